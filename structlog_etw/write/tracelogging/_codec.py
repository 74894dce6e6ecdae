"""TraceLogging's codec table: how each value kind becomes bytes, a row per kind (:class:`Row`).

A row holds a kind's metadata (InType, OutType), its packer (the whole value), the body the
general path writes and the size policy may cut, its logical field count, the step of the
generated shape functions and the compiled packer's op.  :data:`CODEC` derives every table the
encoder uses from the rows: metadata and packers of arrays, the steps and ops per layout kind,
the interpreted route's table.  A new kind or a wire fix is one row here.

Type mapping (``fields`` kind -> InType / OutType)::

    BOOL   -> BOOL32                   I64  -> INT64           U64 -> UINT64
    F64    -> DOUBLE                   STR  -> COUNTEDANSISTRING / UTF8
    BYTES  -> COUNTEDBINARY            UUID -> GUID (bytes_le)
    IPV4   -> UINT32 / IPV4 (the 4 network-order bytes)
    IPV6   -> BINARY / IPV6 (scalar); COUNTEDBINARY / IPV6 (array: BINARY has no arrays)
    TIME   -> FILETIME / DATETIME_UTC (aware: converted to UTC; naive: taken as local time)
    JSON   -> COUNTEDANSISTRING / JSON
    U8 -> UINT8    I16 -> INT16    U16 -> UINT16 / UNSIGNED    U32 -> UINT32
    NULL   -> COUNTEDANSISTRING / UTF8, the text "None" (TraceLogging has no null)
    kind|ARRAY -> the item type with VCount (u16 count in the data)
"""

from __future__ import annotations

import datetime as _dt
import struct
from typing import Any, Final

from ...formats.tracelogging import FILETIME_EPOCH, InType, OutType, valid_text
from .. import fields as kinds
from ..fields import bytes_value
from ..shapes import BINARY, TEXT, Codec, Packer, Row, Step

__all__ = ["CODEC", "filetime"]

_U16: Final = struct.Struct("<H")
_I32: Final = struct.Struct("<i")
_U64S: Final = struct.Struct("<Q")
_U16_16: Final = _U16.pack(16)

_ONE_US: Final = _dt.timedelta(microseconds=1)
#: InMeta's type bits (the flags above them: CCOUNT, VCOUNT, CHAIN).
_IN_TYPE_BITS: Final = 0x1F


def filetime(value: _dt.datetime) -> int:
    """FILETIME ticks (100 ns since 1601-01-01 UTC); a naive datetime is taken as local time."""
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.astimezone(_dt.timezone.utc)
    return ((value - FILETIME_EPOCH) // _ONE_US) * 10


# --- packers (whole values) and bodies (the general path) ---------------------------------------


def _pack_str(value: str) -> bytes:
    if len(value) > 0xFFFF:  # can never fit whole: the general path cuts (without encoding it all)
        raise OverflowError("text past u16")
    b = value.encode()
    return _U16.pack(len(b)) + b


def _text_body(value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    return valid_text(value).encode()


#: ``None`` (the NULL kind): TraceLogging has no null, so it is the text ``"None"`` (docs/types.md).
_NONE_VALUE: Final = _pack_str("None")


def _pack_none(value: Any) -> bytes:
    return _NONE_VALUE


def _pack_bytes(value: bytes) -> bytes:
    if value.__class__ is not bytes:
        value = bytes_value(value)
    return _U16.pack(len(value)) + value


def _pack_bool(value: bool) -> bytes:
    return _I32.pack(1 if value else 0)


def _pack_uuid(value: Any) -> bytes:
    body: bytes = value.bytes_le
    return body


def _pack_ipv4(value: bytes) -> bytes:
    if len(value) != 4:
        raise ValueError("IPv4 address must be 4 bytes")
    return bytes(value)


def _pack_ipv6(value: bytes) -> bytes:
    """u16 length + the 16 address bytes (BINARY scalar and COUNTEDBINARY array item alike)."""
    if len(value) != 16:
        raise ValueError("IPv6 address must be 16 bytes")
    return _U16_16 + value


def _pack_time(value: _dt.datetime) -> bytes:
    return _U64S.pack(filetime(value))


# --- the rows -----------------------------------------------------------------------------------


def _meta(in_type: int, out_type: int = 0) -> bytes:
    return bytes((in_type | InType.CHAIN, out_type)) if out_type else bytes((in_type,))


def _row(
    kind: int,
    in_type: int,
    out_type: int,
    pack: Packer,
    fixed: str = "",
    step: Step | None = None,
    op: str | None = None,
) -> Row:
    """A kind the general path writes whole (with ``pack``; ``fixed``: its struct format, for
    arrays in one call); BINARY and COUNTEDBINARY count as two logical fields."""
    fields = 2 if in_type in (InType.BINARY, InType.COUNTEDBINARY) else 1
    return Row(kind, _meta(in_type, out_type), pack, pack, step=step, op=op, fields=fields, fixed=fixed)


def _fixed(
    kind: int, in_type: int, char: str, out_type: int = 0, step: Step | None = None, op: str | None = None
) -> Row:
    return _row(kind, in_type, out_type, struct.Struct("<" + char).pack, char, step, op)


_ROWS: Final = (
    # an exact bool: struct writes True as 1
    _row(kinds.BOOL, InType.BOOL32, 0, _pack_bool, "i", Step("i", "{v}"), "bool32"),
    _fixed(kinds.I64, InType.INT64, "q", step=Step("q", "{v}"), op="i64"),
    _fixed(kinds.U64, InType.UINT64, "Q"),
    _fixed(kinds.F64, InType.DOUBLE, "d", step=Step("d", "{v}"), op="f64"),
    # str.encode: cheaper than the method call; the general path replaces lone surrogates
    Row(
        kinds.STR,
        _meta(InType.COUNTEDANSISTRING, OutType.UTF8),
        _pack_str,
        _text_body,
        TEXT,
        Step("", "_encode({v})"),
        "str",
    ),
    Row(kinds.JSON, _meta(InType.COUNTEDANSISTRING, OutType.JSON), _pack_str, _text_body, TEXT),
    Row(
        kinds.BYTES,
        _meta(InType.COUNTEDBINARY),
        _pack_bytes,
        bytes_value,
        BINARY,
        Step("", "{v}"),
        "bytes",
        2,
    ),
    _row(kinds.UUID, InType.GUID, 0, _pack_uuid, step=Step("16s", "{v}.bytes_le")),
    _row(kinds.IPV4, InType.UINT32, OutType.IPV4, _pack_ipv4),
    _row(kinds.IPV6, InType.BINARY, OutType.IPV6, _pack_ipv6),
    # before 1601: negative, struct raises (the general path writes the text)
    _row(kinds.TIME, InType.FILETIME, OutType.DATETIME_UTC, _pack_time, step=Step("Q", "_filetime({v})")),
    # fixed widths for prescribed layouts (Common Schema); U16 with OutType UNSIGNED as
    # OpenTelemetry's ETW exporters write ``__csver__``
    _fixed(kinds.U8, InType.UINT8, "B"),
    _fixed(kinds.I16, InType.INT16, "h"),
    _fixed(kinds.U16, InType.UINT16, "H", OutType.UNSIGNED),
    _fixed(kinds.U32, InType.UINT32, "I"),
    _row(
        kinds.NULL,
        InType.COUNTEDANSISTRING,
        OutType.UTF8,
        _pack_none,
        step=Step("", "b'None'"),
        op="null_text",
    ),
)


# --- arrays: a u16 count, then the items --------------------------------------------------------


def _array_meta(row: Row) -> bytes:
    """The item's type with VCOUNT; BINARY has no arrays: an array of it is COUNTEDBINARY."""
    in_type = row.meta[0] & _IN_TYPE_BITS
    if in_type == InType.BINARY:
        in_type = InType.COUNTEDBINARY
    return bytes((in_type | InType.VCOUNT | (row.meta[0] & InType.CHAIN),)) + row.meta[1:]


def _array_pack(codec: Codec, kind: int) -> Packer:
    row = codec.rows[kind]
    if row.fixed:
        code = "<H%d" + row.fixed

        if kind == kinds.BOOL:

            def pack_bools(items: list[Any]) -> bytes:
                n = len(items)
                return struct.pack(code % n, n, *[1 if i else 0 for i in items])

            return pack_bools

        def pack_fixed(items: list[Any]) -> bytes:
            n = len(items)
            return struct.pack(code % n, n, *items)

        return pack_fixed
    item = row.pack

    def pack_items(items: list[Any]) -> bytes:
        return _U16.pack(len(items)) + b"".join([item(i) for i in items])

    return pack_items


#: TraceLogging's codec: its shape functions write the data alone (the tier dispatcher's lead
#: parts are empty: the metadata is a blob of its own); the interpreted route writes ``None`` as
#: the text ``"None"``.
CODEC: Final = Codec(_ROWS, _array_meta, _array_pack, env={"_filetime": filetime})
