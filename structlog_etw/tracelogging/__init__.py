"""Microsoft's TraceLogging format (Windows ETW): its numbers, the provider identity, encoder and decoder.

* :mod:`~structlog_etw.formats.tracelogging` - :class:`InType`, :class:`OutType`, the channel, size
  limits, :func:`provider_id` (the GUID ETW tools derive from a name), group GUIDs, provider traits.
* :mod:`~structlog_etw.write.tracelogging._encoder` - :class:`TraceLoggingEncoder`: typed fields ->
  ``(traits, metadata, data)``.
* :mod:`~structlog_etw.read.decode.tracelogging` - :func:`decode`: metadata and data ->
  :class:`~structlog_etw.read.decoded.DecodedEvent`; :func:`decode_traits`: a provider traits blob ->
  the provider name and group GUID.

The encoder and the decoder are loaded on first use (an EventHeader provider never loads this
format's encoder)::

    from structlog_etw.tracelogging import TraceLoggingEncoder, decode, provider_id
    from structlog_etw.write.fields import to_fields

    traits, metadata, data = TraceLoggingEncoder("MyCompany.MyService").encode(
        "user_login", to_fields({"user": "ann"}.items())
    )
    assert decode(metadata, data).fields == {"user": "ann"}
    print(provider_id("MyCompany.MyService"))  # the GUID of ``*MyCompany.MyService``
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..formats.header import Header
from ..formats.tracelogging import (
    CHANNEL_TRACELOGGING,
    DEFAULT_MAX_SIZE,
    InType,
    OutType,
    TraceLoggingEvent,
    event_descriptor,
    group_guid,
    provider_id,
    provider_traits,
    validate_provider_name,
)

if TYPE_CHECKING:
    from ..read.decode.tracelogging import decode, decode_traits
    from ..write.tracelogging._encoder import TraceLoggingEncoder

__all__ = [
    "CHANNEL_TRACELOGGING",
    "DEFAULT_MAX_SIZE",
    "Header",
    "InType",
    "OutType",
    "TraceLoggingEncoder",
    "TraceLoggingEvent",
    "decode",
    "decode_traits",
    "event_descriptor",
    "group_guid",
    "provider_id",
    "provider_traits",
    "validate_provider_name",
]

#: Names loaded on first use, and the module that has them.
_LAZY: dict[str, str] = {
    "TraceLoggingEncoder": "structlog_etw.write.tracelogging",
    "decode": "structlog_etw.read.decode.tracelogging",
    "decode_traits": "structlog_etw.read.decode.tracelogging",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
