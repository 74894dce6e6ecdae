"""``structlog-etw decode`` on perf's capture of another process's events (marker ``kernel``).

The application (``listen_writer.py``: structlog + EtwRenderer) runs as its own process and logs
once its tracepoint is enabled; ``perf record -a`` captures it; the decode command, run as a
third process, must give back every event with its fields, pid and wall-clock time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from structlog_etw.backends.user_events import UserEventsBackend
from structlog_etw.eventheader.spec import tracepoint_name

pytestmark = pytest.mark.kernel

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).resolve().parent / "listen_writer.py"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}


def test_decode_reads_perfs_capture_of_another_process(
    provider_name: str,
    perf_session: Callable[..., Any],
    user_events_backend: Callable[..., UserEventsBackend],
) -> None:
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
        (provider_name, "late_keyword", 4, "0x8")
    ] * 5
    assert [e["fields"]["i"] for e in events] == [0, 1, 2, 3, 4]
    assert all(e["fields"]["run"] == provider_name for e in events)
    assert {e["pid"] for e in events} == {writer_pid}
    assert all(e["tracepoint"] == f"user_events:{tracepoint}" for e in events)
    assert all(e["timestamp"] and e["timestamp"].endswith("Z") for e in events)
    # the pretty form of the same file, as a user would read it
    pretty = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "decode", "--pretty", str(session.path)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=300,
        check=True,
    ).stdout.splitlines()
    assert len(pretty) == 5
    assert all("[info     ] late_keyword" in line and f"pid={writer_pid}" in line for line in pretty)
