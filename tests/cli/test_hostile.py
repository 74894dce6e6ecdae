"""``decode`` and ``listen`` on hostile input: a clear message and exit 1 or 2, never a traceback
or a hang; text output that cannot drive a terminal; JSON lines that always parse.
"""

from __future__ import annotations

import io
import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.cli.decode import decode_file
from structlog_etw.cli.listen import format_event
from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.perf.listener import ListenedEvent
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.read.writers.console import printable
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import to_fields
from tests.helpers.hostile import EVENTHEADER_BOMB, run_bounded
from tests.helpers.perfdata import ROUND, Event, Tracepoint, eventheader_format, perf_data, plain_format
from tests.helpers.shared_data import vector

EH = Tracepoint("user_events", eventheader_format("Evil_L4K1", 1500), 1500)
#: What a logged value may carry to a terminal: OSC (set title) ended by BEL, CSI (clear screen),
#: a C1 CSI, a right-to-left override, a line break.
NASTY = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202etxt.exe\nx"
_CONTROLS = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} | {"\u202e"}


def _nasty_event() -> bytes:
    event = EventHeaderEncoder().encode(NASTY, to_fields({NASTY: NASTY, "ok": 1}.items()), 4)
    assert event is not None
    return event


def _decode(data: bytes, mode: str) -> tuple[str, list[str]]:
    out = io.StringIO()
    with PerfDataFile.from_bytes(data) as f:
        _written, problems = decode_file(f, out, mode=mode)
    return out.getvalue(), problems


_DECODE_CLI_IN_CHILD = """
import sys
from structlog_etw.cli import main
sys.exit(main(["decode", *sys.argv[1:]]))
"""


class TestTerminalEscapes:
    """Names and values never reach the terminal as control or format characters."""

    @pytest.mark.parametrize("mode", ["text", "json"])
    def test_decode_output_carries_no_control_characters(self, mode: str) -> None:
        """``decode`` text and JSON of an event full of escapes and bidi controls hold no control chars."""
        text, problems = _decode(perf_data([Event(EH, _nasty_event(), 1)]), mode)
        assert problems == []
        assert text.count("\n") == 1
        assert not _CONTROLS & set(text[:-1])
        if mode == "json":
            obj = json.loads(text)
            assert obj["name"] == NASTY.replace(";", "_")  # the encoder keeps ";" for attributes
            assert obj["fields"][NASTY.replace(";", "_")] == NASTY
        else:
            assert "\\x1b]0;pwned\\x07" in text
            assert "\\u202e" in text

    def test_listen_text_carries_no_control_characters(self) -> None:
        """``listen`` text lines, of a decoded event and of an error, hold no control character."""
        ev = ListenedEvent("Evil_L4K1", 1, None, 0, 1, 1, decode_event("Evil_L4K1", _nasty_event()))
        line = format_event(ev, json_lines=False)
        assert not _CONTROLS & set(line)
        bad = ListenedEvent("Evil_L4K1", 1, None, 0, 1, 1, None, f"bad name {NASTY}", b"")
        assert not _CONTROLS & set(format_event(bad, json_lines=False))

    def test_printable_escapes_what_a_terminal_acts_on_and_keeps_the_rest(self) -> None:
        """printable() escapes ESC, BEL, bidi overrides and surrogates, and keeps other non-ASCII text."""
        assert printable("naïve ✓ 日本") == "naïve ✓ 日本"
        assert printable("a\x1b[2Jb\x07\u202e\udc9b") == "a\\x1b[2Jb\\x07\\u202e\\x9b"


class TestJsonLines:
    """Every output line is one JSON object, whatever names the file holds."""

    @pytest.mark.parametrize(
        "name", ['x","n":"injected', "x\nname: y", "\x1b[2J", 'q\\"', "\x7f\x9b\u2028\x85\x1c"]
    )
    def test_crafted_plain_tracepoint_names_stay_inside_their_string(self, name: str) -> None:
        """Tracepoint names crafted with quotes and newlines stay inside their JSON string."""
        tp = Tracepoint(f'sys"{name}', plain_format(f"ev{name}", 1501), 1501)
        data = perf_data([Event(tp, struct.pack("<i", -3), 1), Event(EH, _nasty_event(), 2)])
        fmt = next(PerfDataFile.from_bytes(data).samples()).format
        assert fmt is not None
        for mode in ("perf-json", "json"):
            text, problems = _decode(data, mode)
            assert problems == []
            lines = text.split("\n")[:-1]  # perf-decode leaves U+2028 raw: a line ends at \n only
            assert len(lines) == 2
            first = json.loads(lines[0], object_pairs_hook=dict)
            json.loads(lines[1])
            if mode == "perf-json":
                assert list(first) == ["n", "value", "meta"]  # nothing injected
                assert first["n"] == f"{fmt.system}:{fmt.name}"
            else:
                assert (first["provider"], first["name"], first["fields"]) == (
                    fmt.system,
                    fmt.name,
                    {"value": -3},
                )
                assert not _CONTROLS & set(text.replace("\n", ""))

    def test_json_lines_use_compact_separators_and_numeric_keyword(self) -> None:
        """JSON lines use compact separators and give keyword and tag as numbers beside the tracepoint."""
        text, _ = _decode(perf_data([Event(EH, _nasty_event(), 1)]), "json")
        obj = json.loads(text)
        assert text.startswith('{"timestamp":null,"time_ns":1,')
        assert (obj["keyword"], obj["tag"], obj["tracepoint"]) == (1, 0, "user_events:Evil_L4K1")


class TestDecodeFailures:
    """A crafted file gets a message and exit 1 or 2: no traceback, no hang, bounded memory."""

    def test_a_decoder_bomb_inside_a_perf_data_is_one_reported_sample(self, tmp_path: object) -> None:
        """A decoder bomb among good events is one reported problem: exit 1, others decoded, no traceback."""
        good = _nasty_event()
        data = perf_data([Event(EH, good, 1), Event(EH, EVENTHEADER_BOMB, 2), ROUND, Event(EH, good, 3)])
        run = run_bounded(_DECODE_CLI_IN_CHILD, "--json", "-", stdin=data)
        assert not run.hung
        assert run.returncode == 1, run.stderr
        assert "Traceback" not in run.stderr
        assert len(run.stdout.splitlines()) == 2
        assert "declares 1 members, the metadata has none" in run.stderr
        assert "2 events decoded; 1 problems" in run.stderr

    @pytest.mark.parametrize(
        "data",
        [b"", b"PERFILE2", b"PERFILE2" + b"\xff" * 96, b"PERFILE2" + struct.pack("<Q", 104) + b"\xff" * 88],
    )
    def test_broken_headers_exit_2_with_a_message(self, data: bytes) -> None:
        """A broken perf.data header exits with a "structlog-etw decode:" message, no hang or traceback."""
        run = run_bounded(_DECODE_CLI_IN_CHILD, "-", stdin=data)
        assert not run.hung
        assert run.returncode in (1, 2), run.stderr
        assert "Traceback" not in run.stderr
        assert run.stderr.startswith("structlog-etw decode: ")

    @settings(max_examples=15, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8))
    def test_damaged_real_captures_decode_or_report(self, flips: list[tuple[int, int]]) -> None:
        """A damaged capture opens or raises ``ValueError``; ``decode`` writes at most one event
        per sample the file holds (at most one per 8-byte record header), its text carries no
        control character and its chrome-trace output is one JSON document."""
        data = bytearray(vector("perf.data").read_bytes())
        for pos, value in flips:
            data[pos % len(data)] = value
        try:
            samples = len(list(PerfDataFile.from_bytes(bytes(data)).samples()))
        except ValueError:
            return
        assert samples <= len(data) // 8
        for mode in ("text", "chrome-trace"):
            out = io.StringIO()
            written, _problems = decode_file(PerfDataFile.from_bytes(bytes(data)), out, mode=mode)
            assert written <= samples
            text = out.getvalue()
            if mode == "chrome-trace":
                json.loads(text)
            else:
                assert not (_CONTROLS - {"\n"}) & set(text)


class TestGeneratedHostileEvents:
    """Hypothesis-generated EventHeader and TraceLogging events with adversarial counts and
    nesting go through both decoders, every writer and ``decode`` (tests/helpers/fuzz.py), in a
    subprocess under a 1 GB memory limit: bounded work (counted values per byte), no crash."""

    def test_generated_events_are_decoded_or_rejected_within_bounds(self) -> None:
        """Generated hostile events are decoded or rejected without hang or crash, and some do decode."""
        run = run_bounded("from tests.helpers.fuzz import run; print('decoded', run(80))", timeout=600)
        assert not run.hung, "the decoders hung on a generated event"
        assert run.returncode == 0, run.stderr[-4000:]
        assert run.stdout.startswith("decoded ")
        assert int(run.stdout.split()[1]) > 0  # the strategies reach the decoders' success path too
