"""TraceLogging decoder: event metadata + data -> :class:`~structlog_etw.decoded.DecodedEvent`.

Understands every InType/OutType our encoder writes and the other common ones: all integer
widths, hex integers, FLOAT/DOUBLE, BOOL32, NUL-terminated and counted strings (UTF-8 and
UTF-16), BINARY/COUNTEDBINARY, GUID, FILETIME, SYSTEMTIME, SID, structs (nested), constant
and variable-count arrays (also of structs).  Malformed input raises :class:`ValueError`.

Decoded values: ints -> ``int``; FLOAT/DOUBLE -> ``float``; BOOL32 and UINT8/BOOLEAN -> ``bool``
(0/1, else ``int``); strings -> ``str`` (invalid UTF-8 replaced); binary -> ``bytes``; GUID ->
``uuid.UUID``; UINT32/IPV4 -> ``ipaddress.IPv4Address``; binary/IPV6 ->
``ipaddress.IPv6Address``; FILETIME and SYSTEMTIME -> aware UTC ``datetime`` (``int`` ticks when
out of ``datetime``'s range); structs -> ``list[DecodedField]`` (``dict`` in
``DecodedEvent.fields``); arrays -> ``list``.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import struct
import uuid
from dataclasses import dataclass
from typing import Any, Final

from ..decoded import DecodedEvent, DecodedField
from .spec import CHANNEL_TRACELOGGING, InType, OutType

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
    InType.POINTER: "<Q",
    InType.HEXINT32: "<I",
    InType.HEXINT64: "<Q",
    InType.FILETIME: "<Q",
}
_UTC: Final = _dt.timezone.utc
_FILETIME_EPOCH: Final = _dt.datetime(1601, 1, 1, tzinfo=_UTC)


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


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise ValueError(f"truncated input: need {n} bytes at offset {self.pos}")
        b = self.buf[self.pos : end]
        self.pos = end
        return b

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        v: int = struct.unpack("<H", self.take(2))[0]
        return v

    def cstr(self) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise ValueError("unterminated name")
        s = self.buf[self.pos : end].decode("utf-8", "replace")
        self.pos = end + 1
        return s

    def tag(self) -> int:
        tag = 0
        for i in range(4):
            b = self.u8()
            tag |= (b & 0x7F) << (21 - 7 * i)
            if not b & 0x80:
                return tag
        raise ValueError("tag longer than 4 bytes")

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)


def decode_traits(blob: bytes) -> tuple[str, uuid.UUID | None]:
    """Provider traits blob -> (provider name, provider group GUID or None)."""
    r = _Reader(blob)
    size = r.u16()
    if size != len(blob):
        raise ValueError(f"traits size {size} != blob length {len(blob)}")
    name = r.cstr()
    group = None
    while not r.at_end():
        tsize = r.u16()
        ttype = r.u8()
        body = r.take(tsize - 3)
        if ttype == 1:
            if len(body) != 16:
                raise ValueError("bad provider group trait")
            group = uuid.UUID(bytes_le=body)
    return name, group


def decode_event_descriptor(desc: bytes) -> dict[str, int]:
    """EVENT_DESCRIPTOR bytes -> dict of id, version, channel, level, opcode, task, keyword."""
    keys = ("id", "version", "channel", "level", "opcode", "task", "keyword")
    return dict(zip(keys, struct.unpack("<HBBBBHQ", desc), strict=True))


_MAX_DEPTH: Final = 64


def _parse_fields(r: _Reader, limit: int | None, depth: int = 0) -> list[FieldMeta]:
    if depth > _MAX_DEPTH:
        raise ValueError(f"structs nested deeper than {_MAX_DEPTH}")
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
            raise ValueError(f"field {name!r}: custom-schema fields are not supported")
        ccount = r.u16() if flags == InType.CCOUNT else None
        members: tuple[FieldMeta, ...] = ()
        if in_type == InType.STRUCT:
            if out_type == 0:
                raise ValueError(f"struct {name!r} has no members")
            members = tuple(_parse_fields(r, out_type, depth + 1))
            out_type = 0
        out.append(FieldMeta(name, in_type, out_type, tag, flags == InType.VCOUNT, ccount, members))
    return out


def parse_metadata(metadata: bytes) -> tuple[str, int, list[FieldMeta]]:
    """Event metadata -> (event name, event tags, fields)."""
    r = _Reader(metadata)
    size = r.u16()
    if size != len(metadata):
        raise ValueError(f"metadata size {size} != blob length {len(metadata)}")
    tags = r.tag()
    name = r.cstr()
    return name, tags, _parse_fields(r, None)


def _filetime(ticks: int) -> Any:
    try:
        return _FILETIME_EPOCH + _dt.timedelta(microseconds=ticks // 10)
    except OverflowError:
        return ticks


def _scalar(r: _Reader, f: FieldMeta) -> Any:
    t = f.in_type
    fmt = _FIXED.get(t)
    if fmt is not None:
        v = struct.unpack(fmt, r.take(struct.calcsize(fmt)))[0]
        if t == InType.BOOL32:
            return bool(v) if v in (0, 1) else v
        if t == InType.FILETIME:
            return _filetime(v)
        if t == InType.UINT32 and f.out_type == OutType.IPV4:
            return ipaddress.IPv4Address(struct.pack("<I", v))
        if t == InType.UINT8 and f.out_type == OutType.BOOLEAN:
            return bool(v) if v in (0, 1) else v
        return v
    if t == InType.GUID:
        return uuid.UUID(bytes_le=r.take(16))
    if t in (InType.COUNTEDANSISTRING, InType.COUNTEDSTRING, InType.BINARY, InType.COUNTEDBINARY):
        raw = r.take(r.u16())
        if t == InType.COUNTEDANSISTRING:
            return raw.decode("utf-8", "replace")
        if t == InType.COUNTEDSTRING:
            return raw.decode("utf-16-le", "replace")
        if f.out_type == OutType.IPV6 and len(raw) == 16:
            return ipaddress.IPv6Address(raw)
        return raw
    if t == InType.ANSISTRING:
        end = r.buf.find(b"\0", r.pos)
        if end < 0:
            raise ValueError(f"field {f.name!r}: unterminated string")
        s = r.buf[r.pos : end].decode("utf-8", "replace")
        r.pos = end + 1
        return s
    if t == InType.UNICODESTRING:
        pos = r.pos
        while True:
            unit = r.take(2)
            if unit == b"\0\0":
                return r.buf[pos : r.pos - 2].decode("utf-16-le", "replace")
    if t == InType.SYSTEMTIME:
        year, month, _dow, day, hour, minute, second, ms = struct.unpack("<8H", r.take(16))
        try:
            return _dt.datetime(year, month, day, hour, minute, second, ms * 1000, tzinfo=_UTC)
        except ValueError:
            return (year, month, day, hour, minute, second, ms)
    if t == InType.SID:
        head = r.take(8)
        return head + r.take(4 * head[1])
    if t == InType.NULL:
        return None
    raise ValueError(f"field {f.name!r}: unsupported InType {t}")


def _value(r: _Reader, f: FieldMeta) -> Any:
    if f.members:
        return [_field(r, m) for m in f.members]
    return _scalar(r, f)


def _is_array(f: FieldMeta) -> bool:
    return f.vcount or f.ccount is not None


def _field(r: _Reader, f: FieldMeta) -> DecodedField:
    if _is_array(f):
        if f.in_type == InType.BINARY:
            raise ValueError(f"field {f.name!r}: BINARY cannot be an array")
        n = f.ccount if f.ccount is not None else r.u16()
        value: Any = [_value(r, f) for _ in range(n)]
    else:
        value = _value(r, f)
    return DecodedField(f.name, value, f.in_type, f.out_type, f.tag, _is_array(f))


def _plain(f: DecodedField) -> Any:
    """A DecodedField's value with structs turned into dicts (for ``DecodedEvent.fields``)."""
    if f.encoding == InType.STRUCT:
        if f.is_array:
            return [{m.name: _plain(m) for m in item} for item in f.value]
        return {m.name: _plain(m) for m in f.value}
    return f.value


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
) -> DecodedEvent:
    """Decode one event's metadata and data.

    ``descriptor`` (EVENT_DESCRIPTOR bytes), when given, supplies level, keyword, opcode, id and
    version and must carry the TraceLogging channel (11).
    """
    event_id = version = 0
    if descriptor is not None:
        d = decode_event_descriptor(descriptor)
        if d["channel"] != CHANNEL_TRACELOGGING:
            raise ValueError(f"channel {d['channel']} is not TraceLogging (11)")
        level, keyword, opcode = d["level"], d["keyword"], d["opcode"]
        event_id, version = d["id"], d["version"]
    name, tags, metas = parse_metadata(metadata)
    r = _Reader(data)
    decoded = tuple(_field(r, f) for f in metas)
    if not r.at_end():
        raise ValueError(f"{len(data) - r.pos} bytes of data left over after the last field")
    return DecodedEvent(
        provider=provider,
        name=name,
        level=level,
        keyword=keyword,
        opcode=opcode,
        tag=tags,
        activity_id=activity_id,
        related_id=related_id,
        fields={f.name: _plain(f) for f in decoded},
        field_list=decoded,
        version=version,
        id=event_id,
        raw=metadata + data,
    )
