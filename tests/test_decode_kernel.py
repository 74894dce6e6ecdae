"""``structlog-etw decode`` on a perf.data file perf records from a real kernel.

Marked ``kernel``: it needs root and a kernel with user_events (the virtme-ng guest of
../shared/kernel).  Another process (tests/data/make_capture.py) registers the tracepoints,
runs ``perf record -a`` and writes six events encoded by structlog-etw; this test then decodes
perf's file with the command and checks every event.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._shared import REPO

USER_EVENTS = Path("/sys/kernel/tracing/user_events_data")

pytestmark = pytest.mark.kernel


def _require_user_events() -> None:
    if not USER_EVENTS.exists() or os.geteuid() != 0 or shutil.which("perf") is None:
        pytest.skip("needs root, perf and a kernel with user_events (run in the kernel guest)")


def test_decode_reads_perfs_capture_of_events_from_another_process(tmp_path: Path) -> None:
    _require_user_events()
    out = tmp_path / "perf.data"
    writer = subprocess.run(
        [sys.executable, str(REPO / "tests" / "data" / "make_capture.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert writer.returncode == 0, writer.stderr
    assert out.is_file(), writer.stdout + writer.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "decode", "--json", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(e["name"], e["level"], e["keyword"], e["opcode"]) for e in events] == [
        ("service_started", 4, "0x1", 0),
        ("request", 4, "0x1", 1),
        ("user_login", 4, "0x4", 0),
        ("request", 4, "0x1", 2),
        ("payment_failed", 2, "0x1", 0),
        ("cache_stats", 5, "0x1", 0),
    ]
    assert {e["pid"] for e in events} != {os.getpid()}  # written by the other process
    assert all(e["timestamp"] and e["timestamp"].endswith("Z") for e in events)
    assert events[2]["fields"] == {
        "user": "ann",
        "attempts": 3,
        "source": "192.0.2.7",
        "session": "0b7e8e43-3c52-4d5e-bd1e-2f9c1d0a7b11",
        "at": "2026-11-29T17:30:00+00:00",
    }
    assert events[4]["fields"] == {
        "order": {"id": 1017, "total": 49.9, "items": [3, 7]},
        "error": "card declined",
        "retry": True,
    }
    assert events[5]["fields"] == {"hits": [120, 98, 143], "ratio": 0.913, "raw": "00 01 fe"}
