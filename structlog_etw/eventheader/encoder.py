"""EventHeader encoding for Linux user_events (Microsoft's LinuxTracepoints convention).

An event is::

    eventheader (8 bytes: flags, version, id, tag, opcode, level)
    [ActivityId extension: u16 size (16 or 32), u16 kind 2 | chain, activity id [, related id]]
    Metadata extension:   u16 size, u16 kind 1, event name NUL, per field: name NUL, encoding, [format]
    payload:              little-endian field values

Tracepoints are named ``<Provider>_L<level>K<keyword>[G<group>]`` (:mod:`~structlog_etw.eventheader.spec`).
:class:`EventHeaderEncoder` turns an event name and a list of
:data:`~structlog_etw.fields.Field` into the bytes handed to ``writev`` after the write
index.  Metadata and a packing plan are built once per *event shape* (name, field names,
kinds, nested) and cached; a bounded cache keeps high-cardinality names from growing memory.

Three routes, one result:

* :meth:`EventHeaderEncoder.encode_dict` takes the event dict itself (a log call's fields) and
  writes the common shapes with a function generated per shape's *layout* (:mod:`structlog_etw._shapes`),
  straight from the dict's values; anything else goes through ``dict_fields`` and
  :meth:`EventHeaderEncoder.encode`;
* the **fast path** packs the values with a function generated for the shape's kinds
  (straight-line code, cached); it is taken when every value is what its kind expects and the
  event fits;
* anything else (a value the generated code cannot write, an event too large) takes the one
  **general path**: :func:`~structlog_etw.fields.normalize` turns each value into a piece (a
  value that cannot be written as its kind is written as its text), and the pieces are joined
  whole when they fit, or cut by the shared size policy (:mod:`structlog_etw._size_policy`).

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

import itertools
import re
import struct
import sys
from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from .._counters import count_value
from .._shapes import NONE, SKIP, Step, compile_packer, layout
from .._size_policy import Cuttable, Piece, joined, water_level, whole_size
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
    dict_fields,
    json_as_str,
    leaf_values,
    normalize,
    safe_str,
)
from .spec import (
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
    event name there) and NUL ends the name: both become ``_``.  Lone surrogates become U+FFFD
    when encoded.
    """
    if ";" in name:
        name = name.replace(";", "_")
    if "\0" in name:
        name = name.replace("\0", "_")
    return name


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


_BODY: Final[dict[int, Callable[[Any], bytes]]] = {
    **{kind: struct.Struct("<" + ch).pack for kind, ch in _FIXED_CHAR.items()},
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


def _piece(kind: int, value: Any) -> Piece:
    """One value as the general path writes it: fixed bytes, or a cuttable string, binary or array.

    Raises when ``value`` is not what ``kind`` expects (:func:`~structlog_etw.fields.normalize`
    then writes the value's text instead).
    """
    if kind & ARRAY:
        base = kind & ~ARRAY
        if base not in _BODY:
            raise ValueError(f"not an array kind: {kind!r}")
        return Cuttable.array([_piece(base, item) for item in value])
    body = _BODY[kind](value)
    if kind in _TEXT_KINDS:
        return Cuttable(body, marker=_MARKER_BYTES)
    if kind == BYTES:
        return Cuttable(body)
    return body


# --- the fast path: metadata and a generated packer per event shape --------------------------------


class _Plan:
    """Prebuilt metadata extension and generated payload packers for one event shape."""

    __slots__ = ("meta_block", "pack", "pack_fields")

    def __init__(self, meta_block: bytes, kinds: list[int]) -> None:
        self.meta_block = meta_block
        self.pack, self.pack_fields = _packer(tuple(kinds))


def _field_meta(fields: list[Field], out: list[bytes], kinds: list[int]) -> None:
    """Append each field's metadata to ``out`` and its leaf kinds (flattened) to ``kinds``."""
    for name, kind, value in fields:
        out.append(_name_bytes(name))
        if kind == STRUCT:
            n = len(value)
            if not 1 <= n <= MAX_STRUCT_FIELDS:
                raise ValueError(f"struct field {name!r} has {n} fields (1..{MAX_STRUCT_FIELDS})")
            out.append(bytes((ENC_STRUCT | ENCODING_CHAIN, n)))
            _field_meta(value, out, kinds)
            continue
        if kind & ARRAY:
            base = _KIND_META[kind & ~ARRAY]
            out.append(bytes((base[0] | ENCODING_VARRAY,)) + base[1:])
        else:
            out.append(_KIND_META[kind])
        kinds.append(kind)


def _build_plan(name: str, fields: list[Field]) -> _Plan:
    """The plan of ``fields``' shape.  Raises OverflowError when the metadata passes 65535 bytes."""
    out = [_name_bytes(name)]
    kinds: list[int] = []
    _field_meta(fields, out, kinds)
    meta = b"".join(out)
    if len(meta) > _U16_MAX:
        raise OverflowError("metadata larger than 65535 bytes")
    return _Plan(_EXT.pack(len(meta), EXT_METADATA) + meta, kinds)


def _shape(fields: list[Field]) -> tuple[Any, ...]:
    """Hashable shape of fields: (name, kind or nested shape) pairs (the flat one is the fast key)."""
    key: list[Any] = []
    for f in fields:
        key.append(f[0])
        key.append(_shape(f[2]) if f[1] == STRUCT else f[1])
    return tuple(key)


# Payload steps: (op, arg).  Values arrive flattened in field order (structs contribute their
# children, not themselves).
_OP_FIXED: Final = 0  # arg: (struct.Struct, count) - consecutive fixed-size scalars
_OP_TEXT: Final = 1  # arg: "" (a str) or ".isoformat()" (a datetime) -> u16 length + UTF-8
_OP_BYTES: Final = 2  # bytes -> u16 length + bytes
_OP_UUID: Final = 3  # uuid.UUID -> 16 bytes
_OP_RAW: Final = 4  # arg: the address kind - bytes of exactly its size
_OP_ARRAY: Final = 5  # arg: the element kind -> u16 count + elements

_SCALAR_STEP: Final[dict[int, tuple[int, Any]]] = {
    STR: (_OP_TEXT, ""),
    JSON: (_OP_TEXT, ""),
    TIME: (_OP_TEXT, ".isoformat()"),
    BYTES: (_OP_BYTES, None),
    UUID: (_OP_UUID, None),
    IPV4: (_OP_RAW, IPV4),
    IPV6: (_OP_RAW, IPV6),
}


def _steps(kinds: list[int]) -> list[tuple[int, Any]]:
    """Payload steps for flattened leaf kinds, merging runs of fixed-size scalars into one Struct."""
    steps: list[tuple[int, Any]] = []
    run = ""
    for kind in kinds:
        ch = _FIXED_CHAR.get(kind)
        if ch is not None:
            run += ch
            continue
        if run:
            steps.append((_OP_FIXED, (struct.Struct("<" + run), len(run))))
            run = ""
        steps.append((_OP_ARRAY, kind & ~ARRAY) if kind & ARRAY else _SCALAR_STEP[kind])
    if run:
        steps.append((_OP_FIXED, (struct.Struct("<" + run), len(run))))
    return steps


Packer = Callable[[Sequence[Any]], bytes]
FieldsPacker = Callable[[Sequence[Any], bytes, bytes], bytes]
_PACKERS: dict[tuple[int, ...], tuple[Packer, FieldsPacker]] = {}
_PACKER_LIMIT: Final = 1024


def _packer(kinds: tuple[int, ...]) -> tuple[Packer, FieldsPacker]:
    """Generated payload functions for a sequence of leaf kinds (shared by all shapes with the same
    kinds, whatever their names, so new event names cost no compilation).

    The first function takes the flat values; the second a flat field list (it reads each
    field's value in place, so the encoder need not collect the values first), the header and
    the metadata block, and returns the whole event.
    """
    hit = _PACKERS.get(kinds)
    if hit is None:
        steps = _steps(list(kinds))
        hit = (_generate(steps, "v[{}]"), _generate(steps, "v[{}][2]", "h, m, "))
        if len(_PACKERS) >= _PACKER_LIMIT:
            _PACKERS.clear()
        _PACKERS[kinds] = hit
    return hit


def _generate(steps: list[tuple[int, Any]], item: str, lead: str = "") -> Any:
    """Compile ``values -> payload bytes`` for ``steps``: straight-line code, no per-value dispatch.

    ``item`` is how value ``i`` is read from the argument ``v`` (``"v[{}]"`` for a value list,
    ``"v[{}][2]"`` for a flat field list).  With ``lead="h, m, "`` the function takes
    ``(v, h, m)`` and returns ``h + m + payload`` (the header and metadata joined in the same call).

    The source is built only from our own step table (indices and helper names, never from field
    names or values).  Raises on values the fast path does not write (text that is not valid
    UTF-8, lengths past u16, wrong types); the encoder then takes the general path.
    """
    env: dict[str, Any] = {"_u16": _U16.pack}
    pre: list[str] = []
    parts: list[str] = []
    i = 0
    for k, (op, arg) in enumerate(steps):
        vi = item.format(i)
        if op == _OP_FIXED:
            st, n = arg
            env[f"_s{k}"] = st.pack
            parts.append(f"_s{k}({', '.join(item.format(j) for j in range(i, i + n))})")
            i += n
            continue
        if op == _OP_TEXT:
            pre.append(f"b{k} = {vi}{arg}.encode('utf-8')")
            parts += [f"_u16(len(b{k}))", f"b{k}"]
        elif op == _OP_BYTES:
            env["_bytes"] = bytes_value
            pre.append(f"b{k} = {vi}")
            pre.append(f"if b{k}.__class__ is not bytes: b{k} = _bytes(b{k})")
            parts += [f"_u16(len(b{k}))", f"b{k}"]
        elif op == _OP_UUID:
            parts.append(f"{vi}.bytes")
        elif op == _OP_RAW:
            env[f"_r{k}"] = _BODY[arg]
            parts.append(f"_r{k}({vi})")
        else:
            env[f"_a{k}"] = _ARRAY_BODY[arg]
            parts += [f"_u16(len({vi}))", f"_a{k}({vi})"]
        i += 1
    body = "".join(f"    {line}\n" for line in pre)
    args = f"v, {lead[:-2]}" if lead else "v"
    src = f"def pack({args}):\n{body}    return b''.join(({lead}{', '.join(parts)}{',' if parts else ''}))\n"
    exec(compile(src, "<structlog_etw eventheader packer>", "exec"), env)
    return env["pack"]


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
    **{kind: _elements(kind) for kind in _BODY},
    **{kind: _fixed_array(code) for kind, code in _ARRAY_CODE.items()},
    BOOL: _bool_array,
}


# --- shape functions: event dict -> event bytes, one generated function per layout ---------------

#: How a shape function writes each kind (the same bytes as the packers above and the general path).
_SHAPE_STEPS: Final[dict[int, Step]] = {
    STR: Step("", "{v}.encode()"),
    NONE: Step("", "b'None'"),
    I64: Step("q", "{v}"),
    F64: Step("d", "{v}"),
    BOOL: Step("?", "{v}"),
    BYTES: Step("", "{v}"),
    UUID: Step("16s", "{v}.bytes"),
    TIME: Step("", "{v}.isoformat().encode()"),
}
_SHAPE_FNS: dict[tuple[int, ...], Callable[..., bytes | None]] = {}


def _shape_fn(kinds: tuple[int, ...]) -> Callable[..., bytes | None]:
    """The generated ``f(event, head, meta_block)`` for a layout (shared by every shape with the
    same layout, whatever its names: a new event name costs no compilation)."""
    fn = _SHAPE_FNS.get(kinds)
    if fn is None:
        fn = compile_packer(kinds, _SHAPE_STEPS, ("h", "m"))
        if len(_SHAPE_FNS) >= _PACKER_LIMIT:
            _SHAPE_FNS.clear()
        _SHAPE_FNS[kinds] = fn
    return fn


#: Header bytes of an event with opcode 0, tag 0 and no activity, per level.
_HEADS: Final[dict[int, bytes]] = {lv: _HEADER.pack(HEADER_FLAGS, 0, 0, 0, 0, lv) for lv in range(256)}


def _head(level: int, opcode: int, tag: int, activity_id: bytes | None, related_id: bytes | None) -> bytes:
    """The header and the activity extension; ``ValueError`` for arguments outside their ranges."""
    try:
        head = _HEADER.pack(HEADER_FLAGS, 0, 0, tag, opcode, level)
    except struct.error:
        raise ValueError(
            f"level and opcode must be in 0..255 and tag in 0..65535, got {level}, {opcode}, {tag}"
        ) from None
    if activity_id is not None:
        if len(activity_id) != 16 or (related_id is not None and len(related_id) != 16):
            raise ValueError("activity ids must be 16 bytes")
        ids = activity_id if related_id is None else activity_id + related_id
        head = head + _EXT.pack(len(ids), EXT_ACTIVITY_ID | EXTENSION_CHAIN) + ids
    return head


#: A shape cache entry: the metadata block and the shape function, or ``None`` (general route).
_ShapeEntry = tuple[bytes, Callable[..., bytes | None]] | None
#: What the shape caches' ``get`` returns for a shape not seen yet.
_MISSING: Final[Any] = object()


# --- the encoder ----------------------------------------------------------------------------------

_TRUE: Final = _BODY[BOOL](True)
#: The field a cut event ends with (its value is already the piece the general path writes).
_TRUNCATED: Final[Field] = (TRUNCATED_FIELD, BOOL, _TRUE)


class EventHeaderEncoder:
    """Encode events for one provider; caches metadata and a packing plan per event shape.

    ``max_size`` bounds the whole event (header, extensions, payload); it defaults to what perf
    keeps (:data:`PERF_MAX_EVENT_SIZE`) and may not exceed :data:`DYN_MAX_EVENT_SIZE`.
    ``truncated`` counts events written with values cut by the size policy.
    """

    __slots__ = ("_by_classes", "_by_keys", "_cache", "_truncated", "cache_limit", "max_size")

    def __init__(self, max_size: int = PERF_MAX_EVENT_SIZE, cache_limit: int = 2048) -> None:
        if not 64 <= max_size <= DYN_MAX_EVENT_SIZE:
            raise ValueError(f"max_size must be in 64..{DYN_MAX_EVENT_SIZE}, got {max_size}")
        self.max_size = max_size
        self.cache_limit = cache_limit
        self._truncated = itertools.count()  # next(): one C call, safe under re-entry
        self._cache: dict[Any, _Plan] = {}
        # encode_dict's shape caches: (name, skip, *keys) -> the entry built for the value classes
        # seen first; (name, skip, *keys, *classes) -> the entries of other classes.
        self._by_keys: dict[tuple[Any, ...], _ShapeEntry] = {}
        self._by_classes: dict[tuple[Any, ...], _ShapeEntry] = {}

    @property
    def truncated(self) -> int:
        """Events written with values cut by the size policy."""
        return count_value(self._truncated)

    def _plan(self, name: str, fields: list[Field]) -> _Plan:
        key = (name, *_shape(fields))
        plan = self._cache.get(key)
        if plan is None:
            plan = self._store(key, _build_plan(name, fields))
        return plan

    def _store(self, key: Any, plan: _Plan) -> _Plan:
        cache = self._cache
        if len(cache) >= self.cache_limit:
            cache.clear()
        cache[key] = plan
        return plan

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
        """The event bytes (header, extensions, payload), or ``None`` if it cannot fit ``max_size``.

        The error contract (the same for both encoders, docs/limits.md): never raises for a field
        list whose kinds come from the type table, whatever the values: a value that does not fit
        its kind is written as its text (:func:`~structlog_etw.fields.normalize`).  Returns
        ``None`` only when the event cannot fit ``max_size`` even with its values cut.  Raises
        ``ValueError`` only for arguments outside the header's ranges: ``level`` or ``opcode``
        not in 0..255, ``tag`` not in 0..65535, an activity or related id not 16 bytes.
        """
        head = _head(level, opcode, tag, activity_id, related_id)
        # The fast path.  The common case first: flat fields (no struct), the shape key built in
        # one pass and the generated packer reading the values from the fields in place.
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
            if flat:
                shape = tuple(key)
                plan = self._cache.get(shape)
                if plan is None:
                    plan = self._store(shape, _build_plan(name, fields))
                event = plan.pack_fields(fields, head, plan.meta_block)
            else:
                plan = self._plan(name, fields)
                event = b"".join((head, plan.meta_block, plan.pack(leaf_values(fields))))
            if len(event) <= self.max_size:
                return event
        except Exception:  # a value the generated code does not write: the general path decides
            pass
        return self._encode_general(name, fields, head)

    def encode_dict(
        self,
        name: str,
        event: Mapping[Any, Any],
        skip: str | None,
        level: int,
        opcode: int = 0,
        tag: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> bytes | None:
        """``encode(name, dict_fields(event.items(), skip), level, ...)``, byte for byte, faster.

        ``event``'s items are the fields, except ``exc_info`` and the key ``skip`` (``None``: none
        skipped).  An event whose keys are ``str`` and whose values are of the classes of
        :data:`structlog_etw._shapes.SHAPE_KINDS` is written by its shape's generated function
        straight from the dict's values (one ``struct`` call per run of fixed-size values); the
        shape (event name, ``skip``, keys) and its metadata are cached, bounded by
        ``cache_limit`` like the plans.  Anything else, or a value the function cannot write (an
        int past int64, a string with lone surrogates, an event past ``max_size``), takes the
        route of :meth:`encode`.  Same error contract as :meth:`encode`.
        """
        simple = type(level) is int and opcode == 0 and tag == 0 and activity_id is None
        head = _HEADS.get(level) if simple else None
        if head is None:
            head = _head(level, opcode, tag, activity_id, related_id)
        try:
            entry: _ShapeEntry = self._by_keys.get((name, skip, *event), _MISSING)
            if entry is _MISSING:
                entry = self._shape_entry(name, event, skip, True)
            out = None if entry is None else entry[1](event, head, entry[0])
            if out is None:  # the values' classes are not the ones of the first entry (or it had none)
                entry = self._by_classes.get((name, skip, *event, *map(type, event.values())), _MISSING)
                if entry is _MISSING:
                    entry = self._shape_entry(name, event, skip, False)
                if entry is not None:
                    out = entry[1](event, head, entry[0])
            if out is not None and len(out) <= self.max_size:
                return out
        except Exception:  # a value the shape function does not write: the general route decides
            pass
        return self.encode(
            name, dict_fields(event.items(), skip), level, opcode, tag, activity_id, related_id
        )

    def _shape_entry(self, name: str, event: Mapping[Any, Any], skip: str | None, first: bool) -> _ShapeEntry:
        """Build and cache the entry of ``event``'s shape: in ``_by_keys`` when ``first``, else
        in ``_by_classes``.  ``None`` (cached too) when the shape has no shape function."""
        keys = tuple(event)
        classes = tuple(map(type, event.values()))
        entry: _ShapeEntry = None
        if type(name) is str:
            kinds = layout(keys, classes, skip)
            if kinds is not None:
                template = [
                    (k, STR if kind == NONE else kind, None)
                    for k, kind in zip(keys, kinds, strict=True)
                    if kind != SKIP
                ]
                try:
                    entry = (_build_plan(name, template).meta_block, _shape_fn(kinds))
                except OverflowError:  # metadata past u16: the general route drops the event
                    entry = None
        cache = self._by_keys if first else self._by_classes
        if len(cache) >= self.cache_limit:
            cache.clear()
        cache[(name, skip, *keys) if first else (name, skip, *keys, *classes)] = entry
        return entry

    def _encode_general(self, name: str, fields: list[Field], head: bytes) -> bytes | None:
        """The general path: any field list, the pieces built once, then joined whole or cut.

        ``head`` is the header and activity extension; a cut event gets the ``_truncated`` field.
        """
        if type(name) is not str:
            name = safe_str(name)
        work = normalize(fields, _piece)
        pieces: list[Piece] = leaf_values(work)
        try:
            meta = self._plan(name, work).meta_block
            if len(head) + len(meta) + whole_size(pieces) <= self.max_size:
                return b"".join((head, meta, joined(pieces)))
            meta = self._plan(name, [*json_as_str(work), _TRUNCATED]).meta_block
        except OverflowError:  # the metadata alone is past the u16 extension size: too large
            return None
        pieces.append(_TRUE)
        cap = water_level(pieces, self.max_size - len(head) - len(meta))
        if cap is None:  # not even the fixed part and the markers of the cut strings fit
            return None
        event = b"".join((head, meta, joined(pieces, cap)))
        next(self._truncated)
        return event
