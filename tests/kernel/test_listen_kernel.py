"""``structlog-etw listen`` and ``demo`` against a real kernel (marker ``kernel``; in the virtme-ng guest).

``listen`` runs as its own process (``python -m structlog_etw listen ...``) and reads the events
another process (``listen_writer.py``, structlog + EtwRenderer) writes, through perf_event_open
and the mmap ring buffers: no perf binary involved.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from structlog_etw.backends.user_events import find_tracefs

pytestmark = pytest.mark.kernel

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).resolve().parent / "listen_writer.py"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
TIMEOUT = 180.0  # software-emulated guests are slow


class Proc:
    """A child process whose stdout/stderr lines are collected as they come."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.p = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=ENV, cwd=REPO
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._buf = {"out": b"", "err": b""}
        self._sel = selectors.DefaultSelector()
        assert self.p.stdout is not None and self.p.stderr is not None
        self._sel.register(self.p.stdout, selectors.EVENT_READ, "out")
        self._sel.register(self.p.stderr, selectors.EVENT_READ, "err")

    def _pump(self, timeout: float) -> None:
        for key, _ in self._sel.select(timeout):
            chunk = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
            if not chunk:
                self._sel.unregister(key.fileobj)
                continue
            data = self._buf[key.data] + chunk
            *lines, self._buf[key.data] = data.split(b"\n")
            (self.out if key.data == "out" else self.err).extend(x.decode(errors="replace") for x in lines)

    def wait_for(self, where: str, text: str, timeout: float = TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        lines = self.out if where == "out" else self.err
        while True:
            for line in lines:
                if text in line:
                    return line
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared on {where} of {self.argv}: {self.report()}")
            if self.p.poll() is not None and not self._sel.get_map():
                raise AssertionError(
                    f"{self.argv} exited ({self.p.returncode}) before {text!r}: {self.report()}"
                )
            self._pump(0.1)

    def finish(self, timeout: float = TIMEOUT) -> int:
        deadline = time.monotonic() + timeout
        while self._sel.get_map():
            if time.monotonic() > deadline:
                self.p.kill()
                raise AssertionError(f"{self.argv} did not finish: {self.report()}")
            self._pump(0.2)
        return self.p.wait(timeout=max(1.0, deadline - time.monotonic()))

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()

    def report(self) -> str:
        return "\nstdout:\n" + "\n".join(self.out[-30:]) + "\nstderr:\n" + "\n".join(self.err[-30:])


def listen(*args: str) -> Proc:
    return Proc([sys.executable, "-m", "structlog_etw", "listen", *args])


def writer(*args: str) -> Proc:
    return Proc([sys.executable, str(WRITER), *args])


def json_events(p: Proc) -> list[dict[str, Any]]:
    return [json.loads(line) for line in p.out if line.strip()]


def tracepoints_of(provider: str) -> set[str]:
    tracefs = find_tracefs()
    assert tracefs is not None
    try:
        names = os.listdir(os.path.join(tracefs, "events", "user_events"))
    except FileNotFoundError:  # no user_events registered at all right now
        return set()
    return {n for n in names if n.startswith(provider + "_")}


def test_listen_shows_another_processes_events_live_and_decoded(provider_name: str) -> None:
    """``listen`` shows another process's events live, decoded with its pid, every field type, in order."""
    lis = listen(provider_name, "--json", "--count", "6")
    try:
        lis.wait_for("err", "listening to")
        app = writer(provider_name, "log", "5")
        pid = int(app.wait_for("out", "ready").split()[1])
        app.wait_for("out", "done")
        assert app.finish() == 0
        assert lis.finish() == 0, lis.report()
    finally:
        lis.kill()
    events = json_events(lis)
    assert [e["name"] for e in events] == ["tick"] * 5 + ["done_logging"], lis.report()
    for i, e in enumerate(events[:5]):
        assert (e["provider"], e["level"], e["keyword"], e["opcode"]) == (provider_name, 4, 0x1, 0)
        assert (e["pid"], e["tid"]) == (pid, pid)  # the writer's, not the listener's
        assert isinstance(e["cpu"], int)
        f = e["fields"]
        assert f["run"] == provider_name
        assert (f["i"], f["big"], f["neg"], f["ratio"], f["ok"], f["text"]) == (
            i,
            2**64 - 1,
            -5,
            0.5,
            True,
            "héllo",
        )
        assert f["blob"] == "00 01 ff"
        assert f["uid"] == str(uuid.UUID(int=i + 1))
        assert (f["ip"], f["ip6"]) == ("10.0.0.1", "::1")
        assert f["when"].startswith("2026-01-02T03:04:05")
        assert f["nums"] == [1, 2, 3]
        assert f["inner"] == {"a": 1, "b": "x"}
    assert events[5]["level"] == 3 and events[5]["fields"]["count"] == 5
    stamps = [e["timestamp"] for e in events]
    assert stamps == sorted(stamps)  # one CPU's ring is in time order; the writer is one thread
    assert lis.wait_for("err", "6 events, 0 lost")


def test_listen_reports_lost_events_when_a_flood_overruns_a_one_page_ring(provider_name: str) -> None:
    """A flood overrunning a one-page ring is reported lost exactly: shown plus lost is all written."""
    lis = listen(provider_name, "--json", "--pages", "1", "--duration", "120")
    try:
        lis.wait_for("err", "listening to")
        app = writer(provider_name, "flood", "20000")
        app.wait_for("out", "done")
        assert app.finish() == 0, app.report()
        assert "done 20020" in app.out, app.report()  # every write was taken by the kernel
        lis.wait_for("err", "listen: lost ")
        lis.p.terminate()  # SIGTERM: a clean exit with the summary
        assert lis.finish() == 0, lis.report()
    finally:
        lis.kill()
    lost_lines = [line for line in lis.err if line.startswith("structlog-etw listen: lost ")]
    lost = sum(int(line.split()[3]) for line in lost_lines)
    summary = lis.wait_for("err", " events, ")
    seen, lost_total = int(summary.split()[2]), int(summary.split()[4])
    assert lost_total == lost > 0, lis.report()
    assert 0 < seen < 20020
    events = json_events(lis)
    assert len(events) == seen
    flood = [e["fields"]["i"] for e in events if e["name"] == "flood"]
    assert flood == sorted(flood) and len(set(flood)) == len(flood)  # what arrived is intact and in order
    # Nothing vanished unaccounted: every event written was either shown or reported lost.
    assert seen + lost_total == 20020, lis.report()


def test_listen_registers_the_providers_tracepoints_when_the_app_has_not(provider_name: str) -> None:
    """``listen`` registers the tracepoints the app has not, and the app later shares them, enabled."""
    assert tracepoints_of(provider_name) == set()
    # --count 2: listen is still running (and holding its tracepoints) after the first application
    # exits, so the check between the two runs does not race listen's own exit.
    lis = listen(provider_name, "--json", "--level", "info", "--keyword", "0x4", "--count", "2")
    try:
        line = lis.wait_for("err", "listening to")
        expected = {f"{provider_name}_L{lvl}K4" for lvl in (1, 2, 3, 4)}
        assert tracepoints_of(provider_name) == expected
        assert "registered by listen" in line
        # The application registers the same tracepoint later: it shares listen's, already enabled.
        app = writer(provider_name, "keyword", "0x4", "1")
        app.wait_for("out", "done")
        assert app.finish() == 0, app.report()
        assert {n for n in tracepoints_of(provider_name) if n.endswith("K4")} == expected
        again = writer(provider_name, "keyword", "0x4", "1")  # the second event ends listen
        again.wait_for("out", "done")
        assert again.finish() == 0, again.report()
        assert lis.finish() == 0, lis.report()
    finally:
        lis.kill()
    events = json_events(lis)
    assert [(e["name"], e["level"], e["keyword"], e["fields"]["i"]) for e in events] == [
        ("late_keyword", 4, 0x4, 0),
        ("late_keyword", 4, 0x4, 0),
    ]


def test_listen_picks_up_a_tracepoint_the_app_registers_later(provider_name: str) -> None:
    """``listen`` picks up a tracepoint the app registers after it started and shows its events."""
    lis = listen(provider_name, "--json", "--count", "2")
    try:
        lis.wait_for("err", "listening to")
        assert f"{provider_name}_L4K8" not in tracepoints_of(provider_name)
        app = writer(provider_name, "keyword", "0x8", "2")  # registers _L4K8 now; waits for the rescan
        app.wait_for("out", "done")
        assert app.finish() == 0, app.report()
        assert lis.finish() == 0, lis.report()
    finally:
        lis.kill()
    events = json_events(lis)
    assert [(e["name"], e["level"], e["keyword"], e["fields"]["i"]) for e in events] == [
        ("late_keyword", 4, 0x8, 0),
        ("late_keyword", 4, 0x8, 1),
    ]


def test_listen_as_non_root_says_it_needs_root_and_exits_2(provider_name: str) -> None:
    """``listen`` run as an unprivileged user exits 2 saying it needs root, with no traceback."""
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is needed to drop root"
    p = subprocess.run(
        [
            setpriv,
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-m",
            "structlog_etw",
            "listen",
            provider_name,
            "--count",
            "1",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=ENV,
        cwd="/",
    )
    assert p.returncode == 2, p
    assert p.stdout == ""
    assert "root" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_demo_shows_its_events_live_through_user_events() -> None:
    """``demo`` shows its 8 events live from the kernel's rings, with activities, levels and keywords."""
    p = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "demo", "--json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=ENV,
        cwd=REPO,
    )
    assert p.returncode == 0, p
    assert "perf record -a -k monotonic -e user_events:StructlogEtw_Demo_L1K1" in p.stderr
    assert "Listening in-process" in p.stderr
    assert "8 of 8 events seen live" in p.stderr
    assert "in-process capture" not in p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    assert [e["name"] for e in events] == [
        "HandleRequest",
        "request_started",
        "cache_lookup",
        "order_loaded",
        "slow_query",
        "discount_lookup_failed",
        "HandleRequest",
        "request_finished",
    ]
    assert [e["opcode"] for e in events] == [1, 0, 0, 0, 0, 0, 2, 0]
    assert len({e["activity_id"] for e in events[:7]}) == 1 and events[7]["activity_id"] is None
    assert {e["pid"] for e in events} == {events[0]["pid"]}
    assert all(isinstance(e["cpu"], int) and e["time_ns"] > 0 for e in events)  # from the kernel's rings
    assert events[3]["keyword"] == 0x2 and events[5]["level"] == 2
    assert "KeyError" in events[5]["fields"]["exception"]


def test_listen_survives_a_decoder_bomb_written_by_another_process(provider_name: str) -> None:
    """A 29-byte event declaring 4.3e9 values, written through user_events by an unprivileged-
    looking writer, is one undecodable line: listen (root) neither grows nor stops."""
    bomb_writer = (
        "import sys, time\n"
        "from structlog_etw.backends.user_events import UserEventsBackend\n"
        "from tests.helpers.hostile import EVENTHEADER_BOMB\n"
        "b = UserEventsBackend(sys.argv[1], None)\n"
        "slot = b.open_slot(4, 1)\n"
        "print('ready', flush=True)\n"
        "deadline = time.monotonic() + 120\n"
        "while not slot.word[0] and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "print('write', b.write(slot, EVENTHEADER_BOMB, 0, None, None), flush=True)\n"
        "time.sleep(1)\n"
        "b.close()\n"
    )
    lis = listen(provider_name, "--json", "--count", "2")
    try:
        lis.wait_for("err", "listening to")
        bomb = Proc([sys.executable, "-c", bomb_writer, provider_name])
        assert bomb.wait_for("out", "write") == "write 0", bomb.report()
        assert bomb.finish() == 0
        app = writer(provider_name, "log", "1")
        app.wait_for("out", "done")
        assert app.finish() == 0
        assert lis.finish() == 0, lis.report()
    finally:
        lis.kill()
    events = json_events(lis)
    assert "error" in events[0] and "declares 1 members, the metadata has none" in events[0]["error"]
    assert events[1]["name"] == "tick"
    assert "Traceback" not in "\n".join(lis.err)
