"""The EventHeader encoder (Linux user_events): typed fields -> the bytes of one event.

:class:`EventHeaderEncoder` and its helpers; the format's numbers and tracepoint names are in
:mod:`structlog_etw.formats.eventheader`, the decoder in :mod:`structlog_etw.read.decode.eventheader`.
"""

from ._encoder import EventHeaderEncoder, assemble_event, field_metadata, sanitize_name

__all__ = ["EventHeaderEncoder", "assemble_event", "field_metadata", "sanitize_name"]
