"""Compiled plans of EventHeader events: the decoder's reading of a kind of event, done once.

:func:`~structlog_etw.read.decode.eventheader.decode_event` parses the metadata of every event and
builds a :class:`~structlog_etw.read.decoded.DecodedEvent`; a capture repeats the same few metadata
blocks thousands of times.  :class:`Plans` parses each distinct (tracepoint, header, metadata)
once - with the decoder's own :func:`~structlog_etw.read.decode.eventheader.read_extensions`,
:func:`~structlog_etw.read.decode.eventheader.kind_dispatcher`,
:func:`~structlog_etw.read.decode.eventheader.parse_metadata` and
:func:`~structlog_etw.read.decode.eventheader.header_numbers` - into an :class:`EventPlan`:
provider, name, attributes, the header's numbers, and the fields as one ``%``-template with a
list of readers.  Each reader takes the payload bytes and a position, appends the values its
part of the template takes to a list and returns where its part ended: a run of fixed-size
fields is one unpack (integers go into the template as numbers, other fixed-size values through
their writer), a struct's members are its own readers (flattened into the event's template), a
string or an array is one text.  So an event is a few unpacks and one ``%`` of its template.

What the texts are is the output's: a :class:`FieldStyle` (perf-decode's JSON:
:class:`structlog_etw.read.writers.perf_json.PerfJsonStyle`; the console's:
:class:`structlog_etw.read.writers.console.TextFieldStyle`) writes each value kind, name and
container, once per field when a plan is compiled, never per event.  A plan reads only
well-formed events: anything else raises, and the caller decodes the event the ordinary way,
which reports the error.  Every cache is bounded by the bytes of its keys.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ..._util.bounded import BoundedCache
from ...formats.eventheader import (
    ENC_STRUCT,
    ENCODING_CARRAY,
    FIXED_SIZE,
    FMT_STRING_JSON,
    FMT_STRING_UTF_BOM,
    FMT_STRING_XML,
    LENGTH16_UNIT,
    ZSTRING_UNIT,
    parse_tracepoint_name,
)
from .._text import KeptTexts
from .._text import template_literal as esc
from ..decoded import DecodeError
from ._eventheader_values import BOMS, Kind, bytes_decide_kind, value_kind
from .eventheader import (
    FieldMetadata,
    KindCall,
    header_numbers,
    kind_dispatcher,
    parse_metadata,
    split_event_name,
)

_T = TypeVar("_T")

#: Bytes of cache keys (tracepoint names and metadata) the plans may hold.
_CACHE_BYTES: Final = 16 << 20

#: A value reader: (event bytes, position) -> (the text of the value, next position).
Reader = Callable[[bytes, int], tuple[bytes, int]]
#: A field reader: (event bytes, position, the template's values so far) -> next position; it
#: appends the values its part of the template takes (numbers for ``%d``/``%X``, texts for ``%s``).
FieldReader = Callable[[bytes, int, list[object]], int]

#: Texts of fixed-size values each writer keeps (values repeat: errno, times, addresses, floats).
_VALUES_KEPT: Final = 512
#: The formats whose text a byte-order mark decides.
BOM_FORMATS: Final = frozenset({FMT_STRING_UTF_BOM, FMT_STRING_XML, FMT_STRING_JSON})
#: The first bytes of the byte-order marks (:data:`~structlog_etw.read.decode._eventheader_values.BOMS`).
_BOM_STARTS: Final = frozenset(mark[:1] for mark, _kind, _order in BOMS)
#: Value lengths whose writer a counted value's writer keeps.
_LENGTHS_KEPT: Final = 64


class _Bad(Exception):
    """The event is not what its plan reads (truncated payload): decode it the ordinary way."""


#: What a plan's readers raise on an event that is not what its metadata says.
PLAN_ERRORS: Final = (_Bad, struct.error, ValueError, OverflowError, IndexError)

#: struct codes of the unsigned integers of each size (the signed ones: lower case).
_NUMBER_CODES: Final = {1: "B", 2: "H", 4: "I", 8: "Q"}
#: The kinds of integers a plan may read as numbers of its template.
_INTEGER_KINDS: Final = frozenset({Kind.UNSIGNED, Kind.SIGNED, Kind.HEX})


def integer_code(encoding: int, fmt: int, order: str) -> tuple[str, Kind] | None:
    """A fixed-size integer's :mod:`struct` code (lower case: signed) and kind (unsigned, signed,
    hex), for a style's :meth:`FieldStyle.number`; None for every other value."""
    code = _NUMBER_CODES.get(FIXED_SIZE.get(encoding, 0))
    if code is None:
        return None
    kind = value_kind(encoding, fmt, b"", order)[0]
    if kind not in _INTEGER_KINDS:
        return None
    return (code.lower() if kind is Kind.SIGNED else code), kind


class FieldStyle:
    """How a plan writes values, names and containers: an output's rules, asked once per field
    when a plan is compiled, never per event.  Every method returns UTF-8 bytes.

    A subclass says how each value kind is written (:meth:`kind_writer`), which integers are
    numbers of the template (:meth:`number`), what comes around a field's value
    (:meth:`member`), and the separators and brackets below.
    """

    #: Between fields (top level, inside structs), array elements; struct and array brackets.
    top_sep: bytes = b","
    struct_sep: bytes = b","
    array_sep: bytes = b","
    struct_open: bytes = b"{"
    struct_close: bytes = b"}"
    array_open: bytes = b"["
    array_close: bytes = b"]"

    def __init__(self) -> None:
        self._fixed: dict[tuple[int, int, str], Callable[[bytes], bytes]] = {}

    def kind_writer(self, kind: Kind, order: str) -> Callable[[bytes], bytes]:
        """The writer of a value of ``kind`` in byte order ``order``: its bytes -> its text."""
        raise NotImplementedError

    def fixed(self, encoding: int, fmt: int, order: str) -> Callable[[bytes], bytes]:
        """The writer of a fixed-size value's bytes (its kind follows from the types alone)."""
        return self.kind_writer(value_kind(encoding, fmt, b"", order)[0], order)

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
        writer = self.kind_writer
        if not bytes_decide_kind(encoding, fmt):
            return writer(value_kind(encoding, fmt, b"", order)[0], order)
        if fmt in BOM_FORMATS:  # the text after a mark in the mark's kind, else the encoding's
            plain = writer(value_kind(encoding, fmt, b"", order)[0], order)
            marks = [(mark, len(mark), writer(kind, bom_order)) for mark, kind, bom_order in BOMS]

            def marked(raw: bytes) -> bytes:
                if raw[:1] in _BOM_STARTS:
                    for mark, size, write in marks:
                        if raw.startswith(mark):
                            return write(raw[size:])
                return plain(raw)

            return marked
        # A counted value read as a number by its length: the kind depends on the length alone.
        # (an int key and a writer each: the count bounds the bytes)
        lengths: BoundedCache[int, Callable[[bytes], bytes]] = BoundedCache.of_one_reader(
            _LENGTHS_KEPT, _LENGTHS_KEPT
        )
        by_length = lengths.entries

        def counted(raw: bytes) -> bytes:
            write = by_length.get(len(raw))
            if write is None:
                write = writer(value_kind(encoding, fmt, raw, order)[0], order)
                lengths.store(len(raw), write)
            return write(raw)

        return counted

    def number(self, encoding: int, fmt: int, order: str) -> tuple[str, bytes] | None:
        """A fixed-size integer's :mod:`struct` code and ``%``-template of its text, when its text
        is one (``b"%d"``); a plan reads a run of such fields with one unpack.  None (the
        default): use :meth:`fixed`."""
        return None

    def member(self, meta: FieldMetadata, top: bool) -> tuple[bytes, bytes]:
        """What comes before and after a field's value (``top``: a field of the event, not of a struct)."""
        raise NotImplementedError


def _kept(write: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """``write`` with the texts of the last :data:`_VALUES_KEPT` distinct values kept."""
    return KeptTexts(write, _VALUES_KEPT).__getitem__


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


#: Array lengths whose unpack and template an array reader keeps, and their bytes at most.
_ARRAYS_KEPT: Final = 64
_ARRAYS_BYTES: Final = 1 << 20


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
        before, after = esc(before), esc(after)
        enc = m.encoding
        if enc == ENC_STRUCT and not m.array:
            template, members = _fields(m.children, order, style, False)
            end_run()
            readers += members
            pieces.append(before + esc(style.struct_open) + template + esc(style.struct_close) + after)
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
    return esc(sep).join(pieces), readers


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
        element = _texts(esc(style.struct_open) + template + esc(style.struct_close), members)
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
        arrays: BoundedCache[int, tuple[Callable[[bytes, int], tuple[int, ...]], bytes]]
        arrays = BoundedCache.of_one_reader(_ARRAYS_KEPT, _ARRAYS_BYTES)
        kept = arrays.entries
        sep = esc(asep)
        aopen_t, aclose_t = esc(aopen), esc(aclose)

        def numbers(buf: bytes, pos: int, out: list[object]) -> int:
            n, pos = length(buf, pos)
            end = pos + n * size
            if end > len(buf):
                raise _Bad
            found = kept.get(n)
            if found is None:
                template = aopen_t + sep.join([piece] * n) + aclose_t
                found = (struct.Struct(f"{order}{n}{code}").unpack_from, template)
                arrays.store(n, found, 2 * len(template))  # (the template and the struct's codes)
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
    """How to read one kind of event (a tracepoint, a header, a metadata block).

    ``provider``, ``name``, ``level``, ``keyword``, ``opcode``, ``tag``, ``id``, ``version``,
    ``attributes``, ``raw_name`` as :class:`~structlog_etw.read.decoded.DecodedEvent` has them.  The
    fields' text (``"name":value,...`` in perf-decode's JSON) is ``template % tuple(values)``
    where each of ``readers`` in turn takes ``(data, pos, values)``, appends its values and
    returns the next position (the payload's end after the last one); ``has_fields``: the
    event has any.
    """

    provider: str
    name: str
    raw_name: bytes
    level: int
    keyword: int
    opcode: int
    tag: int
    id: int
    version: int
    attributes: dict[str, str]
    has_fields: bool
    template: bytes
    readers: tuple[FieldReader, ...]


class Plans:
    """Compiles the :class:`EventPlan` of a (tracepoint name, header, metadata) in a ``style``;
    its :class:`PlanCache` objects keep them, bounded together by the bytes of their keys."""

    def __init__(self, style: FieldStyle) -> None:
        self.style = style
        #: The byte budget its PlanCaches share (it holds no entry itself): past
        #: :data:`_CACHE_BYTES` of keys every one of them starts over.
        self.budget: BoundedCache[Any, Any] = BoundedCache.of_one_reader(0, _CACHE_BYTES)

    def compile(self, tracepoint_name: str, head: bytes, metadata: bytes, order: str) -> EventPlan | None:
        """The plan of events of this tracepoint, header (the first 8 bytes) and metadata in
        byte order ``order`` (None: such events are not well-formed; the ordinary decoder says why)."""
        try:
            provider, level, keyword, _options = parse_tracepoint_name(tracepoint_name)
            raw_name, metas = parse_metadata(metadata, order)
        except DecodeError:
            return None
        version, eid, tag, opcode, hlevel = header_numbers(head, order)
        if hlevel != level:
            return None
        name, attrs = split_event_name(raw_name)
        template, readers = _fields(metas, order, self.style, True)
        return EventPlan(
            provider,
            name,
            raw_name,
            level,
            keyword,
            opcode,
            tag,
            eid,
            version,
            attrs,
            bool(metas),
            template,
            tuple(readers),
        )


class PlanCache(Generic[_T]):
    """What a caller keeps per plan (``decide(plan)``: a function of the plan's samples; None:
    such events take the ordinary path) for the events of one EventHeader tracepoint, found by
    the bytes of an event's header and metadata - the plan's key - and compiled once per distinct
    key (bounded with its :class:`Plans`' other caches by the bytes of their keys)."""

    def __init__(
        self, plans: Plans, tracepoint_name: str, decide: Callable[[EventPlan], KindCall[_T] | None]
    ) -> None:
        self._plans = plans
        self._name = tracepoint_name
        self._decide = decide
        self._books: BoundedCache[object, KindCall[_T] | None] = plans.budget.sharing(_CACHE_BYTES)
        self._kept = self._books.entries
        #: ``dispatch(sample)``: what is kept for the plan of the sample's event, called as
        #: ``kept(sample, payload position, activity id, related id)``; None when the event is not
        #: well-formed or its plan decided None.
        self.dispatch = kind_dispatcher(self._kept, self._add)

    def _add(self, key: object, head: bytes, metadata: bytes, order: str) -> KindCall[_T] | None:
        plan = self._plans.compile(self._name, head, metadata, order)
        kept = None if plan is None else self._decide(plan)
        self._books.store(key, kept, len(metadata) + 200)
        return kept
