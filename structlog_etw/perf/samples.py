"""perf.data samples -> decoded events: EventHeader samples through the EventHeader decoder,
plain tracepoints (e.g. ``sched:sched_switch``) through their tracefs format.
"""

from __future__ import annotations

from ..read.decode.eventheader import decode_event
from ..read.decoded import DecodedEvent, DecodeError, plain_fields
from ..read.writers.perf_json import sample_line, sample_time_text, tracefs_perf_json_head
from .datafile import Sample

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
    if sample.format is None:
        raise _unknown_format(sample)
    event = decoded if decoded is not None else decode_sample(sample)
    return sample_line(sample, event, field_tags=field_tags)
