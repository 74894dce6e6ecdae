"""``listen`` pieces that need no kernel: tracepoint matching, the format parser, the CLI, output lines."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid

import pytest

from structlog_etw._cli_listen import add_subcommands, event_json, format_pretty
from structlog_etw._decoded import DecodedEvent
from structlog_etw._listen import ListenedEvent, ListenError, Listener, eventheader_offset, match_tracepoint

# The format file of a user_events EventHeader tracepoint as Linux 6.12 prints it.
FORMAT = """name: MyProv_L4K1
ID: 1234
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:u8 eventheader_flags;\toffset:8;\tsize:1;\tsigned:0;
\tfield:u8 version;\toffset:9;\tsize:1;\tsigned:0;
\tfield:u16 id;\toffset:10;\tsize:2;\tsigned:0;
\tfield:u16 tag;\toffset:12;\tsize:2;\tsigned:0;
\tfield:u8 opcode;\toffset:14;\tsize:1;\tsigned:0;
\tfield:u8 level;\toffset:15;\tsize:1;\tsigned:0;

print fmt: "eventheader_flags=%u ..."
"""


def test_eventheader_starts_after_the_common_fields_of_the_format() -> None:
    assert eventheader_offset(FORMAT) == 8
    common_only = "\n".join(line for line in FORMAT.splitlines() if "common_" in line or "format:" in line)
    assert eventheader_offset(common_only.replace("size:4", "size:8")) == 12
    with pytest.raises(ValueError):
        eventheader_offset("name: x\nformat:\n")


@pytest.mark.parametrize(
    ("name", "kwargs", "expected"),
    [
        ("MyProv_L4K1", {}, (4, 1)),
        ("MyProv_L5K1f", {}, (5, 0x1F)),
        ("MyProv_L4K1Gmygroup", {}, (4, 1)),
        ("MyProv_L4K1Gmygroup", {"group": "mygroup"}, (4, 1)),
        ("MyProv_L4K1", {"group": "mygroup"}, None),
        ("MyProv_L4K1", {"level": 3}, None),
        ("MyProv_L3K1", {"level": 3}, (3, 1)),
        ("MyProv_L4K6", {"keyword": 0x2}, (4, 6)),
        ("MyProv_L4K6", {"keyword": 0x8}, None),
        ("MyProv_L4K0", {"keyword": 0x8}, (4, 0)),  # no keyword: passes every keyword filter (ETW rule)
        ("MyProv_Sub_L4K1", {}, None),  # another provider whose name starts with ours
        ("MyProvX_L4K1", {}, None),
        ("MyProv_L4K1 ", {}, None),
        ("MyProv_L4", {}, None),
        ("MyProv_LAK1", {}, None),  # the name format is lowercase hex
    ],
)
def test_only_the_providers_own_tracepoints_passing_the_filters_match(
    name: str, kwargs: dict[str, object], expected: tuple[int, int] | None
) -> None:
    assert match_tracepoint("MyProv", name, **kwargs) == expected  # type: ignore[arg-type]


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="structlog-etw")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_listen_arguments_are_parsed_with_names_and_hex() -> None:
    a = _parse(["listen", "MyProv", "--level", "warning", "--keyword", "0x6", "--json", "--count", "3"])
    assert (a.provider, a.level, a.keyword, a.json, a.count, a.duration) == ("MyProv", 3, 6, True, 3, None)
    a = _parse(["listen", "MyProv", "--level", "5", "--duration", "1.5", "--pages", "1"])
    assert (a.level, a.duration, a.pages, a.json) == (5, 1.5, 1, False)


@pytest.mark.parametrize(
    "argv",
    [
        ["listen"],
        ["listen", "P", "--level", "loud"],
        ["listen", "P", "--level", "0"],
        ["listen", "P", "--keyword", "x"],
        ["listen", "P", "--count", "0"],
        ["listen", "P", "--duration", "-1"],
    ],
)
def test_bad_listen_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        _parse(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def test_ring_pages_must_be_a_power_of_two() -> None:
    with pytest.raises(ListenError, match="power of two"):
        Listener("MyProv", pages=3)


def _no_user_events() -> str | None:
    from structlog_etw._backend_linux import find_tracefs

    if not sys.platform.startswith("linux"):
        return None
    return "this machine has user_events" if find_tracefs() is not None else None


@pytest.mark.skipif(_no_user_events() is not None, reason="needs a machine without user_events")
def test_listen_without_user_events_says_why_and_exits_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from structlog_etw._cli_listen import main; sys.exit(main())",
         "listen", "MyProv", "--count", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert proc.returncode == 2, proc
    assert proc.stdout == ""
    assert "structlog-etw listen:" in proc.stderr
    assert "user_events" in proc.stderr or "Linux" in proc.stderr
    assert "Traceback" not in proc.stderr


EVENT = DecodedEvent(
    provider="MyProv",
    name="user_login",
    level=4,
    keyword=1,
    opcode=1,
    activity_id=uuid.UUID(int=1),
    fields={"user": "ann", "attempts": 3, "blob": b"\x01\xff", "nested": {"ok": True}},
)
LISTENED = ListenedEvent("MyProv_L4K1", 1_700_000_000_123_456_789, 1, 42, 43, EVENT)


def test_json_line_has_the_decode_shape() -> None:
    obj = json.loads(json.dumps(event_json(LISTENED)))
    assert obj["name"] == "user_login"
    assert obj["provider"] == "MyProv"
    assert (obj["level"], obj["keyword"], obj["opcode"]) == (4, 1, 1)
    assert obj["activity_id"] == str(uuid.UUID(int=1))
    assert (obj["cpu"], obj["pid"], obj["tid"]) == (1, 42, 43)
    assert obj["timestamp"] == "2023-11-14T22:13:20.123456789Z"
    assert obj["fields"] == {"user": "ann", "attempts": 3, "blob": "01ff", "nested": {"ok": True}}


def test_pretty_line_reads_like_console_renderer() -> None:
    line = format_pretty(LISTENED, colors=False)
    assert line.startswith("2023-11-14T22:13:20.123456789Z [info     ] user_login")
    assert "user='ann'" in line and "attempts=3" in line and "opcode=start" in line
    assert "\x1b[" not in line
    assert "\x1b[32m" in format_pretty(LISTENED, colors=True)  # info is green, as in ConsoleRenderer


def test_undecodable_event_is_shown_not_dropped() -> None:
    bad = ListenedEvent("MyProv_L4K1", None, 0, 1, 1, None, "header too short", b"\x07")
    assert "header too short" in format_pretty(bad)
    assert event_json(bad)["error"] == "header too short"
