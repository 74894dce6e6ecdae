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

    from structlog_etw.read.decode.eventheader import decode_event
    from structlog_etw.read.writers.perf_json import perf_json
    from structlog_etw.write.eventheader import EventHeaderEncoder
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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, Literal

from ...formats._tracefs import ARRAY_NONE, FMT_HEX, FMT_NONE, FMT_SIGNED, FMT_STRING
from .._text import errno_text, float_text, time_text, uuid_text, wallclock_text
from .._text import template_literal as esc
from ..decode._eventheader_plans import EventPlan, FieldStyle, integer_code
from ..decode._eventheader_values import (
    Kind,
    bool_value,
    int_of,
    struct_order,
    ucs4_code_points,
    utf16_text,
    value_kind,
)
from ..decode.eventheader import FieldMetadata
from ..decoded import DecodedEvent, DecodedField
from ._lines import NS, Accepts, Lines, PlainLayout, PlanLine, Render, plain_layout, utf8

if TYPE_CHECKING:
    from ..sample import PerfField, PerfFormat, PerfSample

__all__ = [
    "PerfJsonLines",
    "PerfJsonStyle",
    "activity_text",
    "errno_text",
    "float_text",
    "json_string",
    "perf_json",
    "perf_json_fields",
    "sample_line",
    "sample_time_text",
    "time_text",
    "tracefs_perf_json_head",
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
    Kind.UUID: lambda raw, order: _q(uuid_text(raw).encode()),
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


def _n_text(provider: str, raw_name: bytes) -> bytes:
    """perf-decode's ``"n"`` value of an event (``"Provider:Event"``, quoted; attributes cut)."""
    name = (
        _json_utf8(provider.encode("utf-8", "surrogateescape"))
        + b":"
        + _json_utf8(raw_name.split(b";", 1)[0])
    )
    return _q(name)


def _header_meta(eid: int, version: int, level: int, keyword: int, opcode: int, tag: int) -> bytes:
    """perf-decode's ``meta`` members of the header's numbers (``"id":..,"level":..``; 0 left out)."""
    numbers = (
        (b"id", eid, b"%d"),
        (b"version", version, b"%d"),
        (b"level", level, b"%d"),
        (b"keyword", keyword, b'"0x%X"'),
        (b"opcode", opcode, b"%d"),
        (b"tag", tag, b'"0x%X"'),
    )
    return b",".join(_q(key) + b":" + text % value for key, value, text in numbers if value)


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
    parts = [b'"n":' + _n_text(event.provider, event.raw_name)]
    if event.field_list:
        parts.append(_json_fields(event.field_list, order, field_tags))
    meta: list[bytes] = []
    for key, value in (extra_meta or {}).items():
        meta.append(json.dumps(key).encode() + b":" + value.encode())
    header = _header_meta(event.id, event.version, event.level, event.keyword, event.opcode, event.tag)
    if header:
        meta.append(header)
    ids = ((b"activity", event.activity_id), (b"relatedActivity", event.related_id))
    meta.extend(_q(key) + b":" + _q(str(value).encode()) for key, value in ids if value is not None)
    parts.append(b'"meta":{' + b",".join(meta) + b"}")
    return (b"{" + b",".join(parts) + b"}").decode("utf-8", "surrogateescape")


# --- the fast plan ----------------------------------------------------------------------------
#
# The same text for a tracepoint's samples without a DecodedEvent: EventHeader events through the
# decoder's compiled plans (read/decode/_eventheader_plans.py) in PerfJsonStyle, plain tracepoints
# by one unpack per format (PerfJsonLines._plain_lines); what a plan does not read is written the
# ordinary way (PerfJsonLines.event_line).


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


class PerfJsonStyle(FieldStyle):
    """perf-decode's JSON of EventHeader fields, for the compiled plans: :data:`_JSON`'s value
    texts, hex and other integers as template numbers, ``"name;tag=0x.."`` member names
    (without the tag unless ``field_tags``)."""

    def __init__(self, *, field_tags: bool = True) -> None:
        super().__init__()
        self.field_tags = field_tags

    def kind_writer(self, kind: Kind, order: str) -> Callable[[bytes], bytes]:
        """``raw -> _JSON[kind](raw, order)``."""
        return _writer(kind, order)

    def number(self, encoding: int, fmt: int, order: str) -> tuple[str, bytes] | None:
        """Unsigned and signed integers as ``%d``, hex ones as ``"0x%X"``."""
        found = integer_code(encoding, fmt, order)
        if found is None:
            return None
        code, kind = found
        return code, b'"0x%X"' if kind is Kind.HEX else b"%d"

    def member(self, meta: FieldMetadata, top: bool) -> tuple[bytes, bytes]:
        """``"name":`` (``"name;tag=0x12":`` with ``field_tags``)."""
        name = _json_utf8(meta.name)
        if self.field_tags and meta.tag:
            name += b";tag=0x%X" % meta.tag
        return _q(name) + b":", b""


class PerfJsonLines(Lines):
    """``decode --perf-json``: perf-decode's object per sample, from plans (``read.writers._lines``)."""

    def __init__(self, accepts: Accepts, colors: bool = False) -> None:
        super().__init__(PerfJsonStyle(field_tags=True), accepts)

    def event_line(self, sample: PerfSample, event: DecodedEvent) -> str:
        """:func:`sample_line`."""
        return sample_line(sample, event)

    def _plan_line(self, fmt: PerfFormat, plan: EventPlan) -> PlanLine:
        """The fields by the plan's readers into the line's template; ``other``: the template
        with the sample's meta as one text (some of time, cpu, pid, tid missing, or activity ids)."""
        start = b'{"n":' + esc(_n_text(plan.provider, plan.raw_name))
        start += b"," + plan.template if plan.has_fields else b""
        header_meta = _header_meta(plan.id, plan.version, plan.level, plan.keyword, plan.opcode, plan.tag)
        with_header = b"," + esc(header_meta) if header_meta else b""
        whole = start + b',"meta":{"time":"%s.%09dZ","cpu":%d,"pid":%d,"tid":%d' + with_header + b"}}"
        other = start + b',"meta":{%s}}'
        readers = plan.readers
        seconds = self.seconds

        def perf_json_line(s: PerfSample, pos: int, activity: bytes | None, related: bytes | None) -> bytes:
            data = s.data
            out: list[object] = []
            for read in readers:
                pos = read(data, pos, out)
            real, cpu, pid, tid = s.realtime_ns, s.cpu, s.pid, s.tid
            if real is None or cpu is None or pid is None or tid is None or activity is not None:
                out.append(_perf_meta(s, header_meta, activity, related))
                return other % tuple(out)
            second, ns = divmod(real, NS)
            out += (seconds[second], ns, cpu, pid, tid)
            return whole % tuple(out)

        return perf_json_line

    def _plain_layout(self, fmt: PerfFormat) -> PlainLayout | None:
        # perf-decode prints 1- and 2-byte signed fields unsigned (tracefs_perf_json_head)
        def member(f: PerfField, piece: bytes) -> bytes:
            if piece == b"%d" and f.format == FMT_HEX:
                piece = b'"0x%X"'
            return esc(utf8(json_string(f.name))) + b":" + piece

        return plain_layout(
            fmt,
            small_unsigned=True,
            text=lambda text: utf8(json.dumps(text, ensure_ascii=False)),
            binary=lambda raw: b'"' + raw.hex(" ").encode() + b'"',
            member=member,
            sep=b",",
        )

    def _plain_lines(self, fmt: PerfFormat, layout: PlainLayout) -> Render:
        body = esc(b'{"n":' + utf8(json_string(f"{fmt.system}:{fmt.name}")))
        body += b"," + layout.template if fmt.own_fields else b""
        whole = body + b',"meta":{"time":"%s.%09dZ","cpu":%d,"pid":%d,"tid":%d}}'
        body_meta = body + b',"meta":{%s}}'
        seconds = self.seconds
        values_of = layout.values_of

        def perf_json_line(s: PerfSample) -> bytes | None:
            values = values_of(s.raw)
            real, cpu, pid, tid = s.realtime_ns, s.cpu, s.pid, s.tid
            if real is not None and cpu is not None and pid is not None and tid is not None:
                second, ns = divmod(real, NS)
                return whole % (*values, seconds[second], ns, cpu, pid, tid)
            if pid is not None and tid is None:
                return None
            return body_meta % (*values, _perf_meta(s, b"", None, None))

        return perf_json_line


def _perf_meta(
    sample: PerfSample, header_meta: bytes, activity: bytes | None, related: bytes | None
) -> bytes:
    """perf-decode's ``meta`` members of a sample (the general case: some of time, cpu, pid
    missing, or activity ids)."""
    meta = []
    t = sample.time
    if t is not None:
        if sample.realtime_ns is not None:
            meta.append(b'"time":"' + wallclock_text(sample.realtime_ns).encode() + b'"')
        else:
            sec, nsec = divmod(t, NS)
            meta.append(b'"time":%d.%09d' % (sec, nsec))
    if sample.cpu is not None:
        meta.append(b'"cpu":%d' % sample.cpu)
    if sample.pid is not None:
        meta.append(b'"pid":%d,"tid":%d' % (sample.pid, sample.tid or 0))
    if header_meta:
        meta.append(header_meta)
    if activity is not None:
        meta.append(b'"activity":' + activity_text(activity))
    if related is not None:
        meta.append(b'"relatedActivity":' + activity_text(related))
    return b",".join(meta)


def sample_time_text(sample: PerfSample) -> str | None:
    """perf-decode's ``meta.time`` as JSON text: ``"2024-...T..:..:...nnnnnnnnnZ"`` or ``sec.nsec``."""
    if sample.time is None:
        return None
    if sample.realtime_ns is not None:
        return f'"{wallclock_text(sample.realtime_ns)}"'
    sec, nsec = divmod(sample.time, NS)
    return f"{sec}.{nsec:09d}"


def _sample_meta(sample: PerfSample) -> dict[str, str]:
    meta: dict[str, str] = {}
    t = sample_time_text(sample)
    if t is not None:
        meta["time"] = t
    if sample.cpu is not None:
        meta["cpu"] = str(sample.cpu)
    if sample.pid is not None:
        meta["pid"] = str(sample.pid)
        meta["tid"] = str(sample.tid)
    return meta


def sample_line(sample: PerfSample, event: DecodedEvent, *, field_tags: bool = True) -> str:
    """perf-decode's object of a perf.data sample decoded as ``event`` (an EventHeader event
    or a plain tracepoint's, ``format`` ``"tracefs"``): ``{"n":...,fields...,"meta":{...}}``
    with the sample's time, cpu, pid and tid first in ``meta``."""
    meta = _sample_meta(sample)
    if event.format == "eventheader":
        return perf_json(event, field_tags=field_tags, extra_meta=meta)
    meta_text = '"meta":{' + ",".join(f'"{k}":{v}' for k, v in meta.items()) + "}"
    return "{" + tracefs_perf_json_head(event) + "," + meta_text + "}"


def tracefs_perf_json_head(event: DecodedEvent) -> str:
    """perf-decode's text of a plain tracepoint's :class:`~structlog_etw.read.decoded.DecodedEvent`
    (``format`` ``"tracefs"``), up to its ``meta``: ``'"n":"system:name","field":value,...'``.

    Rendered from the decoded fields only (never the event's bytes): names are escaped as
    perf-decode escapes them, so each line is one JSON object whatever the file's tracing data
    holds.
    """
    order = event.byte_order
    parts = ['"n":' + json_string(f"{event.provider}:{event.name}")]
    parts += [json_string(f.name) + ":" + _tracefs_value_text(f, order) for f in event.field_list]
    return ",".join(parts)


def _tracefs_value_text(f: DecodedField, order: Literal["little", "big"]) -> str:
    """perf-decode's JSON text of one plain tracepoint field: text as a string, bytes as spaced
    hex, numbers in the field's style (1- and 2-byte signed numbers print unsigned), arrays as lists."""
    if f.format == FMT_STRING:
        return json.dumps(f.value if f.value is not None else "", ensure_ascii=False)
    if f.format == FMT_NONE:
        return '"' + f.raw.hex(" ") + '"'

    def number(chunk: bytes) -> str:
        if f.format == FMT_HEX:
            return f'"0x{int.from_bytes(chunk, order):X}"'
        return str(int.from_bytes(chunk, order, signed=f.format == FMT_SIGNED and len(chunk) >= 4))

    if f.encoding != ARRAY_NONE:
        return "[" + ",".join(number(chunk) for chunk in f.raw_elements) + "]"
    return "null" if f.value is None else number(f.raw)


def activity_text(raw: bytes) -> bytes:
    """An activity id's text as perf-decode writes it (quoted)."""
    return b'"' + uuid_text(raw).encode() + b'"'
