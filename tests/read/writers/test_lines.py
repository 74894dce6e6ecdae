"""The writers' fast plans (per tracepoint format and EventHeader metadata) write exactly what the
ordinary path writes: the line of :func:`decode_sample` rendered by ``sample_perf_json``,
``event_json`` or ``event_pretty`` (with and without colour)."""

from __future__ import annotations

import ast
import dataclasses
import io
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structlog_etw
from structlog_etw.cli import decode as decode_module
from structlog_etw.cli.decode import decode_file
from structlog_etw.cli.output import EventFilter
from structlog_etw.formats.eventheader import ENC_VALUE64, FIXED_SIZE, FMT_FLOAT, Encoding, Format
from structlog_etw.perf.datafile import PerfDataFile, Sample
from structlog_etw.perf.samples import SampleDecodeError, decode_sample, sample_perf_json
from structlog_etw.perf.tracefs_format import TracepointFormat, parse_format
from structlog_etw.read.decode import _eventheader_plans as plans_module
from structlog_etw.read.decode._eventheader_values import python_value
from structlog_etw.read.decoded import EventMeta
from structlog_etw.read.writers._lines import Lines
from structlog_etw.read.writers.console import ConsoleLines, TextFieldStyle, _value_text, event_pretty
from structlog_etw.read.writers.json_lines import JsonLines, event_json
from structlog_etw.read.writers.perf_json import PerfJsonLines, PerfJsonStyle
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import to_fields
from tests.helpers.perfdata import ROUND, Event, Tracepoint, eventheader_format, perf_data, plain_format
from tests.helpers.shared_data import vector
from tests.helpers.strategies import eventheader_events

_EH = Tracepoint("user_events", eventheader_format("P_L4K1", 1500), 1500)
_PLAIN = Tracepoint("test", plain_format("tick", 500), 500)
_MODES = ("perf-json", "json", "text", "color")


def _ordinary(data: bytes, mode: str) -> list[str]:
    """The lines the ordinary path writes, sample by sample, in time order."""
    lines = []
    with PerfDataFile.from_bytes(data) as f:
        for s in f.samples_by_time():
            try:
                event = decode_sample(s)
            except SampleDecodeError:
                continue
            if mode == "perf-json":
                lines.append(sample_perf_json(s, decoded=event))
            elif mode == "json":
                lines.append(event_json(event, _meta(s)))
            else:
                lines.append(event_pretty(event, _meta(s), colors=mode == "color"))
    return lines


def _meta(s: Sample) -> EventMeta:
    return EventMeta(s.time, s.realtime_ns, s.cpu, s.pid, s.tid, s.name or None)


def _decoded(data: bytes, mode: str) -> list[str]:
    """decode_file's lines, written to a text stream; the same bytes when it writes its lines
    to the byte stream under a text stream (as ``decode`` does to stdout's buffer)."""
    out = io.StringIO()
    kind, colors = ("text" if mode == "color" else mode), mode == "color"
    with PerfDataFile.from_bytes(data) as f:
        decode_file(f, out, mode=kind, colors=colors)
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="\n")
    with PerfDataFile.from_bytes(data) as f:
        decode_file(f, stream, mode=kind, colors=colors, binary_out=stream.buffer)
    stream.flush()
    # split on "\n" only: str.splitlines() also breaks at U+0085, U+2028, ... which JSON and the
    # text output may carry unescaped inside a field name or value.
    text = out.getvalue()
    assert raw.getvalue() == text.encode("utf-8", "surrogateescape")
    assert not text or text.endswith("\n")
    return text.split("\n")[:-1]


class TestPlansWriteWhatTheDecoderWrites:
    """The fast lines equal the ordinary ones, on real captures and on generated hostile events."""

    def test_conformance_capture_in_every_format(self) -> None:
        """perf-decode's own capture (every EventHeader type, sched_switch): same lines in every format."""
        data = vector("perf.data").read_bytes()
        for mode in _MODES:
            assert _decoded(data, mode) == _ordinary(data, mode)

    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(eventheader_events(), min_size=1, max_size=4), st.integers(-3, 3))
    def test_generated_events_in_every_format(self, events: list[bytes], value: int) -> None:
        """Generated (often malformed) EventHeader events beside a plain tracepoint: same lines in all."""
        samples: list[Event | None] = [Event(_EH, e, 10 + t) for t, e in enumerate(events)]
        samples.append(Event(_PLAIN, value.to_bytes(4, "little", signed=True), 1))
        data = perf_data([samples[0], ROUND, *samples[1:]])
        for mode in _MODES:
            assert _decoded(data, mode) == _ordinary(data, mode)


class TestPlansNeedNoDetour:
    """The plans write the conformance capture themselves: the ordinary path is only a fallback."""

    def test_conformance_capture_written_without_the_ordinary_path(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With the ordinary decoder failing, every sample of the capture is still written in every format."""
        data = vector("perf.data").read_bytes()
        expected = {mode: _ordinary(data, mode) for mode in _MODES}

        def refuse(sample: Sample) -> None:
            raise SampleDecodeError("the ordinary path ran")

        monkeypatch.setattr(decode_module, "decode_sample", refuse)
        for mode in _MODES:
            assert _decoded(data, mode) == expected[mode], mode


class TestPlanCachesStayBounded:
    """What the plans keep (per metadata, per value) stays within its bounds, whatever the events."""

    def test_a_new_metadata_per_event_keeps_the_plans_within_their_bytes(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Events with a metadata each: the plan caches never hold more key bytes than their budget
        (and so at most budget/200 plans), and every line is still the ordinary path's."""
        monkeypatch.setattr(plans_module, "_CACHE_BYTES", 4096)
        seen: list[tuple[int, int]] = []
        add = plans_module.PlanCache._add
        caches: list[plans_module.PlanCache[Any]] = []

        def counting(self: plans_module.PlanCache[Any], *args: Any) -> Any:
            kept = add(self, *args)
            caches.append(self)
            held = {id(c._kept): len(c._kept) for c in caches if c._plans is self._plans}
            seen.append((self._plans.budget.cost, sum(held.values())))
            return kept

        monkeypatch.setattr(plans_module.PlanCache, "_add", counting)
        encoder = EventHeaderEncoder()
        events = [
            encoder.encode(f"event{i}", to_fields({"n": i, "s": "x" * i}.items()), 4) for i in range(120)
        ]
        data = perf_data([Event(_EH, e, 10 + t) for t, e in enumerate(events)])
        for mode in _MODES:
            assert _decoded(data, mode) == _ordinary(data, mode)
        assert len(seen) >= 120
        assert max(used for used, _ in seen) <= 4096
        assert max(plans for _, plans in seen) <= 4096 // 200

    def test_value_texts_kept_are_bounded(self) -> None:
        """A fixed-size value's writer keeps at most _VALUES_KEPT texts, and each text is the writer's."""
        style = PerfJsonStyle()
        write = style.kept_fixed(ENC_VALUE64, FMT_FLOAT, "<")
        plain = style.fixed(ENC_VALUE64, FMT_FLOAT, "<")
        for i in range(3 * plans_module._VALUES_KEPT):
            raw = struct.pack("<d", i / 7)
            assert write(raw) == plain(raw)
            assert write(raw) == plain(raw)  # kept: the same text again
        kept = write.__self__  # type: ignore[attr-defined]
        assert isinstance(kept, dict)
        assert 0 < len(kept) <= plans_module._VALUES_KEPT


class TestJsonLinesWithTheNameInTheTemplate:
    """--json puts a tracepoint's own name (and null activity ids) in its templates; other names
    and activity ids take the template with their place: the same line either way."""

    def test_any_name_on_every_sample_of_the_capture(self) -> None:
        """Each sample of the capture under its own name, another one, none: the ordinary path's line."""
        data = vector("perf.data").read_bytes()
        with PerfDataFile.from_bytes(data) as f:
            samples = list(f.samples_by_time())
        lines = JsonLines(EventFilter().accepts_values)
        for s in samples:
            assert s.format is not None
            render = lines.renderer(s.format)
            for name in (s.name, "", "other:name", "n\u00e9e\x7f"):
                renamed = dataclasses.replace(s, name=name)
                expected = event_json(decode_sample(renamed), _meta(renamed))
                assert render(renamed) == expected.encode("utf-8", "surrogateescape")

    def test_activity_ids_take_their_place(self) -> None:
        """Events of a capture's tracepoint with and without activity ids: the ordinary path's line."""
        with PerfDataFile.from_bytes(vector("perf.data").read_bytes()) as f:
            s = next(s for s in f.samples_by_time() if s.name == "user_events:TestProviderC_L5K0Gmsft")
        assert s.format is not None and s.realtime_ns is not None
        lines = JsonLines(EventFilter().accepts_values)
        render = lines.renderer(s.format)
        encoder = EventHeaderEncoder()
        ids = uuid.UUID(int=1).bytes, uuid.UUID(int=2).bytes
        for activity, related in ((None, None), (ids[0], None), ids):
            data = encoder.encode(
                "ev", to_fields({"n": 1}.items()), 5, activity_id=activity, related_id=related
            )
            assert data is not None
            at = s.format.payload_offset
            event = dataclasses.replace(s, raw=s.raw[:at] + data, data=data)
            expected = event_json(decode_sample(event), _meta(event))
            assert render(event) == expected.encode("utf-8", "surrogateescape")


_PLAIN_FIELDS = (
    "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:unsigned char raw[3];\toffset:28;\tsize:3;\tsigned:0;\n"
    "\tfield:s8 small;\toffset:31;\tsize:1;\tsigned:1;\n"
    "\tfield:unsigned long flags;\toffset:32;\tsize:8;\tsigned:0;\n"
    "\tfield:long delta;\toffset:40;\tsize:8;\tsigned:1;\n"
)
_COMMON_FIELDS = (
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
)


def _plain_tracepoint(fields: str) -> TracepointFormat:
    """A plain tracepoint's format with ``fields`` after the common ones."""
    text = f'name: tick\nID: 77\nformat:\n{_COMMON_FIELDS}{fields}\nprint fmt: "x"\n'
    fmt = parse_format("sys", text)
    assert fmt is not None
    return fmt


_PLAIN_FORMATS = {
    "several": _plain_tracepoint(_PLAIN_FIELDS),
    "one": _plain_tracepoint("\tfield:u32 value;\toffset:8;\tsize:4;\tsigned:0;\n"),
    "none": _plain_tracepoint(""),
}
_MAYBE = st.none() | st.integers(0, 2**32 - 1)


def _lines(mode: str) -> Lines:
    """The fast lines of ``mode`` (``color``: text with colours), passing every event."""
    accepts = EventFilter().accepts_values
    if mode == "perf-json":
        return PerfJsonLines(accepts)
    if mode == "json":
        return JsonLines(accepts)
    return ConsoleLines(accepts, colors=mode == "color")


class TestPlainRenderers:
    """A plain tracepoint's renderer (one unpack, one template) writes the ordinary path's line."""

    @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(
        st.sampled_from(sorted(_PLAIN_FORMATS)),
        st.sampled_from(_MODES),
        st.binary(min_size=0, max_size=48),
        st.none() | st.integers(0, 2**62),
        _MAYBE,
        _MAYBE,
        _MAYBE,
        st.none() | st.integers(0, 2**62),
        st.sampled_from(["sys:tick", "", "n\u00e9e\x7f"]),
    )
    def test_same_line_as_the_ordinary_path(
        self,
        which: str,
        mode: str,
        payload: bytes,
        real: int | None,
        cpu: int | None,
        pid: int | None,
        tid: int | None,
        time: int | None,
        name: str,
    ) -> None:
        """Any field bytes (short too), time, cpu, pid, tid there or not, pid == tid or not: the
        line of the decoded sample, and a line whenever the payload holds the fields."""
        fmt = _PLAIN_FORMATS[which]
        lines = _lines(mode)
        render = lines.renderer(fmt)
        raw = b"\x4d\0\0\0\x10\0\0\0" + payload
        every = (  # the same sample with every number there (the common case)
            1_700_000_000_123_456_789 if real is None else real,
            3 if cpu is None else cpu,
            7 if pid is None else pid,
            tid,
            5 if time is None else time,
        )
        layout = fmt.fields_unpack(small_unsigned=mode == "perf-json")
        assert layout is not None
        for r, c, p, t, when in ((real, cpu, pid, tid, time), every):
            for thread in (t, p, 8):
                wall = None if when is None else r  # (a sample's wall-clock time is its time's)
                sample = Sample(name, when, c, p, thread, raw, raw[8:], fmt, 64, wall, None, 0, True)
                line = render(sample)
                assert render(sample) == line  # the texts kept: the same again
                if line is None:  # the ordinary path writes it (or reports why it cannot)
                    assert len(raw) < layout.need or (p is not None and thread is None)
                    continue
                expected = lines.line_of(sample, decode_sample(sample))
                assert expected is not None
                assert line == expected.encode("utf-8", "surrogateescape")


class TestOneCodeGenerator:
    """The read side and the CLI write no code at run time: the plans are closures."""

    def test_no_exec_or_compile_below_read_and_cli(self) -> None:
        """No module of read/, the writers or the CLI calls exec() or compile()."""
        root = Path(structlog_etw.__file__).parent
        calls = []
        for path in [*(root / "read").rglob("*.py"), *(root / "cli").rglob("*.py")]:
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in {"exec", "compile"}
                ):
                    calls.append(f"{path.name}:{node.lineno}")
        assert calls == []


class TestTextStyleValues:
    """The console text of one value, as a plan writes it, is :func:`pretty_value` of its Python value."""

    @settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(
        st.sampled_from([e for e in Encoding if e not in (Encoding.INVALID, Encoding.STRUCT)]),
        st.sampled_from(list(Format)),
        st.sampled_from("<>"),
        st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xff\xfe\0\0", b"\0\0\xfe\xff"]),
        st.binary(max_size=24),
    )
    def test_every_encoding_and_format(
        self, enc: int, fmt: int, order: str, mark: bytes, rest: bytes
    ) -> None:
        """Strings with or without a byte-order mark, numbers, binary: the same text either way."""
        if enc == Encoding.STRUCT:
            return
        raw = mark + rest
        size = FIXED_SIZE.get(enc)
        if size is not None:
            raw = (raw * size + bytes(size))[:size]
        write = TextFieldStyle(colors=False).fixed(enc, fmt, order)
        try:
            value = python_value(enc, fmt, raw, order)
        except (ValueError, struct.error):
            return
        assert write(raw) == _value_text(value, enc, fmt).encode("utf-8", "surrogateescape")
