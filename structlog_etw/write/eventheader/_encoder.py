"""EventHeader encoding for Linux user_events (Microsoft's LinuxTracepoints convention).

An event is::

    eventheader (8 bytes: flags, version, id, tag, opcode, level)
    [ActivityId extension: u16 size (16 or 32), u16 kind 2 | chain, activity id [, related id]]
    Metadata extension:   u16 size, u16 kind 1, event name NUL, per field: name NUL, encoding, [format]
    payload:              little-endian field values

Tracepoints are named ``<Provider>_L<level>K<keyword>[G<group>]`` (:mod:`~structlog_etw.formats.eventheader`).
:class:`EventHeaderEncoder` turns an event name and a list of
:data:`~structlog_etw.write.fields.Field` into the bytes handed to the kernel after the write
index.  Metadata and a packing plan are built once per *event shape* (name, field names,
kinds, nested) and cached; a bounded cache keeps high-cardinality names from growing memory.

Three routes, one result:

* :meth:`EventHeaderEncoder.encode_dict` takes the event dict itself (a log call's fields) and
  writes the common shapes with a function generated per shape's *layout* (:mod:`structlog_etw.write.shapes`),
  straight from the dict's values; anything else goes through ``dict_fields`` and
  :meth:`EventHeaderEncoder.encode`;
* the **fast path** packs the values with a function generated for the shape's kinds
  (straight-line code, cached); it is taken when every value is what its kind expects and the
  event fits;
* anything else (a value the generated code cannot write, an event too large) takes the one
  **general path**: :func:`~structlog_etw.write.fields.normalize` turns each value into a piece (a
  value that cannot be written as its kind is written as its text), and the pieces are joined
  whole when they fit, or cut by the shared size policy (:mod:`structlog_etw.write._size_policy`).

Size policy (docs/limits.md): an event never exceeds ``max_size`` bytes (default
:data:`PERF_MAX_EVENT_SIZE`, what perf keeps of one event).  When the values do not fit, the
longest variable-size values (strings, binaries, arrays) are cut to a common cap: strings end
with :data:`TRUNCATION_MARKER` (a cut string is never shorter than the marker), JSON fields become
plain strings (cut JSON is not JSON), and the event gets an extra ``_truncated=True`` field.  If
even the fixed part (header, metadata with the field names, fixed-size values) does not fit, or
leaves no room for the markers of the strings to cut, ``encode`` returns ``None`` and the caller
counts the event dropped (``too_large``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import re
import struct
import sys
import uuid
from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..._util.counters import Count
from ...formats.eventheader import (
    DYN_MAX_EVENT_SIZE,
    ENC_BINARY_LENGTH16_CHAR8,
    ENC_STRING_LENGTH16_CHAR8,
    ENC_STRUCT,
    ENC_VALUE8,
    ENC_VALUE16,
    ENC_VALUE32,
    ENC_VALUE64,
    ENC_VALUE128,
    ENCODING_CARRAY,
    ENCODING_CHAIN,
    ENCODING_VARRAY,
    EXT_ACTIVITY_ID,
    EXT_METADATA,
    EXTENSION_CHAIN,
    EXTENSION_STRUCT,
    FMT_BOOLEAN,
    FMT_FLOAT,
    FMT_HEX_BYTES,
    FMT_IP_ADDRESS,
    FMT_SIGNED_INT,
    FMT_STRING_JSON,
    FMT_UNSIGNED_INT,
    FMT_UUID,
    FORMAT_CHAIN,
    HEADER,
    HEADER_FLAGS,
    PERF_MAX_EVENT_SIZE,
)
from ...formats.header import INFO_HEADER, Header, HeaderValue, header_problem, plain_header
from .._size_policy import NO_LIMIT, Cuttable, Piece, joined, leading_pieces, water_level, whole_size
from ..fields import (
    ARRAY,
    BOOL,
    BYTES,
    F64,
    I16,
    I64,
    IPV4,
    IPV6,
    JSON,
    MAX_STRUCT_FIELDS,
    NULL,
    STR,
    STRUCT,
    TIME,
    TRUNCATED_FIELD,
    TRUNCATION_MARKER,
    U8,
    U16,
    U32,
    U64,
    UUID,
    Field,
    bytes_value,
    clean_name,
    dict_fields,
    json_as_str,
    leaf_values,
    normalize,
    safe_str,
)
from ..shapes import (
    NONE,
    NULLABLE,
    LayoutFunctions,
    ShapeCache,
    Step,
    Walker,
    key_chars,
    layout_function,
    walk,
)

__all__ = [
    "EventHeaderEncoder",
    "assemble_event",
    "field_metadata",
    "sanitize_name",
]

_MARKER_BYTES: Final = TRUNCATION_MARKER.encode("utf-8")
_U16_MAX: Final = 0xFFFF

_HEADER: Final = HEADER
_EXT: Final = EXTENSION_STRUCT
_U16 = struct.Struct("<H")
_LITTLE: Final = sys.byteorder == "little"

_SURROGATES = re.compile("[\ud800-\udfff]")

#: Or-ed into I64/U64/F64 (this encoder's own kinds, never in a field list it is given): the value
#: is written *nullable*, as BinaryLength16Char8 with the kind's format (LinuxTracepoints 1.4): a
#: u16 length, then 8 bytes for a value or none for ``None`` (perf-decode prints ``null``).  A key
#: that has been ``None`` in an event keeps this one type in the event's later events (docs/types.md).
_NULLABLE: Final = NULLABLE
#: The kinds that have a nullable form; a ``None`` with no other kind known is a nullable I64.
_NULLABLE_KINDS: Final = (I64, U64, F64)

# Metadata bytes (encoding [, format]) per field kind.
_KIND_META: Final[dict[int, bytes]] = {
    BOOL: bytes((ENC_VALUE8 | ENCODING_CHAIN, FMT_BOOLEAN)),
    I64: bytes((ENC_VALUE64 | ENCODING_CHAIN, FMT_SIGNED_INT)),
    U64: bytes((ENC_VALUE64 | ENCODING_CHAIN, FMT_UNSIGNED_INT)),
    F64: bytes((ENC_VALUE64 | ENCODING_CHAIN, FMT_FLOAT)),
    STR: bytes((ENC_STRING_LENGTH16_CHAR8,)),
    BYTES: bytes((ENC_BINARY_LENGTH16_CHAR8 | ENCODING_CHAIN, FMT_HEX_BYTES)),
    UUID: bytes((ENC_VALUE128 | ENCODING_CHAIN, FMT_UUID)),
    IPV4: bytes((ENC_VALUE32 | ENCODING_CHAIN, FMT_IP_ADDRESS)),
    IPV6: bytes((ENC_VALUE128 | ENCODING_CHAIN, FMT_IP_ADDRESS)),
    TIME: bytes((ENC_STRING_LENGTH16_CHAR8,)),
    JSON: bytes((ENC_STRING_LENGTH16_CHAR8 | ENCODING_CHAIN, FMT_STRING_JSON)),
    U8: bytes((ENC_VALUE8 | ENCODING_CHAIN, FMT_UNSIGNED_INT)),
    I16: bytes((ENC_VALUE16 | ENCODING_CHAIN, FMT_SIGNED_INT)),
    U16: bytes((ENC_VALUE16 | ENCODING_CHAIN, FMT_UNSIGNED_INT)),
    U32: bytes((ENC_VALUE32 | ENCODING_CHAIN, FMT_UNSIGNED_INT)),
    I64 | _NULLABLE: bytes((ENC_BINARY_LENGTH16_CHAR8 | ENCODING_CHAIN, FMT_SIGNED_INT)),
    U64 | _NULLABLE: bytes((ENC_BINARY_LENGTH16_CHAR8 | ENCODING_CHAIN, FMT_UNSIGNED_INT)),
    F64 | _NULLABLE: bytes((ENC_BINARY_LENGTH16_CHAR8 | ENCODING_CHAIN, FMT_FLOAT)),
    NULL: bytes((ENC_BINARY_LENGTH16_CHAR8 | ENCODING_CHAIN, FMT_SIGNED_INT)),  # a nullable I64
}

# Fixed-size scalars: struct format char per kind.
_FIXED_CHAR: Final[dict[int, str]] = {
    BOOL: "?",
    I64: "q",
    U64: "Q",
    F64: "d",
    U8: "B",
    I16: "h",
    U16: "H",
    U32: "I",
}
# Fixed-size arrays: array typecode per kind.
_ARRAY_CODE: Final[dict[int, str]] = {I64: "q", U64: "Q", F64: "d"}


# --- names and registration ---------------------------------------------------------------------


def sanitize_name(name: str) -> str:
    """Make ``name`` usable as an EventHeader event or field name.

    ``;`` starts attributes in EventHeader names (names may not contain it; perf-decode cuts the
    event name there): it becomes ``_``, and so does NUL (:func:`~structlog_etw.write.fields.clean_name`,
    the rule of every name).  Lone surrogates become U+FFFD when encoded.
    """
    if ";" in name:
        name = name.replace(";", "_")
    return clean_name(name)


def _utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates become U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text).encode("utf-8")


def _name_bytes(name: str) -> bytes:
    return _utf8(sanitize_name(name)) + b"\0"


def field_metadata(name: str, encoding: int, fmt: int = 0, tag: int = 0, carray_len: int = 0) -> bytes:
    """One field definition of the Metadata extension (any encoding/format of the spec).

    Sets the chain bits as needed: a format byte follows when ``fmt`` or ``tag`` is non-zero, a
    tag when ``tag`` is non-zero; ``carray_len`` (with ``encoding & 0x20``) follows last.
    """
    out = bytearray(_name_bytes(name))
    if fmt or tag:
        out.append(encoding | ENCODING_CHAIN)
        out.append(fmt | (FORMAT_CHAIN if tag else 0))
        if tag:
            out += _U16.pack(tag)
    else:
        out.append(encoding)
    if encoding & ENCODING_CARRAY:
        out += _U16.pack(carray_len)
    return bytes(out)


def assemble_event(
    level: int,
    metadata: bytes,
    payload: bytes,
    opcode: int = 0,
    tag: int = 0,
    version: int = 0,
    event_id: int = 0,
    activity_id: bytes | None = None,
    related_id: bytes | None = None,
) -> bytes:
    """Header + [ActivityId extension] + Metadata extension (``metadata`` = name NUL + fields) + payload."""
    out = [_HEADER.pack(HEADER_FLAGS, version, event_id, tag, opcode, level)]
    if activity_id is not None:
        ids = activity_id + (related_id or b"")
        out.append(_EXT.pack(len(ids), EXT_ACTIVITY_ID | EXTENSION_CHAIN))
        out.append(ids)
    out.append(_EXT.pack(len(metadata), EXT_METADATA))
    out.append(metadata)
    out.append(payload)
    return b"".join(out)


# --- how EventHeader writes one value ----------------------------------------------------------
#
# ``_BODY[kind](value)`` is the bytes of one value of a scalar kind (for counted kinds, the body
# after the u16 length); it raises when the value is not what the kind expects.  The general path
# builds its pieces with it; the fast path's generated code inlines the scalar cases and uses it
# for array elements.


def _text_body(value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    return _utf8(value)


def _time_body(value: Any) -> bytes:
    return _text_body(value.isoformat())


def _uuid_body(value: Any) -> bytes:
    body = value.bytes
    if type(body) is not bytes or len(body) != 16:
        raise ValueError("a UUID is 16 bytes")
    return body


def _address_body(size: int) -> Callable[[Any], bytes]:
    def address(value: Any) -> bytes:
        body = bytes_value(value)
        if len(body) != size:
            raise ValueError(f"address must be {size} bytes")
        return body

    return address


_NULL_BODY: Final = b"\0\0"  # a nullable value's u16 length 0


def _null_body(value: Any) -> bytes:
    if value is not None:
        raise TypeError(f"expected None, got {type(value).__name__}")
    return _NULL_BODY


def _nullable_body(kind: int) -> Callable[[Any], bytes]:
    pack = struct.Struct("<H" + _FIXED_CHAR[kind]).pack
    size = struct.calcsize("<" + _FIXED_CHAR[kind])

    def nullable(value: Any) -> bytes:
        return _NULL_BODY if value is None else pack(size, value)

    return nullable


def _null_of(kind: int) -> int:
    """A kind's form at a key that has been None: an int64, uint64 or float64 nullable, any other
    kind (NULL, a str, a bool, ...) itself.  Also the kind such a key's None is written as, from
    the kind it takes (NULL before a number is seen)."""
    return kind | _NULLABLE if kind in _NULLABLE_KINDS else kind


#: NULL and the nullable kinds: the whole value (u16 length included), a fixed piece.
_NULLABLE_BODY: Final[dict[int, Callable[[Any], bytes]]] = {
    NULL: _null_body,
    **{kind | _NULLABLE: _nullable_body(kind) for kind in _NULLABLE_KINDS},
}

_BODY: Final[dict[int, Callable[[Any], bytes]]] = {
    **{kind: struct.Struct("<" + ch).pack for kind, ch in _FIXED_CHAR.items()},
    **_NULLABLE_BODY,
    STR: _text_body,
    JSON: _text_body,
    TIME: _time_body,
    BYTES: bytes_value,
    UUID: _uuid_body,
    IPV4: _address_body(4),
    IPV6: _address_body(16),
}
#: Kinds written as text (u16 length + UTF-8): a cut value ends with the truncation marker.
_TEXT_KINDS: Final = frozenset((STR, JSON, TIME))


def _piece(kind: int, value: Any, limit: int = NO_LIMIT) -> Piece:
    """One value as the general path writes it: fixed bytes, or a cuttable string, binary or array.

    ``limit`` is the event's budget: an array's elements past it are not built, a text or binary
    longer is taken up to ``limit + 1`` characters or bytes (more than can ever be kept: the value
    is cut all the same, only the work follows what is written).  Raises when ``value`` is not
    what ``kind`` expects (:func:`~structlog_etw.write.fields.normalize` then writes its text instead).
    """
    if kind & ARRAY:
        base = kind & ~ARRAY
        if base not in _BODY:
            raise ValueError(f"not an array kind: {kind!r}")
        return Cuttable.array(leading_pieces(value, lambda item: _piece(base, item, limit), limit))
    if kind in _TEXT_KINDS and type(value) is str and len(value) > limit:
        value = value[: limit + 1]
    body = _BODY[kind](value)
    if len(body) > limit and kind == BYTES:
        body = body[: limit + 1]
    if kind in _TEXT_KINDS:
        return Cuttable(body, marker=_MARKER_BYTES)
    if kind == BYTES:
        return Cuttable(body)
    return body


# --- the fast path: metadata and per-value packers per event shape (nothing compiled) ------------


def _pack_text(value: Any) -> bytes:
    if len(value) > _U16_MAX:  # can never fit whole: the general path cuts (without encoding it all)
        raise OverflowError("text past u16")
    body: bytes = value.encode("utf-8")  # lone surrogates raise: the general path writes U+FFFD
    return _U16.pack(len(body)) + body  # past u16 raises: the general path cuts


def _pack_time(value: Any) -> bytes:
    return _pack_text(value.isoformat())


def _pack_bytes(value: Any) -> bytes:
    body = value if value.__class__ is bytes else bytes_value(value)
    return _U16.pack(len(body)) + body


def _array_packer(base: int) -> Callable[[Any], bytes]:
    elements = _ARRAY_BODY[base]

    def pack(value: Any) -> bytes:
        return _U16.pack(len(value)) + elements(value)  # more than 65535: raises before packing

    return pack


def _value_packer(kind: int) -> Callable[[Any], bytes]:
    """How the fast path writes one leaf value of ``kind`` (u16 prefix included); raises for a
    value it does not write, and the general path decides."""
    if kind & ARRAY:
        return _ARRAY_PACKERS[kind & ~ARRAY]
    return _VALUE_PACKERS[kind]


class _FieldPlan:
    """Prebuilt metadata extension and the per-leaf packers of one event shape."""

    __slots__ = ("kinds", "meta_block", "packers")

    def __init__(self, meta_block: bytes, kinds: list[int]) -> None:
        self.meta_block = meta_block
        self.kinds = kinds
        self.packers = [_value_packer(k) for k in kinds]

    def pack(self, values: Sequence[Any]) -> bytes:
        """The payload of the leaf values (one per packer)."""
        return b"".join([p(v) for p, v in zip(self.packers, values)])  # noqa: B905 - same length by the shape key


#: (field name, kind) -> the field's metadata: shared by every encoder, filled only from written
#: events (:func:`_remember`), names up to :data:`_FIELD_NAME_MAX` characters.
_FIELDS: Final = ShapeCache(8192, 2 << 20)
_FIELD_NAME_MAX: Final = 256
FieldParts = list[tuple[tuple[str, int], bytes]]


def _field_meta(
    fields: list[Field], out: list[bytes], kinds: list[int], fresh: FieldParts | None = None
) -> None:
    """Append each field's metadata to ``out`` and its leaf kinds (flattened) to ``kinds``; the
    metadata of scalar and array fields built here (not known yet) is added to ``fresh``."""
    known = _FIELDS.first
    for name, kind, value in fields:
        if kind == STRUCT:
            n = len(value)
            if not 1 <= n <= MAX_STRUCT_FIELDS:
                raise ValueError(f"struct field {name!r} has {n} fields (1..{MAX_STRUCT_FIELDS})")
            out.append(_name_bytes(name))
            out.append(bytes((ENC_STRUCT | ENCODING_CHAIN, n)))
            _field_meta(value, out, kinds, fresh)
            continue
        meta = known.get((name, kind))
        if meta is None:
            if kind & ARRAY:
                base = _KIND_META[kind & ~ARRAY]
                meta = _name_bytes(name) + bytes((base[0] | ENCODING_VARRAY,)) + base[1:]
            else:
                meta = _name_bytes(name) + _KIND_META[kind]
            if fresh is not None and type(name) is str:
                fresh.append(((name, kind), meta))
        out.append(meta)
        kinds.append(kind)


def _remember(fresh: FieldParts) -> None:
    """Keep the field metadata of a written event (names up to :data:`_FIELD_NAME_MAX`)."""
    for key, meta in fresh:
        if len(key[0]) <= _FIELD_NAME_MAX:
            _FIELDS.put(key, meta, True, len(key[0]), len(meta))


_remember_walked: Final = _remember


def _scalar_meta(name: str, kind: int) -> bytes:
    """The metadata of one scalar field (what :func:`_field_meta` writes for it)."""
    return _name_bytes(name) + _KIND_META[kind]


def _meta_block(name: str, fields: list[Field], kinds: list[int], fresh: FieldParts | None = None) -> bytes:
    """The Metadata extension of ``fields`` (their leaf kinds appended to ``kinds``).  Raises
    OverflowError when the metadata passes 65535 bytes."""
    out = [_name_bytes(name)]
    _field_meta(fields, out, kinds, fresh)
    meta = b"".join(out)
    if len(meta) > _U16_MAX:
        raise OverflowError("metadata larger than 65535 bytes")
    return _EXT.pack(len(meta), EXT_METADATA) + meta


def _build_plan(name: str, fields: list[Field], fresh: FieldParts | None = None) -> _FieldPlan:
    """The plan of ``fields``' shape.  Raises OverflowError when the metadata passes 65535 bytes."""
    kinds: list[int] = []
    return _FieldPlan(_meta_block(name, fields, kinds, fresh), kinds)


def _shape(fields: list[Field]) -> tuple[Any, ...]:
    """Hashable shape of fields: (name, kind or nested shape) pairs (the flat one is the fast key)."""
    key: list[Any] = []
    for f in fields:
        key.append(f[0])
        key.append(_shape(f[2]) if f[1] == STRUCT else f[1])
    return tuple(key)


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


def _elements(kind: int) -> Callable[[list[Any]], bytes]:
    body = _BODY[kind]
    if kind in _TEXT_KINDS or kind == BYTES:

        def counted(items: list[Any]) -> bytes:
            return b"".join([_U16.pack(len(b)) + b for b in map(body, items)])

        return counted

    def plain(items: list[Any]) -> bytes:
        return b"".join([body(i) for i in items])

    return plain


#: The fast path's array bodies (after the u16 count) per element kind: fixed-size numbers in one
#: ``array`` call, bools as 0/1 bytes, the other kinds element by element.
_ARRAY_BODY: Final[dict[int, Callable[[list[Any]], bytes]]] = {
    **{kind: _elements(kind) for kind in _BODY if kind not in _NULLABLE_BODY},
    **{kind: _fixed_array(code) for kind, code in _ARRAY_CODE.items()},
    BOOL: _bool_array,
}


_VALUE_PACKERS: Final[dict[int, Callable[[Any], bytes]]] = {
    **{kind: struct.Struct("<" + ch).pack for kind, ch in _FIXED_CHAR.items()},
    **_NULLABLE_BODY,
    STR: _pack_text,
    JSON: _pack_text,
    TIME: _pack_time,
    BYTES: _pack_bytes,
    UUID: _uuid_body,
    IPV4: _BODY[IPV4],
    IPV6: _BODY[IPV6],
}
_ARRAY_PACKERS: Final[dict[int, Callable[[Any], bytes]]] = {kind: _array_packer(kind) for kind in _ARRAY_BODY}
#: The interpreted route's table (``_shapes.walk``): value class -> kind, packer, field count.
#: ``None`` is not in it: an event with a ``None`` takes the route of ``encode``, which learns
#: the key as nullable (``EventHeaderEncoder._learn``).
_WALK: Final[Walker] = {
    int: (I64, _VALUE_PACKERS[I64], 1),
    float: (F64, _VALUE_PACKERS[F64], 1),
    bool: (BOOL, _VALUE_PACKERS[BOOL], 1),
    bytes: (BYTES, _pack_bytes, 1),
    uuid.UUID: (UUID, _uuid_body, 1),
    _dt.datetime: (TIME, _pack_time, 1),
}


#: The interpreted route's entries (``_shapes.walk``'s ``keyed``) of a key that has been None.
_WalkEntry = tuple[int, Callable[[Any], bytes], int]
_NULLABLE_I64_PACK: Final = struct.Struct("<Hq").pack
_NULLABLE_F64_PACK: Final = struct.Struct("<Hd").pack
_NULL_OF_NONE: Final = {None: _NULL_BODY}.__getitem__  # None -> u16 length 0, in C


def _first_number(value: Any) -> bytes:
    """A key's first number after its None names its None's type: the route of ``encode`` writes it."""
    raise LookupError("the first number of a nullable key")


def _walk_entries(as_null: int) -> dict[type, _WalkEntry]:
    """The ``keyed`` entries (``_shapes.walk``) of a key that has been None, its None's kind ``as_null``."""
    if as_null == NULL:
        number: tuple[_WalkEntry, _WalkEntry] = ((NULL, _first_number, 1), (NULL, _first_number, 1))
    else:
        number = (
            (I64 | _NULLABLE, functools.partial(_NULLABLE_I64_PACK, 8), 1),  # past int64: raises
            (F64 | _NULLABLE, functools.partial(_NULLABLE_F64_PACK, 8), 1),
        )
    # every class of the interpreted route's table: walk reads one table per value
    return {**_WALK, type(None): (_null_of(as_null), _NULL_OF_NONE, 1), int: number[0], float: number[1]}


#: The ``keyed`` table of each kind a key that has been None can take (shared by every such key).
_NULLABLE_WALK: Final[dict[int, dict[type, _WalkEntry]]] = {
    kind: _walk_entries(kind) for kind in (NULL, *_NULLABLE_KINDS)
}


# --- shape functions: event dict -> event bytes, one generated function per layout ---------------

#: How a shape function writes each kind (the same bytes as the packers above and the general path).
_SHAPE_STEPS: Final[dict[int, Step]] = {
    STR: Step("", "_encode({v})"),  # str.encode: cheaper than the method call
    NONE: Step("", "b''"),  # a null (NULL's metadata: a nullable int64), u16 length 0
    I64: Step("q", "{v}"),
    F64: Step("d", "{v}"),
    BOOL: Step("?", "{v}"),
    BYTES: Step("", "{v}"),
    UUID: Step("16s", "{v}.bytes"),
    TIME: Step("", "{v}.isoformat().encode()"),
    # a key that has been None: its int or float as a counted 8-byte value (``_nullable_body``)
    I64 | _NULLABLE: Step("", "_q({v})"),
    F64 | _NULLABLE: Step("", "_d({v})"),
}
_SHAPE_ENV: Final = {"_q": struct.Struct("<q").pack, "_d": struct.Struct("<d").pack}
#: The compiled packer's op for each kind it writes as :data:`_SHAPE_STEPS` does (a layout with
#: another kind, a UUID or a datetime, runs its generated function).
_SHAPE_OPS: Final[dict[int, str]] = {
    STR: "str",
    NONE: "null_empty",
    I64: "i64",
    F64: "f64",
    BOOL: "bool8",
    BYTES: "bytes",
    I64 | _NULLABLE: "i64_counted",
    F64 | _NULLABLE: "f64_counted",
}
#: The ``f(event, head, meta_block)`` per layout (made when hot; see ``_shapes``): the compiled
#: packer where it is built, else the generated function.
_FUNCTIONS: Final = LayoutFunctions(
    lambda kinds: layout_function(kinds, _SHAPE_OPS, _SHAPE_STEPS, ("h", "m"), _SHAPE_ENV)
)


#: The header bytes of each level's plain header (opcode 0, tag 0, no activity), by the header.
_HEADS: Final[dict[HeaderValue, bytes]] = {
    plain_header(lv): _HEADER.pack(HEADER_FLAGS, 0, 0, 0, 0, lv) for lv in range(256)
}


def _head(header: HeaderValue) -> bytes:
    """The header and the activity extension; ``ValueError`` for values outside their ranges."""
    try:
        head = _HEADS.get(header)
    except TypeError:  # an id of an unhashable type (a bytearray): written all the same
        head = None
    return _new_head(header) if head is None else head


#: The header bytes of recent headers that are not plain ones (an activity's events share one):
#: at most :data:`_RECENT_MAX` entries (each under 200 bytes), cleared when full.
_RECENT: Final[dict[HeaderValue, bytes]] = {}
_RECENT_MAX: Final = 256


def _new_head(header: HeaderValue) -> bytes:
    """:func:`_head` of a header that is not a plain one (kept among the recent ones)."""
    try:
        head = _RECENT.get(header)
    except TypeError:  # an id of an unhashable type (a bytearray): built, not kept
        return _build_head(header)
    if head is None:
        head = _build_head(header)
        if len(_RECENT) >= _RECENT_MAX:
            _RECENT.clear()
        _RECENT[header] = head
    return head


def _build_head(header: HeaderValue) -> bytes:
    problem = header_problem(header, 16)
    if problem is not None:
        raise ValueError(problem)
    level, opcode, tag, activity_id, related_id = header
    head = _HEADER.pack(HEADER_FLAGS, 0, 0, tag, opcode, level)
    if activity_id is not None:
        ids = activity_id if related_id is None else activity_id + related_id
        head = head + _EXT.pack(len(ids), EXT_ACTIVITY_ID | EXTENSION_CHAIN) + ids
    return head


#: A shape cache entry: the metadata block and the shape function.
_ShapeEntry = tuple[bytes, Callable[..., bytes | None]]
#: The entry of a shape that has no shape function (it always takes the general route).
_GENERAL: Final[_ShapeEntry] = (b"", lambda event, head, meta: None)
_MISSING: Final[Any] = object()


# --- the encoder ----------------------------------------------------------------------------------

_TRUE: Final = _BODY[BOOL](True)
#: The field a cut event ends with (its value is already the piece the general path writes).
_TRUNCATED: Final[Field] = (TRUNCATED_FIELD, BOOL, _TRUE)


class EventHeaderEncoder:
    """Encode events for one provider; caches metadata and a packing plan per event shape.

    ``max_size`` bounds the whole event (header, extensions, payload); it defaults to what perf
    keeps (:data:`PERF_MAX_EVENT_SIZE`) and may not exceed :data:`DYN_MAX_EVENT_SIZE`.
    ``truncated`` counts events written with values cut by the size policy.  ``cache_limit``
    bounds the entries of each cache (typed-field plans, event-dict shapes), ``cache_bytes``
    their bytes; only written events are cached, and no shape whose names pass
    :data:`structlog_etw.write.shapes.MAX_KEY_CHARS` characters.
    """

    __slots__ = (
        "_by_classes",
        "_by_keys",
        "_cache",
        "_nullable",
        "_nullable_chars",
        "_nullable_keys",
        "_nullable_walk",
        "_plans",
        "_recent",
        "_shapes",
        "_truncated",
        "cache_limit",
        "max_size",
    )

    def __init__(
        self, max_size: int = PERF_MAX_EVENT_SIZE, cache_limit: int = 2048, cache_bytes: int = 4 << 20
    ) -> None:
        if not 64 <= max_size <= DYN_MAX_EVENT_SIZE:
            raise ValueError(f"max_size must be in 64..{DYN_MAX_EVENT_SIZE}, got {max_size}")
        self.max_size = max_size
        self.cache_limit = cache_limit
        self._truncated = Count()  # no lock, no lost count (re-entry, threads: _util.counters)
        # encode's plans per typed-field shape (name and (field name, kind) pairs).
        self._plans = ShapeCache(cache_limit, cache_bytes)
        self._cache: dict[tuple[Any, ...], _FieldPlan] = self._plans.first
        # encode_dict's shapes: (name, skip, *keys) -> the entry built for the value classes seen
        # first; (name, skip, *keys, *classes) -> the entries of other classes.
        self._shapes = ShapeCache(cache_limit, cache_bytes)
        self._by_keys: dict[tuple[Any, ...], _ShapeEntry] = self._shapes.first
        self._by_classes: dict[tuple[Any, ...], _ShapeEntry] = self._shapes.by_class
        self._recent = self._shapes.recent  # event name -> its last shape entry (ShapeCache.remember)
        # event name -> {field name: the kind its None is written as (NULL: none known yet)}, for
        # the top-level fields that have been None in a written event (bounded like the caches)
        self._nullable: dict[str, dict[str, int]] = {}
        self._nullable_chars = 0
        self._nullable_keys = 0
        # event name -> the interpreted route's table of those keys (``_NULLABLE_WALK``)
        self._nullable_walk: dict[str, dict[str, Walker]] = {}

    @property
    def truncated(self) -> int:
        """Events written with values cut by the size policy."""
        return self._truncated.value()

    def encode(
        self,
        name: str,
        fields: list[Field],
        level: int,
        opcode: int = 0,
        tag: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> bytes | None:
        """``encode_fields(name, fields, Header(level, opcode, tag, activity_id, related_id))``."""
        return self.encode_fields(name, fields, Header(level, opcode, tag, activity_id, related_id))

    def encode_fields(
        self, name: str, fields: list[Field], header: HeaderValue = INFO_HEADER
    ) -> bytes | None:
        """The event bytes (header, extensions, payload), or ``None`` if it cannot fit ``max_size``.

        The error contract (the same for both encoders, docs/limits.md): never raises for a field
        list whose kinds come from the type table, whatever the values: a value that does not fit
        its kind is written as its text (:func:`~structlog_etw.write.fields.normalize`).  Returns
        ``None`` only when the event cannot fit ``max_size`` even with its values cut.  Raises
        ``ValueError`` only for a header outside its ranges: ``level`` or ``opcode`` not in
        0..255, ``tag`` not in 0..65535, an activity or related id not 16 bytes.
        """
        head = _head(header)
        first: list[tuple[str, int]] | None = None
        if self._nullable:
            fields, first = self._nullable_fields(name, fields)
        # The fast path: the shape's plan (metadata and one packer per leaf), nothing compiled.
        try:
            key: list[Any] = [name]
            append = key.append
            flat = True
            for fname, kind, _ in fields:
                if kind == STRUCT:
                    flat = False
                    break
                append(fname)
                append(kind)
            shape = tuple(key) if flat else (name, *_shape(fields))
            plan = self._cache.get(shape)
            new = plan is None
            if plan is None:
                plan = _build_plan(name, fields)
            event = b"".join(
                (head, plan.meta_block, plan.pack([f[2] for f in fields] if flat else leaf_values(fields)))
            )
            if len(event) <= self.max_size:
                if first:  # written: its keys' first numbers name their Nones' types from now on
                    self._first_numbers(name, first)
                if new and type(name) is str:  # written: worth keeping for the next event of its shape
                    if NULL in plan.kinds:
                        self._learn(name, fields)
                    chars = key_chars(name, [f[0] for f in fields]) if flat else len(plan.meta_block)
                    self._plans.put(shape, plan, True, chars, len(plan.meta_block))
                return event
        except Exception:  # a value the packers do not write: the general path decides
            pass
        out = self._encode_general(name, fields, head)
        if first and out is not None:
            self._first_numbers(name, first)
        return out

    def encode_dict(
        self,
        name: str,
        event: Mapping[Any, Any],
        skip: str | None,
        header: HeaderValue = INFO_HEADER,
    ) -> bytes | None:
        """``encode_fields(name, dict_fields(event.items(), skip), header)``, byte for byte, faster.

        ``event``'s items are the fields, except ``exc_info`` and the key ``skip`` (``None``: none
        skipped).  A hot shape (``str`` keys, values of the classes of
        :data:`structlog_etw.write.shapes.SHAPE_KINDS`, written :data:`~structlog_etw.write.shapes.SHAPE_HOT`
        times) is written by its layout's generated function straight from the dict's values (one
        ``struct`` call per run of fixed-size values).  Anything else (a shape not hot yet, a
        layout not compiled yet, another value class, a value the function cannot write, an
        event past ``max_size``) takes the route of :meth:`encode_fields`, which compiles nothing.  Same
        error contract as :meth:`encode_fields`.
        """
        try:
            head = _HEADS.get(header)  # a plain header's; any other: _head builds and checks it
        except TypeError:
            head = None
        if head is None:
            head = _new_head(header)
        key: tuple[Any, ...] | None = None
        entry: _ShapeEntry | None = None
        try:
            recent = self._recent.get(name)  # the name's last shape: no key to build and hash
            if recent is not None and recent[0] == skip and list(event) == recent[1]:
                key, entry = recent[2], recent[3]
            else:
                key = (name, skip, *event)
                entry = self._by_keys.get(key)
                if entry is not None and entry is not _GENERAL:
                    self._shapes.remember(name, skip, key, entry, list(event))
            if entry is not None:
                out = entry[1](event, head, entry[0])
                if out is None:  # the values' classes are not the ones of the first entry
                    entry = self._by_classes.get((*key, *map(type, event.values())))
                    if entry is not None:
                        out = entry[1](event, head, entry[0])
                if out is not None and len(out) <= self.max_size:
                    return out
        except Exception:  # a value the shape function does not write: the general route decides
            pass
        out = None
        fresh: list[tuple[tuple[str, int], bytes]] | None = None
        if entry is not _GENERAL:  # no function for this layout yet: the interpreted route
            try:
                out, fresh = self._walk(name, event, skip, head)
            except Exception:  # a value it does not write: the general route decides
                out = None
        if out is None:
            out = self.encode_fields(name, dict_fields(event.items(), skip), header)
        if out is not None and key is not None:  # written: count the shape towards an entry
            _FUNCTIONS.earn()
            with contextlib.suppress(Exception):
                self._seen(key, name, event, skip, fresh)
        return out

    def _walk(
        self, name: str, event: Mapping[Any, Any], skip: str | None, head: bytes
    ) -> tuple[bytes | None, list[tuple[tuple[str, int], bytes]] | None]:
        """The interpreted shape function (``_shapes.walk``): the event (None for the general
        route: metadata or event past their limits) and the field metadata it had to build."""
        if type(name) is not str:
            return None, None
        fresh: list[tuple[tuple[str, int], bytes]] = []
        keyed = self._nullable_walk.get(name)  # keys that have been None: their nullable kinds
        metas, values, _ = walk(event, skip, _WALK, _FIELDS.first, _scalar_meta, fresh, keyed)
        meta = b"".join((_name_bytes(name), *metas))
        if len(meta) > _U16_MAX:
            return None, None
        out = b"".join((head, _EXT.pack(len(meta), EXT_METADATA), meta, *values))
        if len(out) > self.max_size:
            return None, None
        return out, fresh

    def _seen(
        self,
        key: tuple[Any, ...],
        name: str,
        event: Mapping[Any, Any],
        skip: str | None,
        fresh: list[tuple[tuple[str, int], bytes]] | None,
    ) -> None:
        """The general route wrote an event of ``key``'s shape (:meth:`ShapeCache.written`); once
        hot, its entry: ``_GENERAL`` when the shape has no shape function."""
        nullable = self._nullable.get(name)
        hot = self._shapes.written(
            key, name, event, skip, fresh, _remember_walked, _GENERAL, _FUNCTIONS, nullable, _null_of
        )
        if hot is None:
            return
        entry = _GENERAL
        if hot.fn is not None:
            try:
                entry = (_meta_block(name, list(hot.template), []), hot.fn)
            except OverflowError:  # metadata past u16: the general route drops the event
                entry = _GENERAL
        self._shapes.put(hot.key, entry, hot.first, hot.chars, len(entry[0]))

    def _nullable_fields(
        self, name: str, fields: list[Field]
    ) -> tuple[list[Field], list[tuple[str, int]] | None]:
        """``fields`` with the keys of ``name`` that have been None in its written events in their
        nullable type: an int64/uint64/float64 value nullable, a None as the type its key's first
        number had (before one is written: NULL, a nullable int64).  Other kinds (a str, a bool,
        ...) stay as they are.  Second: the keys whose first number this is, with its kind, for
        :meth:`_first_numbers` once the event is written (None: no such key)."""
        known = self._nullable.get(name) if type(name) is str else None
        if not known:
            return fields, None
        out: list[Field] = []
        first: list[tuple[str, int]] | None = None
        for f in fields:
            kind = f[1]
            as_null = known.get(f[0]) if type(f[0]) is str and type(kind) is int else None
            if as_null is None:
                out.append(f)
            elif kind == NULL:
                out.append((f[0], _null_of(as_null), None))
            elif kind in _NULLABLE_KINDS:
                if as_null == NULL:  # the key's first number: learned if this event is written
                    if first is None:
                        first = []
                    first.append((f[0], kind))
                out.append((f[0], kind | _NULLABLE, f[2]))
            else:
                out.append(f)
        return out, first

    def _first_numbers(self, name: str, first: list[tuple[str, int]]) -> None:
        """An event of ``name`` was written with the first number of keys that have been None:
        each key's None is written as its number's kind from now on (nothing is learned from an
        event that was not written)."""
        known = self._nullable.get(name)
        if known is None:  # forgotten meanwhile (the caches' bounds)
            return
        for key, kind in first:
            if known.get(key) == NULL:
                known[key] = kind
                self._nullable_walk.setdefault(name, {})[key] = _NULLABLE_WALK[kind]
        self._shapes.clear()  # (entries wrote its None as a nullable int64)

    def _learn(self, name: str, fields: list[Field]) -> None:
        """A written event of ``name`` had NULL fields: their keys are nullable from now on.  A new
        key forgets the shape entries (built without it); past the caches' bounds all is forgotten."""
        known = self._nullable.get(name)
        for f in fields:
            if f[1] != NULL or type(f[0]) is not str or (known is not None and f[0] in known):
                continue
            chars = 200 + len(name) + len(f[0])  # reckoned like a shape cache entry
            if (
                self._nullable_keys >= self.cache_limit
                or self._nullable_chars + chars > self._shapes.max_bytes
            ):
                self._nullable.clear()
                self._nullable_walk.clear()
                self._nullable_chars = self._nullable_keys = 0
                self._plans.clear()  # plans learn their keys again when rebuilt
                known = None
            if known is None:
                known = self._nullable.setdefault(name, {})
            known[f[0]] = NULL
            self._nullable_walk.setdefault(name, {})[f[0]] = _NULLABLE_WALK[NULL]
            self._nullable_chars += chars
            self._nullable_keys += 1
            self._shapes.clear()

    def _encode_general(self, name: str, fields: list[Field], head: bytes) -> bytes | None:
        """The general path: any field list, the pieces built once, then joined whole or cut.

        ``head`` is the header and activity extension; a cut event gets the ``_truncated`` field.
        Nothing is cached here (an event on this path may be one that is never written).
        """
        if type(name) is not str:
            name = safe_str(name)
        limit = self.max_size
        work = normalize(fields, lambda kind, value: _piece(kind, value, limit))
        pieces: list[Piece] = leaf_values(work)
        try:
            meta = _meta_block(name, work, [])
            if len(head) + len(meta) + whole_size(pieces) <= self.max_size:
                return b"".join((head, meta, joined(pieces)))
            meta = _meta_block(name, [*json_as_str(work), _TRUNCATED], [])
        except OverflowError:  # the metadata alone is past the u16 extension size: too large
            return None
        pieces.append(_TRUE)
        cap = water_level(pieces, self.max_size - len(head) - len(meta))
        if cap is None:  # not even the fixed part and the markers of the cut strings fit
            return None
        event = b"".join((head, meta, joined(pieces, cap)))
        self._truncated.add()
        return event
