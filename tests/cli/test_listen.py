"""``structlog-etw listen`` without a kernel: arguments, the message without user_events, output lines."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid

import pytest

from structlog_etw.cli.listen import add_arguments, format_event
from structlog_etw.perf.listener import (
    ListenedEvent,
)
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.read.decoded import EventMeta
from structlog_etw.read.writers.json_lines import event_json
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import to_fields

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**os.environ, "PYTHONPATH": REPO}


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="structlog-etw listen")
    add_arguments(parser)
    return parser.parse_args(argv)


def test_listen_arguments_are_parsed_with_names_and_hex() -> None:
    """``listen`` takes level names or numbers, hex keywords, count, duration, pages and format flags."""
    a = _parse(["MyProv", "--level", "warning", "--keyword", "0x6", "--json", "--count", "3"])
    assert (a.provider, a.level, a.keyword, a.format, a.count, a.duration) == (
        "MyProv",
        3,
        6,
        "json",
        3,
        None,
    )
    a = _parse(["MyProv", "--level", "5", "--duration", "1.5", "--pages", "1", "--no-color"])
    assert (a.level, a.duration, a.pages, a.format, a.color, a.no_register) == (
        5,
        1.5,
        1,
        "text",
        False,
        False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["P", "--level", "loud"],
        ["P", "--level", "0"],
        ["P", "--keyword", "x"],
        ["P", "--keyword", "0"],
        ["P", "--count", "0"],
        ["P", "--duration", "-1"],
        ["P", "--duration", "nan"],
        ["P", "--color", "--no-color"],
    ],
)
def test_bad_listen_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Missing provider, bad levels, keywords, counts, durations or clashing colour flags exit 2."""
    with pytest.raises(SystemExit) as e:
        _parse(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def test_listen_and_demo_are_subcommands_of_structlog_etw() -> None:
    """``listen`` and ``demo`` are listed subcommands, and listen's help shows --keyword and --pages."""
    proc = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "--help"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert proc.returncode == 0
    assert "listen" in proc.stdout and "demo" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "listen", "--help"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert proc.returncode == 0
    assert "--keyword" in proc.stdout and "--pages" in proc.stdout


def _has_user_events() -> bool:
    return any(
        os.path.exists(os.path.join(d, "user_events_data"))
        for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
    )


@pytest.mark.skipif(_has_user_events(), reason="proves the message on a machine WITHOUT user_events")
def test_listen_without_user_events_says_why_and_exits_2() -> None:
    """Without user_events, ``listen`` exits 2 with one line saying why, no traceback, nothing on stdout."""
    proc = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "listen", "MyProv", "--count", "1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert proc.returncode == 2, proc
    assert proc.stdout == ""
    assert proc.stderr.startswith("structlog-etw listen: ")
    assert "user_events" in proc.stderr or "needs Linux" in proc.stderr
    assert "Traceback" not in proc.stderr


EVENT = decode_event(
    "MyProv_L4K1",
    EventHeaderEncoder().encode(  # type: ignore[arg-type]
        "user_login",
        to_fields({"user": "ann", "attempts": 3}.items()),
        4,
        opcode=1,
        activity_id=uuid.UUID(int=1).bytes,
    ),
)


LISTENED = ListenedEvent("MyProv_L4K1", 5_000_000_000, 1_700_000_000_123_456_789, 1, 42, 43, EVENT)


def test_json_line_is_the_decode_commands_object_with_perf_metadata() -> None:
    """A listened event's JSON line is decode's object for it, with perf's time, cpu, pid and tid."""
    line = format_event(LISTENED, json_lines=True)
    obj = json.loads(line)
    meta = EventMeta(
        time_ns=5_000_000_000,
        realtime_ns=1_700_000_000_123_456_789,
        cpu=1,
        pid=42,
        tid=43,
        tracepoint="user_events:MyProv_L4K1",
    )
    assert obj == json.loads(event_json(EVENT, meta))
    assert (obj["name"], obj["provider"], obj["level"], obj["opcode"]) == ("user_login", "MyProv", 4, 1)
    assert (obj["cpu"], obj["pid"], obj["tid"]) == (1, 42, 43)
    assert obj["timestamp"] == "2023-11-14T22:13:20.123456789Z"
    assert obj["activity_id"] == str(uuid.UUID(int=1))
    assert obj["fields"] == {"user": "ann", "attempts": 3}


def test_pretty_line_reads_like_console_renderer() -> None:
    """A listened event's text line reads like ConsoleRenderer's, coloured (info green) only when asked."""
    line = format_event(LISTENED, json_lines=False)
    assert line.startswith("2023-11-14T22:13:20.123456789Z [info     ] user_login")
    assert "user=ann" in line and "attempts=3" in line and "pid=42/43" in line
    assert "\x1b[" not in line
    assert "\x1b[32m" in format_event(LISTENED, json_lines=False, colors=True)  # info is green


def test_undecodable_event_is_shown_with_its_bytes_not_dropped() -> None:
    """An undecodable event is shown with its error and raw bytes in text and JSON, not dropped."""
    bad = ListenedEvent("MyProv_L4K1", None, None, 0, 1, 1, None, "header too short", b"\x07")
    assert "header too short" in format_event(bad, json_lines=False)
    obj = json.loads(format_event(bad, json_lines=True))
    assert (obj["error"], obj["raw"], obj["tracepoint"]) == (
        "header too short",
        "07",
        "user_events:MyProv_L4K1",
    )


class TestListenNames:
    """``listen`` checks provider and group names as ``tracepoints`` does, before tracefs is touched."""

    @pytest.mark.parametrize(
        "argv",
        [
            ["../x"],
            ["P" * 300],
            ["ünï"],
            ["a b"],
            ["MyProv", "--group", "../g"],
            ["MyProv", "--group", "G"],
        ],
    )
    def test_bad_names_exit_2_without_opening_tracefs(
        self, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A name no tracepoint can have is reported with exit 2, and no Listener (tracefs) is made."""
        import structlog_etw.cli.listen as listen_cli  # noqa: PLC0415 - the module under test
        from structlog_etw.cli import main  # noqa: PLC0415

        made: list[object] = []

        def listener(*args: object, **kwargs: object) -> None:
            made.append(args)
            raise AssertionError("tracefs touched")

        monkeypatch.setattr(listen_cli, "Listener", listener)
        monkeypatch.setattr(listen_cli, "_PLATFORM", "linux")
        assert main(["listen", *argv, "--count", "1"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("structlog-etw listen: ")
        assert "provider" in err
        assert made == []
