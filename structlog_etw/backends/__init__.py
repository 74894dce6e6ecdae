"""Where encoded events go: the :class:`Backend` protocol and the backends that ship with the package.

* :class:`Backend` (with :data:`EventHeaderBackend` / :data:`TraceLoggingBackend`) and :class:`Slot`:
  what a provider needs from a backend; implement it to send events to your own sink.
* :class:`CaptureBackend`: records exactly what the OS would receive (tests, the demo).
* :class:`NullBackend`: nothing ever listens (no trace facility on this machine).
* :mod:`structlog_etw.backends.user_events` (Linux: ``UserEventsBackend``, ``find_tracefs``) and
  :mod:`structlog_etw.backends.etw` (Windows: ``EtwBackend``) are imported by name where needed.
"""

from __future__ import annotations

from ..formats.tracelogging import TraceLoggingEvent
from .base import Backend, BackendUnavailable, EventHeaderBackend, Format, Slot, TraceLoggingBackend
from .capture import CaptureBackend, CaptureRecord
from .null import NullBackend

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
