"""``structlog-etw decode`` on perf's capture of another process's events (marker ``kernel``).

The application (``listen_writer.py``: structlog + EtwRenderer) runs as its own process and logs
once its tracepoint is enabled; ``perf record -a`` captures it; the decode command, run as a
third process, must give back every event with its fields, pid and wall-clock time.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import PERF_TIMEOUT, perf_path

from structlog_etw.backends.user_events import UserEventsBackend
from structlog_etw.formats.eventheader import tracepoint_name
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import to_fields
from tests.helpers.trace_event import check_trace

pytestmark = pytest.mark.kernel

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).resolve().parent / "listen_writer.py"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}


def test_decode_reads_perfs_capture_of_another_process(
    provider_name: str,
    perf_session: Callable[..., Any],
    user_events_backend: Callable[..., UserEventsBackend],
) -> None:
    """``decode`` reads perf's capture of another process: its 5 events with pid, tracepoint, text form."""
    keyword = 0x8
    # Register the tracepoint first: perf refuses names that do not exist yet.
    user_events_backend(provider_name).open_slot(4, keyword)
    tracepoint = tracepoint_name(provider_name, 4, keyword)
    with perf_session([tracepoint], label="decode") as session:
        writer = subprocess.run(
            [sys.executable, str(WRITER), provider_name, "keyword", hex(keyword), "5"],
            capture_output=True,
            text=True,
            env=ENV,
            cwd=REPO,
            timeout=300,
            check=False,
        )
        assert writer.returncode == 0, writer.stdout + writer.stderr
    writer_pid = int(writer.stdout.split()[1])  # "ready <pid>"
    proc = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "decode", "--json", str(session.path)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(e["provider"], e["name"], e["level"], e["keyword"]) for e in events] == [
        (provider_name, "late_keyword", 4, 0x8)
    ] * 5
    assert [e["fields"]["i"] for e in events] == [0, 1, 2, 3, 4]
    assert all(e["fields"]["run"] == provider_name for e in events)
    assert {e["pid"] for e in events} == {writer_pid}
    assert all(e["tracepoint"] == f"user_events:{tracepoint}" for e in events)
    assert all(e["timestamp"] and e["timestamp"].endswith("Z") for e in events)
    # the text form of the same file, as a user would read it: the default, into a pipe too
    pretty = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "decode", str(session.path)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=300,
        check=True,
    ).stdout.splitlines()
    assert len(pretty) == 5
    assert all("[info     ] late_keyword" in line and f"pid={writer_pid}" in line for line in pretty)


def test_decode_draws_a_real_captures_activities_as_a_timeline(
    provider_name: str,
    perf_session: Callable[..., Any],
    user_events_backend: Callable[..., UserEventsBackend],
    kernel_out_dir: Path,
) -> None:
    """perf records a small service (nested activities on two threads, interleaved asyncio jobs);
    ``decode --format chrome-trace`` turns the file into a valid trace-event timeline."""
    user_events_backend(provider_name).open_slot(4, 1)
    tracepoint = tracepoint_name(provider_name, 4, 1)
    with perf_session([tracepoint], label="timeline") as session:
        app = subprocess.run(
            [sys.executable, str(WRITER), provider_name, "activities"],
            capture_output=True,
            text=True,
            env=ENV,
            cwd=REPO,
            timeout=300,
            check=False,
        )
        assert app.returncode == 0, app.stdout + app.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "decode", "--format", "chrome-trace", str(session.path)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (kernel_out_dir / "timeline.json").write_text(proc.stdout)
    doc = json.loads(proc.stdout)
    assert check_trace(doc) == []
    events = doc["traceEvents"]
    begins = [e for e in events if e["ph"] == "B"]
    names = sorted(e["name"] for e in begins)
    assert names.count("request") == 6 and names.count("db_query") == 6 and names.count("render") == 6
    threads = {e["tid"] for e in begins if e["name"] == "request"}
    assert len(threads) == 2  # one track per worker thread
    for tid in threads:  # on each thread: request { db_query } { render }, three times
        track = [(e["ph"], e.get("name")) for e in events if e["tid"] == tid and e["ph"] in "BE"]
        assert (
            track
            == [("B", "request"), ("B", "db_query"), ("E", None), ("B", "render"), ("E", None), ("E", None)]
            * 3
        )
    jobs = [e for e in events if e.get("name") == "job" and e["ph"] in "Bb"]
    assert sorted(e["ph"] for e in jobs) == ["B", "b"]  # the interleaved job is an async slice
    instants = {e["name"] for e in events if e["ph"] == "i"}
    assert {"parse", "rows", "job_step"} <= instants


class TestDecodeLivePipe:
    """``perf record -o - | structlog-etw decode -`` shows events while perf is still recording."""

    def test_first_event_appears_before_perf_ends(
        self, provider_name: str, user_events_backend: Callable[..., UserEventsBackend], tmp_path: Path
    ) -> None:
        """Events written while a live perf pipes into decode: the first line arrives, perf still running."""
        backend = user_events_backend(provider_name)
        slot = backend.open_slot(4, 1)
        tracepoint = tracepoint_name(provider_name, 4, 1)
        perf = perf_path()
        assert perf is not None, "perf is not installed"
        ctl_r, ctl_w = os.pipe()
        ack_r, ack_w = os.pipe()
        cmd = [perf, "record", "-a", "-k", "monotonic", "-D", "-1", "--control", f"fd:{ctl_r},{ack_w}"]
        # --no-buffering: perf drains its ring at every event, not when a watermark fills (docs/cli/decode.md)
        cmd += ["--no-buffering", "-e", f"user_events:{tracepoint}", "-o", "-"]
        log = open(tmp_path / "perf.log", "wb")  # noqa: SIM115 - handed to the child
        recorder = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, pass_fds=(ctl_r, ack_w))
        os.close(ctl_r)
        os.close(ack_w)
        log.close()
        assert recorder.stdout is not None
        decoder = subprocess.Popen(
            [sys.executable, "-m", "structlog_etw", "decode", "--json", "-"],
            stdin=recorder.stdout,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV,
            cwd=REPO,
        )
        recorder.stdout.close()  # the decoder holds the pipe now
        assert decoder.stdout is not None
        encoder = EventHeaderEncoder()
        try:
            with os.fdopen(ctl_w, "w") as ctl, os.fdopen(ack_r, "r") as ack:
                ctl.write("enable\n")
                ctl.flush()
                ready, _, _ = select.select([ack], [], [], PERF_TIMEOUT)
                assert ready and ack.readline().strip() == "ack", (tmp_path / "perf.log").read_text()
                first = b""
                deadline = time.monotonic() + PERF_TIMEOUT
                i = 0
                while not first and time.monotonic() < deadline:
                    event = encoder.encode("live", to_fields({"i": i}.items()), 4)
                    backend.write(slot, event)  # type: ignore[arg-type]
                    i += 1
                    ready, _, _ = select.select([decoder.stdout], [], [], 0.2)
                    if ready:
                        first = decoder.stdout.readline()
                assert first, "no event from decode - while perf was recording"
                assert recorder.poll() is None  # perf is still recording
                line = json.loads(first)
                assert (line["provider"], line["name"], line["fields"]["i"]) == (provider_name, "live", 0)
                recorder.send_signal(signal.SIGINT)
                recorder.wait(timeout=PERF_TIMEOUT)
        finally:
            if recorder.poll() is None:
                recorder.kill()
                recorder.wait()
            rest, err = decoder.communicate(timeout=PERF_TIMEOUT)
        assert decoder.returncode == 0, err.decode(errors="replace")
        assert len(rest.splitlines()) <= i - 1  # every later event at most once
