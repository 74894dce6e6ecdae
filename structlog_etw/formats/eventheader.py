"""The EventHeader format's numbers, names and limits: the one home of every wire constant.

Shared by the encoder and the decoder (and the Linux backend, which registers tracepoints).
Follows Microsoft's ``eventheader.h`` (LinuxTracepoints); ``../shared/spec/eventheader.md`` and
docs/decoding.md describe the layout::

    eventheader (8 bytes: flags, version, id, tag, opcode, level)
    [extension blocks: u16 size, u16 kind (| CHAIN when another follows), size bytes]
    payload (the values the Metadata extension describes)

The enums document the numbers; the ``ENC_*``/``FMT_*``/``EXT_*`` names are the same members
bound at module level, for code that compares them once per byte (an enum attribute lookup
costs about five times a global).
"""

from __future__ import annotations

import enum
import errno
import re
import struct
from typing import Final

from ._errors import DecodeError

__all__ = [
    "COMMAND_FIELDS",
    "DYN_MAX_EVENT_SIZE",
    "ENCODING_CARRAY",
    "ENCODING_CHAIN",
    "ENCODING_NAMES",
    "ENCODING_VALUE_MASK",
    "ENCODING_VARRAY",
    "EXTENSION_CHAIN",
    "EXTENSION_KIND_MASK",
    "EXTENSION_STRUCT",
    "FORMAT_CHAIN",
    "FORMAT_NAMES",
    "FORMAT_VALUE_MASK",
    "HEADER",
    "HEADER_FLAGS",
    "NAME_MAX",
    "PERF_MAX_EVENT_SIZE",
    "PROVIDER_GROUP_MAX",
    "TAG_MAX",
    "Encoding",
    "EventHeaderDecodeError",
    "ExtensionKind",
    "Format",
    "HeaderFlags",
    "error_name",
    "parse_tracepoint_name",
    "register_command",
    "tracepoint_name",
    "validate_provider_name",
]


class HeaderFlags(enum.IntFlag):
    """``eventheader_flags``: the first byte of every event."""

    NONE = 0
    #: Pointer-sized values are 64-bit.
    POINTER64 = 0x01
    #: The header, extensions and payload are little-endian.
    LITTLE_ENDIAN = 0x02
    #: At least one extension block follows the header.
    EXTENSION = 0x04


class ExtensionKind(enum.IntEnum):
    """Kind of an extension block (low 15 bits of its u16 kind)."""

    INVALID = 0
    #: Event name, then one definition per field: the event is self-describing.
    METADATA = 1
    #: The activity id (16 bytes), optionally followed by the related activity id (16 bytes).
    ACTIVITY_ID = 2


class Encoding(enum.IntEnum):
    """How a field's value is laid out in the payload (low 5 bits of its encoding byte)."""

    INVALID = 0
    STRUCT = 1
    VALUE8 = 2
    VALUE16 = 3
    VALUE32 = 4
    VALUE64 = 5
    VALUE128 = 6
    ZSTRING_CHAR8 = 7
    ZSTRING_CHAR16 = 8
    ZSTRING_CHAR32 = 9
    STRING_LENGTH16_CHAR8 = 10
    STRING_LENGTH16_CHAR16 = 11
    STRING_LENGTH16_CHAR32 = 12
    BINARY_LENGTH16_CHAR8 = 13


class Format(enum.IntEnum):
    """How a field's value is meant to be shown (low 7 bits of its format byte).

    For a struct the format byte holds the member count instead.
    """

    DEFAULT = 0
    UNSIGNED_INT = 1
    SIGNED_INT = 2
    HEX_INT = 3
    ERRNO = 4
    PID = 5
    TIME = 6
    BOOLEAN = 7
    FLOAT = 8
    HEX_BYTES = 9
    STRING8 = 10
    STRING_UTF = 11
    STRING_UTF_BOM = 12
    STRING_XML = 13
    STRING_JSON = 14
    UUID = 15
    PORT = 16
    IP_ADDRESS = 17
    IP_ADDRESS_OBSOLETE = 18


#: The header's layout: flags, version, id, tag, opcode, level (in the event's byte order).
HEADER: Final = struct.Struct("<BBHHBB")
#: An extension block's header: size, kind.
EXTENSION_STRUCT: Final = struct.Struct("<HH")
#: The flags every event this package writes carries: 64-bit, little-endian, with extensions.
HEADER_FLAGS: Final = HeaderFlags.POINTER64 | HeaderFlags.LITTLE_ENDIAN | HeaderFlags.EXTENSION

#: Extension kind bit: another extension block follows.
EXTENSION_CHAIN: Final = 0x8000
EXTENSION_KIND_MASK: Final = 0x7FFF
#: Encoding byte bits: a constant-length array (u16 length in the metadata) ...
ENCODING_CARRAY: Final = 0x20
#: ... a variable-length array (u16 count in the payload) ...
ENCODING_VARRAY: Final = 0x40
#: ... a format byte follows.
ENCODING_CHAIN: Final = 0x80
ENCODING_VALUE_MASK: Final = 0x1F
#: Format byte bit: a u16 field tag follows.
FORMAT_CHAIN: Final = 0x80
FORMAT_VALUE_MASK: Final = 0x7F

#: Encoding number -> name (as in eventheader.h, lower case, without the prefix).
ENCODING_NAMES: Final[dict[int, str]] = {e.value: e.name.lower() for e in Encoding if e}
#: Format number -> name (as in eventheader.h, lower case, without the prefix).
FORMAT_NAMES: Final[dict[int, str]] = {f.value: f.name.lower() for f in Format}

# Module-level bindings of the members, for per-byte comparisons (see the module docstring).
EXT_METADATA: Final = ExtensionKind.METADATA
EXT_ACTIVITY_ID: Final = ExtensionKind.ACTIVITY_ID
ENC_STRUCT: Final = Encoding.STRUCT
ENC_VALUE8: Final = Encoding.VALUE8
ENC_VALUE16: Final = Encoding.VALUE16
ENC_VALUE32: Final = Encoding.VALUE32
ENC_VALUE64: Final = Encoding.VALUE64
ENC_VALUE128: Final = Encoding.VALUE128
ENC_ZSTRING_CHAR8: Final = Encoding.ZSTRING_CHAR8
ENC_ZSTRING_CHAR16: Final = Encoding.ZSTRING_CHAR16
ENC_ZSTRING_CHAR32: Final = Encoding.ZSTRING_CHAR32
ENC_STRING_LENGTH16_CHAR8: Final = Encoding.STRING_LENGTH16_CHAR8
ENC_STRING_LENGTH16_CHAR16: Final = Encoding.STRING_LENGTH16_CHAR16
ENC_STRING_LENGTH16_CHAR32: Final = Encoding.STRING_LENGTH16_CHAR32
ENC_BINARY_LENGTH16_CHAR8: Final = Encoding.BINARY_LENGTH16_CHAR8
FMT_DEFAULT: Final = Format.DEFAULT
FMT_UNSIGNED_INT: Final = Format.UNSIGNED_INT
FMT_SIGNED_INT: Final = Format.SIGNED_INT
FMT_HEX_INT: Final = Format.HEX_INT
FMT_ERRNO: Final = Format.ERRNO
FMT_PID: Final = Format.PID
FMT_TIME: Final = Format.TIME
FMT_BOOLEAN: Final = Format.BOOLEAN
FMT_FLOAT: Final = Format.FLOAT
FMT_HEX_BYTES: Final = Format.HEX_BYTES
FMT_STRING8: Final = Format.STRING8
FMT_STRING_UTF: Final = Format.STRING_UTF
FMT_STRING_UTF_BOM: Final = Format.STRING_UTF_BOM
FMT_STRING_XML: Final = Format.STRING_XML
FMT_STRING_JSON: Final = Format.STRING_JSON
FMT_UUID: Final = Format.UUID
FMT_PORT: Final = Format.PORT
FMT_IP_ADDRESS: Final = Format.IP_ADDRESS
FMT_IP_ADDRESS_OBSOLETE: Final = Format.IP_ADDRESS_OBSOLETE

#: Bytes of one value of a fixed-size encoding.
FIXED_SIZE: Final[dict[int, int]] = {
    Encoding.VALUE8: 1,
    Encoding.VALUE16: 2,
    Encoding.VALUE32: 4,
    Encoding.VALUE64: 8,
    Encoding.VALUE128: 16,
}
#: Bytes of one character of a NUL-terminated string encoding.
ZSTRING_UNIT: Final[dict[int, int]] = {
    Encoding.ZSTRING_CHAR8: 1,
    Encoding.ZSTRING_CHAR16: 2,
    Encoding.ZSTRING_CHAR32: 4,
}
#: Bytes of one unit of a u16-counted string or binary encoding.
LENGTH16_UNIT: Final[dict[int, int]] = {
    Encoding.STRING_LENGTH16_CHAR8: 1,
    Encoding.STRING_LENGTH16_CHAR16: 2,
    Encoding.STRING_LENGTH16_CHAR32: 4,
    Encoding.BINARY_LENGTH16_CHAR8: 1,
}

# --- sizes ---------------------------------------------------------------------------------------

#: Largest tag of an event (the header's u16 ``tag``).
TAG_MAX: Final = 0xFFFF
#: Largest event (bytes after the write index) perf keeps.  The kernel's user_event_perf asks
#: perf_trace_buf_alloc for ALIGN(8 + size, 8) bytes (8 = struct trace_entry, the common fields)
#: and gets NULL, dropping the event while writev still succeeds, above PERF_MAX_TRACE_SIZE
#: (8192): so size <= 8184.
PERF_MAX_EVENT_SIZE: Final = 8192 - 8
#: Largest event the kernel's dynamic-event path accepts at all (DYN rejects > 65535 - 68).
DYN_MAX_EVENT_SIZE: Final = 65535 - 68
#: Tracepoint name limit (EVENTHEADER_NAME_MAX, including the NUL).
NAME_MAX: Final = 256
#: ``len(provider) + len(group)`` must stay below this (room for ``_L<lv>K<kw>G``).
PROVIDER_GROUP_MAX: Final = 234

# --- tracepoint names and registration ------------------------------------------------------------

#: The register command's field list (exact text of LinuxTracepoints' EVENTHEADER_COMMAND_TYPES).
COMMAND_FIELDS: Final = "u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level"

_PROVIDER_RE: Final = re.compile(r"[A-Za-z0-9_]+\Z")
_GROUP_RE: Final = re.compile(r"[a-z0-9]+\Z")


#: The name this error had before every decoder shared one: an alias of
#: :class:`structlog_etw.read.decoded.DecodeError` (the same class), kept for code that catches it.
EventHeaderDecodeError = DecodeError


def validate_provider_name(name: str, group: str | None = None) -> None:
    """Raise a clear :class:`ValueError` unless ``name`` (and ``group``) make valid tracepoint names.

    Provider: ``[A-Za-z0-9_]+``; group: ``[a-z0-9]+``; ``len(name) + len(group) < 234`` so that
    every ``<name>_L<level>K<keyword>G<group>`` stays below the 256-byte tracepoint name limit.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"provider name must be a non-empty str, got {name!r}")
    if not _PROVIDER_RE.match(name):
        raise ValueError(
            f"provider name {name!r} may only contain ASCII letters, digits and '_' ([A-Za-z0-9_])"
        )
    glen = 0
    if group is not None:
        if not isinstance(group, str) or not _GROUP_RE.match(group):
            raise ValueError(
                f"provider group {group!r} must be lowercase ASCII letters and digits ([a-z0-9]+)"
            )
        glen = len(group)
    if len(name) + glen >= PROVIDER_GROUP_MAX:
        raise ValueError(
            f"provider name and group are too long ({len(name)} + {glen} characters; "
            f"together they must stay below {PROVIDER_GROUP_MAX})"
        )


def tracepoint_name(provider: str, level: int, keyword: int, group: str | None = None) -> str:
    """``<provider>_L<level>K<keyword>[G<group>]``, level and keyword in lowercase hex."""
    if group:
        return f"{provider}_L{level:x}K{keyword:x}G{group}"
    return f"{provider}_L{level:x}K{keyword:x}"


def register_command(name: str) -> str:
    """The user_events DIAG_IOCSREG command registering tracepoint ``name`` as an EventHeader event."""
    return f"{name} {COMMAND_FIELDS}"


def _lower_hex(text: str, pos: int) -> tuple[int, int]:
    """Parse lowercase hex digits at ``pos``; return ``(value, end)`` (value 0 when none)."""
    end = pos
    while end < len(text) and text[end] in "0123456789abcdef":
        end += 1
    return (int(text[pos:end], 16) if end > pos else 0), end


def parse_tracepoint_name(name: str) -> tuple[str, int, int, str]:
    """Split ``<Provider>_L<level>K<keyword>[options]`` into ``(provider, level, keyword, options)``.

    The inverse of :func:`~structlog_etw.formats.eventheader.tracepoint_name`.  A ``system:`` prefix
    (``user_events:``) is ignored.
    The provider is everything before the LAST ``_``.  Raises :class:`~structlog_etw.read.decoded.DecodeError`
    for a name that is not an EventHeader tracepoint name.
    """
    if ":" in name:
        name = name.rsplit(":", 1)[1]
    if len(name) >= NAME_MAX or "\0" in name:
        raise DecodeError(f"not an EventHeader tracepoint name (length/NUL): {name!r}")
    under = name.rfind("_")
    if under < 0:
        raise DecodeError(f"not an EventHeader tracepoint name (no '_'): {name!r}")
    provider = name[:under]
    pos = under + 1
    if pos >= len(name) or name[pos] != "L":
        raise DecodeError(f"not an EventHeader tracepoint name (no L<level>): {name!r}")
    level, pos = _lower_hex(name, pos + 1)
    if pos >= len(name) or name[pos] != "K":
        raise DecodeError(f"not an EventHeader tracepoint name (no K<keyword>): {name!r}")
    keyword, pos = _lower_hex(name, pos + 1)
    options = name[pos:]
    i = 0
    while i < len(options):
        if not "A" <= options[i] <= "Z":
            raise DecodeError(f"bad option in tracepoint name: {name!r}")
        i += 1
        while i < len(options) and (options[i].isdigit() or "a" <= options[i] <= "z"):
            i += 1
    return provider, level & 0xFF, keyword & 0xFFFFFFFFFFFFFFFF, options


def error_name(code: int) -> str:
    """The name under which ``Provider.stats()`` counts an errno a user_events write or
    registration returned (``EBADF``, ...; ``errno N`` for one Python does not name)."""
    return errno.errorcode.get(code, f"errno {code}")
