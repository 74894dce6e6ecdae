"""``structlog-etw demo`` without user_events: it says why and shows the captured events, decoded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from structlog_etw import get_provider
from structlog_etw.cli.demo import demo
from structlog_etw.provider._registry import REGISTRY
from structlog_etw.testing import capture_etw_events

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**os.environ, "PYTHONPATH": REPO, "NO_COLOR": "1"}
NAMES = [
    "HandleRequest",
    "request_started",
    "cache_lookup",
    "order_loaded",
    "slow_query",
    "discount_lookup_failed",
    "HandleRequest",
    "request_finished",
]


def _has_user_events() -> bool:
    return any(
        os.path.exists(os.path.join(d, "user_events_data"))
        for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
    )


pytestmark = pytest.mark.skipif(
    _has_user_events(), reason="proves the no-user_events path; the kernel tests cover the live path"
)


def test_demo_says_why_and_shows_every_event_decoded_from_the_capture(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without user_events ``demo`` says why and prints its 8 events from an in-process capture, decoded."""
    assert demo(json_lines=True) == 0
    out, err = capsys.readouterr()
    assert "user_events is not available here: " in err
    assert "structlog-etw listen StructlogEtw_Demo" in err
    assert "in-process capture" in err
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["name"] for e in events] == NAMES
    assert {e["provider"] for e in events} == {"StructlogEtw_Demo"}
    assert [e["level"] for e in events] == [4, 4, 5, 4, 3, 2, 4, 4]
    assert [e["opcode"] for e in events] == [1, 0, 0, 0, 0, 0, 2, 0]  # the activity's Start and Stop
    activity = events[0]["activity_id"]
    assert activity is not None
    assert [e["activity_id"] for e in events] == [activity] * 7 + [None]
    assert {e["pid"] for e in events} == {os.getpid()}
    start, started, _, order, slow, failed, stop, finished = (e["fields"] for e in events)
    assert (start["method"], start["path"]) == ("GET", "/orders/42")
    assert stop["outcome"] == "ok" and stop["status"] == 200
    # bound context on every event
    assert {e["fields"]["request_id"] for e in events} == {"6f1c2a4e-8d3b-4c5a-9e7f-0123456789ab"}
    assert {e["fields"]["client"] for e in events} == {"192.0.2.10"}
    assert (started["secure"], started["attempt"]) == (True, 1)
    assert events[3]["keyword"] == 0x2
    assert order["items"] == ["apple", "pear"] and order["quantities"] == [3, 1]
    assert order["total"] == 19.99 and order["customer"] == {"name": "ann", "tier": 2}
    assert order["server"] == "2001:db8::1"
    assert slow["duration_ms"] == 812.5
    assert "KeyError: 'spring_sale'" in failed["exception"]
    assert finished["status"] == 200
    assert REGISTRY.factory is None  # the capture is undone: the process is left as it was


def test_demo_leaves_the_process_providers_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo captures through a provider of its own: it reroutes no process-wide provider."""
    with capture_etw_events() as capture:
        neighbour = get_provider("StructlogEtw_DemoNeighbour")
        backend = neighbour.backend
        try:
            assert demo(json_lines=True) == 0
            assert neighbour.backend is backend
            assert capture.records == []  # the demo's events went to the demo's own capture
        finally:
            neighbour.close()
    assert len(capsys.readouterr().out.splitlines()) == len(NAMES)


def test_demo_pretty_output_has_one_line_per_event(capsys: pytest.CaptureFixture[str]) -> None:
    """``demo`` text output has one uncoloured line per event, with its level."""
    assert demo() == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "[StructlogEtw_Demo" in line]
    assert [line.split("] ", 1)[1].split()[0] for line in lines] == NAMES
    assert "[warning  ] slow_query" in out
    assert "\x1b[" not in out


def _as_nobody() -> list[str]:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:  # Windows has no user ids
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is needed to drop root for this test"
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_python_m_structlog_etw_demo_works_for_a_non_root_user() -> None:
    """``python -m structlog_etw demo`` as a non-root user prints every event and nothing on stderr."""
    proc = subprocess.run(
        [*_as_nobody(), sys.executable, "-m", "structlog_etw", "demo"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
        cwd="/",
    )
    assert proc.returncode == 0, proc
    assert "Traceback (most recent call last):\n  File" not in proc.stderr
    assert proc.stderr == ""  # no warning leaks out of the demo
    assert "user_events is not available here" in proc.stdout
    for name in NAMES:
        assert f"] {name}" in proc.stdout
