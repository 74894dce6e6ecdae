"""perf.data samples -> decoded events: EventHeader samples through the EventHeader decoder,
plain tracepoints (e.g. ``sched:sched_switch``) through their tracefs format.
"""

from __future__ import annotations

import json
from typing import Literal

from ..read._text import wallclock_text
from ..read.decode.eventheader import decode_event
from ..read.decoded import DecodedEvent, DecodedField, DecodeError, plain_fields
from ..read.writers.perf_json import json_string, perf_json
from .datafile import Sample
from .tracefs_format import ARRAY_NONE, FMT_HEX, FMT_NONE, FMT_SIGNED, FMT_STRING

__all__ = [
    "SampleDecodeError",
    "decode_sample",
    "sample_perf_json",
    "sample_time_text",
    "tracefs_perf_json_head",
]


class SampleDecodeError(DecodeError):
    """A sample that cannot be decoded (unknown tracepoint, malformed EventHeader event).

    A :class:`~structlog_etw.read.decoded.DecodeError` that also names the sample (its offset in the
    file and its tracepoint)."""


def sample_time_text(sample: Sample) -> str | None:
    """perf-decode's ``meta.time`` as JSON text: ``"2024-...T..:..:...nnnnnnnnnZ"`` or ``sec.nsec``."""
    if sample.time is None:
        return None
    if sample.realtime_ns is not None:
        return f'"{wallclock_text(sample.realtime_ns)}"'
    sec, nsec = divmod(sample.time, 1_000_000_000)
    return f"{sec}.{nsec:09d}"


def _meta(sample: Sample) -> dict[str, str]:
    meta: dict[str, str] = {}
    t = sample_time_text(sample)
    if t is not None:
        meta["time"] = t
    if sample.cpu is not None:
        meta["cpu"] = str(sample.cpu)
    if sample.pid is not None:
        meta["pid"] = str(sample.pid)
        meta["tid"] = str(sample.tid)
    return meta


def _unknown_format(sample: Sample) -> SampleDecodeError:
    return SampleDecodeError(
        f"sample at offset {sample.offset}: tracepoint format unknown"
        f" ({sample.name or 'unnamed event'}; the file lacks its tracing data)"
    )


def decode_sample(sample: Sample) -> DecodedEvent:
    """The sample as a :class:`~structlog_etw.read.decoded.DecodedEvent`.

    EventHeader samples: provider, level, keyword from the tracepoint name and
    everything else from the event (``format`` ``"eventheader"``).  Plain tracepoints:
    ``provider`` is the system (``sched``), ``name`` the event (``sched_switch``), level and
    keyword 0, ``format`` ``"tracefs"``, fields decoded per the tracefs format (each
    ``field_list`` entry as :meth:`~structlog_etw.perf.tracefs_format.FormatField.decoded` builds
    it: value, print style, array kind and value bytes).  Raises :class:`SampleDecodeError`.
    """
    fmt = sample.format
    if fmt is None:
        raise _unknown_format(sample)
    if fmt.is_eventheader:
        try:
            return decode_event(fmt.name, sample.data)
        except DecodeError as exc:
            raise SampleDecodeError(f"sample at offset {sample.offset} ({sample.name}): {exc}") from exc
    order = "<"
    field_list = tuple(f.decoded(sample.raw, order) for f in fmt.own_fields)
    return DecodedEvent(
        provider=fmt.system,
        name=fmt.name,
        level=0,
        keyword=0,
        fields=plain_fields(field_list),
        field_list=field_list,
        raw=sample.raw,
        format="tracefs",
        raw_name=fmt.name.encode(),
    )


def sample_perf_json(sample: Sample, *, field_tags: bool = True, decoded: DecodedEvent | None = None) -> str:
    """The sample as perf-decode's JSON object text (``{"n":...,fields...,"meta":{...}}``).

    Field tags are written as perf-decode writes them (``"name;tag=0xBEEF"``) unless
    ``field_tags`` is false.

    ``decoded`` is the sample's :func:`decode_sample` result when the caller has it already
    (the sample is then not decoded again: the text is rendered from the decoded event only, a
    plain tracepoint's as well as an EventHeader event's).  Raises :class:`SampleDecodeError`.
    """
    fmt = sample.format
    if fmt is None:
        raise _unknown_format(sample)
    meta = _meta(sample)
    event = decoded if decoded is not None else decode_sample(sample)
    if fmt.is_eventheader:
        return perf_json(event, field_tags=field_tags, extra_meta=meta)
    meta_text = '"meta":{' + ",".join(f'"{k}":{v}' for k, v in meta.items()) + "}"
    return "{" + tracefs_perf_json_head(event) + "," + meta_text + "}"


def tracefs_perf_json_head(event: DecodedEvent) -> str:
    """perf-decode's text of a plain tracepoint's :class:`~structlog_etw.read.decoded.DecodedEvent`
    (``format`` ``"tracefs"``), up to its ``meta``: ``'"n":"system:name","field":value,...'``.

    Rendered from the decoded fields only (never the event's bytes): names are escaped as
    perf-decode escapes them, so each line is one JSON object whatever the file's tracing data
    holds.
    """
    order = event.byte_order
    parts = ['"n":' + json_string(f"{event.provider}:{event.name}")]
    parts += [json_string(f.name) + ":" + _tracefs_value_text(f, order) for f in event.field_list]
    return ",".join(parts)


def _tracefs_value_text(f: DecodedField, order: Literal["little", "big"]) -> str:
    """perf-decode's JSON text of one plain tracepoint field: text as a string, bytes as spaced
    hex, numbers in the field's style (1- and 2-byte signed numbers print unsigned), arrays as lists."""
    if f.format == FMT_STRING:
        return json.dumps(f.value if f.value is not None else "", ensure_ascii=False)
    if f.format == FMT_NONE:
        return '"' + f.raw.hex(" ") + '"'

    def number(chunk: bytes) -> str:
        if f.format == FMT_HEX:
            return f'"0x{int.from_bytes(chunk, order):X}"'
        return str(int.from_bytes(chunk, order, signed=f.format == FMT_SIGNED and len(chunk) >= 4))

    if f.encoding != ARRAY_NONE:
        return "[" + ",".join(number(chunk) for chunk in f.raw_elements) + "]"
    return "null" if f.value is None else number(f.raw)
