"""Helpers for tests of TraceLogging events."""

from __future__ import annotations

from structlog_etw.formats.tracelogging import TraceLoggingEvent


def blobs(event: TraceLoggingEvent | None) -> tuple[bytes, bytes] | None:
    """The event metadata and data of an encoded event (its first element is the provider traits)."""
    if event is None:
        return None
    _traits, metadata, data = event
    return metadata, data
