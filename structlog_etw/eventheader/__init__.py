"""Microsoft's EventHeader format (Linux user_events): its numbers and names, the encoder, the decoder.

* :mod:`~structlog_etw.formats.eventheader` - wire numbers (:class:`Encoding`, :class:`Format`, ...),
  size limits, tracepoint names (``<Provider>_L<level>K<keyword>[G<group>]``) and provider-name rules.
* :mod:`~structlog_etw.write.eventheader._encoder` - :class:`EventHeaderEncoder`: typed fields -> event bytes.
* :mod:`~structlog_etw.read.decode.eventheader` - :func:`decode_event`: event bytes ->
  :class:`~structlog_etw.read.decoded.DecodedEvent` (parsed once: Python values, wire types, value bytes).
* :mod:`~structlog_etw.read.writers.perf_json` - :func:`perf_json`, :func:`perf_json_fields`:
  a decoded event as Microsoft's ``perf-decode`` writes it (rendered from the
  :class:`~structlog_etw.read.decoded.DecodedEvent` alone).

The encoder, the decoder and the perf-decode writer are loaded on first use (writing events never
needs the decoder, and a TraceLogging provider never loads this format's encoder)::

    from structlog_etw.eventheader import EventHeaderEncoder, decode_event, tracepoint_name
    from structlog_etw.write.fields import to_fields

    event = EventHeaderEncoder().encode("user_login", to_fields({"user": "ann"}.items()), 4)
    decoded = decode_event(tracepoint_name("MyCompany_MyService", 4, 1), event)
    assert decoded.fields == {"user": "ann"}
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..formats.eventheader import (
    COMMAND_FIELDS,
    DYN_MAX_EVENT_SIZE,
    PERF_MAX_EVENT_SIZE,
    Encoding,
    EventHeaderDecodeError,
    ExtensionKind,
    Format,
    HeaderFlags,
    parse_tracepoint_name,
    register_command,
    tracepoint_name,
    validate_provider_name,
)
from ..formats.header import Header

if TYPE_CHECKING:
    from ..read.decode.eventheader import decode_event
    from ..read.writers.perf_json import perf_json, perf_json_fields
    from ..write.eventheader._encoder import EventHeaderEncoder

__all__ = [
    "COMMAND_FIELDS",
    "DYN_MAX_EVENT_SIZE",
    "PERF_MAX_EVENT_SIZE",
    "Encoding",
    "EventHeaderDecodeError",
    "EventHeaderEncoder",
    "ExtensionKind",
    "Format",
    "Header",
    "HeaderFlags",
    "decode_event",
    "parse_tracepoint_name",
    "perf_json",
    "perf_json_fields",
    "register_command",
    "tracepoint_name",
    "validate_provider_name",
]

#: Names loaded on first use, and the module that has them.
_LAZY: dict[str, str] = {
    "EventHeaderEncoder": "structlog_etw.write.eventheader",
    "decode_event": "structlog_etw.read.decode.eventheader",
    "perf_json": "structlog_etw.read.writers.perf_json",
    "perf_json_fields": "structlog_etw.read.writers.perf_json",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
