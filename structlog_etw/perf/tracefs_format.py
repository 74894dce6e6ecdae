"""tracefs ``format`` files: field layout of a tracepoint, and decoding of plain (non-EventHeader) events.

A ``format`` file (``/sys/kernel/tracing/events/<system>/<event>/format``, also
stored in perf.data's HEADER_TRACING_DATA) lists the common fields, a blank
line, then the event's own fields::

    name: sched_switch
    ID: 316
    format:
        field:unsigned short common_type;  offset:0;  size:2;  signed:0;
        ...

        field:char prev_comm[16];  offset:8;  size:16;  signed:0;

An event whose first own field is ``eventheader_flags`` is an EventHeader
event: its EventHeader starts at that field's offset.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from ..formats._tracefs import (
    ARRAY_DYNAMIC,
    ARRAY_FIXED,
    ARRAY_NONE,
    ARRAY_REL,
    FMT_HEX,
    FMT_NONE,
    FMT_SIGNED,
    FMT_STRING,
    FMT_UNSIGNED,
    UNPACKED_BYTES,
    UNPACKED_INT,
    UNPACKED_TEXT,
)
from ..read.decoded import DecodedField

__all__ = ["FieldsUnpack", "FormatField", "TracepointFormat", "eventheader_offset", "parse_format"]


_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(\[[^\]]*\]?)|(\([^)]*\)?)|(\"(?:\\.|[^\"])*\"?)|(\S))")

_SIZED_TYPES: Final[dict[str, tuple[int, int]]] = {
    "u8": (FMT_UNSIGNED, 1),
    "__u8": (FMT_UNSIGNED, 1),
    "uint8_t": (FMT_UNSIGNED, 1),
    "s8": (FMT_SIGNED, 1),
    "__s8": (FMT_SIGNED, 1),
    "int8_t": (FMT_SIGNED, 1),
    "u16": (FMT_UNSIGNED, 2),
    "__u16": (FMT_UNSIGNED, 2),
    "uint16_t": (FMT_UNSIGNED, 2),
    "s16": (FMT_SIGNED, 2),
    "__s16": (FMT_SIGNED, 2),
    "int16_t": (FMT_SIGNED, 2),
    "u32": (FMT_UNSIGNED, 4),
    "__u32": (FMT_UNSIGNED, 4),
    "uint32_t": (FMT_UNSIGNED, 4),
    "s32": (FMT_SIGNED, 4),
    "__s32": (FMT_SIGNED, 4),
    "int32_t": (FMT_SIGNED, 4),
    "u64": (FMT_UNSIGNED, 8),
    "__u64": (FMT_UNSIGNED, 8),
    "uint64_t": (FMT_UNSIGNED, 8),
    "s64": (FMT_SIGNED, 8),
    "__s64": (FMT_SIGNED, 8),
    "int64_t": (FMT_SIGNED, 8),
}


def _byteorder(order: str) -> Literal["little", "big"]:
    return "little" if order == "<" else "big"


@dataclass(frozen=True)
class FormatField:
    """One ``field:`` line: C declaration, offset, size, signedness, and the derived layout."""

    name: str
    decl: str
    offset: int
    size: int
    signed: bool | None
    format: int
    element_size: int
    array: int
    count: int

    def field_bytes(self, raw: bytes, order: str) -> bytes | None:
        """This field's bytes within an event's raw data (``None`` when out of range)."""
        if self.offset + self.size > len(raw):
            return None
        if self.size == 0:
            return raw[self.offset :]
        if self.array in (ARRAY_DYNAMIC, ARRAY_REL):
            byteorder = _byteorder(order)
            loc = int.from_bytes(raw[self.offset : self.offset + self.size], byteorder)
            if self.size == 4:
                dyn_size, dyn_offset = loc >> 16, loc & 0xFFFF
                if self.array == ARRAY_REL:
                    dyn_offset += self.offset + self.size
                if dyn_offset + dyn_size > len(raw):
                    return None
                return raw[dyn_offset : dyn_offset + dyn_size]
            if self.size == 2:
                if self.array == ARRAY_REL:
                    loc += self.offset + self.size
                end = raw.find(b"\0", loc)
                if loc >= len(raw) or end < 0:
                    return None
                return raw[loc:end]
            return None
        return raw[self.offset : self.offset + self.size]

    def value(self, raw: bytes, order: str) -> Any:
        """The Python value of this field in ``raw``: int, list of ints, str, bytes, or None."""
        data = self.field_bytes(raw, order)
        return None if data is None else self._value(data, order)

    @functools.cached_property
    def is_bytes(self) -> bool:
        """True when the field's value is its bytes (structs and other types without a number or
        text form, and arrays of such 1-byte elements)."""
        return self.format == FMT_NONE and (self.array == ARRAY_NONE or self.element_size == 1)

    def _elements(self, data: bytes) -> list[bytes]:
        es = self.element_size
        return [data[i : i + es] for i in range(0, len(data) - es + 1, es)]

    def _value(self, data: bytes, order: str) -> Any:
        if self.format == FMT_STRING:
            return data.split(b"\0", 1)[0].decode("latin-1")
        if self.is_bytes:
            return bytes(data)
        signed = self.format == FMT_SIGNED
        byteorder = _byteorder(order)
        values = [int.from_bytes(chunk, byteorder, signed=signed) for chunk in self._elements(data)]
        if self.array == ARRAY_NONE:
            return values[0] if values else None
        return values

    def decoded(self, raw: bytes, order: str) -> DecodedField:
        """This field of ``raw`` as a :class:`~structlog_etw.read.decoded.DecodedField`: its :meth:`value`
        and what a writer needs to print it as perf-decode does, without the event's bytes.

        ``format`` is the print style (``FMT_NONE``: the bytes, ``FMT_HEX``, ``FMT_UNSIGNED``,
        ``FMT_SIGNED``, ``FMT_STRING``), ``encoding`` the array kind (``ARRAY_NONE``,
        ``ARRAY_FIXED``, ``ARRAY_DYNAMIC`` or ``ARRAY_REL``: anything but ``ARRAY_NONE`` is printed
        as a list, except text and bytes); ``raw`` is the text's bytes (up to its NUL), the bytes of
        a byte array or the number's bytes; ``raw_elements`` the bytes of each number of an array
        (all empty when the field lies outside the event).
        """
        data = self.field_bytes(raw, order)
        style = FMT_HEX if self.format == FMT_NONE and not self.is_bytes else self.format
        if data is None:
            return DecodedField(self.name, None, self.array, style)
        value = self._value(data, order)
        if self.format == FMT_STRING:
            return DecodedField(self.name, value, self.array, style, raw=data.split(b"\0", 1)[0])
        if self.is_bytes:
            return DecodedField(self.name, value, self.array, style, raw=bytes(data))
        elements = self._elements(data)
        if self.array == ARRAY_NONE:
            return DecodedField(self.name, value, self.array, style, raw=elements[0] if elements else b"")
        return DecodedField(self.name, value, self.array, style, raw_elements=tuple(elements))


#: Words of a C declaration that qualify its type; of the other words (but those ignored),
#: the last is the field's name and the one before it the base type.
_QUALIFIERS: Final = frozenset({"short", "unsigned", "signed", "struct", "__data_loc", "__rel_loc"})
_IGNORED: Final = frozenset({"__attribute__", "const", "volatile"})


def _parse_decl(decl: str, offset: int, size: int, signed: bool | None, long64: bool) -> FormatField:
    n_long = 0
    quals: set[str] = set()
    array = pointer = False
    name = ""
    base = ""
    count = 0
    pos = 0
    while pos < len(decl):
        m = _TOKEN.match(decl, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        ident, brackets, _paren, _string, punct = m.groups()
        if ident is not None:
            if ident == "long":
                n_long += 1
            elif ident in _QUALIFIERS:
                quals.add(ident)
            elif ident not in _IGNORED:
                base, name = name, ident
        elif brackets is not None:
            array = True
            inner = brackets[1:].rstrip("]").strip()
            try:
                count = int(inner, 0) if inner else 0
            except ValueError:
                count = 0
            m2 = _TOKEN.match(decl, pos)
            if m2 is not None and m2.group(1):
                base, name = name, m2.group(1)
            break
        elif punct == "*":
            pointer = True
    if not name:
        name = "noname"
    unsigned, struct_kw = "unsigned" in quals, "struct" in quals
    fixup = False
    element_size = 1
    if pointer:
        fmt, element_size = FMT_HEX, (8 if long64 else 4)
    elif struct_kw:
        fmt, element_size = FMT_NONE, 1
    elif base in ("", "int"):
        fmt = FMT_UNSIGNED if unsigned else FMT_SIGNED
        if n_long >= 2:
            element_size = 8
        elif n_long == 1:
            element_size = 8 if long64 else 4
            if unsigned:
                fmt = FMT_HEX
        elif "short" in quals:
            element_size = 2
        else:
            element_size = 4
    elif base == "char":
        fmt = FMT_UNSIGNED if unsigned else FMT_SIGNED if "signed" in quals else FMT_STRING
        element_size = 1
    elif base in _SIZED_TYPES:
        fmt, element_size = _SIZED_TYPES[base]
    else:
        fmt = FMT_HEX
        fixup = True
    if fmt in (FMT_UNSIGNED, FMT_SIGNED) and signed is not None:
        fmt = FMT_SIGNED if signed else FMT_UNSIGNED
    if "__rel_loc" in quals:
        kind, count = ARRAY_REL, 0
    elif "__data_loc" in quals:
        kind, count = ARRAY_DYNAMIC, 0
    elif array:
        kind = ARRAY_FIXED
        if fixup and count and size % count == 0 and size // count in (1, 2, 4, 8):
            element_size, fixup = size // count, False
    else:
        kind, count = ARRAY_NONE, 0
        if size in (1, 2, 4, 8):
            element_size, fixup = size, False
    if fixup:
        element_size = 1
    return FormatField(name, decl, offset, size, signed, fmt, element_size, kind, count)


def _parse_field_line(line: str, long64: bool) -> FormatField | None:
    # ``field:int a;\toffset:0;\tsize:4;\tsigned:1;``: split at ``;`` then at the first ``:``,
    # which is linear in the line's length whatever it holds (no regex that can backtrack).
    props: dict[str, str] = {}
    for part in line.split(";"):
        key, sep, value = part.partition(":")
        if sep:
            props[key.strip()] = value.strip()
    decl = props.get("field", props.get("field special"))
    try:
        offset = int(props["offset"], 0)
        size = int(props["size"], 0)
    except (KeyError, ValueError):
        return None
    if not decl:
        return None
    sig = props.get("signed")
    signed = None if sig is None or not sig.isdigit() else sig != "0"
    return _parse_decl(decl, offset, size, signed, long64)


@dataclass(frozen=True)
class TracepointFormat:
    """A parsed ``format`` file."""

    system: str
    name: str
    id: int
    fields: tuple[FormatField, ...]
    common_count: int
    print_fmt: str = ""
    text: str = field(default="", repr=False)

    @functools.cached_property
    def full_name(self) -> str:
        """``system:name``."""
        return f"{self.system}:{self.name}"

    @functools.cached_property
    def common_size(self) -> int:
        """Bytes taken by the common fields (``common_type`` ... ``common_pid``)."""
        if not self.common_count:
            return 0
        last = self.fields[self.common_count - 1]
        return last.offset + last.size

    @functools.cached_property
    def is_eventheader(self) -> bool:
        """True when the first own field is ``eventheader_flags`` (a user_events EventHeader event)."""
        return (
            len(self.fields) > self.common_count
            and self.fields[self.common_count].name == "eventheader_flags"
        )

    @functools.cached_property
    def payload_offset(self) -> int:
        """Where the event's own data starts: the EventHeader for EventHeader events, else common size."""
        if len(self.fields) > self.common_count:
            return self.fields[self.common_count].offset
        return self.common_size

    @functools.cached_property
    def own_fields(self) -> tuple[FormatField, ...]:
        """The event's fields after the common ones."""
        return self.fields[self.common_count :]

    def fields_unpack(self, small_unsigned: bool = False) -> FieldsUnpack | None:
        """How the own fields are read in one unpack (:class:`FieldsUnpack`), or None for formats
        with fields of other layouts (arrays of numbers, ``__data_loc``, sizes a struct code
        cannot say).  ``small_unsigned``: 1- and 2-byte signed fields read unsigned (as
        perf-decode prints them)."""
        return _fields_unpack(self.own_fields, small_unsigned)


#: struct codes of an integer field of each size (signed: lower case).
_INT_CODES: Final = {1: "B", 2: "H", 4: "I", 8: "Q"}


class FieldsUnpack(NamedTuple):
    """One unpack of a format's own fields: ``unpack_from(raw, start)`` gives one value per field
    (``kinds``: ``UNPACKED_TEXT``, ``UNPACKED_BYTES`` or ``UNPACKED_INT``) of a sample's raw data
    of at least ``need`` bytes."""

    unpack_from: Callable[[bytes, int], tuple[Any, ...]]
    start: int
    need: int
    kinds: tuple[int, ...]


def _fields_unpack(fields: tuple[FormatField, ...], small_unsigned: bool) -> FieldsUnpack | None:
    start = fields[0].offset if fields else 0
    codes = "<"
    at = start
    kinds: list[int] = []
    for f in fields:
        if f.offset < at or f.size == 0 or f.array in (ARRAY_DYNAMIC, ARRAY_REL):
            return None
        codes += "x" * (f.offset - at)
        if f.format == FMT_STRING:
            codes += f"{f.size}s"
            kinds.append(UNPACKED_TEXT)
        elif f.format == FMT_NONE and (f.array == ARRAY_NONE or f.element_size == 1):
            codes += f"{f.size}s"
            kinds.append(UNPACKED_BYTES)
        elif f.array == ARRAY_NONE and f.element_size == f.size and f.size in _INT_CODES:
            code = _INT_CODES[f.size]
            signed = f.format == FMT_SIGNED and not (small_unsigned and f.size < 4)
            codes += code.lower() if signed else code
            kinds.append(UNPACKED_INT)
        else:
            return None
        at = f.offset + f.size
    return FieldsUnpack(struct.Struct(codes).unpack_from, start, at, tuple(kinds))


def parse_format(system: str, text: str, long64: bool = True) -> TracepointFormat | None:
    """Parse a ``format`` file's text; ``None`` when it has no name or ID."""
    name, eid, print_fmt, fields, common_count = _parse_text(text, long64)
    if not name or eid is None:
        return None
    return TracepointFormat(system, name, eid, fields, common_count, print_fmt, text)


def eventheader_offset(format_text: str) -> int:
    """Where the EventHeader starts in a sample's raw data, from the tracepoint's tracefs ``format``.

    That is the :attr:`TracepointFormat.payload_offset`: the offset of the first field after
    the common ones (``eventheader_flags``); failing that, the end of the common fields.
    Unlike :func:`parse_format` it needs only the field lines.  Raises ValueError when
    the text has no fields.
    """
    _name, _id, _print_fmt, fields, common_count = _parse_text(format_text, True)
    if not fields:
        raise ValueError("no fields in tracepoint format")
    return TracepointFormat("", "", 0, fields, common_count).payload_offset


def _parse_text(text: str, long64: bool) -> tuple[str, int | None, str, tuple[FormatField, ...], int]:
    """``(name, id, print fmt, fields, number of common fields)`` of a ``format`` file's text."""
    name = ""
    eid: int | None = None
    print_fmt = ""
    fields: list[FormatField] = []
    common_count = 0
    lines = text.split(
        "\n"
    )  # the kernel ends lines with \n only (splitlines() also splits at \x85, \u2028, ...)
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        value = value.strip()
        if key == "name":
            name = value
        elif key == "ID":
            try:
                eid = int(value, 0)
            except ValueError:
                eid = None
        elif key == "print fmt":
            print_fmt = value
        elif key == "format":
            common = True
            while i < len(lines):
                fline = lines[i]
                i += 1
                if not fline.strip():
                    if common:
                        common = False
                        continue
                    break
                parsed = _parse_field_line(fline, long64)
                if parsed is None:
                    continue
                fields.append(parsed)
                common_count += common
    return name, eid, print_fmt, tuple(fields), common_count
