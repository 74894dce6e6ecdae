"""The TraceLogging format's numbers, names and limits, and the provider identity ETW derives from a name.

Shared by the encoder, the decoder and the Windows backend.  Follows Microsoft's
``TraceLoggingProvider.h`` / ``traceloggingdynamic`` (``../shared/spec/tracelogging.md``): an event
is the provider traits, the event metadata (tags, name, one definition per field: name, InType,
OutType) and the event data (the packed values), written with an EVENT_DESCRIPTOR on channel 11.
"""

from __future__ import annotations

import datetime as _dt
import enum
import hashlib
import re
import struct
import uuid
from typing import Final

from ._names import clean_name

__all__ = [
    "CHANNEL_TRACELOGGING",
    "DEFAULT_MAX_SIZE",
    "EVENT_DESCRIPTOR",
    "FILETIME_EPOCH",
    "FILETIME_UNIX_EPOCH",
    "GROUP_TRAIT_SIZE",
    "MAX_FIELDS",
    "MAX_METADATA",
    "MIN_EVENT_ROOM",
    "TAG_MAX",
    "InType",
    "OutType",
    "TraceLoggingEvent",
    "Win32Error",
    "error_name",
    "event_descriptor",
    "group_guid",
    "name_bytes",
    "provider_id",
    "provider_traits",
    "valid_text",
    "validate_provider_name",
]


class InType(enum.IntEnum):
    """TraceLogging InType numbers (low 5 bits of a field's InMeta byte)."""

    NULL = 0
    UNICODESTRING = 1
    ANSISTRING = 2
    INT8 = 3
    UINT8 = 4
    INT16 = 5
    UINT16 = 6
    INT32 = 7
    UINT32 = 8
    INT64 = 9
    UINT64 = 10
    FLOAT = 11
    DOUBLE = 12
    BOOL32 = 13
    BINARY = 14
    GUID = 15
    POINTER = 16
    FILETIME = 17
    SYSTEMTIME = 18
    SID = 19
    HEXINT32 = 20
    HEXINT64 = 21
    COUNTEDSTRING = 22
    COUNTEDANSISTRING = 23
    STRUCT = 24
    COUNTEDBINARY = 25
    #: InMeta flag: constant element count (u16 in the metadata).
    CCOUNT = 0x20
    #: InMeta flag: variable element count (u16 in the data).
    VCOUNT = 0x40
    #: InMeta flag: an OutMeta byte follows.
    CHAIN = 0x80


class OutType(enum.IntEnum):
    """TraceLogging OutType numbers (low 7 bits of a field's OutMeta byte)."""

    NULL = 0
    NOPRINT = 1
    STRING = 2
    BOOLEAN = 3
    HEX = 4
    PID = 5
    TID = 6
    PORT = 7
    IPV4 = 8
    IPV6 = 9
    SOCKETADDRESS = 10
    XML = 11
    JSON = 12
    WIN32ERROR = 13
    NTSTATUS = 14
    HRESULT = 15
    FILETIME = 16
    SIGNED = 17
    UNSIGNED = 18
    CULTURE_INSENSITIVE_DATETIME = 33
    UTF8 = 35
    PKCS7_WITH_TYPE_INFO = 36
    CODE_POINTER = 37
    DATETIME_UTC = 38
    #: OutMeta flag: field tag bytes follow.
    CHAIN = 0x80


#: One TraceLogging event as the TraceLogging encoder produces it and a TraceLogging backend
#: hands it to EventWriteTransfer: the provider traits, the event metadata and the event data
#: (the three data descriptors, in that order).
TraceLoggingEvent = tuple[bytes, bytes, bytes]


class Win32Error(enum.IntEnum):
    """The Win32 error codes the ETW provider API returns that the package names."""

    ERROR_INVALID_HANDLE = 6
    ERROR_NOT_ENOUGH_MEMORY = 8
    ERROR_INVALID_PARAMETER = 87
    ERROR_MORE_DATA = 234
    ERROR_ARITHMETIC_OVERFLOW = 534


def error_name(code: int) -> str:
    """The name under which ``Provider.stats()`` counts a Win32 code an ETW call returned
    (``ERROR_MORE_DATA``, ...; ``WIN32_N`` for others)."""
    try:
        return Win32Error(code).name
    except ValueError:
        return f"WIN32_{code}"


#: A FILETIME's zero: 1601-01-01 UTC; a FILETIME counts 100 ns ticks from it (TraceLogging
#: FILETIME fields, ETW timestamps of sessions and .etl files).
FILETIME_EPOCH: Final = _dt.datetime(1601, 1, 1, tzinfo=_dt.timezone.utc)
#: 1970-01-01 UTC as a FILETIME (100 ns ticks since :data:`FILETIME_EPOCH`).
FILETIME_UNIX_EPOCH: Final = 116_444_736_000_000_000

#: Largest event tags value (28 bits, in the event metadata).
TAG_MAX: Final = 0x0FFFFFFF
#: EVENT_DESCRIPTOR.Channel of every TraceLogging event.
CHANNEL_TRACELOGGING: Final = 11
#: Default budget for traits + metadata + data of one event.
DEFAULT_MAX_SIZE: Final = 64000
#: Metadata must stay under this many bytes.
MAX_METADATA: Final = 32767
#: Decoders handle at most this many logical fields.
MAX_FIELDS: Final = 128

_SURROGATES: Final = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (so it encodes as UTF-8)."""
    return _SURROGATES.sub("\ufffd", text)


def name_bytes(name: str) -> bytes:
    """A metadata name: UTF-8, NUL-terminated; a NUL becomes ``_`` (the rule of every name,
    :func:`~structlog_etw.write.fields.clean_name`), lone surrogates U+FFFD."""
    name = clean_name(name)
    try:
        return name.encode() + b"\0"
    except UnicodeEncodeError:
        return valid_text(name).encode() + b"\0"


# ---------------------------------------------------------------------------------------------
# Provider id and traits

_NAMESPACE: Final = bytes.fromhex("482C2DB2C39047C887F81A15BFC130FB")


def provider_id(name: str) -> uuid.UUID:
    """The provider GUID ETW tools derive from ``name`` (``*Name``): the EventSource hash.

    SHA-1 over a fixed namespace and the UTF-16BE of the upper-cased name; version nibble 5;
    the GUID is read from the hash in ``bytes_le`` order.  Python's ``str.upper`` is used, so
    non-ASCII names may differ from .NET's per-UTF-16-unit upper-casing: use ASCII names.
    """
    h = bytearray(
        hashlib.sha1(
            _NAMESPACE + name.upper().encode("utf-16-be", "surrogatepass"), usedforsecurity=False
        ).digest()
    )
    h[7] = (h[7] & 0x0F) | 0x50
    return uuid.UUID(bytes_le=bytes(h[:16]))


def group_guid(group: uuid.UUID | str | None) -> uuid.UUID | None:
    """The provider group GUID for ``group``.

    A ``uuid.UUID`` or GUID text is used as is; any other text (a Linux-style group name such as
    ``"mygroup"``) is mapped to ``provider_id(group)``, so one configuration works on both systems.
    """
    if group is None or isinstance(group, uuid.UUID):
        return group
    if not isinstance(group, str) or not group:
        raise TypeError("a provider group must be a uuid.UUID, a non-empty str or None")
    try:
        return uuid.UUID(group)
    except ValueError:
        return provider_id(group)


#: Bytes of the optional group trait in the provider traits (u16 size, u8 type, 16-byte GUID).
GROUP_TRAIT_SIZE: Final = 19
#: Room an event must keep for its metadata and data after the provider traits.
MIN_EVENT_ROOM: Final = 256


def validate_provider_name(
    name: str, group: uuid.UUID | str | None = None, max_size: int = DEFAULT_MAX_SIZE
) -> None:
    """Raise a clear :class:`ValueError` unless ``name`` (and ``group``) can be a TraceLogging provider.

    What Microsoft's TraceLogging providers accept: a non-empty name without NUL that encodes as
    UTF-8 (``MyCompany.MyService`` included), a group given as a :class:`uuid.UUID`, GUID text or
    a name; and a provider traits blob (u16 size, name, NUL, optional 19-byte group trait) that
    leaves at least :data:`~structlog_etw.formats.tracelogging.MIN_EVENT_ROOM` bytes of a
    ``max_size``-byte event for the event itself.
    """
    if not isinstance(name, str) or not name or "\0" in name:
        raise ValueError(f"provider name must be a non-empty str without NUL, got {name!r}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"provider name {name!r} is not valid Unicode (lone surrogate)") from None
    if group is not None and not isinstance(group, uuid.UUID) and (not isinstance(group, str) or not group):
        raise ValueError(f"provider group must be a non-empty str (GUID text or a name), got {group!r}")
    traits = 2 + size + 1 + (GROUP_TRAIT_SIZE if group is not None else 0)
    if max_size - traits < MIN_EVENT_ROOM or traits > 0xFFFF:
        raise ValueError(
            f"provider name is too long for TraceLogging: its traits blob takes {traits} bytes of the "
            f"{max_size}-byte event (the name is {size} UTF-8 bytes; at most "
            f"{max_size - MIN_EVENT_ROOM - 3} bytes, {GROUP_TRAIT_SIZE} fewer with a group)"
        )


def provider_traits(name: str, group_id: uuid.UUID | None = None) -> bytes:
    """The provider traits blob: u16 size, the name (UTF-8, NUL-terminated), an optional group trait."""
    body = name_bytes(name)
    if group_id is not None:
        body += struct.pack("<HB", 19, 1) + group_id.bytes_le
    return struct.pack("<H", len(body) + 2) + body


def event_descriptor(level: int, opcode: int, keyword: int) -> bytes:
    """EVENT_DESCRIPTOR (16 bytes): Id 0, Version 0, Channel 11, Level, Opcode, Task 0, Keyword."""
    return EVENT_DESCRIPTOR.pack(0, 0, CHANNEL_TRACELOGGING, level, opcode, 0, keyword)


#: The layout of an EVENT_DESCRIPTOR (evntprov.h, 16 bytes): Id u16, Version u8, Channel u8,
#: Level u8, Opcode u8, Task u16, Keyword u64: what a write passes and what a record carries
#: (:func:`event_descriptor` writes it, the decoders and the ``.etl`` reader unpack it).
EVENT_DESCRIPTOR: Final = struct.Struct("<HBBBBHQ")
