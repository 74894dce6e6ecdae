"""EventHeader's codec table: how each value kind becomes bytes, a row per kind (:class:`Row`).

A row holds a kind's metadata (encoding and format), its packer (the whole value, u16 length
included), the body the general path writes and the size policy may cut, the step of the
generated shape functions and the compiled packer's op.  :data:`CODEC` derives every table the
encoder uses from the rows: metadata and packers of arrays, the steps and ops per layout kind,
the interpreted route's table.  A new kind or a wire fix is one row here.

Nullable kinds (LinuxTracepoints 1.4): I64, U64 and F64 or-ed with :data:`NULLABLE` are written
as BinaryLength16Char8 with the kind's format: a u16 length, then 8 bytes for a value or none for
``None`` (perf-decode prints ``null``).  A key that has been ``None`` in an event keeps this one
type in the event's later events (docs/types.md).
"""

from __future__ import annotations

import functools
import re
import struct
import sys
from array import array
from collections.abc import Callable
from typing import Any, Final

from ...formats import eventheader as spec
from .. import fields as kinds
from ..fields import bytes_value
from ..shapes import BINARY, NULLABLE, TEXT, Codec, Packer, Row, Step, Walker

__all__ = ["CODEC", "NULLABLE_KINDS", "NULLABLE_WALK", "null_of", "utf8"]

_U16_MAX: Final = 0xFFFF
_U16: Final = struct.Struct("<H")
_LITTLE: Final = sys.byteorder == "little"
_SURROGATES: Final = re.compile("[\ud800-\udfff]")
#: The kinds that have a nullable form; a ``None`` with no other kind known is a nullable I64.
NULLABLE_KINDS: Final = (kinds.I64, kinds.U64, kinds.F64)
_NULL_BODY: Final = b"\0\0"  # a nullable value's u16 length 0


def utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates become U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text).encode("utf-8")


def null_of(kind: int) -> int:
    """A kind's form at a key that has been None: an int64, uint64 or float64 nullable, any other
    kind (NULL, a str, a bool, ...) itself.  Also the kind such a key's None is written as, from
    the kind it takes (NULL before a number is seen)."""
    return kind | NULLABLE if kind in NULLABLE_KINDS else kind


# --- bodies (the general path) and packers (the fast paths) ---------------------------------------


def _text_body(value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    return utf8(value)


def _time_body(value: Any) -> bytes:
    return _text_body(value.isoformat())


def _uuid(value: Any) -> bytes:
    body = value.bytes
    if type(body) is not bytes or len(body) != 16:
        raise ValueError("a UUID is 16 bytes")
    return body


def _address(size: int) -> Packer:
    def address(value: Any) -> bytes:
        body = bytes_value(value)
        if len(body) != size:
            raise ValueError(f"address must be {size} bytes")
        return body

    return address


def _null(value: Any) -> bytes:
    if value is not None:
        raise TypeError(f"expected None, got {type(value).__name__}")
    return _NULL_BODY


def _nullable_body(char: str) -> Packer:
    pack = struct.Struct("<H" + char).pack
    size = struct.calcsize("<" + char)

    def nullable(value: Any) -> bytes:
        return _NULL_BODY if value is None else pack(size, value)

    return nullable


def _pack_text(value: Any) -> bytes:
    if len(value) > _U16_MAX:  # can never fit whole: the general path cuts (without encoding it all)
        raise OverflowError("text past u16")
    body: bytes = value.encode("utf-8")  # lone surrogates raise: the general path writes U+FFFD
    return _U16.pack(len(body)) + body  # past u16 raises: the general path cuts


def _pack_time(value: Any) -> bytes:
    return _pack_text(value.isoformat())


def _bytes(value: Any) -> bytes:
    body = value if value.__class__ is bytes else bytes_value(value)
    return _U16.pack(len(body)) + body


# --- the rows -----------------------------------------------------------------------------------


def _meta(encoding: int, fmt: int = 0) -> bytes:
    return bytes((encoding | spec.ENCODING_CHAIN, fmt)) if fmt else bytes((encoding,))


def _fixed(
    kind: int, encoding: int, fmt: int, char: str, step: Step | None = None, op: str | None = None
) -> Row:
    """A fixed-size kind packed with the struct format ``char``."""
    pack = struct.Struct("<" + char).pack
    return Row(kind, _meta(encoding, fmt), pack, pack, step=step, op=op, fixed=char)


def _nullable(kind: int, fmt: int, char: str, step: Step | None = None, op: str | None = None) -> Row:
    """A nullable kind: the whole value (u16 length included) is a fixed piece."""
    body = _nullable_body(char)
    return Row(kind | NULLABLE, _meta(spec.ENC_BINARY_LENGTH16_CHAR8, fmt), body, body, step=step, op=op)


_S16: Final = spec.ENC_STRING_LENGTH16_CHAR8
_B16: Final = spec.ENC_BINARY_LENGTH16_CHAR8

_ROWS: Final = (
    _fixed(kinds.BOOL, spec.ENC_VALUE8, spec.FMT_BOOLEAN, "?", Step("?", "{v}"), "bool8"),
    _fixed(kinds.I64, spec.ENC_VALUE64, spec.FMT_SIGNED_INT, "q", Step("q", "{v}"), "i64"),
    _fixed(kinds.U64, spec.ENC_VALUE64, spec.FMT_UNSIGNED_INT, "Q"),
    _fixed(kinds.F64, spec.ENC_VALUE64, spec.FMT_FLOAT, "d", Step("d", "{v}"), "f64"),
    _fixed(kinds.U8, spec.ENC_VALUE8, spec.FMT_UNSIGNED_INT, "B"),
    _fixed(kinds.I16, spec.ENC_VALUE16, spec.FMT_SIGNED_INT, "h"),
    _fixed(kinds.U16, spec.ENC_VALUE16, spec.FMT_UNSIGNED_INT, "H"),
    _fixed(kinds.U32, spec.ENC_VALUE32, spec.FMT_UNSIGNED_INT, "I"),
    # str.encode: cheaper than the method call
    Row(kinds.STR, _meta(_S16), _pack_text, _text_body, TEXT, Step("", "_encode({v})"), "str"),
    Row(kinds.JSON, _meta(_S16, spec.FMT_STRING_JSON), _pack_text, _text_body, TEXT),
    Row(kinds.TIME, _meta(_S16), _pack_time, _time_body, TEXT, Step("", "{v}.isoformat().encode()")),
    Row(kinds.BYTES, _meta(_B16, spec.FMT_HEX_BYTES), _bytes, bytes_value, BINARY, Step("", "{v}"), "bytes"),
    Row(kinds.UUID, _meta(spec.ENC_VALUE128, spec.FMT_UUID), _uuid, _uuid, step=Step("16s", "{v}.bytes")),
    Row(kinds.IPV4, _meta(spec.ENC_VALUE32, spec.FMT_IP_ADDRESS), _address(4), _address(4)),
    Row(kinds.IPV6, _meta(spec.ENC_VALUE128, spec.FMT_IP_ADDRESS), _address(16), _address(16)),
    # a null (a nullable int64 that is None): u16 length 0
    Row(kinds.NULL, _meta(_B16, spec.FMT_SIGNED_INT), _null, _null, step=Step("", "b''"), op="null_empty"),
    # a key that has been None: its int or float as a counted 8-byte value
    _nullable(kinds.I64, spec.FMT_SIGNED_INT, "q", Step("", "_q({v})"), "i64_counted"),
    _nullable(kinds.U64, spec.FMT_UNSIGNED_INT, "Q"),
    _nullable(kinds.F64, spec.FMT_FLOAT, "d", Step("", "_d({v})"), "f64_counted"),
)


# --- arrays: a u16 count, then the elements -----------------------------------------------------

#: The struct formats whose ``array`` typecode is the same character and size on every platform:
#: arrays of them are written in one ``array`` call.
_ARRAY_CODES: Final = ("q", "Q", "d")


def _fixed_array(code: str) -> Callable[[list[Any]], bytes]:
    def fixed(items: list[Any]) -> bytes:
        # array() would read a bytes or str initializer as raw machine values: a list only.
        a = array(code, items if items.__class__ is list else list(items))
        if not _LITTLE:  # pragma: no cover - big-endian hosts
            a.byteswap()
        return a.tobytes()

    return fixed


def _bool_array(items: list[Any]) -> bytes:
    return bytes([1 if i else 0 for i in items])  # every true value is written as 1


def _elements(row: Row) -> Callable[[list[Any]], bytes]:
    """The elements of an array of ``row``'s kind as the general path writes them (a counted
    element with its u16 length)."""
    if row.fixed in _ARRAY_CODES:
        return _fixed_array(row.fixed)
    if row.kind == kinds.BOOL:
        return _bool_array
    body = row.body
    if row.cut:

        def counted(items: list[Any]) -> bytes:
            return b"".join([_U16.pack(len(b)) + b for b in map(body, items)])

        return counted

    def plain(items: list[Any]) -> bytes:
        return b"".join([body(i) for i in items])

    return plain


def _array_pack(codec: Codec, kind: int) -> Packer:
    elements = _elements(codec.rows[kind])

    def pack(value: Any) -> bytes:
        return _U16.pack(len(value)) + elements(value)  # more than 65535: raises before packing

    return pack


def _array_meta(row: Row) -> bytes:
    return bytes((row.meta[0] | spec.ENCODING_VARRAY,)) + row.meta[1:]


#: EventHeader's codec: its shape functions take the head and the metadata before the values; a
#: ``None`` takes the general route (which learns its key as nullable), not the interpreted one.
CODEC: Final = Codec(
    _ROWS,
    _array_meta,
    _array_pack,
    env={"_q": struct.Struct("<q").pack, "_d": struct.Struct("<d").pack},
    walk_none=False,
    null_of=null_of,
)

# --- the interpreted route's tables of a key that has been None ---------------------------------

_WalkEntry = tuple[int, Packer, int]
_NULL_OF_NONE: Final = {None: _NULL_BODY}.__getitem__  # None -> u16 length 0, in C


def _first_number(value: Any) -> bytes:
    """A key's first number after its None names its None's type: the route of ``encode`` writes it."""
    raise LookupError("the first number of a nullable key")


def _walk_entries(as_null: int) -> Walker:
    """The ``keyed`` entries (``shapes.walk``) of a key that has been None, its None's kind ``as_null``."""
    if as_null == kinds.NULL:
        number: tuple[_WalkEntry, _WalkEntry] = (
            (kinds.NULL, _first_number, 1),
            (kinds.NULL, _first_number, 1),
        )
    else:  # the rows' packers, less the test for None (C calls: past int64 raises)
        number = (
            (kinds.I64 | NULLABLE, functools.partial(struct.Struct("<Hq").pack, 8), 1),
            (kinds.F64 | NULLABLE, functools.partial(struct.Struct("<Hd").pack, 8), 1),
        )
    # every class of the interpreted route's table: walk reads one table per value
    return {
        **CODEC.walker,
        type(None): (null_of(as_null), _NULL_OF_NONE, 1),
        int: number[0],
        float: number[1],
    }


#: The ``keyed`` table (``shapes.walk``) of each kind a key that has been None can take (shared
#: by every such key).
NULLABLE_WALK: Final[dict[int, Walker]] = {
    kind: _walk_entries(kind) for kind in (kinds.NULL, *NULLABLE_KINDS)
}
