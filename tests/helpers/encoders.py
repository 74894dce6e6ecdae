"""Encoders for tests that hold a format's fast route to its general one."""

from __future__ import annotations

from typing import Any

from structlog_etw.formats.header import Header as EhHeader
from structlog_etw.formats.header import Header as TlHeader
from structlog_etw.write.eventheader import _encoder as eh
from structlog_etw.write.tracelogging import _encoder as tl

#: The two formats, by the names the tests parametrise with.
FORMATS = ("eventheader", "tracelogging")


def fast_and_general(fmt: str) -> tuple[Any, Any, Any]:
    """Two fresh encoders of ``fmt`` (one for ``encode_dict``, one for ``encode_fields``, so that
    neither's caches serve the other) and a plain header both take."""
    if fmt == "eventheader":
        return eh.EventHeaderEncoder(), eh.EventHeaderEncoder(), EhHeader(4)
    return tl.TraceLoggingEncoder("Co_Encoders"), tl.TraceLoggingEncoder("Co_Encoders"), TlHeader(4)
