"""EventHeader decoder: one user_events event (bytes) -> :class:`~structlog_etw.read.decoded.DecodedEvent`.

Pure Python, no structlog.  The layout is Microsoft's EventHeader (see ``docs/decoding.md``
and :mod:`~structlog_etw.formats.eventheader`): an 8-byte header, extension blocks (ActivityId,
Metadata), then the little- or big-endian payload the metadata describes.

This module parses: it frames the header, the extensions, the metadata and every value once,
and returns a :class:`~structlog_etw.read.decoded.DecodedEvent` holding both the Python values and
what a renderer needs to show the event exactly (each field's wire encoding and format, its
value bytes - per element for arrays -, the byte order, the raw event name).  Renderers work
from that: :mod:`~structlog_etw.read.writers.perf_json` writes perf-decode's JSON, the CLI its
JSON lines and console text.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

from ..._util.lazy import LazyModule
from ...formats.eventheader import (
    ENC_BINARY_LENGTH16_CHAR8,
    ENC_STRUCT,
    ENCODING_CARRAY,
    ENCODING_CHAIN,
    ENCODING_VALUE_MASK,
    ENCODING_VARRAY,
    EXT_ACTIVITY_ID,
    EXT_METADATA,
    EXTENSION_CHAIN,
    EXTENSION_KIND_MASK,
    FIXED_SIZE,
    FORMAT_CHAIN,
    FORMAT_VALUE_MASK,
    LENGTH16_UNIT,
    ZSTRING_UNIT,
    EventHeaderDecodeError,  # re-exported: the old name of DecodeError
    HeaderFlags,
    parse_tracepoint_name,
)
from ..decoded import MAX_DECODE_NESTING, DecodedEvent, DecodedField, DecodeError, plain_fields
from ._eventheader_values import BYTE_ORDER, python_value

if TYPE_CHECKING:
    import uuid

    from ..sample import PerfSample
else:  # imported on first use (the ordinary path's activity ids): a reader's start loads no uuid
    uuid = LazyModule("uuid", globals())

__all__ = [
    "KNOWN_FLAGS",
    "EventHeaderDecodeError",
    "FieldMetadata",
    "decode_event",
    "header_numbers",
    "kind_dispatcher",
    "parse_metadata",
    "parse_tracepoint_name",
    "read_extensions",
    "split_event_name",
]

#: Every header flag the format defines (an event with another one set is rejected).
KNOWN_FLAGS: Final = sum(int(flag) for flag in HeaderFlags)
_LITTLE_ENDIAN: Final = int(HeaderFlags.LITTLE_ENDIAN)
_EXTENSION: Final = int(HeaderFlags.EXTENSION)


# --- metadata -----------------------------------------------------------------------------------


@dataclass
class FieldMetadata:
    """One field's metadata, as the Metadata extension declares it.

    ``name`` (bytes), ``encoding`` and ``format`` (value numbers, without the chain and array
    flags), ``tag``, ``array`` (0, ENCODING_CARRAY or ENCODING_VARRAY), ``count`` (a CArray's
    length), ``children`` (a struct's members).
    """

    name: bytes
    encoding: int
    format: int
    tag: int
    array: int
    count: int  # CArray length
    children: list[FieldMetadata] = field(default_factory=list)
    #: Fewest payload bytes one element takes (one value; a struct: its members' sum).  Every
    #: element takes at least one byte (a struct has at least one member), so an array of
    #: ``n`` elements needs ``n * element_min`` bytes: checked before a single element is read.
    element_min: int = 1
    #: Fewest payload bytes the whole field takes (an array: its count or its elements).
    min_size: int = 1


class _MetaReader:
    __slots__ = ("buf", "end", "order", "pos")

    def __init__(self, buf: bytes, pos: int, order: str) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.order = order

    def fields(self, limit: int, depth: int) -> list[FieldMetadata]:
        out: list[FieldMetadata] = []
        while len(out) < limit and self.pos < self.end:
            out.append(self.one(depth))
        return out

    def members(self, meta: FieldMetadata, depth: int) -> list[FieldMetadata]:
        """A struct's members: as many as its format declares, or fewer when the metadata ends first
        (perf-decode's reading; Microsoft's own test events declare 20 and carry 2), but at least one.

        A struct without members would take no payload bytes, and an array of them could repeat
        without bound: rejected, like a format of 0.
        """
        out = self.fields(meta.format, depth)
        if not out:
            raise DecodeError(
                f"metadata: struct {meta.name!r} declares {meta.format} members, the metadata has none"
            )
        return out

    def one(self, depth: int) -> FieldMetadata:
        buf = self.buf
        nul = buf.find(b"\0", self.pos)
        if nul < 0 or self.end - nul < 2:
            raise DecodeError("metadata: field name not NUL-terminated or encoding missing")
        name = buf[self.pos : nul]
        pos = nul + 1
        enc = buf[pos]
        pos += 1
        fmt = 0
        tag = 0
        if enc & ENCODING_CHAIN:
            if pos >= self.end:
                raise DecodeError(f"metadata: field {name!r}: format byte missing")
            fmt = buf[pos]
            pos += 1
            if fmt & FORMAT_CHAIN:
                if self.end - pos < 2:
                    raise DecodeError(f"metadata: field {name!r}: tag missing")
                (tag,) = struct.unpack_from(self.order + "H", buf, pos)
                pos += 2
        array = enc & (ENCODING_CARRAY | ENCODING_VARRAY)
        value_enc = enc & ENCODING_VALUE_MASK
        fmt &= FORMAT_VALUE_MASK
        count = 0
        if array == ENCODING_CARRAY | ENCODING_VARRAY:
            raise DecodeError(f"metadata: field {name!r}: both CArray and VArray flags set")
        if array == ENCODING_CARRAY:
            if self.end - pos < 2:
                raise DecodeError(f"metadata: field {name!r}: CArray length missing")
            (count,) = struct.unpack_from(self.order + "H", buf, pos)
            pos += 2
            if count == 0:
                raise DecodeError(f"metadata: field {name!r}: CArray length 0")
        if value_enc == 0 or value_enc > ENC_BINARY_LENGTH16_CHAR8:
            raise DecodeError(f"metadata: field {name!r}: unsupported encoding {value_enc}")
        self.pos = pos
        meta = FieldMetadata(name, value_enc, fmt, tag, array, count)
        if value_enc == ENC_STRUCT:
            if fmt == 0:
                raise DecodeError(f"metadata: struct {name!r} with 0 fields")
            if depth >= MAX_DECODE_NESTING:
                raise DecodeError("metadata: structs nested too deeply")
            meta.children = self.members(meta, depth + 1)
            meta.element_min = sum(child.min_size for child in meta.children)
        else:
            meta.element_min = FIXED_SIZE.get(value_enc) or ZSTRING_UNIT.get(value_enc) or 2
        if array == ENCODING_CARRAY:
            meta.min_size = count * meta.element_min
        elif array == ENCODING_VARRAY:
            meta.min_size = 2
        else:
            meta.min_size = meta.element_min
        return meta


# --- data ---------------------------------------------------------------------------------------


class _DataReader:
    """Reads the payload the metadata describes into :class:`DecodedField` objects."""

    __slots__ = ("buf", "order", "pos")

    def __init__(self, buf: bytes, pos: int, order: str) -> None:
        self.buf = buf
        self.pos = pos
        self.order = order

    def need(self, n: int, meta: FieldMetadata) -> None:
        if len(self.buf) - self.pos < n:
            raise DecodeError(
                f"payload truncated in field {meta.name.decode('utf-8', 'replace')!r}"
                f" (need {n} bytes at offset {self.pos}, have {len(self.buf) - self.pos})"
            )

    def u16(self, meta: FieldMetadata) -> int:
        self.need(2, meta)
        (v,) = struct.unpack_from(self.order + "H", self.buf, self.pos)
        self.pos += 2
        return int(v)

    def fields(self, metas: list[FieldMetadata]) -> list[DecodedField]:
        return [self.field(m) for m in metas]

    def field(self, meta: FieldMetadata) -> DecodedField:
        name = meta.name.decode("utf-8", "surrogateescape")
        enc, fmt, order = meta.encoding, meta.format, self.order
        is_struct = enc == ENC_STRUCT
        if not meta.array:
            if is_struct:
                return DecodedField(name, self.fields(meta.children), enc, fmt, meta.tag, is_struct=True)
            raw = self.value_bytes(meta)
            return DecodedField(name, python_value(enc, fmt, raw, order), enc, fmt, meta.tag, raw=raw)
        n = meta.count if meta.array == ENCODING_CARRAY else self.u16(meta)
        # Before reading any element: the payload must hold n of the smallest element.  This
        # bounds the work by the payload's size, whatever counts the metadata declares.
        self.need(n * meta.element_min, meta)
        if is_struct:
            elements = [self.fields(meta.children) for _ in range(n)]
            return DecodedField(name, elements, enc, fmt, meta.tag, is_array=True, is_struct=True)
        raws = tuple(self.value_bytes(meta) for _ in range(n))
        values = [python_value(enc, fmt, raw, order) for raw in raws]
        return DecodedField(name, values, enc, fmt, meta.tag, is_array=True, raw_elements=raws)

    def value_bytes(self, meta: FieldMetadata) -> bytes:
        """The next value's bytes, without its length prefix or terminator."""
        buf = self.buf
        size = FIXED_SIZE.get(meta.encoding)
        if size is None:
            unit = ZSTRING_UNIT.get(meta.encoding)
            if unit is not None:
                end = self.pos
                zero = b"\0" * unit
                while True:
                    if len(buf) - end < unit:
                        self.need(end - self.pos + unit, meta)  # raises: no terminator
                    if buf[end : end + unit] == zero:
                        break
                    end += unit
                raw = buf[self.pos : end]
                self.pos = end + unit
                return raw
            size = self.u16(meta) * LENGTH16_UNIT[meta.encoding]
        self.need(size, meta)
        raw = buf[self.pos : self.pos + size]
        self.pos += size
        return raw


# --- header and extensions ----------------------------------------------------------------------


@dataclass
class _Header:
    """The header and extensions of an event; ``payload`` is where the values start."""

    version: int
    id: int
    tag: int
    opcode: int
    level: int
    order: str
    metadata: bytes
    payload: int
    activity: bytes | None = None
    related: bytes | None = None


#: An extension's header (size, kind) in each byte order.
_EXT_HEADER: Final = {o: struct.Struct(o + "HH").unpack_from for o in "<>"}


def read_extensions(data: bytes) -> tuple[str, bytes, int, bytes | None, bytes | None]:
    """``(byte order, metadata, payload position, activity id, related id)`` of the EventHeader
    event ``data``: its flags and extension chain checked (the one reader of them, for
    :func:`decode_event` and the compiled plans).  Raises :class:`~structlog_etw.read.decoded.DecodeError`."""
    if len(data) < 8:
        raise DecodeError(f"event too short for an EventHeader ({len(data)} bytes)")
    flags = data[0]
    if flags & ~KNOWN_FLAGS:
        raise DecodeError(f"unsupported EventHeader flags 0x{flags:02x}")
    order = "<" if flags & _LITTLE_ENDIAN else ">"
    pos = 8
    meta_buf: bytes | None = None
    activity: bytes | None = None
    related: bytes | None = None
    n = len(data)
    if flags & _EXTENSION:
        ext = _EXT_HEADER[order]
        while True:
            if n - pos < 4:
                raise DecodeError("extension header truncated")
            size, kind = ext(data, pos)
            pos += 4
            k = kind & EXTENSION_KIND_MASK
            if n - pos < size:
                raise DecodeError(f"extension (kind {k}) truncated")
            if k == 0:
                raise DecodeError("extension of kind 0 (invalid)")
            if k == EXT_METADATA:
                if meta_buf is not None:
                    raise DecodeError("more than one Metadata extension")
                meta_buf = data[pos : pos + size]
            elif k == EXT_ACTIVITY_ID:
                if activity is not None or size not in (16, 32):
                    raise DecodeError(f"bad ActivityId extension (size {size})")
                activity = data[pos : pos + 16]
                if size == 32:
                    related = data[pos + 16 : pos + 32]
            pos += size
            if not kind & EXTENSION_CHAIN:
                break
    if meta_buf is None:
        raise DecodeError("no Metadata extension (not a self-describing EventHeader event)")
    return order, meta_buf, pos, activity, related


#: The extension header (size, kind) of a little-endian event; the kind of a metadata extension.
_EXT_LE: Final = _EXT_HEADER["<"]
_METADATA_KIND: Final = int(EXT_METADATA)


_R = TypeVar("_R")
#: What a caller keeps per kind of event for :func:`kind_dispatcher`: called as
#: ``kept(sample, payload position, activity id, related id)``.
KindCall = Callable[["PerfSample", int, "bytes | None", "bytes | None"], _R]


def kind_dispatcher(
    kept: Mapping[object, KindCall[_R] | None],
    add: Callable[[object, bytes, bytes, str], KindCall[_R] | None],
) -> Callable[[PerfSample], _R | None]:
    """A dispatcher of events to what a caller keeps per kind of event (a compiled plan's line
    function): ``dispatch(sample)`` reads the extensions of the tracepoint sample's EventHeader
    event, ``sample.data`` (:func:`read_extensions`, and beside it its fast case: a
    little-endian event whose one extension is its metadata, nearly every event, read in place)
    and returns
    ``kept[key](sample, payload position, activity id, related id)``; None for an event that
    is not well-formed or whose kind was kept as None.  The key tells the event's header and
    metadata apart from every other's (the event's bytes up to its payload, or ``(header,
    metadata)``); a new one is kept as ``add(key, header, metadata, byte order)`` gives it
    (``add`` stores it in ``kept``, bounded).  One frame per event: the reading and the call."""

    def dispatch(sample: PerfSample) -> _R | None:
        data = sample.data
        if len(data) >= 12 and data[0] | 1 == 7:  # little-endian, extensions (pointer size either)
            size, kind = _EXT_LE(data, 8)
            if kind == _METADATA_KIND:  # the metadata extension alone: no chain, no activity ids
                pos = 12 + size
                if pos > len(data):
                    return None
                key: object = data[:pos]
                found = kept.get(key, kept)
                if found is kept:
                    found = add(key, data[:8], data[12:pos], "<")
                return None if found is None else found(sample, pos, None, None)  # type: ignore[operator]
        try:
            order, metadata, pos, activity, related = read_extensions(data)
        except DecodeError:
            return None
        key = (data[:8], metadata)
        found = kept.get(key, kept)
        if found is kept:
            found = add(key, data[:8], metadata, order)
        return None if found is None else found(sample, pos, activity, related)  # type: ignore[operator]

    return dispatch


#: The header's numbers after its flags: (version, id, tag, opcode, level) in each byte order.
_NUMBERS: Final = {o: struct.Struct(o + "xBHHBB").unpack_from for o in "<>"}


def header_numbers(data: bytes, order: str) -> tuple[int, int, int, int, int]:
    """``(version, id, tag, opcode, level)`` of the header at the start of ``data`` (8 bytes or
    more) in byte order ``order``."""
    numbers: tuple[int, int, int, int, int] = _NUMBERS[order](data)
    return numbers


def _header(data: bytes) -> _Header:
    order, meta_buf, pos, activity, related = read_extensions(data)
    version, eid, tag, opcode, level = header_numbers(data, order)
    return _Header(version, eid, tag, opcode, level, order, meta_buf, pos, activity, related)


def split_event_name(raw: bytes) -> tuple[str, dict[str, str]]:
    """``Name;attr=value;...`` with ``;;`` for a literal ``;`` -> (name, attributes)."""
    text = raw.decode("utf-8", "surrogateescape")
    parts: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == ";":
            if i + 1 < len(text) and text[i + 1] == ";":
                cur.append(";")
                i += 2
                continue
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    attrs: dict[str, str] = {}
    for part in parts[1:]:
        key, _, value = part.partition("=")
        attrs[key] = value
    return parts[0], attrs


def parse_metadata(metadata: bytes, order: str) -> tuple[bytes, list[FieldMetadata]]:
    """A Metadata extension's event name (raw, with its ``;attr=value`` suffix) and fields.

    ``order`` is the event's :mod:`struct` byte order.  Raises
    :class:`~structlog_etw.read.decoded.DecodeError`
    when the metadata is malformed.
    """
    nul = metadata.find(b"\0")
    if nul < 0:
        raise DecodeError("event name not NUL-terminated")
    return metadata[:nul], _MetaReader(metadata, nul + 1, order).fields(1 << 30, 0)


def _uuid(raw: bytes | None) -> uuid.UUID | None:
    return None if raw is None else uuid.UUID(bytes=raw)


def decode_event(tracepoint_name: str, data: bytes) -> DecodedEvent:
    """Decode one EventHeader event.

    ``tracepoint_name`` is the user_events name (``Provider_L4K1[options]``,
    an optional ``user_events:`` prefix is ignored); ``data`` the event bytes,
    starting at the EventHeader (after perf's common fields).  Raises
    :class:`~structlog_etw.read.decoded.DecodeError` when the name or the bytes are malformed.
    """
    provider, level, keyword, _options = parse_tracepoint_name(tracepoint_name)
    data = bytes(data)
    h = _header(data)
    nul = h.metadata.find(b"\0")
    if nul < 0:
        raise DecodeError("event name not NUL-terminated")
    metas = _MetaReader(h.metadata, nul + 1, h.order).fields(1 << 30, 0)
    field_list = tuple(_DataReader(data, h.payload, h.order).fields(metas))
    if h.level != level:
        raise DecodeError(f"header level {h.level} differs from the level {level} in the tracepoint name")
    raw_name = h.metadata[:nul]
    name, attrs = split_event_name(raw_name)
    return DecodedEvent(
        provider=provider,
        name=name,
        level=level,
        keyword=keyword,
        opcode=h.opcode,
        tag=h.tag,
        activity_id=_uuid(h.activity),
        related_id=_uuid(h.related),
        fields=plain_fields(field_list),
        field_list=field_list,
        attributes=attrs,
        version=h.version,
        id=h.id,
        raw=data,
        format="eventheader",
        byte_order=BYTE_ORDER[h.order],
        raw_name=raw_name,
    )
