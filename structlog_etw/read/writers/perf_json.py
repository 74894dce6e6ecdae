"""perf-decode's text of an EventHeader event: a :class:`~structlog_etw.read.decoded.DecodedEvent` ->
the JSON Microsoft's ``perf-decode`` writes for it, byte for byte.

The presentation half of the decoder (the decoder enumerates, this writer renders): it reads
only the :class:`~structlog_etw.read.decoded.DecodedEvent` - each field's wire encoding and format,
its value bytes (per element for arrays), the event's byte order and raw name - and never the
event bytes.  perf-decode's conventions: hex ints as ``"0xFF"``, errno values as
``"EPERM(1)"``, times as ``"2033-05-18T03:33:20"`` (or ``"TIME(n)"``), floats as C++
``std::to_chars`` prints them, binary as ``"01 02"``, UUIDs, IPv4/IPv6 text as ``inet_ntop``,
ports, booleans, strings with its lenient treatment of invalid UTF-8, arrays, structs and field
tags as ``"name;tag=0x12"``::

    from structlog_etw.write.eventheader import EventHeaderEncoder
    from structlog_etw.read.decode.eventheader import decode_event
    from structlog_etw.read.writers.perf_json import perf_json
    from structlog_etw.write.fields import to_fields

    data = EventHeaderEncoder().encode("cache", to_fields({"hits": [3, 4]}.items()), 5)
    assert perf_json(decode_event("MyCompany_MyService_L5K1", data)) == (
        '{"n":"MyCompany_MyService:cache","hits":[3,4],"meta":{"level":5,"keyword":"0x1"}}'
    )

Text that perf-decode writes as invalid UTF-8 (unpaired surrogates, code points past
U+10FFFF) comes back as ``surrogateescape`` characters: ``text.encode("utf-8",
"surrogateescape")`` gives perf-decode's exact bytes.
"""

from __future__ import annotations

import functools
import json
import math
import re
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ...formats.eventheader import (
    ENC_STRUCT,
    ENCODING_CARRAY,
    EXT_METADATA,
    FIXED_SIZE,
    FMT_STRING_JSON,
    FMT_STRING_UTF_BOM,
    FMT_STRING_XML,
    LENGTH16_UNIT,
    ZSTRING_UNIT,
    parse_tracepoint_name,
)
from .._text import errno_text, float_text, time_text, wallclock_text
from ..decode._eventheader_values import (
    BOMS,
    Kind,
    bool_value,
    bytes_decide_kind,
    int_of,
    struct_order,
    ucs4_code_points,
    utf16_text,
    value_kind,
)
from ..decode.eventheader import FieldMetadata, parse_metadata, read_extensions, split_event_name
from ..decoded import DecodedEvent, DecodedField, DecodeError

__all__ = [
    "EventPlan",
    "FieldStyle",
    "PlanCache",
    "Plans",
    "activity_text",
    "errno_text",
    "float_text",
    "json_string",
    "perf_json",
    "perf_json_fields",
    "time_text",
    "wallclock_text",
]


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


#: Bytes a JSON string escapes (perf-decode: C0 controls, ``"`` and ``\\``).
_NEEDS_ESCAPE: Final = re.compile(rb'[\x00-\x1f"\\]')


def _json_utf8(raw: bytes) -> bytes:
    """perf-decode's lenient UTF-8 copy: invalid sequences are read as Latin-1."""
    if _NEEDS_ESCAPE.search(raw) is None:  # the common case: nothing to escape ...
        if raw.isascii():
            return bytes(raw)
        try:
            raw.decode("utf-8")  # ... and valid UTF-8 (no surrogates, <= U+10FFFF): copied as it is
        except UnicodeDecodeError:
            pass
        else:
            return bytes(raw)
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
    """perf-decode's text of UTF-16: its code points as UTF-8 (unpaired surrogates too), escaped."""
    text = utf16_text(raw, order)
    try:
        utf8 = text.encode()  # valid UTF-8 of valid text: what _json_ucs writes, the fast way
    except UnicodeEncodeError:
        return _json_ucs([ord(c) for c in text])
    return _json_utf8(utf8)


def _json_ucs4(raw: bytes, order: str) -> bytes:
    """perf-decode's text of UTF-32: its values as UTF-8(-like) bytes (past U+10FFFF too), escaped."""
    n = len(raw) & ~3
    try:
        utf8 = raw[:n].decode("utf-32-le" if order == "<" else "utf-32-be").encode()
    except UnicodeError:  # surrogates, values past U+10FFFF: perf-decode's own encoding of them
        return _json_ucs(ucs4_code_points(raw, order))
    return _json_utf8(utf8)


def _q(text: bytes) -> bytes:
    return b'"' + text + b'"'


def json_string(text: str) -> str:
    """``text`` as a JSON string the way perf-decode writes one (quoted; ``"``, ``\\`` and control
    characters escaped; invalid UTF-8 kept as ``surrogateescape`` characters, read as Latin-1)."""
    return _q(_json_utf8(text.encode("utf-8", "surrogateescape"))).decode("utf-8", "surrogateescape")


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


def _num(value: int) -> bytes:
    return str(value).encode()


def _json_float(raw: bytes, order: str) -> bytes:
    single = len(raw) == 4
    value: float = struct.unpack(order + ("f" if single else "d"), raw)[0]
    text = float_text(value, single=single).encode()
    return text if math.isfinite(value) else _q(text)


def _json_bool(raw: bytes, order: str) -> bytes:
    u = int_of(raw, order, False)
    return b"false" if u == 0 else b"true" if u == 1 else _num(int(bool_value(u)))


#: kind -> perf-decode's JSON text of (bytes, byte order), as raw (UTF-8-ish) bytes.
_JSON: Final[dict[Kind, Callable[[bytes, str], bytes]]] = {
    Kind.UNSIGNED: lambda raw, order: _num(int_of(raw, order, False)),
    Kind.SIGNED: lambda raw, order: _num(int_of(raw, order, True)),
    Kind.HEX: lambda raw, order: _q(b"0x%X" % int_of(raw, order, False)),
    Kind.ERRNO: lambda raw, order: _q(errno_text(int_of(raw, order, False)).encode()),
    Kind.BOOL: _json_bool,
    Kind.FLOAT: _json_float,
    Kind.TIME: lambda raw, order: _q(time_text(int_of(raw, order, True)).encode()),
    Kind.CHAR: lambda raw, order: _q(_json_ucs((int_of(raw, order, False),))),
    Kind.PORT: lambda raw, order: _num(int.from_bytes(raw, "big")),
    Kind.IPV4: lambda raw, order: _q(".".join(str(b) for b in raw).encode()),
    Kind.IPV6: lambda raw, order: _q(_ipv6_text(raw).encode()),
    Kind.UUID: lambda raw, order: _q(str(uuid.UUID(bytes=bytes(raw))).encode()),
    Kind.BYTES: lambda raw, order: _hex_bytes(raw),
    Kind.NULL: lambda raw, order: b"null",
    Kind.LATIN1: lambda raw, order: _q(_json_utf8(raw.decode("latin-1").encode())),
    Kind.UTF8: lambda raw, order: _q(_json_utf8(raw)),
    Kind.UTF16: lambda raw, order: _q(_json_utf16(raw, order)),
    Kind.UCS4: lambda raw, order: _q(_json_ucs4(raw, order)),
}


def _json_value(encoding: int, fmt: int, raw: bytes, order: str) -> bytes:
    """One value as perf-decode writes it in JSON (raw UTF-8-ish bytes)."""
    kind, raw, order = value_kind(encoding, fmt, raw, order)
    return _JSON[kind](raw, order)


def _json_member(f: DecodedField, field_tags: bool) -> bytes:
    name = _json_utf8(f.name.encode("utf-8", "surrogateescape"))
    if field_tags and f.tag:
        name += b";tag=0x%X" % f.tag
    return _q(name) + b":"


def _json_fields(fields: Iterable[DecodedField], order: str, field_tags: bool) -> bytes:
    return b",".join(_json_member(f, field_tags) + _json_field(f, order, field_tags) for f in fields)


def _json_field(f: DecodedField, order: str, field_tags: bool) -> bytes:
    """A field's value: a struct as ``{...}``, an array as ``[...]``, else the value."""
    if f.is_struct:
        if f.is_array:
            return b"[" + b",".join(b"{" + _json_fields(e, order, field_tags) + b"}" for e in f.value) + b"]"
        return b"{" + _json_fields(f.value, order, field_tags) + b"}"
    if f.is_array:
        return b"[" + b",".join(_json_value(f.encoding, f.format, r, order) for r in f.raw_elements) + b"]"
    return _json_value(f.encoding, f.format, f.raw, order)


def _order_of(event: DecodedEvent) -> str:
    if event.format != "eventheader":
        raise ValueError(
            f"perf-decode's text is for EventHeader events, not {event.format or 'unknown'!r} ones"
        )
    return struct_order(event.byte_order)


def perf_json_fields(event: DecodedEvent, *, field_tags: bool = True) -> str:
    """The event's fields as perf-decode writes them: ``"name":value,...`` (no braces).

    ``event`` is an EventHeader :class:`~structlog_etw.read.decoded.DecodedEvent` (others raise
    :class:`ValueError`).  Strings that perf-decode would write as invalid UTF-8 (lone
    surrogates, code points past U+10FFFF) come back as ``surrogateescape`` characters:
    ``text.encode("utf-8", "surrogateescape")`` gives perf-decode's bytes.
    """
    body = _json_fields(event.field_list, _order_of(event), field_tags)
    return body.decode("utf-8", "surrogateescape")


def perf_json(
    event: DecodedEvent,
    *,
    field_tags: bool = True,
    extra_meta: dict[str, str] | None = None,
) -> str:
    """One event as a perf-decode JSON object: ``{"n":"Provider:Event", fields..., "meta":{...}}``.

    ``event`` is an EventHeader :class:`~structlog_etw.read.decoded.DecodedEvent` (others raise
    :class:`ValueError`).  ``extra_meta`` (e.g. ``time``, ``cpu``, ``pid``, ``tid`` from
    perf.data) is written first in ``meta``, as perf-decode does; its values are JSON texts
    (``{"cpu": "3", "time": '"2024-...Z"'}``).
    """
    order = _order_of(event)
    name = event.raw_name.split(b";", 1)[0]
    n = _json_utf8(event.provider.encode("utf-8", "surrogateescape")) + b":" + _json_utf8(name)
    parts = [b'"n":' + _q(n)]
    if event.field_list:
        parts.append(_json_fields(event.field_list, order, field_tags))
    meta: list[bytes] = []
    for key, value in (extra_meta or {}).items():
        meta.append(json.dumps(key).encode() + b":" + value.encode())
    numbers = (
        (b"id", event.id, b"%d"),
        (b"version", event.version, b"%d"),
        (b"level", event.level, b"%d"),
        (b"keyword", event.keyword, b'"0x%X"'),
        (b"opcode", event.opcode, b"%d"),
        (b"tag", event.tag, b'"0x%X"'),
    )
    meta.extend(_q(key) + b":" + text % value for key, value, text in numbers if value)
    ids = ((b"activity", event.activity_id), (b"relatedActivity", event.related_id))
    meta.extend(_q(key) + b":" + _q(str(value).encode()) for key, value in ids if value is not None)
    parts.append(b'"meta":{' + b",".join(meta) + b"}")
    return (b"{" + b",".join(parts) + b"}").decode("utf-8", "surrogateescape")


# --- compiled plans -----------------------------------------------------------------------------
#
# decode_event parses the metadata of every event and builds a DecodedEvent; a capture repeats the
# same few metadata blocks thousands of times.  Plans parses each distinct (tracepoint, header,
# metadata) once into an EventPlan: provider, name, attributes, the header's numbers, perf-decode's
# text of the constant parts, and the fields as one %-template with a list of readers.  Each reader
# takes the payload bytes and a position, appends the values its part of the template takes to a
# list and returns where its part ended: a run of fixed-size fields is one unpack (integers go into
# the template as numbers, other fixed-size values through their writer, the same functions as
# perf_json's), a struct's members are its own readers (flattened into the event's template), a
# string or an array is one text.  So an event is a few unpacks and one % of its template.  A plan
# reads only well-formed events: anything else raises (or gives None in Plans.fields) and the
# caller decodes the event the ordinary way, which reports the error.  The cache is bounded by the
# bytes of its keys.

_T = TypeVar("_T")

#: Bytes of cache keys (tracepoint names and metadata) the plans may hold.
_CACHE_BYTES: Final = 16 << 20

#: A value reader: (event bytes, position) -> (perf-decode's JSON text of the value, next position).
Reader = Callable[[bytes, int], tuple[bytes, int]]
#: A field reader: (event bytes, position, the template's values so far) -> next position; it
#: appends the values its part of the template takes (numbers for ``%d``/``%X``, texts for ``%s``).
FieldReader = Callable[[bytes, int, list[object]], int]

#: Texts of fixed-size values each writer keeps (values repeat: errno, times, addresses, floats).
_VALUES_KEPT: Final = 512


class _Bad(Exception):
    """The event is not what its plan reads (truncated payload): decode it the ordinary way."""


def _bind(text: Callable[[bytes, str], bytes], order: str) -> Callable[[bytes], bytes]:
    """``raw -> text(raw, order)`` without a Python frame of its own (every writer's ``order``)."""
    return functools.partial(text, order=order)  # type: ignore[call-arg]


def _utf8_value(raw: bytes) -> bytes:
    """:data:`_JSON`'s text of UTF-8 text (one call: the common case of a plan's strings)."""
    if raw.isascii() and _NEEDS_ESCAPE.search(raw) is None:
        return b'"' + raw + b'"'
    return _q(_json_utf8(raw))


def _wide_value(unit: int, order: str) -> Callable[[bytes], bytes]:
    """:data:`_JSON`'s text of UTF-16 (``unit`` 2) or UTF-32 (4) text in byte order ``order``:
    text that decodes to ASCII needing no escapes in one call, the rest as :data:`_JSON`."""
    codec = ("utf-16" if unit == 2 else "utf-32") + ("-le" if order == "<" else "-be")
    errors = "surrogatepass" if unit == 2 else "strict"
    mask = ~(unit - 1)
    kind = Kind.UTF16 if unit == 2 else Kind.UCS4
    slow = _bind(_JSON[kind], order)

    def wide(raw: bytes) -> bytes:
        try:
            text = raw[: len(raw) & mask].decode(codec, errors)
        except UnicodeDecodeError:
            return slow(raw)
        if text.isascii():
            ascii_text = text.encode()
            if _NEEDS_ESCAPE.search(ascii_text) is None:
                return b'"' + ascii_text + b'"'
        return slow(raw)

    return wide


#: Writers of kinds whose text does not depend on the byte order: one call, no partial.
_ORDERLESS: Final[dict[Kind, Callable[[bytes], bytes]]] = {Kind.UTF8: _utf8_value, Kind.BYTES: _hex_bytes}
#: Writers of UTF-16 and UTF-32 text in each byte order.
_WIDE: Final[dict[tuple[Kind, str], Callable[[bytes], bytes]]] = {
    (kind, order): _wide_value(unit, order)
    for kind, unit in ((Kind.UTF16, 2), (Kind.UCS4, 4))
    for order in "<>"
}


def _writer(kind: Kind, order: str) -> Callable[[bytes], bytes]:
    """``raw -> _JSON[kind](raw, order)``."""
    return _ORDERLESS.get(kind) or _WIDE.get((kind, order)) or _bind(_JSON[kind], order)


#: The formats whose text a byte-order mark decides.
_BOM_FORMATS: Final = frozenset({FMT_STRING_UTF_BOM, FMT_STRING_XML, FMT_STRING_JSON})
#: The first bytes of the byte-order marks (:data:`~structlog_etw.read.decode._eventheader_values.BOMS`).
_BOM_STARTS: Final = frozenset(mark[:1] for mark, _kind, _order in BOMS)
#: Value lengths whose writer a counted value's writer keeps.
_LENGTHS_KEPT: Final = 64


def _esc(text: bytes) -> bytes:
    """``text`` as a constant part of a ``%`` template."""
    return text.replace(b"%", b"%%")


class FieldStyle:
    """How a plan writes values, names and containers (default: perf-decode's JSON).

    A subclass writes another text from the same readers (the CLI's console text): every
    method returns UTF-8 bytes and is called once per field when a plan is compiled, never
    per event.
    """

    #: Between fields (top level, inside structs), array elements; struct and array brackets.
    top_sep = b","
    struct_sep = b","
    array_sep = b","
    struct_open, struct_close = b"{", b"}"
    array_open, array_close = b"[", b"]"

    def __init__(self, *, field_tags: bool = True) -> None:
        self.field_tags = field_tags
        self._fixed: dict[tuple[int, int, str], Callable[[bytes], bytes]] = {}

    def fixed(self, encoding: int, fmt: int, order: str) -> Callable[[bytes], bytes]:
        """The writer of a fixed-size value's bytes (its kind follows from the types alone)."""
        return _writer(value_kind(encoding, fmt, b"", order)[0], order)

    def kept_fixed(self, encoding: int, fmt: int, order: str) -> Callable[[bytes], bytes]:
        """:meth:`fixed`, keeping the texts of the last values it wrote (a bounded memo per
        encoding, format and byte order, shared by every plan of this style)."""
        key = (encoding, fmt, order)
        found = self._fixed.get(key)
        if found is None:
            found = self._fixed[key] = _kept(self.fixed(encoding, fmt, order))
        return found

    def varying(self, encoding: int, fmt: int, order: str) -> Callable[[bytes], bytes]:
        """The writer of a string or binary value's bytes (its kind may depend on them)."""
        if not bytes_decide_kind(encoding, fmt):
            return _writer(value_kind(encoding, fmt, b"", order)[0], order)
        if fmt in _BOM_FORMATS:  # the text after a mark in the mark's kind, else the encoding's
            plain = _writer(value_kind(encoding, fmt, b"", order)[0], order)
            marks = [(mark, len(mark), _writer(kind, bom_order)) for mark, kind, bom_order in BOMS]

            def marked(raw: bytes) -> bytes:
                if raw[:1] in _BOM_STARTS:
                    for mark, size, write in marks:
                        if raw.startswith(mark):
                            return write(raw[size:])
                return plain(raw)

            return marked
        # A counted value read as a number by its length: the kind depends on the length alone.
        by_length: dict[int, Callable[[bytes], bytes]] = {}

        def counted(raw: bytes) -> bytes:
            write = by_length.get(len(raw))
            if write is None:
                write = _writer(value_kind(encoding, fmt, raw, order)[0], order)
                if len(by_length) >= _LENGTHS_KEPT:
                    by_length.clear()
                by_length[len(raw)] = write
            return write(raw)

        return counted

    def number(self, encoding: int, fmt: int, order: str) -> tuple[str, bytes] | None:
        """A fixed-size integer's :mod:`struct` code and ``%``-template of its text, when its text
        is one (``b"%d"``); a plan reads a run of such fields with one unpack.  None: use
        :meth:`fixed`."""
        code = _NUMBER_CODES.get(FIXED_SIZE.get(encoding, 0))
        if code is None:
            return None
        kind = value_kind(encoding, fmt, b"", order)[0]
        if kind is Kind.UNSIGNED:
            return code, b"%d"
        if kind is Kind.SIGNED:
            return code.lower(), b"%d"
        if kind is Kind.HEX:
            return code, b'"0x%X"'
        return None

    def member(self, meta: FieldMetadata, top: bool) -> tuple[bytes, bytes]:
        """What comes before and after a field's value (``"name":``)."""
        name = _json_utf8(meta.name)
        if self.field_tags and meta.tag:
            name += b";tag=0x%X" % meta.tag
        return _q(name) + b":", b""


class _Kept(dict[bytes, bytes]):
    """The texts ``write`` gave for the last :data:`_VALUES_KEPT` distinct values, by value: a
    value seen is one look-up in C (``kept[raw]``), a new one is written by ``__missing__``."""

    __slots__ = ("write",)

    def __init__(self, write: Callable[[bytes], bytes]) -> None:
        super().__init__()
        self.write = write

    def __missing__(self, raw: bytes) -> bytes:
        found = self.write(raw)
        if len(self) >= _VALUES_KEPT:
            self.clear()
        self[raw] = found
        return found


def _kept(write: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """``write`` with the texts of the last :data:`_VALUES_KEPT` distinct values kept."""
    return _Kept(write).__getitem__


def _scalar(meta: FieldMetadata, order: str, style: FieldStyle) -> Reader:
    """The reader of one value (not an array) of ``meta``'s encoding."""
    enc, fmt = meta.encoding, meta.format
    size = FIXED_SIZE.get(enc)
    if size is not None:
        text = style.kept_fixed(enc, fmt, order)

        def fixed(buf: bytes, pos: int) -> tuple[bytes, int]:
            end = pos + size
            if end > len(buf):
                raise _Bad
            return text(buf[pos:end]), end

        return fixed
    write = style.varying(enc, fmt, order)
    unit = ZSTRING_UNIT.get(enc)
    if unit == 1:

        def zstring8(buf: bytes, pos: int) -> tuple[bytes, int]:
            end = buf.find(b"\0", pos)
            if end < 0:
                raise _Bad
            return write(buf[pos:end]), end + 1

        return zstring8
    if unit is not None:
        zero = b"\0" * unit

        def zstring(buf: bytes, pos: int) -> tuple[bytes, int]:
            end = buf.find(zero, pos)  # the first aligned run of `unit` zero bytes
            while end >= 0 and (end - pos) % unit:
                end = buf.find(zero, end + 1)
            if end < 0:
                raise _Bad
            return write(buf[pos:end]), end + unit

        return zstring
    length_unit = LENGTH16_UNIT[enc]
    u16 = struct.Struct(order + "H").unpack_from

    def counted(buf: bytes, pos: int) -> tuple[bytes, int]:
        if pos + 2 > len(buf):
            raise _Bad
        end = pos + 2 + u16(buf, pos)[0] * length_unit
        if end > len(buf):
            raise _Bad
        return write(buf[pos + 2 : end]), end

    return counted


def _appending(meta: FieldMetadata, order: str, style: FieldStyle) -> FieldReader:
    """The field reader of one string or binary value (its text: one ``%s``)."""
    enc, fmt = meta.encoding, meta.format
    write = style.varying(enc, fmt, order)
    unit = ZSTRING_UNIT.get(enc)
    if unit == 1:

        def zstring8(buf: bytes, pos: int, out: list[object]) -> int:
            end = buf.find(b"\0", pos)
            if end < 0:
                raise _Bad
            out.append(write(buf[pos:end]))
            return end + 1

        return zstring8
    if unit is None:
        length_unit = LENGTH16_UNIT[enc]
        u16 = struct.Struct(order + "H").unpack_from

        def counted(buf: bytes, pos: int, out: list[object]) -> int:
            start = pos + 2
            end: int = start + u16(buf, pos)[0] * length_unit  # struct.error past the end
            if end > len(buf):
                raise _Bad
            out.append(write(buf[start:end]))
            return end

        return counted
    zero = b"\0" * unit

    def zstring(buf: bytes, pos: int, out: list[object]) -> int:
        end = buf.find(zero, pos)  # the first aligned run of `unit` zero bytes
        while end >= 0 and (end - pos) % unit:
            end = buf.find(zero, end + 1)
        if end < 0:
            raise _Bad
        out.append(write(buf[pos:end]))
        return end + unit

    return zstring


#: struct codes of the unsigned integers of each size (the signed ones: lower case).
_NUMBER_CODES: Final = {1: "B", 2: "H", 4: "I", 8: "Q"}
#: Array lengths whose unpack and template an array reader keeps.
_ARRAYS_KEPT: Final = 64


def _run(codes: list[str], writers: list[tuple[int, Callable[[bytes], bytes]]], order: str) -> FieldReader:
    """The reader of a run of fixed-size fields: one unpack; the values that are not numbers of
    the template (``writers``: their index in the run and writer) replaced by their text."""
    unpack = struct.Struct(order + "".join(codes))
    size = unpack.size
    read = unpack.unpack_from
    if not writers:

        def numbers(buf: bytes, pos: int, out: list[object]) -> int:
            out += read(buf, pos)  # struct.error when the payload is too short
            return pos + size

        return numbers
    if len(writers) == 1:
        at, write = writers[0]

        def one(buf: bytes, pos: int, out: list[object]) -> int:
            values = read(buf, pos)
            out += values
            out[at - len(values)] = write(values[at])
            return pos + size

        return one

    def run(buf: bytes, pos: int, out: list[object]) -> int:
        values = read(buf, pos)
        base = len(out)
        out += values
        for i, write in writers:
            out[base + i] = write(values[i])
        return pos + size

    return run


def _fields(
    metas: list[FieldMetadata], order: str, style: FieldStyle, top: bool
) -> tuple[bytes, list[FieldReader]]:
    """The template and readers of a list of fields (``"name":value,...``, no braces).
    Consecutive fixed-size fields are read with one unpack; a struct's members are read by
    their own readers into the same template."""
    sep = style.top_sep if top else style.struct_sep
    pieces: list[bytes] = []
    readers: list[FieldReader] = []
    codes: list[str] = []
    writers: list[tuple[int, Callable[[bytes], bytes]]] = []

    def end_run() -> None:
        if codes:
            readers.append(_run(codes[:], writers[:], order))
            codes.clear()
            writers.clear()

    for m in metas:
        before, after = style.member(m, top)
        before, after = _esc(before), _esc(after)
        enc = m.encoding
        if enc == ENC_STRUCT and not m.array:
            template, members = _fields(m.children, order, style, False)
            end_run()
            readers += members
            pieces.append(before + _esc(style.struct_open) + template + _esc(style.struct_close) + after)
            continue
        size = FIXED_SIZE.get(enc)
        if size is not None and not m.array:
            number = style.number(enc, m.format, order)
            if number is not None:
                codes.append(number[0])
                pieces.append(before + number[1] + after)
            else:
                writers.append((len(codes), style.kept_fixed(enc, m.format, order)))
                codes.append(f"{size}s")
                pieces.append(before + b"%s" + after)
            continue
        end_run()
        readers.append(_field(m, order, style))
        pieces.append(before + b"%s" + after)
    end_run()
    return _esc(sep).join(pieces), readers


def _texts(template: bytes, readers: list[FieldReader]) -> Reader:
    """``(buf, pos) -> (template filled by the readers, next position)``."""

    def texts(buf: bytes, pos: int) -> tuple[bytes, int]:
        out: list[object] = []
        for read in readers:
            pos = read(buf, pos, out)
        return template % tuple(out), pos

    return texts


def _field(meta: FieldMetadata, order: str, style: FieldStyle) -> FieldReader:
    """The field reader of a string, binary value or array: one text."""
    if not meta.array:
        return _appending(meta, order, style)
    if meta.encoding == ENC_STRUCT:
        template, members = _fields(meta.children, order, style, False)
        element = _texts(_esc(style.struct_open) + template + _esc(style.struct_close), members)
    else:
        element = _scalar(meta, order, style)
    count = meta.count if meta.array == ENCODING_CARRAY else None
    element_min = meta.element_min
    u16 = struct.Struct(order + "H").unpack_from
    aopen, asep, aclose = style.array_open, style.array_sep, style.array_close

    def length(buf: bytes, pos: int) -> tuple[int, int]:
        """The array's element count (its own, or the u16 before the elements) and where they start."""
        if count is not None:
            return count, pos
        if pos + 2 > len(buf):
            raise _Bad
        return u16(buf, pos)[0], pos + 2

    number = None if meta.encoding == ENC_STRUCT else style.number(meta.encoding, meta.format, order)
    if number is not None:  # n integers: one unpack, one template (kept per length)
        code, piece = number
        size = FIXED_SIZE[meta.encoding]
        kept: dict[int, tuple[Callable[[bytes, int], tuple[int, ...]], bytes]] = {}
        sep = _esc(asep)
        aopen_t, aclose_t = _esc(aopen), _esc(aclose)

        def numbers(buf: bytes, pos: int, out: list[object]) -> int:
            n, pos = length(buf, pos)
            end = pos + n * size
            if end > len(buf):
                raise _Bad
            found = kept.get(n)
            if found is None:
                if len(kept) >= _ARRAYS_KEPT:
                    kept.clear()
                found = kept[n] = (
                    struct.Struct(f"{order}{n}{code}").unpack_from,
                    aopen_t + sep.join([piece] * n) + aclose_t,
                )
            out.append(found[1] % found[0](buf, pos))
            return end

        return numbers
    fixed_size = FIXED_SIZE.get(meta.encoding) if meta.encoding != ENC_STRUCT else None
    if fixed_size is not None:  # n fixed-size values: each one's bytes through its writer
        write = style.kept_fixed(meta.encoding, meta.format, order)

        def values(buf: bytes, pos: int, out: list[object]) -> int:
            n, pos = length(buf, pos)
            end = pos + n * fixed_size
            if end > len(buf):
                raise _Bad
            texts = [write(buf[p : p + fixed_size]) for p in range(pos, end, fixed_size)]
            out.append(aopen + asep.join(texts) + aclose)
            return end

        return values

    def array(buf: bytes, pos: int, out: list[object]) -> int:
        n, pos = length(buf, pos)
        if len(buf) - pos < n * element_min:
            raise _Bad
        parts = []
        for _ in range(n):
            text, pos = element(buf, pos)
            parts.append(text)
        out.append(aopen + asep.join(parts) + aclose)
        return pos

    return array


@dataclass(frozen=True, slots=True, eq=False)
class EventPlan:
    """How to write one kind of event (a tracepoint, a header, a metadata block).

    ``provider``, ``name``, ``level``, ``keyword``, ``attributes`` as
    :class:`~structlog_etw.read.decoded.DecodedEvent` has them; ``n`` perf-decode's ``"n"`` value text
    (``"Provider:Event"``, quoted); ``header_meta`` its ``meta`` members of the header's numbers
    (``"id":..,"level":..``, without activities).  The fields' text (``"name":value,...``) is
    ``template % tuple(values)`` where each of ``readers`` in turn takes ``(data, pos, values)``,
    appends its values and returns the next position (``read_fields(data, pos)`` does that: the
    text and where the payload ended).  ``run``: when the fields are one run of fixed-size
    values, that run's unpack and the writers of its values that are not numbers (index in the
    run, writer), so that a caller can fill a larger template with them; else None.
    """

    provider: str
    name: str
    level: int
    keyword: int
    opcode: int
    tag: int
    id: int
    version: int
    attributes: dict[str, str]
    n: bytes
    header_meta: bytes
    read_fields: Callable[[bytes, int], tuple[bytes, int]]
    has_fields: bool
    template: bytes = b""
    readers: tuple[FieldReader, ...] = ()


class Plans:
    """The :class:`EventPlan` of every (tracepoint name, header, metadata) seen, compiled once.

    ``style`` writes the fields (default :class:`FieldStyle`: perf-decode's JSON, field names
    with their ``;tag=0x..`` suffix unless ``field_tags`` is false).  :meth:`fields` reads one
    event.
    """

    def __init__(self, *, field_tags: bool = True, style: FieldStyle | None = None) -> None:
        self.style = style if style is not None else FieldStyle(field_tags=field_tags)
        self._plans: dict[tuple[str, bytes, bytes], EventPlan | None] = {}
        self._bytes = 0
        #: Every cache that counts its keys' bytes in ``_bytes``: this one's and its PlanCaches'.
        self._caches: list[dict[Any, Any]] = [self._plans]

    def _spend(self, cost: int) -> None:
        """Count ``cost`` bytes of a new key; past :data:`_CACHE_BYTES` every cache is emptied."""
        if self._bytes + cost > _CACHE_BYTES:
            for kept in self._caches:
                kept.clear()
            self._bytes = 0
        self._bytes += cost

    def compile(self, tracepoint_name: str, head: bytes, metadata: bytes, order: str) -> EventPlan | None:
        """The plan of events of this tracepoint, header (the first 8 bytes) and metadata in
        byte order ``order`` (None: such events are not well-formed; the ordinary decoder says why)."""
        try:
            provider, level, keyword, _options = parse_tracepoint_name(tracepoint_name)
            raw_name, metas = parse_metadata(metadata, order)
        except DecodeError:
            return None
        version = head[1]
        eid, tag, opcode, hlevel = struct.unpack_from(order + "HHBB", head, 2)
        if hlevel != level:
            return None
        name, attrs = split_event_name(raw_name)
        n = _q(
            _json_utf8(provider.encode("utf-8", "surrogateescape"))
            + b":"
            + _json_utf8(raw_name.split(b";", 1)[0])
        )
        numbers = (
            (b"id", eid, b"%d"),
            (b"version", version, b"%d"),
            (b"level", level, b"%d"),
            (b"keyword", keyword, b'"0x%X"'),
            (b"opcode", opcode, b"%d"),
            (b"tag", tag, b'"0x%X"'),
        )
        header_meta = b",".join(_q(key) + b":" + text % value for key, value, text in numbers if value)
        template, readers = _fields(metas, order, self.style, True)
        return EventPlan(
            provider,
            name,
            level,
            keyword,
            opcode,
            tag,
            eid,
            version,
            attrs,
            n,
            header_meta,
            _texts(template, readers),
            bool(metas),
            template,
            tuple(readers),
        )

    def plan(
        self, tracepoint_name: str, data: bytes
    ) -> tuple[EventPlan, int, bytes | None, bytes | None] | None:
        """``(plan, payload position, activity id, related id)`` of the event ``data``, or None
        when the event is not well-formed (decode it the ordinary way to learn why)."""
        try:
            order, metadata, pos, activity, related = read_extensions(data)
        except DecodeError:
            return None
        key = (tracepoint_name, data[:8], metadata)
        plan = self._plans.get(key, self)
        if plan is self:
            plan = self.compile(tracepoint_name, data[:8], metadata, order)
            self._spend(len(tracepoint_name) + len(metadata) + 200)
            self._plans[key] = plan
        if plan is None:
            return None
        assert isinstance(plan, EventPlan)
        return plan, pos, activity, related

    @staticmethod
    def fields(plan: EventPlan, data: bytes, pos: int) -> bytes | None:
        """The event's fields as perf-decode's text (``"name":value,...``), or None when the payload
        is not what the metadata says (decode it the ordinary way to learn why)."""
        try:
            return plan.read_fields(data, pos)[0]
        except (_Bad, struct.error, ValueError, OverflowError, IndexError):
            return None


#: The extension header (size, kind) of a little-endian event; the kind of a metadata extension.
_EXT_LE: Final = struct.Struct("<HH").unpack_from
_METADATA_KIND: Final = int(EXT_METADATA)


class PlanCache(Generic[_T]):
    """What a caller keeps per plan (``decide(plan)``; None: such events take the ordinary path)
    for the events of one EventHeader tracepoint, found by the bytes of an event's header and
    metadata - the plan's key - and compiled once per distinct key (bounded with its
    :class:`Plans`' other caches by the bytes of their keys)."""

    def __init__(self, plans: Plans, tracepoint_name: str, decide: Callable[[EventPlan], _T | None]) -> None:
        self._plans = plans
        self._name = tracepoint_name
        self._decide = decide
        self._kept: dict[object, _T | None] = {}
        plans._caches.append(self._kept)

    def _add(self, key: object, head: bytes, metadata: bytes, order: str) -> _T | None:
        plan = self._plans.compile(self._name, head, metadata, order)
        kept = None if plan is None else self._decide(plan)
        self._plans._spend(len(metadata) + 200)
        self._kept[key] = kept
        return kept

    def find(self, data: bytes) -> tuple[_T, int, bytes | None, bytes | None] | None:
        """``(what is kept for the plan, payload position, activity id, related id)`` of the
        event ``data``, or None when it is not well-formed or its plan decided None."""
        if len(data) >= 12 and data[0] | 1 == 7:  # little-endian, extensions (pointer size either)
            size, kind = _EXT_LE(data, 8)
            if kind == _METADATA_KIND:  # the metadata extension alone (no activity ids): the key is
                pos = 12 + size  # the event's bytes up to the payload
                if pos > len(data):
                    return None
                key: object = data[:pos]
                kept = self._kept.get(key, self)
                if kept is self:
                    kept = self._add(key, data[:8], data[12:pos], "<")
                return None if kept is None else (kept, pos, None, None)  # type: ignore[return-value]
        try:
            order, metadata, pos, activity, related = read_extensions(data)
        except DecodeError:
            return None
        key = (data[:8], metadata)
        kept = self._kept.get(key, self)
        if kept is self:
            kept = self._add(key, data[:8], metadata, order)
        return None if kept is None else (kept, pos, activity, related)  # type: ignore[return-value]


def activity_text(raw: bytes) -> bytes:
    """An activity id's text as perf-decode writes it (quoted)."""
    return b'"' + str(uuid.UUID(bytes=raw)).encode() + b'"'
