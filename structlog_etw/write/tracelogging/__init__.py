"""The TraceLogging encoder (Windows ETW): typed fields -> event metadata and event data.

:class:`TraceLoggingEncoder` and its helpers; the format's numbers and provider identity are in
:mod:`structlog_etw.formats.tracelogging`, the decoder in :mod:`structlog_etw.read.decode.tracelogging`.
"""

from ._encoder import TraceLoggingEncoder, encode_tag, event_metadata, field_metadata, filetime

__all__ = ["TraceLoggingEncoder", "encode_tag", "event_metadata", "field_metadata", "filetime"]
