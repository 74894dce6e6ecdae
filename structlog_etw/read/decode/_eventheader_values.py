"""What one EventHeader value is, and its Python value: the rules the decoder and the perf-decode
writer share.

:func:`value_kind` reads a field's (encoding, format) pair and value bytes once and names what
the value is (:class:`Kind`: a signed int, a hex int, an errno, UTF-16 text, ...), following
perf-decode: a format that does not apply to an encoding falls back to the encoding's default;
a counted (Length16) value whose length fits a numeric format is read as that fixed-size value;
a BOM picks the text encoding of the StringUtfBom/Xml/Json formats.  :func:`python_value` turns
the kind into the Python value (docs/decoding.md has the table); ``perf_decode`` turns the same
kind into perf-decode's text.  Neither reads event framing: the decoder hands over value bytes.
"""

from __future__ import annotations

import enum
import functools
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal

from ..._util.lazy import LazyModule
from ...formats.eventheader import (
    ENC_BINARY_LENGTH16_CHAR8,
    ENC_STRING_LENGTH16_CHAR8,
    ENC_VALUE8,
    ENC_VALUE16,
    ENC_VALUE32,
    ENC_VALUE64,
    ENC_VALUE128,
    FIXED_SIZE,
    FMT_BOOLEAN,
    FMT_ERRNO,
    FMT_FLOAT,
    FMT_HEX_BYTES,
    FMT_HEX_INT,
    FMT_IP_ADDRESS,
    FMT_IP_ADDRESS_OBSOLETE,
    FMT_PID,
    FMT_PORT,
    FMT_SIGNED_INT,
    FMT_STRING8,
    FMT_STRING_JSON,
    FMT_STRING_UTF,
    FMT_STRING_UTF_BOM,
    FMT_STRING_XML,
    FMT_TIME,
    FMT_UNSIGNED_INT,
    FMT_UUID,
    LENGTH16_UNIT,
    ZSTRING_UNIT,
)
from ..decoded import DecodeError

if TYPE_CHECKING:
    import datetime as _dt
    import ipaddress
    import uuid
else:  # imported on first use (a decoded value of these kinds): a reader's start loads none of them
    _dt = LazyModule("datetime", globals(), "_dt")
    ipaddress = LazyModule("ipaddress", globals())
    uuid = LazyModule("uuid", globals())

__all__ = [
    "BOMS",
    "BYTE_ORDER",
    "Kind",
    "bool_value",
    "int_of",
    "python_value",
    "struct_order",
    "ucs4_code_points",
    "utf16_text",
    "value_kind",
]


class Kind(enum.Enum):
    """What a value is, whatever bytes carried it."""

    UNSIGNED = "unsigned"
    SIGNED = "signed"
    HEX = "hex"  # an unsigned int that tools show in hex
    ERRNO = "errno"  # a signed int that tools show as an errno name
    BOOL = "bool"
    FLOAT = "float"
    TIME = "time"  # signed seconds since 1970
    CHAR = "char"  # one code point (String8 byte, UTF-16 unit, UTF-32 value)
    PORT = "port"  # network byte order
    IPV4 = "ipv4"
    IPV6 = "ipv6"
    UUID = "uuid"
    BYTES = "bytes"
    NULL = "null"  # a counted numeric value with no bytes
    LATIN1 = "latin1"
    UTF8 = "utf8"
    UTF16 = "utf16"
    UCS4 = "ucs4"


_INTS: Final = (ENC_VALUE8, ENC_VALUE16, ENC_VALUE32, ENC_VALUE64)

#: (fixed-size encoding, format) -> kind, for the pairs where the format applies; any other
#: pair falls back to the encoding's default (:data:`_FIXED_DEFAULT`).
_FIXED_KINDS: Final[dict[tuple[int, int], Kind]] = {
    **{(e, FMT_UNSIGNED_INT): Kind.UNSIGNED for e in _INTS},
    **{(e, FMT_SIGNED_INT): Kind.SIGNED for e in _INTS},
    **{(e, FMT_HEX_INT): Kind.HEX for e in _INTS},
    **{(e, FMT_HEX_BYTES): Kind.BYTES for e in (*_INTS, ENC_VALUE128)},
    **{(e, FMT_BOOLEAN): Kind.BOOL for e in (ENC_VALUE8, ENC_VALUE16, ENC_VALUE32)},
    **{(e, FMT_TIME): Kind.TIME for e in (ENC_VALUE32, ENC_VALUE64)},
    **{(e, FMT_FLOAT): Kind.FLOAT for e in (ENC_VALUE32, ENC_VALUE64)},
    (ENC_VALUE32, FMT_PID): Kind.SIGNED,
    (ENC_VALUE32, FMT_ERRNO): Kind.ERRNO,
    (ENC_VALUE8, FMT_STRING8): Kind.CHAR,
    (ENC_VALUE16, FMT_STRING_UTF): Kind.CHAR,
    (ENC_VALUE32, FMT_STRING_UTF): Kind.CHAR,
    (ENC_VALUE16, FMT_PORT): Kind.PORT,
    (ENC_VALUE32, FMT_IP_ADDRESS): Kind.IPV4,
    (ENC_VALUE32, FMT_IP_ADDRESS_OBSOLETE): Kind.IPV4,
    (ENC_VALUE128, FMT_IP_ADDRESS): Kind.IPV6,
    (ENC_VALUE128, FMT_IP_ADDRESS_OBSOLETE): Kind.IPV6,
    (ENC_VALUE128, FMT_UUID): Kind.UUID,
}
_FIXED_DEFAULT: Final[dict[int, Kind]] = {**dict.fromkeys(_INTS, Kind.UNSIGNED), ENC_VALUE128: Kind.BYTES}

#: Formats a counted (Length16) Char8 or binary value is read under as a number.
_COUNTED_NUMERIC: Final = (
    FMT_UNSIGNED_INT,
    FMT_SIGNED_INT,
    FMT_HEX_INT,
    FMT_ERRNO,
    FMT_PID,
    FMT_TIME,
    FMT_BOOLEAN,
    FMT_FLOAT,
    FMT_UUID,
    FMT_PORT,
    FMT_IP_ADDRESS,
    FMT_IP_ADDRESS_OBSOLETE,
)
#: numeric format -> {byte length: the fixed-size encoding a counted value of that length is}.
_COUNTED_AS_FIXED: Final[dict[int, dict[int, int]]] = {
    fmt: {FIXED_SIZE[enc]: enc for (enc, f) in _FIXED_KINDS if f == fmt} for fmt in _COUNTED_NUMERIC
}
_BOM_FORMATS: Final = frozenset({FMT_STRING_UTF_BOM, FMT_STRING_XML, FMT_STRING_JSON})
_TEXT_FORMATS: Final = frozenset({FMT_STRING8, FMT_STRING_UTF, *_BOM_FORMATS})
#: Character size in bytes -> the kind of text in that unit.
_TEXT_OF_UNIT: Final = {1: Kind.UTF8, 2: Kind.UTF16, 4: Kind.UCS4}
#: Byte-order marks, longest first: (mark, kind of the text after it, its byte order).
BOMS: Final = (
    (b"\xff\xfe\0\0", Kind.UCS4, "<"),
    (b"\0\0\xfe\xff", Kind.UCS4, ">"),
    (b"\xff\xfe", Kind.UTF16, "<"),
    (b"\xfe\xff", Kind.UTF16, ">"),
    (b"\xef\xbb\xbf", Kind.UTF8, "<"),
)


#: :mod:`struct` byte-order prefix -> its name (``DecodedEvent.byte_order``, :meth:`int.from_bytes`).
BYTE_ORDER: Final[dict[str, Literal["little", "big"]]] = {"<": "little", ">": "big"}


def struct_order(byte_order: str) -> str:
    """The :mod:`struct` prefix (``"<"``/``">"``) of ``"little"``/``"big"``."""
    return "<" if byte_order == "little" else ">"


def bytes_decide_kind(encoding: int, fmt: int) -> bool:
    """Whether :func:`value_kind` of a value of this encoding and format depends on its bytes
    (a counted value read as a number by its size, or empty; a byte-order mark), not on the types alone."""
    if encoding in FIXED_SIZE:
        return False
    counted = encoding in (ENC_STRING_LENGTH16_CHAR8, ENC_BINARY_LENGTH16_CHAR8) and fmt in _COUNTED_AS_FIXED
    return counted or fmt in _BOM_FORMATS


def value_kind(encoding: int, fmt: int, raw: bytes, order: str) -> tuple[Kind, bytes, str]:
    """``(kind, bytes, byte order)`` of one value (after a BOM: the text after it, in the BOM's order).

    ``encoding`` is the value encoding (no array flags), ``raw`` the value's bytes without a
    length prefix or terminator, ``order`` the event's :mod:`struct` byte-order prefix.
    """
    if encoding in FIXED_SIZE:
        return _FIXED_KINDS.get((encoding, fmt), _FIXED_DEFAULT[encoding]), raw, order
    if encoding in (ENC_STRING_LENGTH16_CHAR8, ENC_BINARY_LENGTH16_CHAR8):
        sizes = _COUNTED_AS_FIXED.get(fmt)
        if sizes is not None:
            as_fixed = sizes.get(len(raw))
            if as_fixed is not None:
                return _FIXED_KINDS[(as_fixed, fmt)], raw, order
            if not raw:
                return Kind.NULL, raw, order
    if fmt == FMT_HEX_BYTES or (encoding == ENC_BINARY_LENGTH16_CHAR8 and fmt not in _TEXT_FORMATS):
        return Kind.BYTES, raw, order
    unit = ZSTRING_UNIT.get(encoding) or LENGTH16_UNIT.get(encoding)
    if unit is None:  # pragma: no cover - the parser rejects unknown encodings
        raise DecodeError(f"unsupported encoding {encoding}")
    if fmt in _BOM_FORMATS:
        for mark, kind, bom_order in BOMS:
            if raw.startswith(mark):
                return kind, raw[len(mark) :], bom_order
    if unit == 1 and fmt == FMT_STRING8:
        return Kind.LATIN1, raw, order
    return _TEXT_OF_UNIT[unit], raw, order


# --- Python values ------------------------------------------------------------------------------


@functools.cache
def _epoch() -> _dt.datetime:
    """1970-01-01 UTC (made on first use: :mod:`datetime` is imported only then)."""
    return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def int_of(raw: bytes, order: str, signed: bool) -> int:
    """The integer in ``raw`` (any length) in byte order ``order`` (``"<"``/``">"``)."""
    return int.from_bytes(raw, BYTE_ORDER[order], signed=signed)


def bool_value(v: int) -> bool | int:
    """A Boolean's value: ``bool`` for 0/1, else the int (as a signed 32-bit value)."""
    if v in (0, 1):
        return bool(v)
    return v - (1 << 32) if v >= 1 << 31 else v


def _time_value(seconds: int) -> _dt.datetime | int:
    try:
        return _epoch() + _dt.timedelta(seconds=seconds)
    except OverflowError:
        return seconds


def _ucs_char(v: int) -> str:
    return chr(v) if v <= 0x10FFFF else "\ufffd"


def utf16_text(raw: bytes, order: str) -> str:
    """UTF-16 text (pairs joined, unpaired surrogates kept; an odd last byte ignored)."""
    codec = "utf-16-le" if order == "<" else "utf-16-be"
    return raw[: len(raw) & ~1].decode(codec, "surrogatepass")


def ucs4_code_points(raw: bytes, order: str) -> tuple[int, ...]:
    """The 32-bit values of UTF-32 text, as they are (past U+10FFFF too)."""
    n = len(raw) // 4
    return struct.unpack(f"{order}{n}I", raw[: n * 4])


def _float(raw: bytes, order: str) -> float:
    value: float = struct.unpack(order + ("f" if len(raw) == 4 else "d"), raw)[0]
    return value


#: kind -> Python value of (bytes, byte order).
_PYTHON: Final[dict[Kind, Callable[[bytes, str], Any]]] = {
    Kind.UNSIGNED: lambda raw, order: int_of(raw, order, False),
    Kind.HEX: lambda raw, order: int_of(raw, order, False),
    Kind.SIGNED: lambda raw, order: int_of(raw, order, True),
    Kind.ERRNO: lambda raw, order: int_of(raw, order, True),
    Kind.BOOL: lambda raw, order: bool_value(int_of(raw, order, False)),
    Kind.FLOAT: _float,
    Kind.TIME: lambda raw, order: _time_value(int_of(raw, order, True)),
    Kind.CHAR: lambda raw, order: _ucs_char(int_of(raw, order, False)),
    Kind.PORT: lambda raw, order: int.from_bytes(raw, "big"),
    Kind.IPV4: lambda raw, order: ipaddress.IPv4Address(bytes(raw)),
    Kind.IPV6: lambda raw, order: ipaddress.IPv6Address(bytes(raw)),
    Kind.UUID: lambda raw, order: uuid.UUID(bytes=bytes(raw)),
    Kind.BYTES: lambda raw, order: bytes(raw),
    Kind.NULL: lambda raw, order: None,
    Kind.LATIN1: lambda raw, order: raw.decode("latin-1"),
    Kind.UTF8: lambda raw, order: raw.decode("utf-8", "surrogateescape"),
    Kind.UTF16: utf16_text,
    Kind.UCS4: lambda raw, order: "".join(_ucs_char(c) for c in ucs4_code_points(raw, order)),
}


#: The first bytes of the byte-order marks.
_BOM_STARTS: Final = frozenset(mark[:1] for mark, _kind, _order in BOMS)


def python_reader(encoding: int, fmt: int, order: str) -> Callable[[bytes], Any]:
    """``raw -> python_value(encoding, fmt, raw, order)``, its kind decided once when the types
    alone decide it (:func:`bytes_decide_kind`), or when the value cannot start with a
    byte-order mark."""
    if bytes_decide_kind(encoding, fmt):
        if fmt in _BOM_FORMATS:  # the kind without a mark, unless the value starts as one may
            plain = _PYTHON[value_kind(encoding, fmt, b"", order)[0]]

            def marked(raw: bytes) -> Any:
                if raw[:1] in _BOM_STARTS:
                    return python_value(encoding, fmt, raw, order)
                return plain(raw, order)

            return marked
        return lambda raw: python_value(encoding, fmt, raw, order)
    return functools.partial(_PYTHON[value_kind(encoding, fmt, b"", order)[0]], order=order)  # type: ignore[call-arg]


def python_value(encoding: int, fmt: int, raw: bytes, order: str) -> Any:
    """The Python value of one scalar value (docs/decoding.md has the table)."""
    kind, raw, order = value_kind(encoding, fmt, raw, order)
    return _PYTHON[kind](raw, order)
