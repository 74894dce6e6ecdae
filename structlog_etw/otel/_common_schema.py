"""Common Schema 4.0 layouts: the fields of a Log or Span event as Microsoft's collectors read them.

Format-aware but encoder-neutral: builds a ``list[Field]`` that either encoder writes.  Two layouts
(docs/common-schema.md has them field by field, with the exporter source they follow):

``schema="common"`` (:func:`otel_log_fields`, :func:`otel_span_fields`): as OpenTelemetry's
user_events and ETW exporters write it, the layout the Geneva uploader and otel-arrow's
user_events receiver recognise.  Log events are named ``Log``::

    __csver__  uint32 (user_events) / uint16 (ETW)   0x400
    PartA      time [, ext_dt_traceId, ext_dt_spanId] [, ext_cloud_role, ext_cloud_roleInstance]
               (ETW: [ext_dt {traceId, spanId}] [ext_cloud {role, roleInstance}], time)
    PartC      the event's own fields (left out when there are none)
    PartB      _typeName "Log", [body], severityNumber int16, [severityText], [eventId], [name]

Activities are one event named ``Span`` at their Stop: ``__csver__``, PartA (``time`` = the end,
ids), PartB (``_typeName`` ``"Span"``, ``name``, ``startTime``, ``success``, ``kind``,
[``parentId``], [``statusMessage``]; ETW's order differs), PartC (the activity's fields); ETW
writes PartC before PartB.  Ids are W3C-sized hex: trace 32 digits, span 16 (an activity's span
id is the last 8 bytes of its id; its trace the OpenTelemetry span's, else its root activity's
id: decided at its Start, remembered per context in :data:`_TRACES`).

``schema="tracing-etw"`` (:func:`log_fields`, :func:`span_fields`): the tracing-etw crate's
layout, events named as usual::

    __csver__  int64    0x0401
    PartA      struct   time (RFC 3339 UTC, microseconds), [ext_dt struct: [traceId], spanId]
    PartB      struct   Log:  _typeName "Log",  name, eventTime
                        Span: _typeName "Span", [parentId], name, startTime
    PartC      struct   Body (the message), then the event's fields

In both, every struct is built from the fields actually written, so its declared count always
matches; a struct holds 1..127 fields (fields past 126 go into a last field ``_more`` as JSON
text).  Events have opcode 0 and no ETW activity ids; an activity's Start writes nothing.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ..context import _correlation as _otel
from ..context._activity import CURRENT_ACTIVITY
from ..formats._levels import Opcode
from ..write.fields import BOOL, I16, I64, JSON, MAX_STRUCT_FIELDS, STR, STRUCT, U8, U16, U32, Field, safe_str

if TYPE_CHECKING:
    from ..backends.base import Slot
    from ..provider._provider import Provider

__all__ = [
    "CSVER",
    "OTEL_CSVER",
    "SEVERITY",
    "log_fields",
    "otel_log_fields",
    "otel_record_fields",
    "otel_span_fields",
    "rfc3339",
    "rfc3339_autosi",
    "span_fields",
    "span_id_of",
    "write_common",
]

CSVER: Final = 0x0401


def rfc3339(time_ns: int) -> str:
    """``time_ns`` (ns since the Unix epoch) as RFC 3339 UTC text with microseconds and ``Z``."""
    secs, ns = divmod(time_ns, 1_000_000_000)
    stamp = _dt.datetime.fromtimestamp(secs, _dt.timezone.utc)
    return f"{stamp:%Y-%m-%dT%H:%M:%S}.{ns // 1000:06d}Z"


def _ext_dt(trace_id: str | None, span_id: str | None) -> list[Field]:
    inner: list[Field] = []
    if trace_id:
        inner.append(("traceId", STR, trace_id))
    if span_id:
        inner.append(("spanId", STR, span_id))
    return [("ext_dt", STRUCT, inner)] if inner else []


def _part_c(fields: list[Field], body: str | None) -> list[Field]:
    """PartC: ``Body`` first (``body``, else a ``message`` str field moved there), then the rest."""
    moved: Field | None = None
    if body is None:
        for f in fields:
            if f[0] == "message" and f[1] == STR:
                moved = f
                body = f[2]
                break
    own: list[Field] = []
    if body is not None:
        own.append(("Body", STR, body))
    own.extend(f for f in fields if f is not moved)
    return _part_c_struct(own)


def _part_c_struct(own: list[Field]) -> list[Field]:
    """PartC of ``own`` fields, left out when there are none; past 127 the last is ``_more``
    (the rest as JSON text): the one home of PartC's field limit, both layouts."""
    if not own:
        return []
    if len(own) > MAX_STRUCT_FIELDS:
        rest = own[MAX_STRUCT_FIELDS - 1 :]
        try:
            text = json.dumps({f[0]: _json_value(f) for f in rest}, default=safe_str, ensure_ascii=False)
        except Exception:
            text = safe_str([f[0] for f in rest])
        own = [*own[: MAX_STRUCT_FIELDS - 1], ("_more", JSON, text)]
    return [("PartC", STRUCT, own)]


def _json_value(field: Field) -> Any:
    if field[1] == STRUCT:
        return {f[0]: _json_value(f) for f in field[2]}
    value = field[2]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value


def log_fields(
    name: str,
    fields: list[Field],
    *,
    time_ns: int,
    body: str | None,
    trace_id: str | None = None,
    span_id: str | None = None,
) -> list[Field]:
    """The Common Schema fields of a Log event named ``name``.

    ``fields`` are the event's own typed fields.  ``Body`` is ``body`` when given (a ``message``
    field then stays an ordinary PartC field), else a ``message`` str field moved there.
    ``trace_id``/``span_id`` fill PartA's ``ext_dt``.
    """
    when = rfc3339(time_ns)
    return [
        ("__csver__", I64, CSVER),
        ("PartA", STRUCT, [("time", STR, when), *_ext_dt(trace_id, span_id)]),
        ("PartB", STRUCT, [("_typeName", STR, "Log"), ("name", STR, name), ("eventTime", STR, when)]),
        *_part_c(fields, body),
    ]


def span_fields(
    name: str,
    fields: list[Field],
    *,
    start_ns: int,
    stop_ns: int,
    span_id: str,
    parent_id: str | None = None,
    trace_id: str | None = None,
) -> list[Field]:
    """The Common Schema fields of a Span event (an activity, written once when it stops).

    A ``message`` str field becomes PartC's ``Body``.
    """
    part_b: list[Field] = [("_typeName", STR, "Span")]
    if parent_id:
        part_b.append(("parentId", STR, parent_id))
    part_b.append(("name", STR, name))
    part_b.append(("startTime", STR, rfc3339(start_ns)))
    return [
        ("__csver__", I64, CSVER),
        ("PartA", STRUCT, [("time", STR, rfc3339(stop_ns)), *_ext_dt(trace_id, span_id)]),
        ("PartB", STRUCT, part_b),
        *_part_c(fields, None),
    ]


# --- the layout OpenTelemetry's user_events / ETW exporters write (schema="common") ---------------

#: ``__csver__`` as OpenTelemetry's exporters write it (Common Schema 4.0); the Geneva reader
#: treats a record as Common Schema only with this value and ``PartB._typeName == "Log"``.
OTEL_CSVER: Final = 0x0400
EVENTHEADER: Final = "eventheader"
TRACELOGGING: Final = "tracelogging"
#: Trace level (1 critical .. 5 verbose) -> (OpenTelemetry severity number, severity text).
SEVERITY: Final[dict[int, tuple[int, str]]] = {
    1: (21, "FATAL"),
    2: (17, "ERROR"),
    3: (13, "WARN"),
    4: (9, "INFO"),
    5: (5, "DEBUG"),
}
#: The span kind written for an activity: OpenTelemetry's ``SpanKind.INTERNAL``.
SPAN_KIND_INTERNAL: Final = 0
#: An integer field of this name moves to ``PartB.eventId``, as the exporters move it.
EVENT_ID_KEY: Final = "event_id"


def rfc3339_autosi(time_ns: int) -> str:
    """``time_ns`` (ns since the Unix epoch) as RFC 3339 UTC text ending in ``Z``, with the fewest
    of 0, 3, 6 or 9 fraction digits that keep it exact (chrono's ``SecondsFormat::AutoSi``, what
    the exporters write)."""
    secs, ns = divmod(time_ns, 1_000_000_000)
    stamp = _dt.datetime.fromtimestamp(secs, _dt.timezone.utc)
    if ns == 0:
        frac = ""
    elif ns % 1_000_000 == 0:
        frac = f".{ns // 1_000_000:03d}"
    elif ns % 1000 == 0:
        frac = f".{ns // 1000:06d}"
    else:
        frac = f".{ns:09d}"
    return f"{stamp:%Y-%m-%dT%H:%M:%S}{frac}Z"


def _csver(fmt: str) -> Field:
    # user_events exporters: add_value(1024) -> Value32 UnsignedInt; ETW: add_u16(.., Unsigned)
    return ("__csver__", U16 if fmt == TRACELOGGING else U32, OTEL_CSVER)


def _otel_part_a(
    fmt: str,
    time_text: str,
    trace_id: str | None,
    span_id: str | None,
    cloud: tuple[str | None, str | None],
    *,
    span: bool,
) -> Field:
    """PartA: flat ``ext_dt_*``/``ext_cloud_*`` on user_events, nested ``ext_dt``/``ext_cloud`` on ETW."""
    role, instance = cloud
    time_field: Field = ("time", STR, time_text)
    if fmt != TRACELOGGING:
        out = [time_field]
        if trace_id:
            out.append(("ext_dt_traceId", STR, trace_id))
        if span_id:
            out.append(("ext_dt_spanId", STR, span_id))
        if role:
            out.append(("ext_cloud_role", STR, role))
        if instance:
            out.append(("ext_cloud_roleInstance", STR, instance))
        return ("PartA", STRUCT, out)
    dt_inner: list[Field] = []
    if trace_id:
        dt_inner.append(("traceId", STR, trace_id))
    if span_id:
        dt_inner.append(("spanId", STR, span_id))
    cloud_inner: list[Field] = []
    if role:
        cloud_inner.append(("role", STR, role))
    if instance:
        cloud_inner.append(("roleInstance", STR, instance))
    ext = [("ext_dt", STRUCT, dt_inner)] if dt_inner else []
    if cloud_inner:
        ext.append(("ext_cloud", STRUCT, cloud_inner))
    # the ETW log exporter writes time after ext_dt/ext_cloud, the ETW span exporter before
    return ("PartA", STRUCT, [time_field, *ext] if span else [*ext, time_field])


def otel_log_fields(
    fields: list[Field],
    *,
    fmt: str,
    time_ns: int,
    level: int,
    body: str | None,
    name: str | None = None,
    trace_id: str | None = None,
    span_id: str | None = None,
    cloud: tuple[str | None, str | None] = (None, None),
) -> list[Field]:
    """The fields of a Log event as OpenTelemetry's log exporter for ``fmt`` writes them.

    Order ``__csver__``, PartA, PartC, PartB (both formats).  PartB: ``_typeName`` ``"Log"``,
    ``body`` (``body``, else a ``message`` str field moved there), ``severityNumber`` (int16)
    and ``severityText`` from ``level`` (:data:`SEVERITY`), ``eventId`` (an int64 ``event_id``
    field moved there), ``name`` (``name``: the OpenTelemetry event name, when given).
    ``trace_id`` (32 hex digits) / ``span_id`` (16) go into PartA.
    """
    moved_body: Field | None = None
    if body is None:
        for f in fields:
            if f[0] == "message" and f[1] == STR:
                moved_body = f
                body = f[2]
                break
    own = fields if moved_body is None else [f for f in fields if f is not moved_body]
    number, text = SEVERITY.get(level, (0, ""))
    return otel_record_fields(
        own,
        fmt=fmt,
        time_ns=time_ns,
        severity_number=number,
        severity_text=text or None,
        body=None if body is None else ("body", STR, body),
        name=name,
        trace_id=trace_id,
        span_id=span_id,
        cloud=cloud,
    )


def otel_record_fields(
    fields: list[Field],
    *,
    fmt: str,
    time_ns: int,
    severity_number: int,
    severity_text: str | None,
    body: Field | None,
    name: str | None = None,
    trace_id: str | None = None,
    span_id: str | None = None,
    cloud: tuple[str | None, str | None] = (None, None),
    resource: list[Field] | None = None,
) -> list[Field]:
    """The fields of one OpenTelemetry log record as the log exporter for ``fmt`` writes them.

    ``fields`` are the record's attributes (an int64 ``event_id`` moves to ``PartB.eventId``);
    ``body`` is PartB's ``body`` field with its own kind (a string, or any kind of the type table);
    ``resource`` are resource attributes written into PartC too (ETW: before the record's
    attributes, user_events: after them, as each exporter does).  Shared by the renderer
    (:func:`otel_log_fields`) and :mod:`structlog_etw.otel`.
    """
    moved_id: Field | None = None
    for f in fields:
        if f[0] == EVENT_ID_KEY and f[1] == I64:
            moved_id = f
            break
    own = fields if moved_id is None else [f for f in fields if f is not moved_id]
    if resource:
        own = [*resource, *own] if fmt == TRACELOGGING else [*own, *resource]
    part_b: list[Field] = [("_typeName", STR, "Log")]
    if body is not None:
        part_b.append(("body", body[1], body[2]))
    part_b.append(("severityNumber", I16, severity_number))
    if severity_text:
        part_b.append(("severityText", STR, severity_text))
    if moved_id is not None:
        part_b.append(("eventId", I64, moved_id[2]))
    if name:
        part_b.append(("name", STR, name))
    return [
        _csver(fmt),
        _otel_part_a(fmt, rfc3339_autosi(time_ns), trace_id, span_id, cloud, span=False),
        *_part_c_struct(own),
        ("PartB", STRUCT, part_b),
    ]


def otel_span_fields(
    name: str,
    fields: list[Field],
    *,
    fmt: str,
    start_ns: int,
    stop_ns: int,
    trace_id: str,
    span_id: str,
    parent_id: str | None = None,
    success: bool = True,
    status_message: str | None = None,
    kind: int = SPAN_KIND_INTERNAL,
    cloud: tuple[str | None, str | None] = (None, None),
    links: str | None = None,
    well_known: list[Field] | None = None,
    resource: list[Field] | None = None,
) -> list[Field]:
    """The fields of a Span event as OpenTelemetry's span exporter for ``fmt`` writes them.

    user_events: ``__csver__``, PartA, PartB (``_typeName`` ``"Span"``, ``name``, ``startTime``,
    ``success``, ``kind`` (uint32), [``parentId``], [``links``], [well-known], [``statusMessage``]),
    PartC.  ETW: ``__csver__``, PartA, PartC, PartB (``_typeName``, ``name``, ``kind`` (uint8),
    ``startTime``, [``parentId``], [``links``], [``statusMessage``], [well-known], ``success``).
    PartA ``time`` is the end.  ``links`` is the exporters' JSON text of the span's links;
    ``well_known`` the PartB fields made of well-known attributes (``httpMethod``, ...);
    ``resource`` resource attributes for PartC (ETW: first; user_events: after the fields).
    """
    start = rfc3339_autosi(start_ns)
    part_a = _otel_part_a(fmt, rfc3339_autosi(stop_ns), trace_id, span_id, cloud, span=True)
    if resource:
        fields = [*resource, *fields] if fmt == TRACELOGGING else [*fields, *resource]
    part_c = _part_c_struct(fields)
    head: list[Field] = []
    if parent_id:
        head.append(("parentId", STR, parent_id))
    if links:
        head.append(("links", STR, links))
    status: list[Field] = [("statusMessage", STR, status_message)] if status_message else []
    if fmt == TRACELOGGING:
        part_b: list[Field] = [
            ("_typeName", STR, "Span"),
            ("name", STR, name),
            ("kind", U8, kind),
            ("startTime", STR, start),
            *head,
            *status,
            *(well_known or ()),
            ("success", BOOL, success),
        ]
        return [_csver(fmt), part_a, *part_c, ("PartB", STRUCT, part_b)]
    part_b = [
        ("_typeName", STR, "Span"),
        ("name", STR, name),
        ("startTime", STR, start),
        ("success", BOOL, success),
        ("kind", U32, kind),
        *head,
        *(well_known or ()),
        *status,
    ]
    return [_csver(fmt), part_a, ("PartB", STRUCT, part_b), *part_c]


# --- which trace an activity belongs to --------------------------------------------------------------


class _Trace(NamedTuple):
    """What the Start of an activity decided: its trace id, its parent span id, the
    OpenTelemetry span current at its Start (a later span is nested inside the activity) and
    the wall-clock time of its Start."""

    activity_id: bytes
    trace_id: str
    parent_id: str | None
    otel_span: int | None
    start_ns: int


#: The ``_Trace`` of each open activity of this context, outermost first (set at each Start that
#: passes a Common Schema renderer; an entry of an activity that ended is dropped at the next
#: Start of a sibling, and never matched: ids are unique).
_TRACES: ContextVar[tuple[_Trace, ...]] = ContextVar("structlog-etw.cs-traces", default=())
_MAX_DEPTH: Final = 64


def span_id_of(activity_id: bytes) -> str:
    """An activity's W3C span id (16 hex digits): the last 8 bytes of its id.

    For an activity that took its id from an OpenTelemetry span (``etw_otel``) that is the span's
    id; for a generated id, the per-process unique half (never all zero: it holds the variant bits).
    """
    return activity_id[8:].hex()


def _find(traces: tuple[_Trace, ...], activity_id: bytes | None) -> int:
    if activity_id is not None:
        for i in range(len(traces) - 1, -1, -1):
            if traces[i].activity_id == activity_id:
                return i
    return -1


def _start_activity(current: tuple[bytes, bytes | None], otel: tuple[int, int] | None, now: int) -> None:
    """At an activity's Start: decide its trace id and parent span id, remember them."""
    aid, related = current
    traces = _TRACES.get()
    at = _find(traces, related)
    parent = traces[at] if at >= 0 else None
    own = span_id_of(aid)
    parent_id: str | None = None
    if otel is not None:
        trace = f"{otel[0]:032x}"
        otel_span = f"{otel[1]:016x}"
        if parent is not None and parent.otel_span == otel[1]:
            parent_id = span_id_of(parent.activity_id)  # the span is outside the parent activity
        elif otel_span != own:
            parent_id = otel_span  # the span is the innermost enclosing one
    elif parent is not None:
        trace = parent.trace_id
        parent_id = span_id_of(parent.activity_id)
    else:
        trace = aid.hex()  # a root activity starts a trace of its own: its id is W3C-sized
    if related is not None and parent is None and parent_id is None:
        parent_id = span_id_of(related)  # the parent's Start was not seen (nobody listened)
    keep = traces[: at + 1] if at >= 0 else ()
    entry = _Trace(aid, trace, parent_id, None if otel is None else otel[1], now)
    _TRACES.set((*keep[-(_MAX_DEPTH - 1) :], entry))


def _activity_ids(
    current: tuple[bytes, bytes | None], otel: tuple[int, int] | None
) -> tuple[str, str, str | None, bool, int | None]:
    """``(trace_id, span_id, parent_id, otel_inner, start_ns)`` inside an activity; ``otel_inner``:
    an OpenTelemetry span started inside the activity is the innermost span; ``start_ns``: when
    its Start was rendered (``None`` when it was not)."""
    aid, related = current
    traces = _TRACES.get()
    at = _find(traces, aid)
    if at < 0:  # its Start was not seen: a trace of its own (or the span's)
        trace = aid.hex() if otel is None else f"{otel[0]:032x}"
        parent = None if related is None else span_id_of(related)
        return trace, span_id_of(aid), parent, False, None
    entry = traces[at]
    inner = otel is not None and otel[1] != entry.otel_span and f"{otel[1]:016x}" != span_id_of(aid)
    return entry.trace_id, span_id_of(aid), entry.parent_id, inner, entry.start_ns


def write_common(
    provider: Provider,
    slot: Slot,
    name: str,
    fields: list[Field],
    *,
    opcode: int,
    tags: int,
    body: str | None,
    event_name: str | None = None,
    layout: str = "common",
    cloud: tuple[str | None, str | None] = (None, None),
) -> None:
    """Write one renderer event in a Common Schema layout.

    ``layout="common"``: the layout OpenTelemetry's exporters write (:func:`otel_log_fields`,
    :func:`otel_span_fields`): Log events named ``Log``, activities as one Span event named
    ``Span`` at their Stop.  ``layout="tracing-etw"``: tracing-etw's layout (:func:`log_fields`,
    :func:`span_fields`), events named ``name``.  An activity's Start (opcode 1) writes nothing
    (it only records the activity's trace); events have opcode 0 and no ETW activity ids.
    ``event_name`` is the event's own name (``etw_name``): ``PartB.name`` of a Log event.
    """
    now = time.time_ns()
    otel = _otel.current_span_ids()
    current = CURRENT_ACTIVITY.get()
    if layout != "common":
        if opcode != Opcode.ACTIVITY_START:
            _write_tracing_etw(provider, slot, name, fields, opcode, tags, body, now, otel, current)
        return
    fmt = provider.format
    if current is not None and opcode == Opcode.ACTIVITY_START:
        _start_activity(current, otel, now)
        return
    if opcode == Opcode.ACTIVITY_START:
        return
    if current is not None and opcode == Opcode.ACTIVITY_STOP:
        trace, span, parent, _, started = _activity_ids(current, otel)
        duration = 0
        outcome = "ok"
        own: list[Field] = []
        for f in fields:
            if f[0] == "duration_ns" and f[1] == I64:
                duration = f[2]
            elif f[0] == "outcome" and f[1] == STR:
                outcome = f[2]
            else:
                own.append(f)
        out = otel_span_fields(
            name,
            own,
            fmt=fmt,
            # the Start's own time when it was rendered: the end minus the duration would move the
            # start as late as the Stop is rendered after the duration was measured
            start_ns=now - max(duration, 0) if started is None else min(started, now),
            stop_ns=now,
            trace_id=trace,
            span_id=span,
            parent_id=parent,
            success=outcome == "ok",
            status_message=None if outcome == "ok" else outcome,
            cloud=cloud,
        )
        provider.write(slot, "Span", out, 0, tags)
        return
    trace_id: str | None = None
    span_id: str | None = None
    if current is not None:
        trace, span, _, inner, _ = _activity_ids(current, otel)
        if inner and otel is not None:
            trace_id, span_id = f"{otel[0]:032x}", f"{otel[1]:016x}"
        else:
            trace_id, span_id = trace, span
    elif otel is not None:
        trace_id, span_id = f"{otel[0]:032x}", f"{otel[1]:016x}"
    out = otel_log_fields(
        fields,
        fmt=fmt,
        time_ns=now,
        level=slot.level,
        body=body,
        name=event_name,
        trace_id=trace_id,
        span_id=span_id,
        cloud=cloud,
    )
    provider.write(slot, "Log", out, 0, tags)


def _write_tracing_etw(
    provider: Provider,
    slot: Slot,
    name: str,
    fields: list[Field],
    opcode: int,
    tags: int,
    body: str | None,
    now: int,
    otel: tuple[int, int] | None,
    current: tuple[bytes, bytes | None] | None,
) -> None:
    """tracing-etw's layout (``schema="tracing-etw"``): see the module docstring."""
    trace_id = None if otel is None else f"{otel[0]:032x}"
    if opcode == Opcode.ACTIVITY_STOP and current is not None:
        duration = 0
        for f in fields:
            if f[0] == "duration_ns" and f[1] == I64:
                duration = f[2]
        out = span_fields(
            name,
            fields,
            start_ns=now - max(duration, 0),
            stop_ns=now,
            span_id=current[0].hex(),
            parent_id=None if current[1] is None else current[1].hex(),
            trace_id=trace_id,
        )
    else:
        if current is not None:  # the innermost activity: a Span event of ours has this spanId
            span_id: str | None = current[0].hex()
        else:
            span_id = None if otel is None else f"{otel[1]:016x}"
        out = log_fields(name, fields, time_ns=now, body=body, trace_id=trace_id, span_id=span_id)
    provider.write(slot, name, out, 0, tags)
