"""Hostile generated events through both decoders, the writers and ``decode`` (run in a bounded
subprocess by tests/cli/test_hostile.py: a decoder bomb there fails fast, it cannot hang the suite).

:func:`run` drives hypothesis over :func:`tests.helpers.strategies.eventheader_events` and
:func:`~tests.helpers.strategies.tracelogging_events`.  For each event: the decoder returns a
:class:`~structlog_etw.read.decoded.DecodedEvent` or raises its documented error; what it returns
was read from the input (:func:`tests.helpers.decoded_spans.assert_read_from`: its raw bytes,
every field's bytes inside the input, no more fields than the metadata has room for) and holds
at most :data:`ITEMS_PER_BYTE` values per event byte (the work bound, counted, not timed); every
writer renders it; text is free of control characters and JSON lines parse.  EventHeader
events also go through ``decode`` (``decode_file``) inside a perf.data in every format.
"""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import HealthCheck, given, settings

from structlog_etw.cli.decode import decode_file
from structlog_etw.formats.eventheader import EventHeaderDecodeError
from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.read.decode.tracelogging import decode as tracelogging_decode
from structlog_etw.read.decoded import DecodedEvent, DecodedField, EventMeta
from structlog_etw.read.writers.console import event_pretty
from structlog_etw.read.writers.json_lines import event_json
from structlog_etw.read.writers.perf_json import perf_json
from tests.helpers.decoded_spans import assert_read_from
from tests.helpers.perfdata import ROUND, Event, Tracepoint, eventheader_format, perf_data
from tests.helpers.strategies import eventheader_events, tracelogging_events

#: Decoded values (fields and array elements, nested) allowed per byte of an event: the
#: decoders' work bound (struct nesting 32 deep, each element at least one byte or one claimed).
ITEMS_PER_BYTE = 70
_TRACEPOINT = Tracepoint("user_events", eventheader_format("P_L4K1", 1500), 1500)
_CONTROLS = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} | {"\u202e", "\u2066"}


def _items(fields: Any) -> int:
    n = 0
    for f in fields:
        assert isinstance(f, DecodedField)
        n += 1
        if f.is_struct and f.is_array:
            n += sum(1 + _items(e) for e in f.value)
        elif f.is_struct:
            n += _items(f.value)
        elif f.is_array:
            n += len(f.value)
    return n


def _check_rendering(event: DecodedEvent, size: int) -> None:
    assert _items(event.field_list) <= ITEMS_PER_BYTE * (size + 1), "more values than the bytes allow"
    text = event_pretty(event, EventMeta(time_ns=1, pid=1, tid=1))
    assert not _CONTROLS & set(text), f"control character in text output: {text!r}"
    line = event_json(event, EventMeta(time_ns=1))
    assert isinstance(json.loads(line), dict)
    if event.format == "eventheader":
        json.loads(perf_json(event).encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def _check_decode_command(events: list[bytes]) -> None:
    samples: list[Event | None] = [Event(_TRACEPOINT, e, t) for t, e in enumerate(events)]
    data = perf_data([*samples[:1], ROUND, *samples[1:]])
    for mode in ("text", "json", "perf-json", "chrome-trace"):
        out = io.StringIO()
        with PerfDataFile.from_bytes(data) as f:
            written, problems = decode_file(f, out, mode=mode)
        assert written + len(problems) >= len(events)
        text = out.getvalue()
        if mode == "chrome-trace":
            json.loads(text)
        elif mode in ("json", "perf-json"):
            for line in text.splitlines():
                json.loads(line.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
        else:
            assert not _CONTROLS - {"\n"} & set(text)


def run(examples: int) -> int:
    """Run ``examples`` generated cases of each kind; return how many events decoded."""
    decoded = 0
    quick = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )

    @quick
    @given(eventheader_events())
    def eventheader(event: bytes) -> None:
        nonlocal decoded
        try:
            ev = decode_event("P_L4K1", event)
        except EventHeaderDecodeError:
            return
        decoded += 1
        assert_read_from(ev, event, event, event)
        _check_rendering(ev, len(event))

    @quick
    @given(tracelogging_events())
    def tracelogging(event: tuple[bytes, bytes]) -> None:
        nonlocal decoded
        metadata, data = event
        try:
            ev = tracelogging_decode(metadata, data, provider="P", level=4, keyword=1)
        except ValueError:
            return
        decoded += 1
        assert_read_from(ev, data, metadata, metadata + data)
        _check_rendering(ev, len(metadata) + len(data))

    @settings(quick, max_examples=max(1, examples // 10))
    @given(eventheader_events(), eventheader_events(), eventheader_events())
    def decode_command(a: bytes, b: bytes, c: bytes) -> None:
        _check_decode_command([a, b, c])

    eventheader()
    tracelogging()
    decode_command()
    return decoded
