"""OpenTelemetry correlation: the current span's trace id and span id on events and activities.

Optional: install the ``otel`` extra (``opentelemetry-api``; no SDK needed).  Nothing here
imports OpenTelemetry until first used, and without it every function quietly reports
"no span" (one failed import, cached).

- :func:`add_otel_ids` is a structlog processor (place it before the renderer): when a valid
  span is current it adds ``trace_id`` (``str``, 32 lowercase hex digits, W3C form) and
  ``span_id`` (``str``, 16 lowercase hex digits) to the event dict, unless the call already
  set them.
- :func:`use_otel_activity_ids` makes activities started inside a span take their activity
  id from it (see :func:`activity_id_from_span`); ``etw_activity(..., etw_otel=True/False)``
  overrides that per activity.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from contextvars import ContextVar
from typing import Any, Final, TypeVar

__all__ = [
    "activity_id_from_span",
    "add_otel_ids",
    "current_span_ids",
    "use_otel_activity_ids",
]

TRACE_ID_KEY: Final = "trace_id"
SPAN_ID_KEY: Final = "span_id"

_UNSET: Final = object()
_get_current_span: Any = _UNSET  # opentelemetry.trace.get_current_span, or None when not installed
_activity_ids_from_span = False

#: The span-derived activity id taken by the innermost enclosing activity that took one
#: (set and reset by ``_activity``), so that a nested activity inside the same span gets a
#: fresh id instead of repeating an id that is still open.
SPAN_ID_TAKEN: ContextVar[bytes | None] = ContextVar("structlog_etw_otel_taken", default=None)


def _load() -> Any:
    global _get_current_span
    try:
        from opentelemetry.trace import get_current_span  # noqa: PLC0415  (optional dependency)
    except Exception:
        _get_current_span = None
    else:
        _get_current_span = get_current_span
    return _get_current_span


def current_span_ids() -> tuple[int, int] | None:
    """``(trace_id, span_id)`` of the current OpenTelemetry span as ints, or ``None``.

    ``None`` when OpenTelemetry is not installed, no span is current, or the current span's
    context is invalid (all-zero ids).  Never raises.
    """
    get = _get_current_span
    if get is _UNSET:
        get = _load()
    if get is None:
        return None
    try:
        ctx = get().get_span_context()
        if not ctx.is_valid:
            return None
        return int(ctx.trace_id), int(ctx.span_id)
    except Exception:
        return None


#: The event dict type a processor is given (structlog's ``EventDict`` is a ``MutableMapping``).
EventDictT = TypeVar("EventDictT", bound=MutableMapping[str, Any])


def add_otel_ids(_logger: Any, _method_name: str, event_dict: EventDictT) -> EventDictT:
    """structlog processor: add ``trace_id``/``span_id`` (hex ``str``) of the current span, if any.

    Keys already in the event dict are kept.  Never raises.  Typed as a structlog ``Processor``
    (any ``MutableMapping`` event dict; the same type comes back), so it fits
    ``structlog.configure(processors=[...])`` under ``mypy --strict``.
    """
    ids = current_span_ids()
    if ids is not None:
        if TRACE_ID_KEY not in event_dict:
            event_dict[TRACE_ID_KEY] = f"{ids[0]:032x}"
        if SPAN_ID_KEY not in event_dict:
            event_dict[SPAN_ID_KEY] = f"{ids[1]:016x}"
    return event_dict


def activity_id_from_span(trace_id: int, span_id: int) -> bytes:
    """The 16-byte activity id an activity takes from a span.

    Layout (RFC 4122 byte order): the first 8 bytes of the trace id, then the 8 bytes of the
    span id, so the activity GUID reads ``tttttttt-tttt-tttt-ssss-ssssssssssss``: its first 16
    hex digits are the trace id's first 16, its last 16 the span id.
    """
    return (trace_id >> 64).to_bytes(8, "big") + span_id.to_bytes(8, "big")


def use_otel_activity_ids(enabled: bool = True) -> None:
    """Process-wide: activities started inside an OpenTelemetry span take their id from it.

    Off by default.  An activity nested (at any depth) in another activity that already took
    the same span's id gets a fresh id instead: ids stay unique per open activity, so Start
    and Stop events pair up.
    """
    global _activity_ids_from_span
    _activity_ids_from_span = bool(enabled)


def span_activity_id(per_call: bool | None) -> bytes | None:
    """The id for a new activity if it should come from the current span, else ``None``. Never raises."""
    if not (_activity_ids_from_span if per_call is None else per_call):
        return None
    ids = current_span_ids()
    if ids is None:
        return None
    try:
        aid = activity_id_from_span(*ids)
    except Exception:  # ids out of range from a broken span implementation
        return None
    return None if aid == SPAN_ID_TAKEN.get() else aid
