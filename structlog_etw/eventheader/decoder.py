"""EventHeader decoder: one user_events event (bytes) -> :class:`~structlog_etw.decoded.DecodedEvent`.

Pure Python, no structlog.  The layout is Microsoft's EventHeader (see
``docs/decoding.md``): an 8-byte header, extension blocks (ActivityId,
Metadata), then the little- or big-endian payload the metadata describes.

Two outputs are built from one parse:

* :func:`decode_event` returns Python values (ints, floats, bools, str, bytes,
  :class:`uuid.UUID`, :mod:`ipaddress` objects, :class:`datetime.datetime`, ...).
* :func:`perf_json` renders the event the way Microsoft's ``perf-decode`` prints
  it (hex ints as ``"0x.."``, errno names, hex bytes, UCS strings, ...), so a
  decoded event can be compared with ``perf-decode`` output exactly.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import json
import math
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from ..decoded import DecodedEvent, DecodedField
from .spec import (
    ENC_BINARY_LENGTH16_CHAR8,
    ENC_STRING_LENGTH16_CHAR8,
    ENC_STRING_LENGTH16_CHAR16,
    ENC_STRING_LENGTH16_CHAR32,
    ENC_STRUCT,
    ENC_VALUE8,
    ENC_VALUE16,
    ENC_VALUE32,
    ENC_VALUE64,
    ENC_VALUE128,
    ENC_ZSTRING_CHAR8,
    ENC_ZSTRING_CHAR16,
    ENC_ZSTRING_CHAR32,
    ENCODING_CARRAY,
    ENCODING_CHAIN,
    ENCODING_NAMES,
    ENCODING_VALUE_MASK,
    ENCODING_VARRAY,
    EXT_ACTIVITY_ID,
    EXT_METADATA,
    EXTENSION_CHAIN,
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
    FORMAT_CHAIN,
    FORMAT_NAMES,
    FORMAT_VALUE_MASK,
    LENGTH16_UNIT,
    ZSTRING_UNIT,
    EventHeaderDecodeError,
    HeaderFlags,
    parse_tracepoint_name,
)

__all__ = [
    "ENCODING_NAMES",
    "FORMAT_NAMES",
    "EventHeaderDecodeError",
    "decode_event",
    "errno_text",
    "field_value",
    "float_text",
    "parse_tracepoint_name",
    "perf_json",
    "perf_json_fields",
    "time_text",
]

_KNOWN_FLAGS: Final = int(HeaderFlags.POINTER64 | HeaderFlags.LITTLE_ENDIAN | HeaderFlags.EXTENSION)
_MAX_DEPTH: Final = 32  # struct nesting limit (perf-decode: 8-deep stack; we are a bit more lenient)


# --- metadata -----------------------------------------------------------------------------------


@dataclass
class _Meta:
    """One field's metadata. ``array``: 0, ENCODING_CARRAY or ENCODING_VARRAY."""

    name: bytes
    encoding: int
    format: int
    tag: int
    array: int
    count: int  # CArray length
    children: list[_Meta] = field(default_factory=list)


class _MetaReader:
    __slots__ = ("buf", "end", "order", "pos")

    def __init__(self, buf: bytes, pos: int, order: str) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.order = order

    def fields(self, limit: int, depth: int) -> list[_Meta]:
        out: list[_Meta] = []
        while len(out) < limit and self.pos < self.end:
            out.append(self.one(depth))
        return out

    def one(self, depth: int) -> _Meta:
        buf = self.buf
        nul = buf.find(b"\0", self.pos)
        if nul < 0 or self.end - nul < 2:
            raise EventHeaderDecodeError("metadata: field name not NUL-terminated or encoding missing")
        name = buf[self.pos : nul]
        pos = nul + 1
        enc = buf[pos]
        pos += 1
        fmt = 0
        tag = 0
        if enc & ENCODING_CHAIN:
            if pos >= self.end:
                raise EventHeaderDecodeError(f"metadata: field {name!r}: format byte missing")
            fmt = buf[pos]
            pos += 1
            if fmt & FORMAT_CHAIN:
                if self.end - pos < 2:
                    raise EventHeaderDecodeError(f"metadata: field {name!r}: tag missing")
                (tag,) = struct.unpack_from(self.order + "H", buf, pos)
                pos += 2
        array = enc & (ENCODING_CARRAY | ENCODING_VARRAY)
        value_enc = enc & ENCODING_VALUE_MASK
        fmt &= FORMAT_VALUE_MASK
        count = 0
        if array == ENCODING_CARRAY | ENCODING_VARRAY:
            raise EventHeaderDecodeError(f"metadata: field {name!r}: both CArray and VArray flags set")
        if array == ENCODING_CARRAY:
            if self.end - pos < 2:
                raise EventHeaderDecodeError(f"metadata: field {name!r}: CArray length missing")
            (count,) = struct.unpack_from(self.order + "H", buf, pos)
            pos += 2
            if count == 0:
                raise EventHeaderDecodeError(f"metadata: field {name!r}: CArray length 0")
        if value_enc == 0 or value_enc > ENC_BINARY_LENGTH16_CHAR8:
            raise EventHeaderDecodeError(f"metadata: field {name!r}: unsupported encoding {value_enc}")
        self.pos = pos
        meta = _Meta(name, value_enc, fmt, tag, array, count)
        if value_enc == ENC_STRUCT:
            if fmt == 0:
                raise EventHeaderDecodeError(f"metadata: struct {name!r} with 0 fields")
            if depth >= _MAX_DEPTH:
                raise EventHeaderDecodeError("metadata: structs nested too deeply")
            meta.children = self.fields(fmt, depth + 1)
        return meta


# --- data ---------------------------------------------------------------------------------------

# A parsed item: ("v", meta, raw) a value; ("s", meta, [items]) a struct;
# ("a", meta, [items]) an array (elements are "v" or "s" items of the same meta).
_Item = tuple[str, _Meta, Any]


class _DataReader:
    __slots__ = ("buf", "order", "pos")

    def __init__(self, buf: bytes, pos: int, order: str) -> None:
        self.buf = buf
        self.pos = pos
        self.order = order

    def need(self, n: int, meta: _Meta) -> None:
        if len(self.buf) - self.pos < n:
            raise EventHeaderDecodeError(
                f"payload truncated in field {meta.name.decode('utf-8', 'replace')!r}"
                f" (need {n} bytes at offset {self.pos}, have {len(self.buf) - self.pos})"
            )

    def u16(self, meta: _Meta) -> int:
        self.need(2, meta)
        (v,) = struct.unpack_from(self.order + "H", self.buf, self.pos)
        self.pos += 2
        return int(v)

    def items(self, metas: list[_Meta]) -> list[_Item]:
        return [self.item(m) for m in metas]

    def item(self, meta: _Meta) -> _Item:
        if meta.array:
            n = meta.count if meta.array == ENCODING_CARRAY else self.u16(meta)
            size = FIXED_SIZE.get(meta.encoding)
            if size is not None:
                self.need(size * n, meta)
            return ("a", meta, [self.element(meta) for _ in range(n)])
        return self.element(meta)

    def element(self, meta: _Meta) -> _Item:
        if meta.encoding == ENC_STRUCT:
            return ("s", meta, self.items(meta.children))
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
                return ("v", meta, raw)
            n = self.u16(meta) * LENGTH16_UNIT[meta.encoding]
            size = n
        self.need(size, meta)
        raw = buf[self.pos : self.pos + size]
        self.pos += size
        return ("v", meta, raw)


@dataclass
class _Parsed:
    flags: int
    version: int
    id: int
    tag: int
    opcode: int
    level: int
    order: str
    activity: bytes | None
    related: bytes | None
    name_raw: bytes
    items: list[_Item]


def _parse(data: bytes) -> _Parsed:
    if len(data) < 8:
        raise EventHeaderDecodeError(f"event too short for an EventHeader ({len(data)} bytes)")
    flags, version = data[0], data[1]
    if flags & ~_KNOWN_FLAGS:
        raise EventHeaderDecodeError(f"unsupported EventHeader flags 0x{flags:02x}")
    order = "<" if flags & HeaderFlags.LITTLE_ENDIAN else ">"
    eid, tag, opcode, level = struct.unpack_from(order + "HHBB", data, 2)
    pos = 8
    meta_buf: bytes | None = None
    activity: bytes | None = None
    related: bytes | None = None
    if flags & HeaderFlags.EXTENSION:
        while True:
            if len(data) - pos < 4:
                raise EventHeaderDecodeError("extension header truncated")
            size, kind = struct.unpack_from(order + "HH", data, pos)
            pos += 4
            if len(data) - pos < size:
                raise EventHeaderDecodeError(f"extension (kind {kind & 0x7FFF}) truncated")
            k = kind & 0x7FFF
            if k == 0:
                raise EventHeaderDecodeError("extension of kind 0 (invalid)")
            if k == EXT_METADATA:
                if meta_buf is not None:
                    raise EventHeaderDecodeError("more than one Metadata extension")
                meta_buf = data[pos : pos + size]
            elif k == EXT_ACTIVITY_ID:
                if activity is not None or size not in (16, 32):
                    raise EventHeaderDecodeError(f"bad ActivityId extension (size {size})")
                activity = data[pos : pos + 16]
                if size == 32:
                    related = data[pos + 16 : pos + 32]
            pos += size
            if not kind & EXTENSION_CHAIN:
                break
    if meta_buf is None:
        raise EventHeaderDecodeError("no Metadata extension (not a self-describing EventHeader event)")
    nul = meta_buf.find(b"\0")
    if nul < 0:
        raise EventHeaderDecodeError("event name not NUL-terminated")
    metas = _MetaReader(meta_buf, nul + 1, order).fields(1 << 30, 0)
    items = _DataReader(data, pos, order).items(metas)
    return _Parsed(flags, version, eid, tag, opcode, level, order, activity, related, meta_buf[:nul], items)


def _split_event_name(raw: bytes) -> tuple[str, dict[str, str]]:
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


# --- Python values ------------------------------------------------------------------------------

_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _time_value(seconds: int) -> _dt.datetime | int:
    try:
        return _EPOCH + _dt.timedelta(seconds=seconds)
    except OverflowError:
        return seconds


def _bool_value(v: int) -> bool | int:
    if v in (0, 1):
        return bool(v)
    return v - (1 << 32) if v >= 1 << 31 else v


def _ucs_char(v: int) -> str:
    return chr(v) if v <= 0x10FFFF else "\ufffd"


def _utf16_text(raw: bytes, order: str) -> str:
    codec = "utf-16-le" if order == "<" else "utf-16-be"
    return raw[: len(raw) & ~1].decode(codec, "surrogatepass")


def _ucs4_text(raw: bytes, order: str) -> str:
    n = len(raw) // 4
    return "".join(_ucs_char(v) for v in struct.unpack(f"{order}{n}I", raw[: n * 4]))


#: UTF-16 and UTF-32 string encodings -> their text decoder (bytes, byte order -> str).
_WIDE_TEXT: Final[dict[int, Callable[[bytes, str], str]]] = {
    ENC_ZSTRING_CHAR16: _utf16_text,
    ENC_STRING_LENGTH16_CHAR16: _utf16_text,
    ENC_ZSTRING_CHAR32: _ucs4_text,
    ENC_STRING_LENGTH16_CHAR32: _ucs4_text,
}


def _bom_text(raw: bytes) -> str | None:
    if raw[:4] == b"\xff\xfe\0\0":
        return _ucs4_text(raw[4:], "<")
    if raw[:4] == b"\0\0\xfe\xff":
        return _ucs4_text(raw[4:], ">")
    if raw[:2] == b"\xff\xfe":
        return _utf16_text(raw[2:], "<")
    if raw[:2] == b"\xfe\xff":
        return _utf16_text(raw[2:], ">")
    if raw[:3] == b"\xef\xbb\xbf":
        return raw[3:].decode("utf-8", "surrogateescape")
    return None


def _int_of(raw: bytes, order: str, signed: bool) -> int:
    return int.from_bytes(raw, "little" if order == "<" else "big", signed=signed)


def _sized_value(raw: bytes, fmt: int, order: str) -> tuple[bool, Any]:
    """Value of a counted (Length16) item under a numeric format; ``(False, None)`` if not applicable."""
    n = len(raw)
    if n == 0 and fmt in _SIZED_FORMATS:
        return True, None
    if fmt in (FMT_UNSIGNED_INT, FMT_HEX_INT) and n in (1, 2, 4, 8):
        return True, _int_of(raw, order, False)
    if fmt == FMT_SIGNED_INT and n in (1, 2, 4, 8):
        return True, _int_of(raw, order, True)
    if fmt in (FMT_ERRNO, FMT_PID) and n == 4:
        return True, _int_of(raw, order, True)
    if fmt == FMT_TIME and n in (4, 8):
        return True, _time_value(_int_of(raw, order, True))
    if fmt == FMT_BOOLEAN and n in (1, 2, 4):
        return True, _bool_value(_int_of(raw, order, False))
    if fmt == FMT_FLOAT and n in (4, 8):
        return True, struct.unpack(order + ("f" if n == 4 else "d"), raw)[0]
    if fmt == FMT_UUID and n == 16:
        return True, uuid.UUID(bytes=raw)
    if fmt == FMT_PORT and n == 2:
        return True, int.from_bytes(raw, "big")
    if fmt in (FMT_IP_ADDRESS, FMT_IP_ADDRESS_OBSOLETE) and n in (4, 16):
        return True, (ipaddress.IPv4Address(raw) if n == 4 else ipaddress.IPv6Address(raw))
    return False, None


_SIZED_FORMATS: Final = frozenset(
    {
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
    }
)


def _py_value(enc: int, fmt: int, raw: bytes, order: str) -> Any:
    """The Python value of one scalar item (see docs/decoding.md for the table)."""
    if enc == ENC_VALUE8:
        v = raw[0]
        if fmt == FMT_SIGNED_INT:
            return v - 256 if v >= 128 else v
        if fmt == FMT_BOOLEAN:
            return _bool_value(v)
        if fmt == FMT_HEX_BYTES:
            return bytes(raw)
        if fmt == FMT_STRING8:
            return chr(v)
        return v
    if enc == ENC_VALUE16:
        if fmt == FMT_SIGNED_INT:
            return _int_of(raw, order, True)
        if fmt == FMT_BOOLEAN:
            return _bool_value(_int_of(raw, order, False))
        if fmt == FMT_HEX_BYTES:
            return bytes(raw)
        if fmt == FMT_STRING_UTF:
            return chr(_int_of(raw, order, False))
        if fmt == FMT_PORT:
            return int.from_bytes(raw, "big")
        return _int_of(raw, order, False)
    if enc == ENC_VALUE32:
        if fmt in (FMT_SIGNED_INT, FMT_PID, FMT_ERRNO):
            return _int_of(raw, order, True)
        if fmt == FMT_TIME:
            return _time_value(_int_of(raw, order, True))
        if fmt == FMT_BOOLEAN:
            return _bool_value(_int_of(raw, order, False))
        if fmt == FMT_FLOAT:
            return struct.unpack(order + "f", raw)[0]
        if fmt == FMT_HEX_BYTES:
            return bytes(raw)
        if fmt == FMT_STRING_UTF:
            return _ucs_char(_int_of(raw, order, False))
        if fmt in (FMT_IP_ADDRESS, FMT_IP_ADDRESS_OBSOLETE):
            return ipaddress.IPv4Address(raw)
        return _int_of(raw, order, False)
    if enc == ENC_VALUE64:
        if fmt == FMT_SIGNED_INT:
            return _int_of(raw, order, True)
        if fmt == FMT_TIME:
            return _time_value(_int_of(raw, order, True))
        if fmt == FMT_FLOAT:
            return struct.unpack(order + "d", raw)[0]
        if fmt == FMT_HEX_BYTES:
            return bytes(raw)
        return _int_of(raw, order, False)
    if enc == ENC_VALUE128:
        if fmt == FMT_UUID:
            return uuid.UUID(bytes=bytes(raw))
        if fmt in (FMT_IP_ADDRESS, FMT_IP_ADDRESS_OBSOLETE):
            return ipaddress.IPv6Address(bytes(raw))
        return bytes(raw)
    if enc in (ENC_ZSTRING_CHAR8, ENC_STRING_LENGTH16_CHAR8, ENC_BINARY_LENGTH16_CHAR8):
        if enc != ENC_ZSTRING_CHAR8:
            ok, value = _sized_value(raw, fmt, order)
            if ok:
                return value
        if fmt == FMT_HEX_BYTES or (enc == ENC_BINARY_LENGTH16_CHAR8 and fmt not in _TEXT_FORMATS):
            return bytes(raw)
        if fmt == FMT_STRING8:
            return raw.decode("latin-1")
        if fmt in (FMT_STRING_UTF_BOM, FMT_STRING_XML, FMT_STRING_JSON):
            text = _bom_text(raw)
            if text is not None:
                return text
        return raw.decode("utf-8", "surrogateescape")
    wide_text = _WIDE_TEXT.get(enc)
    if wide_text is not None:
        if fmt == FMT_HEX_BYTES:
            return bytes(raw)
        if fmt in (FMT_STRING_UTF_BOM, FMT_STRING_XML, FMT_STRING_JSON):
            text = _bom_text(raw)
            if text is not None:
                return text
        return wide_text(raw, order)
    raise EventHeaderDecodeError(f"unsupported encoding {enc}")  # pragma: no cover - rejected by the parser


_TEXT_FORMATS: Final = frozenset(
    {FMT_STRING8, FMT_STRING_UTF, FMT_STRING_UTF_BOM, FMT_STRING_XML, FMT_STRING_JSON}
)


def _field_name(meta: _Meta) -> str:
    return meta.name.decode("utf-8", "surrogateescape")


def _to_decoded(item: _Item, order: str) -> DecodedField:
    kind, meta, payload = item
    if kind == "v":
        value: Any = _py_value(meta.encoding, meta.format, payload, order)
        return DecodedField(_field_name(meta), value, meta.encoding, meta.format, meta.tag)
    if kind == "s":
        children = [_to_decoded(i, order) for i in payload]
        return DecodedField(_field_name(meta), children, meta.encoding, meta.format, meta.tag)
    elements: list[Any] = []
    for element in payload:
        if element[0] == "s":
            elements.append([_to_decoded(i, order) for i in element[2]])
        else:
            elements.append(_py_value(meta.encoding, meta.format, element[2], order))
    return DecodedField(_field_name(meta), elements, meta.encoding, meta.format, meta.tag, is_array=True)


def field_value(f: DecodedField) -> Any:
    """A DecodedField's value as in ``DecodedEvent.fields``: structs -> dict, arrays -> list."""
    if f.encoding == ENC_STRUCT:
        if f.is_array:
            return [{c.name: field_value(c) for c in element} for element in f.value]
        return {c.name: field_value(c) for c in f.value}
    return f.value


def decode_event(tracepoint_name: str, data: bytes) -> DecodedEvent:
    """Decode one EventHeader event.

    ``tracepoint_name`` is the user_events name (``Provider_L4K1[options]``,
    an optional ``user_events:`` prefix is ignored); ``data`` the event bytes,
    starting at the EventHeader (after perf's common fields).  Raises
    :class:`EventHeaderDecodeError` when the name or the bytes are malformed.
    """
    provider, level, keyword, _options = parse_tracepoint_name(tracepoint_name)
    data = bytes(data)
    p = _parse(data)
    if p.level != level:
        raise EventHeaderDecodeError(
            f"header level {p.level} differs from the level {level} in the tracepoint name"
        )
    name, attrs = _split_event_name(p.name_raw)
    field_list = tuple(_to_decoded(i, p.order) for i in p.items)
    fields = {f.name: field_value(f) for f in field_list}
    return DecodedEvent(
        provider=provider,
        name=name,
        level=level,
        keyword=keyword,
        opcode=p.opcode,
        tag=p.tag,
        activity_id=uuid.UUID(bytes=p.activity) if p.activity is not None else None,
        related_id=uuid.UUID(bytes=p.related) if p.related is not None else None,
        fields=fields,
        field_list=field_list,
        attributes=attrs,
        version=p.version,
        id=p.id,
        raw=data,
    )


# --- perf-decode JSON rendering -----------------------------------------------------------------

_ERRNO_NAMES: Final = (
    "EPERM",
    "ENOENT",
    "ESRCH",
    "EINTR",
    "EIO",
    "ENXIO",
    "E2BIG",
    "ENOEXEC",
    "EBADF",
    "ECHILD",
    "EAGAIN",
    "ENOMEM",
    "EACCES",
    "EFAULT",
    "ENOTBLK",
    "EBUSY",
    "EEXIST",
    "EXDEV",
    "ENODEV",
    "ENOTDIR",
    "EISDIR",
    "EINVAL",
    "ENFILE",
    "EMFILE",
    "ENOTTY",
    "ETXTBSY",
    "EFBIG",
    "ENOSPC",
    "ESPIPE",
    "EROFS",
    "EMLINK",
    "EPIPE",
    "EDOM",
    "ERANGE",
    "EDEADLK",
    "ENAMETOOLONG",
    "ENOLCK",
    "ENOSYS",
    "ENOTEMPTY",
    "ELOOP",
    "-",
    "ENOMSG",
    "EIDRM",
    "ECHRNG",
    "EL2NSYNC",
    "EL3HLT",
    "EL3RST",
    "ELNRNG",
    "EUNATCH",
    "ENOCSI",
    "EL2HLT",
    "EBADE",
    "EBADR",
    "EXFULL",
    "ENOANO",
    "EBADRQC",
    "EBADSLT",
    "-",
    "EBFONT",
    "ENOSTR",
    "ENODATA",
    "ETIME",
    "ENOSR",
    "ENONET",
    "ENOPKG",
    "EREMOTE",
    "ENOLINK",
    "EADV",
    "ESRMNT",
    "ECOMM",
    "EPROTO",
    "EMULTIHOP",
    "EDOTDOT",
    "EBADMSG",
    "EOVERFLOW",
    "ENOTUNIQ",
    "EBADFD",
    "EREMCHG",
    "ELIBACC",
    "ELIBBAD",
    "ELIBSCN",
    "ELIBMAX",
    "ELIBEXEC",
    "EILSEQ",
    "ERESTART",
    "ESTRPIPE",
    "EUSERS",
    "ENOTSOCK",
    "EDESTADDRREQ",
    "EMSGSIZE",
    "EPROTOTYPE",
    "ENOPROTOOPT",
    "EPROTONOSUPPORT",
    "ESOCKTNOSUPPORT",
    "EOPNOTSUPP",
    "EPFNOSUPPORT",
    "EAFNOSUPPORT",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "ENETDOWN",
    "ENETUNREACH",
    "ENETRESET",
    "ECONNABORTED",
    "ECONNRESET",
    "ENOBUFS",
    "EISCONN",
    "ENOTCONN",
    "ESHUTDOWN",
    "ETOOMANYREFS",
    "ETIMEDOUT",
    "ECONNREFUSED",
    "EHOSTDOWN",
    "EHOSTUNREACH",
    "EALREADY",
    "EINPROGRESS",
    "ESTALE",
    "EUCLEAN",
    "ENOTNAM",
    "ENAVAIL",
    "EISNAM",
    "EREMOTEIO",
    "EDQUOT",
    "ENOMEDIUM",
    "EMEDIUMTYPE",
    "ECANCELED",
    "ENOKEY",
    "EKEYEXPIRED",
    "EKEYREVOKED",
    "EKEYREJECTED",
    "EOWNERDEAD",
    "ENOTRECOVERABLE",
    "ERFKILL",
    "EHWPOISON",
)


def errno_text(value: int) -> str:
    """perf-decode's errno text: ``EPERM(1)``, ``ERRNO(41)``, ``ERRNO(-5)``."""
    u = value & 0xFFFFFFFF
    if 1 <= u <= len(_ERRNO_NAMES) and _ERRNO_NAMES[u - 1] != "-":
        return f"{_ERRNO_NAMES[u - 1]}({u})"
    s = u - (1 << 32) if u >= 1 << 31 else u
    return f"ERRNO({s})"


def _days_to_civil(days: int) -> tuple[int, int, int]:
    """Proleptic Gregorian (year, month, day) of a day count since 1970-01-01."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


def time_text(seconds: int) -> str:
    """perf-decode's time text: ``YYYY-MM-DDTHH:MM:SS`` (UTC) or ``TIME(n)`` when out of range."""
    days, sod = divmod(seconds, 86400)
    y, m, d = _days_to_civil(days)
    if not -(1 << 31) <= y - 1900 < 1 << 31:
        return f"TIME({seconds})"
    ys = f"{y:04d}" if y >= 0 else f"-{-y:03d}"
    return f"{ys}-{m:02d}-{d:02d}T{sod // 3600:02d}:{sod // 60 % 60:02d}:{sod % 60:02d}"


def _shortest_digits(value: float, single: bool) -> tuple[str, int]:
    """Shortest round-trip digits ``d`` and exponent ``e`` with value == 0.d * 10**e (value > 0)."""
    if single:
        target = struct.pack("<f", value)
        for p in range(1, 10):
            s = f"{value:.{p - 1}e}"
            if struct.pack("<f", float(s)) == target:
                break
    else:
        s = repr(value)
    mant, _, exp_s = s.partition("e")
    exp = int(exp_s) if exp_s else 0
    int_part, _, frac = mant.partition(".")
    digits = (int_part + frac).lstrip("0")
    lead_zeros = len(int_part + frac) - len((int_part + frac).lstrip("0"))
    point = len(int_part) - lead_zeros + exp
    digits = digits.rstrip("0") or "0"
    return digits, point


def float_text(value: float, single: bool = False) -> str:
    """``std::to_chars`` shortest text of a float (as perf-decode prints floats)."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(abs(value), single)
    # scientific: d.ddde+XX
    exp = point - 1
    sci = digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + ("e-" if exp < 0 else "e+")
    sci += f"{abs(exp):02d}"
    if point <= 0:
        fixed = "0." + "0" * -point + digits
    elif point >= len(digits):
        fixed = str(int(abs(value)))  # an integer: C++ prints its exact digits, not the shortest ones
    else:
        fixed = digits[:point] + "." + digits[point:]
    return sign + (fixed if len(fixed) <= len(sci) else sci)


def _ucs_bytes(cp: int) -> bytes:
    """perf-decode's UTF-8-like encoding of any 32-bit code point (surrogates and > 0x10FFFF too)."""
    if cp < 0x80:
        return bytes((cp,))
    if cp < 0x800:
        return bytes((0xC0 | cp >> 6, 0x80 | cp & 0x3F))
    if cp < 0x10000:
        return bytes((0xE0 | cp >> 12, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F))
    if cp < 0x200000:
        return bytes((0xF0 | cp >> 18, 0x80 | cp >> 12 & 0x3F, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F))
    if cp < 0x4000000:
        lead = 0xF8 | cp >> 24
        shifts: tuple[int, ...] = (18, 12, 6, 0)
    elif cp < 0x80000000:
        lead = 0xFC | cp >> 30
        shifts = (24, 18, 12, 6, 0)
    else:
        lead = 0xFE
        shifts = (30, 24, 18, 12, 6, 0)
    return bytes((lead, *(0x80 | cp >> s & 0x3F for s in shifts)))


_ESCAPES: Final = {0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t"}


def _escape_ascii(b: int) -> bytes:
    if b < 0x20:
        return _ESCAPES.get(b) or b"\\u00%02x" % b
    if b in (0x22, 0x5C):
        return bytes((0x5C, b))
    return bytes((b,))


def _json_ucs(cps: list[int] | tuple[int, ...]) -> bytes:
    return b"".join(_escape_ascii(c) if c < 0x80 else _ucs_bytes(c) for c in cps)


def _json_utf8(raw: bytes) -> bytes:
    """perf-decode's lenient UTF-8 copy: invalid sequences are read as Latin-1."""
    out = bytearray()
    i = 0
    n = len(raw)
    while i < n:
        b0 = raw[i]
        if b0 < 0x80:
            out += _escape_ascii(b0)
            i += 1
            continue
        length = 0
        if 0xC0 <= b0 <= 0xDF and n - i >= 2:
            b1 = raw[i + 1]
            if b1 & 0xC0 == 0x80 and ((b0 & 0x1F) << 6 | (b1 & 0x3F)) >= 0x80:
                length = 2
        elif 0xE0 <= b0 <= 0xEF and n - i >= 3:
            b1, b2 = raw[i + 1], raw[i + 2]
            if (
                b1 & 0xC0 == 0x80
                and b2 & 0xC0 == 0x80
                and ((b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F)) >= 0x800
            ):
                length = 3
        elif 0xF0 <= b0 <= 0xF4 and n - i >= 4:
            b1, b2, b3 = raw[i + 1], raw[i + 2], raw[i + 3]
            if b1 & 0xC0 == 0x80 and b2 & 0xC0 == 0x80 and b3 & 0xC0 == 0x80:
                cp = (b0 & 0x07) << 18 | (b1 & 0x3F) << 12 | (b2 & 0x3F) << 6 | (b3 & 0x3F)
                if 0x10000 <= cp <= 0x10FFFF:
                    length = 4
        if length:
            out += raw[i : i + length]
            i += length
        else:
            out += bytes((0xC0 | b0 >> 6, 0x80 | b0 & 0x3F))
            i += 1
    return bytes(out)


def _json_utf16(raw: bytes, order: str) -> bytes:
    n = len(raw) // 2
    units = struct.unpack(f"{order}{n}H", raw[: n * 2])
    cps: list[int] = []
    i = 0
    while i < n:
        w0 = units[i]
        if 0xD800 <= w0 <= 0xDBFF and i + 1 < n and 0xDC00 <= units[i + 1] <= 0xDFFF:
            cps.append(((w0 - 0xD800) << 10 | (units[i + 1] - 0xDC00)) + 0x10000)
            i += 2
        else:
            cps.append(w0)
            i += 1
    return _json_ucs(cps)


def _json_ucs4(raw: bytes, order: str) -> bytes:
    n = len(raw) // 4
    return _json_ucs(struct.unpack(f"{order}{n}I", raw[: n * 4]))


def _q(text: bytes) -> bytes:
    return b'"' + text + b'"'


def _json_bom(raw: bytes) -> bytes | None:
    if raw[:4] == b"\xff\xfe\0\0":
        return _q(_json_ucs4(raw[4:], "<"))
    if raw[:4] == b"\0\0\xfe\xff":
        return _q(_json_ucs4(raw[4:], ">"))
    if raw[:2] == b"\xff\xfe":
        return _q(_json_utf16(raw[2:], "<"))
    if raw[:2] == b"\xfe\xff":
        return _q(_json_utf16(raw[2:], ">"))
    if raw[:3] == b"\xef\xbb\xbf":
        return _q(_json_utf8(raw[3:]))
    return None


def _hex_bytes(raw: bytes) -> bytes:
    return _q(raw.hex(" ").encode())


def _ipv6_text(raw: bytes) -> str:
    """glibc ``inet_ntop(AF_INET6)`` text."""
    words = struct.unpack(">8H", raw)
    best_base, best_len = -1, 0
    cur_base, cur_len = -1, 0
    for i, w in enumerate(words):
        if w == 0:
            if cur_base < 0:
                cur_base, cur_len = i, 1
            else:
                cur_len += 1
        elif cur_base >= 0:
            if cur_len > best_len:
                best_base, best_len = cur_base, cur_len
            cur_base = -1
    if cur_base >= 0 and cur_len > best_len:
        best_base, best_len = cur_base, cur_len
    if best_len < 2:
        best_base = -1
    out = []
    i = 0
    while i < 8:
        if best_base >= 0 and best_base <= i < best_base + best_len:
            if i == best_base:
                out.append(":")
            i += 1
            continue
        if i:
            out.append(":")
        if (
            i == 6
            and best_base == 0
            and (best_len == 6 or (best_len == 7 and words[7] != 1) or (best_len == 5 and words[5] == 0xFFFF))
        ):
            out.append(".".join(str(b) for b in raw[12:]))
            break
        out.append(f"{words[i]:x}")
        i += 1
    if best_base >= 0 and best_base + best_len == 8:
        out.append(":")
    return "".join(out)


def _uuid_text(raw: bytes) -> str:
    return str(uuid.UUID(bytes=bytes(raw)))


def _num(value: int | str) -> bytes:
    return str(value).encode()


def _json_value(enc: int, fmt: int, raw: bytes, order: str) -> bytes:
    """One scalar value as perf-decode writes it in JSON (raw UTF-8-ish bytes)."""
    size = FIXED_SIZE.get(enc)
    if size is not None:
        u = _int_of(raw, order, False)
        if enc == ENC_VALUE128:
            if fmt == FMT_UUID:
                return _q(_uuid_text(raw).encode())
            if fmt in (FMT_IP_ADDRESS, FMT_IP_ADDRESS_OBSOLETE):
                return _q(_ipv6_text(raw).encode())
            return _hex_bytes(raw)
        bits = size * 8
        signed = u - (1 << bits) if u >= 1 << (bits - 1) else u
        if fmt == FMT_SIGNED_INT or (fmt == FMT_PID and enc == ENC_VALUE32):
            return _num(signed)
        if fmt == FMT_HEX_INT:
            return _q(b"0x%X" % u)
        if fmt == FMT_HEX_BYTES:
            return _hex_bytes(raw)
        if fmt == FMT_BOOLEAN and enc != ENC_VALUE64:
            return b"false" if u == 0 else b"true" if u == 1 else _num(_bool_value(u))
        if enc == ENC_VALUE8 and fmt == FMT_STRING8:
            return _q(_json_ucs((u,)))
        if enc in (ENC_VALUE16, ENC_VALUE32) and fmt == FMT_STRING_UTF:
            return _q(_json_ucs((u,)))
        if enc == ENC_VALUE16 and fmt == FMT_PORT:
            return _num(int.from_bytes(raw, "big"))
        if enc == ENC_VALUE32 and fmt == FMT_ERRNO:
            return _q(errno_text(u).encode())
        if enc in (ENC_VALUE32, ENC_VALUE64) and fmt == FMT_TIME:
            return _q(time_text(signed).encode())
        if enc in (ENC_VALUE32, ENC_VALUE64) and fmt == FMT_FLOAT:
            f = struct.unpack(order + ("f" if enc == ENC_VALUE32 else "d"), raw)[0]
            text = float_text(f, single=enc == ENC_VALUE32).encode()
            return text if math.isfinite(f) else _q(text)
        if enc == ENC_VALUE32 and fmt in (FMT_IP_ADDRESS, FMT_IP_ADDRESS_OBSOLETE):
            return _q(".".join(str(b) for b in raw).encode())
        return _num(u)
    if enc in (ENC_STRING_LENGTH16_CHAR8, ENC_BINARY_LENGTH16_CHAR8):
        n = len(raw)
        if n == 0 and fmt in _SIZED_FORMATS:
            return b"null"
        by_format: dict[int, dict[int, int]] = {
            FMT_UNSIGNED_INT: {1: ENC_VALUE8, 2: ENC_VALUE16, 4: ENC_VALUE32, 8: ENC_VALUE64},
            FMT_SIGNED_INT: {1: ENC_VALUE8, 2: ENC_VALUE16, 4: ENC_VALUE32, 8: ENC_VALUE64},
            FMT_HEX_INT: {1: ENC_VALUE8, 2: ENC_VALUE16, 4: ENC_VALUE32, 8: ENC_VALUE64},
            FMT_ERRNO: {4: ENC_VALUE32},
            FMT_PID: {4: ENC_VALUE32},
            FMT_TIME: {4: ENC_VALUE32, 8: ENC_VALUE64},
            FMT_BOOLEAN: {1: ENC_VALUE8, 2: ENC_VALUE16, 4: ENC_VALUE32},
            FMT_FLOAT: {4: ENC_VALUE32, 8: ENC_VALUE64},
            FMT_UUID: {16: ENC_VALUE128},
            FMT_PORT: {2: ENC_VALUE16},
            FMT_IP_ADDRESS: {4: ENC_VALUE32, 16: ENC_VALUE128},
            FMT_IP_ADDRESS_OBSOLETE: {4: ENC_VALUE32, 16: ENC_VALUE128},
        }
        sized = by_format.get(fmt, {})
        as_enc = sized.get(n)
        if as_enc is not None:
            return _json_value(as_enc, fmt, raw, order)
        if fmt == FMT_HEX_BYTES:
            return _hex_bytes(raw)
        if fmt == FMT_STRING8:
            return _q(_json_ucs(tuple(raw)))
        if fmt in (FMT_STRING_UTF_BOM, FMT_STRING_XML, FMT_STRING_JSON):
            bom = _json_bom(raw)
            if bom is not None:
                return bom
            return _q(_json_utf8(raw))
        if fmt == FMT_STRING_UTF:
            return _q(_json_utf8(raw))
        if enc == ENC_BINARY_LENGTH16_CHAR8:
            return _hex_bytes(raw)
        return _q(_json_utf8(raw))
    if fmt == FMT_HEX_BYTES:
        return _hex_bytes(raw)
    if fmt in (FMT_STRING_UTF_BOM, FMT_STRING_XML, FMT_STRING_JSON):
        bom = _json_bom(raw)
        if bom is not None:
            return bom
    if enc == ENC_ZSTRING_CHAR8:
        if fmt == FMT_STRING8:
            return _q(_json_ucs(tuple(raw)))
        return _q(_json_utf8(raw))
    if enc in (ENC_ZSTRING_CHAR16, ENC_STRING_LENGTH16_CHAR16):
        return _q(_json_utf16(raw, order))
    return _q(_json_ucs4(raw, order))


def _json_member(meta: _Meta, field_tags: bool) -> bytes:
    name = _json_utf8(meta.name)
    if field_tags and meta.tag:
        name += b";tag=0x%X" % meta.tag
    return _q(name) + b":"


def _json_item(item: _Item, order: str, field_tags: bool, named: bool) -> bytes:
    kind, meta, payload = item
    head = _json_member(meta, field_tags) if named else b""
    if kind == "v":
        return head + _json_value(meta.encoding, meta.format, payload, order)
    if kind == "s":
        return head + b"{" + b",".join(_json_item(i, order, field_tags, True) for i in payload) + b"}"
    return head + b"[" + b",".join(_json_item(e, order, field_tags, False) for e in payload) + b"]"


def perf_json_fields(event: DecodedEvent, *, field_tags: bool = True) -> str:
    """The event's fields as perf-decode writes them: ``"name":value,...`` (no braces).

    Strings that perf-decode would write as invalid UTF-8 (lone surrogates,
    code points past U+10FFFF) come back as ``surrogateescape`` characters:
    ``text.encode("utf-8", "surrogateescape")`` gives perf-decode's bytes.
    """
    p = _parse(event.raw)
    body = b",".join(_json_item(i, p.order, field_tags, True) for i in p.items)
    return body.decode("utf-8", "surrogateescape")


def perf_json(
    event: DecodedEvent,
    *,
    field_tags: bool = True,
    extra_meta: dict[str, str] | None = None,
) -> str:
    """One event as a perf-decode JSON object: ``{"n":"Provider:Event", fields..., "meta":{...}}``.

    ``extra_meta`` (e.g. ``time``, ``cpu``, ``pid``, ``tid`` from perf.data)
    is written first in ``meta``, as perf-decode does; its values are JSON
    texts (``{"cpu": "3", "time": '"2024-...Z"'}``).
    """
    p = _parse(event.raw)
    name_raw = p.name_raw.split(b";", 1)[0]
    n = _json_utf8(event.provider.encode("utf-8", "surrogateescape")) + b":" + _json_utf8(name_raw)
    parts = [b'"n":' + _q(n)]
    parts.extend(_json_item(i, p.order, field_tags, True) for i in p.items)
    meta: list[bytes] = []
    for key, value in (extra_meta or {}).items():
        meta.append(json.dumps(key).encode() + b":" + value.encode())
    if p.id:
        meta.append(b'"id":%d' % p.id)
    if p.version:
        meta.append(b'"version":%d' % p.version)
    if p.level:
        meta.append(b'"level":%d' % p.level)
    if event.keyword:
        meta.append(b'"keyword":"0x%X"' % event.keyword)
    if p.opcode:
        meta.append(b'"opcode":%d' % p.opcode)
    if p.tag:
        meta.append(b'"tag":"0x%X"' % p.tag)
    if p.activity is not None:
        meta.append(b'"activity":' + _q(_uuid_text(p.activity).encode()))
    if p.related is not None:
        meta.append(b'"relatedActivity":' + _q(_uuid_text(p.related).encode()))
    parts.append(b'"meta":{' + b",".join(meta) + b"}")
    return (b"{" + b",".join(parts) + b"}").decode("utf-8", "surrogateescape")
