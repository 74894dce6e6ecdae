"""Where encoded events go: the :class:`Backend` protocol and the backends that ship with the package.

* :class:`Backend` (with :data:`EventHeaderBackend` / :data:`TraceLoggingBackend`) and :class:`Slot`:
  what a provider needs from a backend; implement it to send events to your own sink.
* :class:`CaptureBackend`: records exactly what the OS would receive (tests, the demo).
* :class:`NullBackend`: nothing ever listens (no trace facility on this machine).
* :mod:`structlog_etw.backends.user_events` (Linux: ``UserEventsBackend``, ``find_tracefs``) and
  :mod:`structlog_etw.backends.etw` (Windows: ``EtwBackend``) are imported by name where needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..formats.tracelogging import TraceLoggingEvent
    from .base import Backend, BackendUnavailable, EventHeaderBackend, Format, Slot, TraceLoggingBackend
    from .capture import CaptureBackend, CaptureRecord
    from .null import NullBackend

#: Public name -> the module that defines it (loaded on first use: a provider that writes to
#: user_events or ETW never loads the capture backend).
_EXPORTS: dict[str, str] = {
    "Backend": ".base",
    "BackendUnavailable": ".base",
    "CaptureBackend": ".capture",
    "CaptureRecord": ".capture",
    "EventHeaderBackend": ".base",
    "Format": ".base",
    "NullBackend": ".null",
    "Slot": ".base",
    "TraceLoggingBackend": ".base",
    "TraceLoggingEvent": "..formats.tracelogging",
}

__all__ = [
    "Backend",
    "BackendUnavailable",
    "CaptureBackend",
    "CaptureRecord",
    "EventHeaderBackend",
    "Format",
    "NullBackend",
    "Slot",
    "TraceLoggingBackend",
    "TraceLoggingEvent",
]

__getattr__, __dir__ = _lazy_exports(globals(), _EXPORTS)
