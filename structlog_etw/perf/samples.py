"""perf.data samples -> decoded events: EventHeader samples through the EventHeader decoder,
plain tracepoints (e.g. ``sched:sched_switch``) through their tracefs format.
"""

from __future__ import annotations

from .._text import wallclock_text
from ..decoded import DecodedEvent, DecodedField, DecodeError, plain_fields
from ..eventheader.decoder import decode_event
from ..eventheader.perf_decode import perf_json
from .datafile import Sample

__all__ = ["SampleDecodeError", "decode_sample", "sample_perf_json", "sample_time_text"]


class SampleDecodeError(DecodeError):
    """A sample that cannot be decoded (unknown tracepoint, malformed EventHeader event).

    A :class:`~structlog_etw.decoded.DecodeError` that also names the sample (its offset in the
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
    """The sample as a :class:`~structlog_etw.decoded.DecodedEvent`.

    EventHeader samples: provider, level, keyword from the tracepoint name and
    everything else from the event (``format`` ``"eventheader"``).  Plain tracepoints:
    ``provider`` is the system (``sched``), ``name`` the event (``sched_switch``), level and
    keyword 0, ``format`` ``"tracefs"``, fields decoded per the tracefs format (encoding 0 in
    ``field_list``).  Raises :class:`SampleDecodeError`.
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
    field_list = tuple(DecodedField(f.name, f.value(sample.raw, order), 0) for f in fmt.own_fields)
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
    (an EventHeader sample is then not decoded again).  Raises :class:`SampleDecodeError`.
    """
    fmt = sample.format
    if fmt is None:
        raise _unknown_format(sample)
    meta = _meta(sample)
    if fmt.is_eventheader:
        event = decoded if decoded is not None else decode_sample(sample)
        return perf_json(event, field_tags=field_tags, extra_meta=meta)
    # Names come from the file's tracing data: escaped like every other string, so that each line
    # is one JSON object whatever the file holds (the format's writer is made once per format).
    meta_text = '"meta":{' + ",".join(f'"{k}":{v}' for k, v in meta.items()) + "}"
    return "{" + fmt.perf_json_head(sample.raw) + "," + meta_text + "}"
