"""Common Schema 4.0 layout: the fields of a Log or Span event as Microsoft's collectors read them.

Format-neutral: builds a ``list[Field]`` that either encoder writes.  The layout (top level,
in order)::

    __csver__  int      0x0401 (Common Schema 4.1 marker, as tracing-etw and the 1DS SDKs write)
    PartA      struct   time (str, RFC 3339 UTC), [ext_dt struct: [traceId str], spanId str]
    PartB      struct   Log:  _typeName "Log",  name, eventTime (RFC 3339 UTC)
                        Span: _typeName "Span", [parentId], name, startTime (RFC 3339 UTC)
    PartC      struct   Body (the message: structlog's ``event`` text), then the event's fields

Every struct is built from the list of fields actually written, so its declared field count
always matches (an unknown trace id or parent id is left out, not written empty).  A struct
holds 1..127 fields: an event with no own fields has no PartC, and fields beyond 126 go into
PartC's last field ``_more`` as JSON text.

Ids (lowercase hex strings): ``traceId`` is the current OpenTelemetry span's trace id (32
digits) when there is one.  ``spanId`` is the innermost activity's id (32 digits) inside an
activity, so every Log event joins the Span event written for that activity; else the current
OpenTelemetry span's id (16 digits); else there is no ``ext_dt``.  Span events (activities,
written once at their Stop) use activity ids for ``spanId``/``parentId``.

Common Schema events have opcode 0 and carry no ETW activity ids (as tracing-etw writes
them); an activity's Start event is not written at all.  ``__csver__`` is written as this
project's only integer kind, a signed 64-bit value (tracing-etw: 32-bit on Linux, 16-bit on
Windows); collectors read it by name and value.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from typing import TYPE_CHECKING, Any, Final

from . import _otel
from ._activity import CURRENT_ACTIVITY
from .fields import I64, JSON, MAX_STRUCT_FIELDS, STR, STRUCT, Field, safe_str

if TYPE_CHECKING:
    from ._provider import Provider
    from .backends.base import Slot

__all__ = ["CSVER", "log_fields", "rfc3339", "span_fields", "write_common"]

CSVER: Final = 0x0401
_UTC: Final = _dt.timezone.utc


def rfc3339(time_ns: int) -> str:
    """``time_ns`` (ns since the Unix epoch) as RFC 3339 UTC text with microseconds and ``Z``."""
    secs, ns = divmod(time_ns, 1_000_000_000)
    stamp = _dt.datetime.fromtimestamp(secs, _UTC)
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
    if not own:
        return []
    if len(own) > MAX_STRUCT_FIELDS:
        rest = own[MAX_STRUCT_FIELDS - 1 :]
        try:
            text = json.dumps({f[0]: _plain(f) for f in rest}, default=safe_str, ensure_ascii=False)
        except Exception:
            text = safe_str([f[0] for f in rest])
        own = [*own[: MAX_STRUCT_FIELDS - 1], ("_more", JSON, text)]
    return [("PartC", STRUCT, own)]


def _plain(field: Field) -> Any:
    if field[1] == STRUCT:
        return {f[0]: _plain(f) for f in field[2]}
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


def write_common(
    provider: Provider,
    slot: Slot,
    name: str,
    fields: list[Field],
    *,
    opcode: int,
    tags: int,
    body: str | None,
) -> None:
    """Write one renderer event in the Common Schema layout (``EtwRenderer(schema="common")``).

    An activity's Start (opcode 1) writes nothing; its Stop (opcode 2) becomes a Span event;
    everything else a Log event.  Common Schema events have opcode 0 (Info) and no ETW
    activity ids: correlation is in PartA ``ext_dt`` and PartB ``parentId``.
    """
    if opcode == 1:
        return
    now = time.time_ns()
    otel = _otel.current_span_ids()
    trace_id = None if otel is None else f"{otel[0]:032x}"
    current = CURRENT_ACTIVITY.get()
    if opcode == 2 and current is not None:
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
