"""TraceLogging decoder: event metadata + data -> :class:`~structlog_etw.read.decoded.DecodedEvent`.

Understands every InType/OutType our encoder writes and the other common ones: all integer
widths, hex integers, FLOAT/DOUBLE, BOOL32, NUL-terminated and counted strings (UTF-8 and
UTF-16), BINARY/COUNTEDBINARY, GUID, FILETIME, SYSTEMTIME, SID, structs (nested), constant
and variable-count arrays (also of structs).  Malformed input raises
:class:`~structlog_etw.read.decoded.DecodeError` (a :class:`ValueError`).

Decoded values: ints -> ``int``; FLOAT/DOUBLE -> ``float``; BOOL32 and UINT8/BOOLEAN -> ``bool``
(0/1, else ``int``); strings -> ``str`` (invalid UTF-8 replaced); binary -> ``bytes``; GUID ->
``uuid.UUID``; UINT32/IPV4 -> ``ipaddress.IPv4Address``; binary/IPV6 ->
``ipaddress.IPv6Address``; FILETIME and SYSTEMTIME -> aware UTC ``datetime`` (``int`` ticks when
out of ``datetime``'s range); structs -> ``list[DecodedField]`` (``dict`` in
``DecodedEvent.fields``); arrays -> ``list``.  Each :class:`~structlog_etw.read.decoded.DecodedField`
also carries its value bytes (``raw``, per element ``raw_elements`` for arrays), without a count
or a terminator.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import struct
import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from ...formats.tracelogging import CHANNEL_TRACELOGGING, EVENT_DESCRIPTOR, FILETIME_EPOCH, InType, OutType
from ..decoded import MAX_DECODE_NESTING, DecodedEvent, DecodedField, DecodeError, plain_fields

__all__ = [
    "FieldMeta",
    "decode",
    "decode_event_descriptor",
    "decode_traits",
    "parse_metadata",
]

_FIXED: Final[dict[int, str]] = {
    InType.INT8: "<b",
    InType.UINT8: "<B",
    InType.INT16: "<h",
    InType.UINT16: "<H",
    InType.INT32: "<i",
    InType.UINT32: "<I",
    InType.INT64: "<q",
    InType.UINT64: "<Q",
    InType.FLOAT: "<f",
    InType.DOUBLE: "<d",
    InType.BOOL32: "<i",
    InType.HEXINT32: "<I",
    InType.HEXINT64: "<Q",
    InType.FILETIME: "<Q",
}


@dataclass(frozen=True)
class FieldMeta:
    """One field as the metadata describes it (``members`` for structs)."""

    name: str
    in_type: int
    out_type: int = 0
    tag: int = 0
    vcount: bool = False
    ccount: int | None = None
    members: tuple[FieldMeta, ...] = ()

    @cached_property
    def element_size(self) -> int:
        """Fewest data bytes one value (one array element) of this field takes; 0 for NULL."""
        if self.members:
            return sum(m.min_size for m in self.members)
        return _MIN_VALUE_SIZE.get(self.in_type, 0)

    @cached_property
    def min_size(self) -> int:
        """Fewest data bytes this field takes (a variable-count array: its count)."""
        if self.vcount:
            return 2
        if self.ccount is not None:
            return self.ccount * self.element_size
        return self.element_size


#: InType -> fewest bytes of one value (a count, a terminator, a fixed size); NULL takes none.
_MIN_VALUE_SIZE: Final[dict[int, int]] = {
    **{t: struct.calcsize(f) for t, f in _FIXED.items()},
    InType.POINTER: 4,  # 8 in a 64-bit event (the reader's pointer size)
    InType.GUID: 16,
    InType.SYSTEMTIME: 16,
    InType.SID: 8,
    InType.COUNTEDANSISTRING: 2,
    InType.COUNTEDSTRING: 2,
    InType.BINARY: 2,
    InType.COUNTEDBINARY: 2,
    InType.ANSISTRING: 1,
    InType.UNICODESTRING: 2,
}


class _Reader:
    """Data bytes and a read position.

    ``ghosts`` counts the array elements read so far that take no data bytes (NULL values,
    structs of them): each stands for one byte the data must still hold.  Before an array is
    read, :meth:`claim` checks that the data left can hold its elements (the smallest element
    size each, one byte for one that takes none), so the work stays bounded by the data's size
    whatever counts the metadata and the data declare.
    """

    __slots__ = ("buf", "ghosts", "pointer", "pos")

    def __init__(self, buf: bytes, pos: int = 0, pointer: int = 8) -> None:
        self.buf = buf
        self.pos = pos
        self.ghosts = 0
        self.pointer = pointer  # bytes of a POINTER value: the event's pointer size

    def claim(self, n: int, each: int, name: str) -> None:
        """Room for ``n`` elements of at least ``each`` bytes (``0``: elements that take none)."""
        left = len(self.buf) - self.pos - self.ghosts
        need = n * max(each, 1)
        if need > left:
            raise DecodeError(f"field {name!r}: {n} elements need at least {need} bytes of data, {left} left")
        if each == 0:
            self.ghosts += n

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise DecodeError(f"truncated input: need {n} bytes at offset {self.pos}")
        b = self.buf[self.pos : end]
        self.pos = end
        return b

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        v: int = struct.unpack("<H", self.take(2))[0]
        return v

    def cstr_bytes(self, error: str = "unterminated name") -> bytes:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise DecodeError(error)
        b = self.buf[self.pos : end]
        self.pos = end + 1
        return b

    def cstr(self) -> str:
        return self.cstr_bytes().decode("utf-8", "replace")

    def tag(self) -> int:
        tag = 0
        for i in range(4):
            b = self.u8()
            tag |= (b & 0x7F) << (21 - 7 * i)
            if not b & 0x80:
                return tag
        raise DecodeError("tag longer than 4 bytes")

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)


def decode_traits(blob: bytes) -> tuple[str, uuid.UUID | None]:
    """Provider traits blob -> (provider name, provider group GUID or None)."""
    r = _Reader(blob)
    size = r.u16()
    if size != len(blob):
        raise DecodeError(f"traits size {size} != blob length {len(blob)}")
    name = r.cstr()
    group = None
    while not r.at_end():
        tsize = r.u16()
        ttype = r.u8()
        body = r.take(tsize - 3)
        if ttype == 1:
            if len(body) != 16:
                raise DecodeError("bad provider group trait")
            group = uuid.UUID(bytes_le=body)
    return name, group


def decode_event_descriptor(desc: bytes) -> dict[str, int]:
    """EVENT_DESCRIPTOR bytes -> dict of id, version, channel, level, opcode, task, keyword."""
    if len(desc) != 16:
        raise DecodeError(f"EVENT_DESCRIPTOR is 16 bytes, not {len(desc)}")
    keys = ("id", "version", "channel", "level", "opcode", "task", "keyword")
    return dict(zip(keys, EVENT_DESCRIPTOR.unpack(desc), strict=True))


def _parse_fields(r: _Reader, limit: int | None, depth: int = 0) -> list[FieldMeta]:
    if depth > MAX_DECODE_NESTING:  # the members of a struct at depth >= MAX_DECODE_NESTING
        raise DecodeError(f"structs nested deeper than {MAX_DECODE_NESTING}")
    out: list[FieldMeta] = []
    while (limit is None and not r.at_end()) or (limit is not None and len(out) < limit):
        name = r.cstr()
        in_meta = r.u8()
        out_type = 0
        tag = 0
        if in_meta & InType.CHAIN:
            out_meta = r.u8()
            out_type = out_meta & 0x7F
            if out_meta & OutType.CHAIN:
                tag = r.tag()
        in_type = in_meta & 0x1F
        flags = in_meta & 0x60
        if flags == 0x60:
            raise DecodeError(f"field {name!r}: custom-schema fields are not supported")
        ccount = r.u16() if flags == InType.CCOUNT else None
        members: tuple[FieldMeta, ...] = ()
        if in_type == InType.STRUCT:
            if out_type == 0:
                raise DecodeError(f"struct {name!r} has no members")
            members = tuple(_parse_fields(r, out_type, depth + 1))
            out_type = 0
        out.append(FieldMeta(name, in_type, out_type, tag, flags == InType.VCOUNT, ccount, members))
    return out


def _metadata(metadata: bytes) -> tuple[bytes, int, list[FieldMeta]]:
    r = _Reader(metadata)
    size = r.u16()
    if size != len(metadata):
        raise DecodeError(f"metadata size {size} != blob length {len(metadata)}")
    tags = r.tag()
    name = r.cstr_bytes()
    return name, tags, _parse_fields(r, None)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def parse_metadata(metadata: bytes) -> tuple[str, int, list[FieldMeta]]:
    """Event metadata -> (event name, event tags, fields)."""
    name, tags, fields = _metadata(metadata)
    return _text(name), tags, fields


def _filetime(ticks: int) -> Any:
    try:
        return FILETIME_EPOCH + _dt.timedelta(microseconds=ticks // 10)
    except OverflowError:
        return ticks


def _value_bytes(r: _Reader, f: FieldMeta) -> bytes:
    """The next value's bytes, without a count or a terminator."""
    t = f.in_type
    fmt = _FIXED.get(t)
    if fmt is not None:
        return r.take(struct.calcsize(fmt))
    if t == InType.POINTER:
        return r.take(r.pointer)
    if t in (InType.GUID, InType.SYSTEMTIME):
        return r.take(16)
    if t in (InType.COUNTEDANSISTRING, InType.COUNTEDSTRING, InType.BINARY, InType.COUNTEDBINARY):
        return r.take(r.u16())
    if t == InType.ANSISTRING:
        return r.cstr_bytes(f"field {f.name!r}: unterminated string")
    if t == InType.UNICODESTRING:
        pos = r.pos
        while True:
            if r.take(2) == b"\0\0":
                return r.buf[pos : r.pos - 2]
    if t == InType.SID:
        head = r.take(8)
        return head + r.take(4 * head[1])
    if t == InType.NULL:
        return b""
    raise DecodeError(f"field {f.name!r}: unsupported InType {t}")


def _scalar(raw: bytes, f: FieldMeta) -> Any:
    """The Python value of one value's bytes (see the module docstring)."""
    t = f.in_type
    fmt = _FIXED.get(t)
    if fmt is not None:
        v = struct.unpack(fmt, raw)[0]
        if t == InType.BOOL32:
            return bool(v) if v in (0, 1) else v
        if t == InType.FILETIME:
            return _filetime(v)
        if t == InType.UINT32 and f.out_type == OutType.IPV4:
            return ipaddress.IPv4Address(struct.pack("<I", v))
        if t == InType.UINT8 and f.out_type == OutType.BOOLEAN:
            return bool(v) if v in (0, 1) else v
        return v
    if t == InType.POINTER:
        return int.from_bytes(raw, "little")
    if t == InType.GUID:
        return uuid.UUID(bytes_le=raw)
    if t in (InType.COUNTEDANSISTRING, InType.ANSISTRING):
        return _text(raw)
    if t in (InType.COUNTEDSTRING, InType.UNICODESTRING):
        return raw.decode("utf-16-le", "replace")
    if t in (InType.BINARY, InType.COUNTEDBINARY):
        if f.out_type == OutType.IPV6 and len(raw) == 16:
            return ipaddress.IPv6Address(raw)
        return raw
    if t == InType.SYSTEMTIME:
        year, month, _dow, day, hour, minute, second, ms = struct.unpack("<8H", raw)
        try:
            return _dt.datetime(year, month, day, hour, minute, second, ms * 1000, tzinfo=_dt.timezone.utc)
        except ValueError:
            return (year, month, day, hour, minute, second, ms)
    if t == InType.SID:
        return raw
    return None  # NULL


def _field(r: _Reader, f: FieldMeta) -> DecodedField:
    is_struct = bool(f.members)
    if f.vcount or f.ccount is not None:
        if f.in_type == InType.BINARY:
            raise DecodeError(f"field {f.name!r}: BINARY cannot be an array")
        n = f.ccount if f.ccount is not None else r.u16()
        r.claim(n, f.element_size, f.name)
        if is_struct:
            elements = [_members(r, f) for _ in range(n)]
            return DecodedField(f.name, elements, f.in_type, f.out_type, f.tag, True, True)
        raws = tuple(_value_bytes(r, f) for _ in range(n))
        values = [_scalar(raw, f) for raw in raws]
        return DecodedField(f.name, values, f.in_type, f.out_type, f.tag, True, raw_elements=raws)
    if is_struct:
        return DecodedField(f.name, _members(r, f), f.in_type, f.out_type, f.tag, is_struct=True)
    raw = _value_bytes(r, f)
    return DecodedField(f.name, _scalar(raw, f), f.in_type, f.out_type, f.tag, raw=raw)


def _members(r: _Reader, f: FieldMeta) -> list[DecodedField]:
    return [_field(r, m) for m in f.members]


def decode(
    metadata: bytes,
    data: bytes,
    *,
    provider: str = "",
    level: int = 0,
    keyword: int = 0,
    opcode: int = 0,
    activity_id: uuid.UUID | None = None,
    related_id: uuid.UUID | None = None,
    descriptor: bytes | None = None,
    pointer_size: int = 8,
) -> DecodedEvent:
    """Decode one event's metadata and data.

    ``descriptor`` (EVENT_DESCRIPTOR bytes), when given, supplies level, keyword, opcode, id and
    version and must carry the TraceLogging channel (11).  ``pointer_size``: the bytes of a
    POINTER value (4 in an event of a 32-bit process; an .etl record says which).
    """
    if pointer_size not in (4, 8):
        raise DecodeError(f"pointer size {pointer_size} (not 4 or 8)")
    event_id = version = 0
    if descriptor is not None:
        d = decode_event_descriptor(descriptor)
        if d["channel"] != CHANNEL_TRACELOGGING:
            raise DecodeError(f"channel {d['channel']} is not TraceLogging (11)")
        level, keyword, opcode = d["level"], d["keyword"], d["opcode"]
        event_id, version = d["id"], d["version"]
    raw_name, tags, metas = _metadata(metadata)
    r = _Reader(data, pointer=pointer_size)
    decoded = tuple(_field(r, f) for f in metas)
    if not r.at_end():
        raise DecodeError(f"{len(data) - r.pos} bytes of data left over after the last field")
    return DecodedEvent(
        provider=provider,
        name=_text(raw_name),
        level=level,
        keyword=keyword,
        opcode=opcode,
        tag=tags,
        activity_id=activity_id,
        related_id=related_id,
        fields=plain_fields(decoded),
        field_list=decoded,
        version=version,
        id=event_id,
        raw=metadata + data,
        format="tracelogging",
        raw_name=raw_name,
    )
