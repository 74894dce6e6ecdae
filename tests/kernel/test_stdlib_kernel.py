"""docs/stdlib.md's gunicorn recipe in a real kernel: ``--preload -w 2``, the provider registered in the
master before the fork, both workers' events in perf (marker ``kernel``)."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kernel_harness import PerfSession, wait_until

from structlog_etw.backends.user_events import find_tracefs
from structlog_etw.read.decode.eventheader import decode_event

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]


def _doc_block(first_line: str) -> str:
    text = (ROOT / "docs" / "stdlib.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if b.startswith(first_line)]
    return block


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=60)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(60)
        sock.connect(self._path)
        self.sock = sock


def _get(path: str) -> int:
    conn = _UnixHTTPConnection(path)
    try:
        conn.request("GET", "/", headers={"Connection": "close"})
        return int(conn.getresponse().read())
    finally:
        conn.close()


class TestGunicornPreloadWorkers:
    """Fork after the provider exists: every worker's events still arrive (kernel-copied enable words)."""

    def test_both_workers_events_arrive(
        self, provider_name: str, perf_session: Callable[..., PerfSession], tmp_path: Path
    ) -> None:
        """Both gunicorn --preload workers' stdlib and structlog events arrive, each under its own pid."""
        (tmp_path / "gunicorn.conf.py").write_text(_doc_block("# gunicorn.conf.py"))
        (tmp_path / "app.py").write_text(_doc_block("# app.py"))
        sock = str(tmp_path / "gunicorn.sock")
        env = dict(os.environ, ETW_PROVIDER=provider_name, PYTHONPATH=str(ROOT))
        cmd = [
            sys.executable, "-m", "gunicorn", "--preload", "-w", "2", "-c", "gunicorn.conf.py",
            "--bind", f"unix:{sock}", "--worker-tmp-dir", str(tmp_path), "--timeout", "120",
            "app:application",
        ]  # fmt: skip
        log = (tmp_path / "gunicorn.log").open("w")
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            tracefs = find_tracefs()
            assert tracefs is not None
            tracepoint = f"{provider_name}_L4K1"
            wait_until(
                lambda: os.path.exists(os.path.join(tracefs, "events", "user_events", tracepoint)),
                timeout=180,
                what="the master registering the provider (--preload)",
            )
            wait_until(lambda: os.path.exists(sock), timeout=180, what="gunicorn listening")
            pids: set[int] = set()
            with perf_session([tracepoint]) as session:
                deadline = time.monotonic() + 240
                while len(pids) < 2 and time.monotonic() < deadline:
                    pids.add(_get(sock))
            assert len(pids) == 2, f"only one worker answered: {pids}"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                log.close()
        assert proc.pid not in pids  # the answers came from forked workers
        by_pid: dict[int, set[str]] = {}
        for sample in session.samples():
            if sample.name != f"user_events:{tracepoint}" or sample.pid is None:
                continue
            event = decode_event(tracepoint, sample.data)
            if event.name not in ("stdlib_request", "structlog_request"):
                continue  # gunicorn's own records ("Booting worker ...") go to the same provider
            assert event.fields["worker"] == sample.pid  # written by the process it names
            by_pid.setdefault(sample.pid, set()).add(event.name)
        for pid in pids:
            assert by_pid.get(pid) == {"stdlib_request", "structlog_request"}, (pid, by_pid)
