"""TraceLogging encoder: typed fields -> event metadata and event data (next to the provider traits).

Pure Python, no structlog.  One :class:`TraceLoggingEncoder` per provider; it turns a
name and a ``list[Field]`` (see :mod:`structlog_etw.write.fields`) into the two blobs a
TraceLogging event carries next to the provider traits: the event *metadata* (tags,
name, field names and types) and the event *data* (the packed values).  Metadata and
a packing plan are built once per event shape (name, tags, field names and kinds)
and cached.

Type mapping (``fields`` kind -> InType / OutType)::

    BOOL   -> BOOL32                   I64  -> INT64           U64 -> UINT64
    F64    -> DOUBLE                   STR  -> COUNTEDANSISTRING / UTF8
    BYTES  -> COUNTEDBINARY            UUID -> GUID (bytes_le)
    IPV4   -> UINT32 / IPV4 (the 4 network-order bytes)
    IPV6   -> BINARY / IPV6 (scalar); COUNTEDBINARY / IPV6 (array: BINARY has no arrays)
    TIME   -> FILETIME / DATETIME_UTC (aware: converted to UTC; naive: taken as local time)
    JSON   -> COUNTEDANSISTRING / JSON
    U8 -> UINT8    I16 -> INT16    U16 -> UINT16 / UNSIGNED    U32 -> UINT32
    STRUCT -> STRUCT (member count in OutMeta), nested
    kind|ARRAY -> the item type with VCount (u16 count in the data)

Three routes, one result: :meth:`TraceLoggingEncoder.encode_dict` writes the common shapes of an
event dict with a function generated per shape's layout (:mod:`structlog_etw.write.shapes`), anything
else goes through ``dict_fields`` and :meth:`~TraceLoggingEncoder.encode`; there, the **fast
path** packs the values with the cached plan's packers and is taken when every value is what its
kind expects and the event fits; anything else takes the one
**general path**: :func:`~structlog_etw.write.fields.normalize` turns each value into a piece (a value
that cannot be written as its kind, such as a datetime before 1601, is written as its text),
TraceLogging's limits are applied, and the pieces are joined whole or cut by the size policy
both encoders share (:mod:`structlog_etw.write._size_policy`, docs/limits.md).

Size policy (ETW drops an event silently when it is too large, so we never hand it one):
the whole event (traits + metadata + data) must fit ``max_size`` (default 64,000 bytes, below
ETW's 64 KB limit with room for the ETW header and extended data); the metadata must be under
32 KB; at most 128 logical fields (BINARY, COUNTEDBINARY and arrays count 2, a struct 1 plus
its members).  An event over the field budget or the metadata budget keeps its leading fields
(the first struct over the field budget as JSON text); an event over the size budget has its
longest values cut to one cap (strings end in ``...[truncated]``, binaries and arrays are
shortened; a cut JSON value becomes a plain string).  Either way a trailing ``_truncated=True``
field is added and :attr:`TraceLoggingEncoder.truncated` counts it.  If even that cannot fit (e.g.
the event name alone is too long), :meth:`TraceLoggingEncoder.encode` returns ``None`` and the
provider counts the event as dropped (``too_large``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import ipaddress
import json
import math
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..._util.counters import Count
from ...formats.header import INFO_HEADER, Header, HeaderValue, header_problem, plain_header
from ...formats.tracelogging import (
    DEFAULT_MAX_SIZE,
    MAX_FIELDS,
    MAX_METADATA,
    InType,
    OutType,
    TraceLoggingEvent,
    group_guid,
    name_bytes,
    provider_traits,
    valid_text,
    validate_provider_name,
)
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
    dict_fields,
    json_as_str,
    leaf_values,
    normalize,
    safe_str,
)
from ..shapes import (
    NONE,
    LayoutFunctions,
    ShapeCache,
    Step,
    Walker,
    layout_function,
    walk,
)

__all__ = [
    "TraceLoggingEncoder",
    "encode_tag",
    "event_metadata",
    "field_metadata",
    "filetime",
]


#: The largest ``max_size`` accepted (ETW's own limit is 64 KB including its header).
_MAX_MAX_SIZE: Final = 65535
_MIN_MAX_SIZE: Final = 1024
#: Suffix of a string value that was cut by the size policy.
_MARKER_BYTES: Final = TRUNCATION_MARKER.encode()

# ---------------------------------------------------------------------------------------------
# Metadata building blocks (also the low-level builder API used by tests)


def encode_tag(tag: int, size: int | None = None) -> bytes:
    """A 28-bit tag, most-significant 7-bit group first, 0x80 on every byte but the last.

    ``size`` None picks the shortest of 1, 2 or 4 bytes (event tags); field tags use 4.
    """
    tag &= 0x0FFFFFFF
    if size is None:
        size = 1 if tag & 0x0FE00000 == tag else 2 if tag & 0x0FFFC000 == tag else 4
    out = bytearray()
    for i in range(size):
        b = (tag >> (21 - 7 * i)) & 0x7F
        out.append(b | 0x80 if i < size - 1 else b)
    return bytes(out)


def field_metadata(
    name: str,
    in_type: int,
    out_type: int = 0,
    tag: int = 0,
    *,
    vcount: bool = False,
    ccount: int | None = None,
) -> bytes:
    """One field's metadata: name, InMeta, [OutMeta], [4-byte tag], [u16 constant count].

    For a struct pass ``in_type=InType.STRUCT`` and the member count as ``out_type``.
    """
    in_meta = in_type
    if vcount:
        in_meta |= InType.VCOUNT
    if ccount is not None:
        in_meta |= InType.CCOUNT
    out = name_bytes(name)
    if tag:
        out += bytes((in_meta | InType.CHAIN, out_type | OutType.CHAIN)) + encode_tag(tag, 4)
    elif out_type:
        out += bytes((in_meta | InType.CHAIN, out_type))
    else:
        out += bytes((in_meta,))
    if ccount is not None:
        out += struct.pack("<H", ccount)
    return out


def event_metadata(name: str, fields: Sequence[bytes], tags: int = 0) -> bytes:
    """Event metadata: u16 size, event tags, the name (NUL-terminated), the fields' metadata."""
    body = encode_tag(tags) + name_bytes(name) + b"".join(fields)
    return struct.pack("<H", len(body) + 2) + body


# ---------------------------------------------------------------------------------------------
# Value packers

_U16: Final = struct.Struct("<H")
_I32: Final = struct.Struct("<i")
_I64S: Final = struct.Struct("<q")
_U64S: Final = struct.Struct("<Q")
_F64S: Final = struct.Struct("<d")
_U16_16: Final = _U16.pack(16)

_UTC: Final = _dt.timezone.utc
_FILETIME_EPOCH: Final = _dt.datetime(1601, 1, 1, tzinfo=_UTC)
_ONE_US: Final = _dt.timedelta(microseconds=1)

Packer = Callable[[Any], bytes]


def filetime(value: _dt.datetime) -> int:
    """FILETIME ticks (100 ns since 1601-01-01 UTC); a naive datetime is taken as local time."""
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.astimezone(_UTC)
    return ((value - _FILETIME_EPOCH) // _ONE_US) * 10


def _pack_str(value: str) -> bytes:
    if len(value) > 0xFFFF:  # can never fit whole: the general path cuts (without encoding it all)
        raise OverflowError("text past u16")
    b = value.encode()
    return _U16.pack(len(b)) + b


#: ``None`` (the NULL kind): TraceLogging has no null, so it is the text ``"None"`` (docs/types.md).
_NONE_VALUE: Final = _pack_str("None")


def _pack_none(value: Any) -> bytes:
    return _NONE_VALUE


def _pack_bytes(value: bytes) -> bytes:
    if value.__class__ is not bytes:
        value = bytes_value(value)
    return _U16.pack(len(value)) + value


def _pack_bool(value: bool) -> bytes:
    return _I32.pack(1 if value else 0)


def _pack_uuid(value: uuid.UUID) -> bytes:
    return value.bytes_le


def _pack_ipv4(value: bytes) -> bytes:
    if len(value) != 4:
        raise ValueError("IPv4 address must be 4 bytes")
    return bytes(value)


def _pack_ipv6(value: bytes) -> bytes:
    """u16 length + the 16 address bytes (BINARY scalar and COUNTEDBINARY array item alike)."""
    if len(value) != 16:
        raise ValueError("IPv6 address must be 16 bytes")
    return _U16_16 + value


def _pack_time(value: _dt.datetime) -> bytes:
    return _U64S.pack(filetime(value))


# kind -> (InType, OutType, packer, fixed struct format of one item or "")
_SCALARS: Final[dict[int, tuple[int, int, Packer, str]]] = {
    BOOL: (InType.BOOL32, 0, _pack_bool, "i"),
    I64: (InType.INT64, 0, _I64S.pack, "q"),
    U64: (InType.UINT64, 0, _U64S.pack, "Q"),
    F64: (InType.DOUBLE, 0, _F64S.pack, "d"),
    STR: (InType.COUNTEDANSISTRING, OutType.UTF8, _pack_str, ""),
    BYTES: (InType.COUNTEDBINARY, 0, _pack_bytes, ""),
    UUID: (InType.GUID, 0, _pack_uuid, ""),
    IPV4: (InType.UINT32, OutType.IPV4, _pack_ipv4, ""),
    IPV6: (InType.BINARY, OutType.IPV6, _pack_ipv6, ""),
    TIME: (InType.FILETIME, OutType.DATETIME_UTC, _pack_time, ""),
    JSON: (InType.COUNTEDANSISTRING, OutType.JSON, _pack_str, ""),
    # fixed widths for prescribed layouts (Common Schema); U16 with OutType UNSIGNED as
    # OpenTelemetry's ETW exporters write ``__csver__``
    U8: (InType.UINT8, 0, struct.Struct("<B").pack, "B"),
    I16: (InType.INT16, 0, struct.Struct("<h").pack, "h"),
    U16: (InType.UINT16, OutType.UNSIGNED, struct.Struct("<H").pack, "H"),
    U32: (InType.UINT32, 0, struct.Struct("<I").pack, "I"),
    NULL: (InType.COUNTEDANSISTRING, OutType.UTF8, _pack_none, ""),
}


def _array_packer(kind: int) -> Packer:
    _, _, item, fmt = _SCALARS[kind]
    if fmt:
        code = "<H%d" + fmt

        if kind == BOOL:

            def pack_bools(items: list[Any]) -> bytes:
                n = len(items)
                return struct.pack(code % n, n, *[1 if i else 0 for i in items])

            return pack_bools

        def pack_fixed(items: list[Any]) -> bytes:
            n = len(items)
            return struct.pack(code % n, n, *items)

        return pack_fixed

    def pack_items(items: list[Any]) -> bytes:
        return _U16.pack(len(items)) + b"".join([item(i) for i in items])

    return pack_items


_ARRAY_PACKERS: Final[dict[int, Packer]] = {kind: _array_packer(kind) for kind in _SCALARS}


def _struct_packer(packers: list[Packer]) -> Packer:
    def pack_struct(value: list[Field]) -> bytes:
        if len(value) != len(packers):
            raise ValueError("struct shape changed")
        return b"".join([p(f[2]) for p, f in zip(packers, value, strict=False)])

    return pack_struct


def _scalar_field(name: str, kind: int) -> tuple[bytes, Packer, int]:
    """The metadata, packer and logical field count of one field of a scalar or array kind."""
    if kind & ARRAY:
        base = kind & ~ARRAY
        in_type, out_type, _, _ = _SCALARS[base]
        if base == IPV6:
            in_type = InType.COUNTEDBINARY
        return field_metadata(name, in_type, out_type, vcount=True), _ARRAY_PACKERS[base], 2
    in_type, out_type, packer, _ = _SCALARS[kind]
    return field_metadata(name, in_type, out_type), packer, 2 if in_type in _COUNTED_TWICE else 1


_FIELD_NAME_MAX: Final = 256
_COUNTED_TWICE: Final = frozenset((InType.BINARY, InType.COUNTEDBINARY))


def _compile(fields: Sequence[Field]) -> tuple[list[bytes], list[Packer], int]:
    """Field metadata, packers and the logical field count for ``fields``.  Raises on a bad kind."""
    metas: list[bytes] = []
    packers: list[Packer] = []
    count = 0
    for name, kind, value in fields:
        if kind == STRUCT:
            n = len(value)
            if not 1 <= n <= MAX_STRUCT_FIELDS:
                raise ValueError("struct field count out of range")
            sub_meta, sub_packers, sub_count = _compile(value)
            metas.append(field_metadata(name, InType.STRUCT, n))
            metas.extend(sub_meta)
            packers.append(_struct_packer(sub_packers))
            count += 1 + sub_count
            continue
        meta, packer, n = _scalar_field(name, kind)
        metas.append(meta)
        packers.append(packer)
        count += n
    return metas, packers, count


#: (field name, kind) -> field metadata, for the interpreted route: shared by every encoder, kept
#: only for keys written before (one-off keys are not), names up to :data:`_FIELD_NAME_MAX`.
_WALK_META: Final = ShapeCache(8192, 2 << 20)


def _remember_walked(fresh: list[tuple[tuple[str, int], bytes]]) -> None:
    """Keep the field metadata the interpreted route built (names up to :data:`_FIELD_NAME_MAX`)."""
    for key, meta in fresh:
        if len(key[0]) <= _FIELD_NAME_MAX:
            _WALK_META.put(key, meta, True, len(key[0]), len(meta))


def _scalar_meta(name: str, kind: int) -> bytes:
    """The metadata of one scalar field (what :func:`_compile` writes for it)."""
    return _scalar_field(name, kind)[0]


def _shape(fields: Sequence[Field]) -> tuple[Any, ...]:
    out: list[Any] = []
    for f in fields:
        out.append(f[0])
        out.append(f[1])
        if f[1] == STRUCT:
            out.append(_shape(f[2]))
    return tuple(out)


class _FieldPlan:
    """Metadata and packers for one event shape, and the room its data may take in the budget."""

    __slots__ = ("metadata", "ok", "packers", "room")

    def __init__(self, metadata: bytes, packers: list[Packer], ok: bool, budget: int) -> None:
        self.metadata = metadata
        self.packers = packers
        #: False when the shape breaks the field-count or metadata-size limits.
        self.ok = ok
        #: Bytes left for the data (-1 when not ok: the fast path never fits then).
        self.room = budget - len(metadata) if ok else -1


# ---------------------------------------------------------------------------------------------
# The general path: pieces, the field-count and metadata limits


def _piece(kind: int, value: Any, limit: int = NO_LIMIT) -> Piece:
    """One value as the general path writes it: fixed bytes, or a cuttable string, binary or array.

    ``limit`` is the event's budget: an array's elements past it are not built, a text or binary
    longer is taken up to ``limit + 1`` characters or bytes before it is cleaned (lone surrogates)
    and encoded (more than can ever be kept: the value is cut all the same, only the work follows
    what is written).  Raises when TraceLogging cannot write ``value`` as ``kind`` (a value of
    another type, a datetime before 1601 as FILETIME, ...): :func:`~structlog_etw.write.fields.normalize`
    then writes the value's text instead.
    """
    if kind & ARRAY:
        base = kind & ~ARRAY
        if base not in _SCALARS:
            raise ValueError(f"not an array kind: {kind!r}")
        return Cuttable.array(leading_pieces(value, lambda item: _piece(base, item, limit), limit))
    if kind in (STR, JSON):
        if not isinstance(value, str):
            raise TypeError(f"expected str, got {type(value).__name__}")
        if len(value) > limit:
            value = value[: limit + 1]
        return Cuttable(valid_text(value).encode(), marker=_MARKER_BYTES)
    if kind == BYTES:
        body = bytes_value(value)
        return Cuttable(body if len(body) <= limit else body[: limit + 1])
    return _SCALARS[kind][2](value)


def _field_count(f: Field) -> int:
    """Logical fields of ``f`` for the 128-field limit: BINARY, COUNTEDBINARY and arrays count 2."""
    kind = f[1]
    if kind == STRUCT:
        return 1 + sum(_field_count(s) for s in f[2])
    if kind & ARRAY or kind in (BYTES, IPV6):
        return 2
    return 1


def _limit_count(work: list[Field], fields: list[Any], budget: int) -> list[Field]:
    """The leading fields of ``work`` whose logical count fits ``budget``.

    ``work`` is ``fields`` normalized.  The first struct that does not fit is kept as the JSON
    text of its value (one field) when there is room.
    """
    out: list[Field] = []
    used = 0
    for f, original in zip(work, fields, strict=False):
        n = _field_count(f)
        if used + n > budget:
            if f[1] == STRUCT and used < budget:
                out.append((f[0], JSON, _piece(JSON, _json_text(original[2]))))
            break
        out.append(f)
        used += n
    return out


def _plain_value(kind: int, value: Any) -> Any:
    """A field value as JSON-able Python data (its text when it is not what ``kind`` expects)."""
    try:
        if kind == STRUCT:
            return {safe_str(n): _plain_value(k, v) for n, k, v in value}
        if kind & ARRAY:
            return [_plain_value(kind & ~ARRAY, i) for i in value]
        if kind == BYTES:
            return bytes(value).hex()
        if kind in (IPV4, IPV6):
            return str(ipaddress.ip_address(bytes(value)))
        if kind in (UUID, TIME):
            return str(value)
        if kind == F64 and not math.isfinite(value):
            return str(value)
    except Exception:
        return safe_str(value)
    return value


def _json_text(fields: list[Field]) -> str:
    """A struct's fields as JSON text (for a struct that cannot stay a struct)."""
    try:
        return valid_text(json.dumps(_plain_value(STRUCT, fields), ensure_ascii=False, default=safe_str))
    except Exception:
        return valid_text(safe_str(fields))


_TRUE: Final = _pack_bool(True)
_TAG0: Final = encode_tag(0)
#: The field a cut event ends with (its value is already the piece the general path writes).
_TRUNCATED: Final[Field] = (TRUNCATED_FIELD, BOOL, _TRUE)
_TRUNCATED_META: Final = field_metadata(TRUNCATED_FIELD, InType.BOOL32)


def _metadata_within(name: str, metas: Sequence[bytes], tags: int) -> bytes:
    """:func:`event_metadata`, or ``b""`` when it would pass :data:`MAX_METADATA` (never raises
    for a long name: the u16 size is packed only when it fits)."""
    body = b"".join((_TAG0 if tags == 0 else encode_tag(tags), name_bytes(name), *metas))
    if len(body) + 2 > MAX_METADATA:
        return b""
    return _U16.pack(len(body) + 2) + body


def _metadata_prefix(name: str, work: list[Field], tags: int) -> list[Field] | None:
    """The leading fields of ``work`` whose metadata, with the ``_truncated`` field, stays within
    :data:`MAX_METADATA`; ``None`` if not even the event name and that field fit."""
    room = MAX_METADATA - (2 + len(encode_tag(tags)) + len(name_bytes(name)) + len(_TRUNCATED_META))
    if room < 0:
        return None
    for i, f in enumerate(work):
        room -= sum([len(m) for m in _compile([f])[0]])
        if room < 0:
            return work[:i]
    return work


# ---------------------------------------------------------------------------------------------
# Shape functions: event dict -> event data, one generated function per layout

#: How a shape function writes each kind (the same bytes as the packers of :data:`_SCALARS`).
_SHAPE_STEPS: Final[dict[int, Step]] = {
    STR: Step("", "_encode({v})"),  # str.encode: cheaper than the method call
    NONE: Step("", "b'None'"),
    I64: Step("q", "{v}"),
    F64: Step("d", "{v}"),
    BOOL: Step("i", "{v}"),  # an exact bool: struct writes True as 1
    BYTES: Step("", "{v}"),
    UUID: Step("16s", "{v}.bytes_le"),
    TIME: Step("Q", "_filetime({v})"),  # before 1601: negative, struct raises
}
#: The interpreted route's table (``_shapes.walk``): value class -> kind, packer, field count.
_WALK: Final[Walker] = {
    int: (I64, _I64S.pack, 1),
    float: (F64, _F64S.pack, 1),
    bool: (BOOL, _pack_bool, 1),
    type(None): (NULL, _pack_none, 1),
    bytes: (BYTES, _pack_bytes, 2),
    uuid.UUID: (UUID, _pack_uuid, 1),
    _dt.datetime: (TIME, _pack_time, 1),
}
#: The compiled packer's op for each kind it writes as :data:`_SHAPE_STEPS` does (a layout with
#: another kind, a UUID or a datetime, runs its generated function).
_SHAPE_OPS: Final[dict[int, str]] = {
    STR: "str",
    NONE: "null_text",
    I64: "i64",
    F64: "f64",
    BOOL: "bool32",
    BYTES: "bytes",
}
#: The ``f(event) -> data`` per layout (made when hot; see ``_shapes``): the compiled packer where
#: it is built, else the generated function.
_FUNCTIONS: Final = LayoutFunctions(
    lambda kinds: layout_function(kinds, _SHAPE_OPS, _SHAPE_STEPS, env={"_filetime": filetime})
)
_MISSING: Final[Any] = object()
#: The tag of each plain header (0), by the header.
_PLAIN_CHECKED: Final[dict[HeaderValue, int]] = {plain_header(lv): 0 for lv in range(256)}
#: The tag of every header checked already, by the header: the plain ones and up to
#: :data:`_CHECKED_MAX` recent others (an activity's events share one); back to the plain ones
#: when full.  A header found here needs no check.
_CHECKED: Final[dict[HeaderValue, int]] = dict(_PLAIN_CHECKED)
_CHECKED_MAX: Final = 512


def _remember_checked(header: HeaderValue, tag: int) -> None:
    """Keep a header :func:`header_problem` found fine (a thread that misses it checks again)."""
    if len(_CHECKED) >= _CHECKED_MAX:
        _CHECKED.clear()
        _CHECKED.update(_PLAIN_CHECKED)
    with contextlib.suppress(TypeError):  # an id of an unhashable type: not kept
        _CHECKED[header] = tag


class _ShapeEntry:
    """encode_dict's entry for one shape: the event's metadata, its data function, the room."""

    __slots__ = ("fn", "metadata", "room")

    def __init__(self, metadata: bytes, fn: Callable[..., bytes | None], room: int) -> None:
        self.metadata = metadata
        self.fn = fn
        self.room = room


# ---------------------------------------------------------------------------------------------


#: The entry of a shape that has no shape function (it always takes the general route).
_GENERAL: Final = _ShapeEntry(b"", lambda event: None, -1)


class TraceLoggingEncoder:
    """Encodes events of one provider as TraceLogging metadata + data.

    ``traits`` is the provider traits blob (passed once to EventSetInformation and with every
    write).  ``truncated`` counts events written with values cut or fields left off by the size
    policy.  ``cache_limit`` bounds the entries of each cache (typed-field plans, event-dict
    shapes), ``cache_bytes`` their bytes; only written events are cached, and no shape whose names
    pass :data:`structlog_etw.write.shapes.MAX_KEY_CHARS` characters.
    """

    __slots__ = (
        "_budget",
        "_by_classes",
        "_by_keys",
        "_cache",
        "_plans",
        "_recent",
        "_shapes",
        "_truncated",
        "cache_limit",
        "max_size",
        "traits",
    )

    def __init__(
        self,
        provider_name: str,
        group_id: uuid.UUID | str | None = None,
        max_size: int = DEFAULT_MAX_SIZE,
        cache_limit: int = 1024,
        cache_bytes: int = 4 << 20,
    ) -> None:
        if not isinstance(max_size, int) or not _MIN_MAX_SIZE <= max_size <= _MAX_MAX_SIZE:
            raise ValueError(f"max_size must be an int in [{_MIN_MAX_SIZE}, {_MAX_MAX_SIZE}]")
        group = group_guid(group_id)  # TypeError for a group of another type
        validate_provider_name(provider_name, group, max_size)
        self.traits: bytes = provider_traits(provider_name, group)
        self.max_size = max_size
        self.cache_limit = cache_limit
        self._truncated = Count()  # no lock, no lost count (re-entry, threads: _util.counters)
        self._budget = max_size - len(self.traits)
        # encode's plans per typed-field shape (name, tags, (field name, kind) pairs).
        self._plans = ShapeCache(cache_limit, cache_bytes)
        self._cache: dict[tuple[Any, ...], _FieldPlan] = self._plans.first
        # encode_dict's shapes: (name, tag, skip, *keys) -> the entry built for the value classes
        # seen first; (name, tag, skip, *keys, *classes) -> the entries of other classes.
        self._shapes = ShapeCache(cache_limit, cache_bytes)
        self._by_keys: dict[tuple[Any, ...], _ShapeEntry] = self._shapes.first
        self._by_classes: dict[tuple[Any, ...], _ShapeEntry] = self._shapes.by_class
        self._recent = self._shapes.recent  # event name -> its last shape entry (ShapeCache.remember)

    @property
    def truncated(self) -> int:
        """Events written with values cut or fields left off by the size policy."""
        return self._truncated.value()

    def _new_plan(self, name: str, fields: Sequence[Field], tags: int) -> _FieldPlan:
        """The plan of a shape; its metadata is ``b""`` (and it is not ok) past :data:`MAX_METADATA`."""
        metas, packers, count = _compile(fields)
        metadata = _metadata_within(name, metas, tags)
        ok = count <= MAX_FIELDS and bool(metadata)
        return _FieldPlan(metadata, packers, ok, self._budget)

    def encode(
        self,
        name: str,
        fields: list[Field],
        level: int = 4,
        opcode: int = 0,
        tag: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> TraceLoggingEvent | None:
        """``encode_fields(name, fields, Header(level, opcode, tag, activity_id, related_id))``."""
        return self.encode_fields(name, fields, Header(level, opcode, tag, activity_id, related_id))

    def encode_fields(
        self, name: str, fields: list[Field], header: HeaderValue = INFO_HEADER
    ) -> TraceLoggingEvent | None:
        """``(traits, metadata, data)`` for one event, or ``None`` if it cannot fit even truncated.

        ``tag`` is the event's 28-bit tags value (in the metadata).  Level, opcode and the activity
        ids are not part of the TraceLogging blobs: the backend passes them to EventWriteTransfer
        (they are parameters here so that both encoders share one signature).

        The error contract (the same for both encoders, docs/limits.md): never raises for a field
        list whose kinds come from the type table, whatever the values: a value that does not fit
        its kind, or that TraceLogging cannot represent (a datetime before 1601), is written as
        its text (:func:`~structlog_etw.write.fields.normalize`).  Returns ``None`` only when the event
        cannot fit ``max_size`` even with its values cut.  Raises ``ValueError`` only for arguments
        outside the header's ranges: ``level`` or ``opcode`` not in 0..255, ``tag`` not in
        0..0x0FFFFFFF, an activity or related id not 16 bytes.
        """
        try:
            tag = _CHECKED.get(header)
        except TypeError:  # an id of an unhashable type (a bytearray): checked all the same
            tag = None
        if tag is None:  # not a plain header: checked (the ids are not in the blobs: their sizes)
            problem = header_problem(header, 28)
            if problem is not None:
                raise ValueError(problem)
            tag = header[2]
        # The fast path: the plan's packers, one per field.
        try:
            key = (name, tag, _shape(fields))
            plan = self._cache.get(key)
            new = plan is None
            if plan is None:
                plan = self._new_plan(name, fields, tag)
            # The shape key guarantees one packer per field: zip needs no strict check (and its
            # keyword costs a measurable part of the call).
            data = b"".join([p(f[2]) for p, f in zip(plan.packers, fields)])  # noqa: B905
            if len(data) <= plan.room:
                if new and type(name) is str:  # written: worth keeping for the next event of its shape
                    self._plans.put(key, plan, True, len(plan.metadata), len(plan.metadata))
                return self.traits, plan.metadata, data
        except Exception:  # a value the packers do not write: the general path decides
            pass
        return self._encode_general(name, fields, tag)

    def encode_dict(
        self,
        name: str,
        event: Mapping[Any, Any],
        skip: str | None,
        header: HeaderValue = INFO_HEADER,
    ) -> TraceLoggingEvent | None:
        """``encode_fields(name, dict_fields(event.items(), skip), header)``, byte for byte, faster.

        ``event``'s items are the fields, except ``exc_info`` and the key ``skip`` (``None``: none
        skipped).  A hot shape (``str`` keys, values of the classes of
        :data:`structlog_etw.write.shapes.SHAPE_KINDS`, written :data:`~structlog_etw.write.shapes.SHAPE_HOT`
        times) has its data packed by its layout's generated function straight from the dict's
        values; its metadata and its room in the budget are cached with it.  Anything else (a
        shape not hot yet, a layout not compiled yet, another value class, a value the function
        cannot write) takes the route of :meth:`encode_fields`, which compiles nothing.  Same error
        contract as :meth:`encode_fields` (the header is checked on that route).
        """
        key: tuple[Any, ...] | None = None
        entry: _ShapeEntry | None = None
        try:
            tag = _CHECKED.get(header)  # a plain header's; any other: checked (not in the blobs)
        except TypeError:
            tag = None
        if tag is None and header_problem(header, 28) is None:
            tag = header[2]
            _remember_checked(header, tag)
        if tag is not None:
            try:
                recent = self._recent.get(name)  # the name's last shape: no key to build and hash
                if recent is not None and recent[0] == (tag, skip) and list(event) == recent[1]:
                    key, entry = recent[2], recent[3]
                else:
                    key = (name, tag, skip, *event)
                    entry = self._by_keys.get(key)
                    if entry is not None and entry is not _GENERAL:
                        self._shapes.remember(name, (tag, skip), key, entry, list(event))
                if entry is not None:
                    data = entry.fn(event)
                    if data is None:  # the values' classes are not the ones of the first entry
                        entry = self._by_classes.get((*key, *map(type, event.values())))
                        if entry is not None:
                            data = entry.fn(event)
                    if data is not None and len(data) <= entry.room:  # type: ignore[union-attr]
                        return self.traits, entry.metadata, data  # type: ignore[union-attr]
            except Exception:  # a value the shape function does not write: the general route
                pass
        out = None
        fresh: list[tuple[tuple[str, int], bytes]] | None = None
        if (
            tag is not None and entry is not _GENERAL
        ):  # no function for this layout yet: the interpreted route
            try:
                out, fresh = self._walk(name, event, skip, tag)
            except Exception:  # a value it does not write: the general route decides
                out = None
        if out is None:
            out = self.encode_fields(name, dict_fields(event.items(), skip), header)
        if out is not None and key is not None and tag is not None:  # written: count the shape
            _FUNCTIONS.earn()
            with contextlib.suppress(Exception):
                self._seen(key, name, event, skip, tag, fresh)
        return out

    def _walk(
        self, name: str, event: Mapping[Any, Any], skip: str | None, tag: int
    ) -> tuple[TraceLoggingEvent | None, list[tuple[tuple[str, int], bytes]] | None]:
        """The interpreted shape function (``_shapes.walk``): the event (None for the general
        route: field count, metadata or data past their limits) and the field metadata it had to
        build."""
        if type(name) is not str:
            return None, None
        fresh: list[tuple[tuple[str, int], bytes]] = []
        metas, values, count = walk(event, skip, _WALK, _WALK_META.first, _scalar_meta, fresh)
        metadata = _metadata_within(name, metas, tag)
        if not metadata or count > MAX_FIELDS:
            return None, None
        data = b"".join(values)
        if len(data) > self._budget - len(metadata):
            return None, None
        return (self.traits, metadata, data), fresh

    def _seen(
        self,
        key: tuple[Any, ...],
        name: str,
        event: Mapping[Any, Any],
        skip: str | None,
        tag: int,
        fresh: list[tuple[tuple[str, int], bytes]] | None,
    ) -> None:
        """The general route wrote an event of ``key``'s shape: count it; once hot, build its entry
        (``_GENERAL`` when the shape has no shape function or breaks TraceLogging's field-count or
        metadata limits) if its layout has a function."""
        hot = self._shapes.written(key, name, event, skip, fresh, _remember_walked, _GENERAL, _FUNCTIONS)
        if hot is None:
            return
        entry = _GENERAL
        if hot.fn is not None:
            metas, _, count = _compile(hot.template)
            metadata = _metadata_within(name, metas, tag)
            if count <= MAX_FIELDS and metadata:
                entry = _ShapeEntry(metadata, hot.fn, self._budget - len(metadata))
        self._shapes.put(hot.key, entry, hot.first, hot.chars, len(entry.metadata))

    def _encode_general(self, name: str, fields: list[Field], tags: int) -> TraceLoggingEvent | None:
        """The general path: any field list, the pieces built once, then joined whole or cut.

        Applies TraceLogging's limits (module docstring): at most 128 logical fields (leading
        fields kept), metadata within :data:`MAX_METADATA` (leading fields kept), then the shared
        size policy; a cut event gets the ``_truncated`` field and is counted in :attr:`truncated`.
        Nothing is cached here (an event on this path may be one that is never written).
        """
        if type(name) is not str:
            name = safe_str(name)
        limit = self._budget
        work = normalize(fields, lambda kind, value: _piece(kind, value, limit))
        count = sum([_field_count(f) for f in work])
        if count <= MAX_FIELDS:
            plan = self._new_plan(name, work, tags)
            pieces: list[Piece] = leaf_values(work)
            if plan.ok and len(plan.metadata) + whole_size(pieces) <= self._budget:
                return self.traits, plan.metadata, joined(pieces)
        if count > MAX_FIELDS - 1:  # the _truncated field takes one of the 128 logical fields
            work = _limit_count(work, fields, MAX_FIELDS - 1)
        prefix = _metadata_prefix(name, work, tags)  # names too long: keep the leading fields that fit
        if prefix is None:
            return None
        marked = [*prefix, _TRUNCATED]
        plan = self._new_plan(name, marked, tags)
        pieces = leaf_values(marked)
        cap = water_level(pieces, self._budget - len(plan.metadata))
        if cap is None:  # not even the fixed part and the markers of the cut strings fit
            return None
        cut_json = json_as_str(marked, lambda piece: piece.is_cut(cap))
        if cut_json != marked:  # a cut JSON text is no longer JSON: written as a plain string
            plan = self._new_plan(name, cut_json, tags)
        self._truncated.add()
        return self.traits, plan.metadata, joined(pieces, cap)
