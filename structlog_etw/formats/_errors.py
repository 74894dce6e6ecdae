"""The one error of every decoder, here so that the name rules of :mod:`structlog_etw.formats`
raise it too without importing the read side; :mod:`structlog_etw.read.decoded` is its public home."""

from __future__ import annotations

__all__ = ["DecodeError"]


class DecodeError(ValueError):
    """The bytes (or the tracepoint name) are not a well-formed event of the format being decoded.

    The one error of every decoder (EventHeader, TraceLogging, perf samples); a
    :class:`ValueError`, so ``except ValueError`` keeps working.
    """

    __module__ = "structlog_etw.read.decoded"  # its public home (pickles and tracebacks name it)
