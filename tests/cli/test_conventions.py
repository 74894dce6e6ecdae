"""CLI conventions shared by ``decode`` and ``listen`` (issue 16): the same text whether or not
stdout is a terminal, time order by default, the same filters and flags, one JSON object."""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import subprocess
import sys
import uuid

import pytest

from structlog_etw.cli import main
from structlog_etw.cli.decode import add_arguments as decode_arguments
from structlog_etw.cli.decode import decode_file
from structlog_etw.cli.listen import add_arguments as listen_arguments
from structlog_etw.cli.listen import format_event
from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.perf.listener import ListenedEvent
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import to_fields
from tests.helpers.perfdata import ROUND, Event, Tracepoint, eventheader_format, perf_data
from tests.helpers.shared_data import REPO, pipe_mode_copy, vector


def _inversions(times: list[int]) -> int:
    return sum(1 for a, b in itertools.pairwise(times) if b < a)


def _json_times(text: str) -> list[int]:
    return [json.loads(line)["time_ns"] for line in text.splitlines()]


def _parser(add: object) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add(parser)  # type: ignore[operator]
    return parser


class TestOutputFormat:
    """Text by default, piped or not; ``--json`` for JSON lines; the same flags in both commands."""

    def test_decode_prints_text_into_a_pipe(self) -> None:
        """``decode`` into a pipe writes text lines (time, [tracepoint], name), without colour."""
        proc = subprocess.run(
            [sys.executable, "-m", "structlog_etw", "decode", str(vector("perf.data"))],
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env={**os.environ, "PYTHONPATH": str(REPO)},
            cwd=REPO,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        first = proc.stdout.splitlines()[0]
        assert first.startswith("2024-03-28T00:45:12.640913120Z [tracepoint] sched_switch")
        assert "\x1b[" not in proc.stdout  # no colour into a pipe

    @pytest.mark.parametrize("add", [decode_arguments, listen_arguments])
    def test_both_commands_default_to_text_and_take_json_and_colour_flags(self, add: object) -> None:
        """``decode`` and ``listen`` default to text and share the --json, colour, level and keyword flags."""
        parser = _parser(add)
        base = ["x"]
        assert parser.parse_args(base).format == "text"
        assert parser.parse_args([*base, "--json"]).format == "json"
        assert parser.parse_args([*base, "--format", "json"]).format == "json"
        assert parser.parse_args([*base, "--color"]).color is True
        assert parser.parse_args([*base, "--no-color"]).color is False
        assert parser.parse_args([*base, "--level", "warning", "--keyword", "0x6"]).level == 3

    def test_decode_colour_flag_forces_colour_into_a_pipe(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``decode --color`` writes ANSI colour into a pipe, and ``--no-color`` writes none."""
        assert main(["decode", "--color", "--event", "u8", str(vector("perf.data"))]) == 0
        assert "\x1b[34mdebug" in capsys.readouterr().out
        assert main(["decode", "--no-color", "--event", "u8", str(vector("perf.data"))]) == 0
        assert "\x1b[" not in capsys.readouterr().out


class TestTimeOrder:
    """Events come in timestamp order unless file order is asked for."""

    def test_the_conformance_capture_has_no_time_inversion_by_default(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``decode`` orders the capture by time by default (0 inversions, 18 in file order), same events."""
        path = str(vector("perf.data"))
        assert main(["decode", "--json", path]) == 0
        by_time = _json_times(capsys.readouterr().out)
        assert main(["decode", "--json", "--order", "file", path]) == 0
        by_file = _json_times(capsys.readouterr().out)
        assert len(by_time) == len(by_file) == 539
        assert (_inversions(by_time), _inversions(by_file)) == (0, 18)
        assert sorted(by_file) == by_time

    def test_a_pipe_mode_stream_comes_out_in_the_same_order(self) -> None:
        """A pipe-mode copy of perf.data comes out in the same time order as the file."""
        stream = pipe_mode_copy(vector("perf.data").read_bytes())
        pipe = [(s.time, s.cpu, s.pid) for s in PerfDataFile.from_bytes(stream).samples_by_time()]
        disk = [(s.time, s.cpu, s.pid) for s in PerfDataFile.open(vector("perf.data")).samples_by_time()]
        assert pipe == disk
        assert len(pipe) == 539

    def test_events_wait_for_the_next_round_as_perf_orders_them(self) -> None:
        """Events are released by finished rounds as perf does; one older than two rounds is late, counted."""
        tp = Tracepoint("user_events", eventheader_format("P_L4K1", 1500), 1500)
        ev = EventHeaderEncoder().encode("e", [], 4)
        assert ev is not None
        # round 1 holds 10 and 30; round 2 brings 20 (older than 30, newer than round 0's end)
        events = [Event(tp, ev, 10), Event(tp, ev, 30), ROUND, Event(tp, ev, 20), ROUND, Event(tp, ev, 40)]
        f = PerfDataFile.from_bytes(perf_data(events))
        assert [s.time for s in f.samples_by_time()] == [10, 20, 30, 40]
        assert f.late == 0
        # an event older than what two rounds already released comes out late, and is counted
        late = [
            Event(tp, ev, 10),
            ROUND,
            Event(tp, ev, 30),
            ROUND,
            Event(tp, ev, 40),
            ROUND,
            Event(tp, ev, 5),
        ]
        f = PerfDataFile.from_bytes(perf_data(late))
        assert [s.time for s in f.samples_by_time()] == [10, 30, 5, 40]
        assert f.late == 1


class TestFilters:
    """``decode`` filters like ``listen``: levels up to L, keywords sharing a bit, level/keyword 0 pass."""

    def test_level_and_keyword_filters(self) -> None:
        """Level and keyword filters keep only matching events, plain tracepoints pass, and fewer come out."""
        f = PerfDataFile.open(vector("perf.data"))
        out = io.StringIO()
        decode_file(f, out, mode="json", level=4, keyword=0x4)
        objs = [json.loads(line) for line in out.getvalue().splitlines()]
        assert objs
        assert all(o["level"] <= 4 for o in objs)
        assert all(o["keyword"] == 0 or o["keyword"] & 0x4 for o in objs)
        assert {o["provider"] for o in objs if o["level"] == 0} == {"sched"}  # plain tracepoints pass
        everything = io.StringIO()
        decode_file(PerfDataFile.open(vector("perf.data")), everything, mode="json")
        assert len(out.getvalue().splitlines()) < len(everything.getvalue().splitlines())

    def test_level_filter_from_the_command_line(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``decode --level error`` keeps only events of level 1 and 2."""
        assert (
            main(
                [
                    "decode",
                    "--json",
                    "--level",
                    "error",
                    "--provider",
                    "TestProviderC",
                    str(vector("perf.data")),
                ]
            )
            == 0
        )
        levels = {json.loads(line)["level"] for line in capsys.readouterr().out.splitlines()}
        assert levels and levels <= {1, 2}


class TestOneJsonObject:
    """``listen --json`` and ``decode --json`` write the same object for the same event."""

    def test_listen_and_decode_objects_are_identical(self) -> None:
        """``listen`` and ``decode`` write byte-identical JSON lines for the same event."""
        aid = uuid.UUID(int=7)
        data = EventHeaderEncoder().encode(
            "user_login", to_fields({"user": "ann", "n": 3}.items()), 4, opcode=1, activity_id=aid.bytes
        )
        assert data is not None
        tp = Tracepoint("user_events", eventheader_format("MyProv_L4K4", 1500), 1500)
        out = io.StringIO()
        decode_file(
            PerfDataFile.from_bytes(perf_data([Event(tp, data, 5_000, pid=9, tid=10, cpu=1)])),
            out,
            mode="json",
        )
        from_decode = json.loads(out.getvalue())
        listened = ListenedEvent("MyProv_L4K4", 5_000, None, 1, 9, 10, decode_event("MyProv_L4K4", data))
        line = format_event(listened, json_lines=True)
        assert json.loads(line) == from_decode
        assert line == out.getvalue().rstrip("\n")  # byte for byte: same keys, order, separators
        assert (from_decode["tracepoint"], from_decode["keyword"], from_decode["tag"]) == (
            "user_events:MyProv_L4K4",
            4,
            0,
        )


class TestTracepointsLevels:
    """``tracepoints -l`` takes the levels structlog-etw writes: 1-5 or their names."""

    @pytest.mark.parametrize("level", ["9", "0", "6", "255"])
    def test_levels_outside_1_to_5_are_refused(self, level: str, capsys: pytest.CaptureFixture[str]) -> None:
        """``tracepoints -l`` refuses levels outside 1..5 with exit status 2 and "out of range 1..5"."""
        with pytest.raises(SystemExit) as exc:
            main(["tracepoints", "P", "-l", level])
        assert exc.value.code == 2
        assert "out of range 1..5" in capsys.readouterr().err

    def test_levels_1_to_5_and_names_are_accepted(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``tracepoints -l`` accepts levels 1 to 5 as numbers and as names."""
        assert main(["tracepoints", "P", "-l", "5", "-l", "verbose", "-l", "critical"]) == 0
        assert capsys.readouterr().out.splitlines()[:2] == ["P_L1K1", "P_L5K1"]
