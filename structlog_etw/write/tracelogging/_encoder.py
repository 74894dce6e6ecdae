"""TraceLogging encoder: typed fields -> event metadata and event data (next to the provider traits).

Pure Python, no structlog.  One :class:`TraceLoggingEncoder` per provider; it turns a
name and a ``list[Field]`` (see :mod:`structlog_etw.write.fields`) into the two blobs a
TraceLogging event carries next to the provider traits: the event *metadata* (tags,
name, field names and types) and the event *data* (the packed values).  Metadata and
a packing plan are built once per event shape (name, tags, field names and kinds)
and cached.

How each value kind is written (its InType / OutType, its packers) is one row of the codec table,
:mod:`structlog_etw.write.tracelogging._codec`; a struct is STRUCT with its member count in the
OutMeta, nested.

Three routes, one result: :meth:`TraceLoggingEncoder.encode_dict` is the tier dispatcher both
encoders share (:func:`structlog_etw.write.shapes.encode_dict`): it writes the common shapes of an
event dict with their layout's function, a shape without one yet with the interpreted route;
anything else goes through ``dict_fields`` and :meth:`~TraceLoggingEncoder.encode_fields`; there,
the **fast path** packs the values with the cached plan's packers (the codec table's) and is taken
when every value is what its kind expects and the event fits; anything else takes the one
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
import ipaddress
import json
import math
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final

from ..._util.bounded import BoundedCache
from ..._util.counters import Count
from ...formats.header import INFO_HEADER, HeaderValue, header_problem, plain_header
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
from .._size_policy import Piece, joined, water_level, whole_size
from ..fields import (
    ARRAY,
    BOOL,
    BYTES,
    F64,
    IPV4,
    IPV6,
    JSON,
    MAX_STRUCT_FIELDS,
    STRUCT,
    TIME,
    TRUNCATED_FIELD,
    UUID,
    Field,
    json_as_str,
    leaf_values,
    normalize,
    safe_str,
)
from ..shapes import BaseEncoder, Codec, ShapeCache, walk
from ._codec import CODEC, filetime

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


_U16: Final = struct.Struct("<H")
Packer = Callable[[Any], bytes]
_PACKERS: Final = CODEC.packers
_KIND_META: Final = CODEC.meta
_ROWS: Final = CODEC.rows


def _struct_packer(packers: list[Packer]) -> Packer:
    def pack_struct(value: list[Field]) -> bytes:
        if len(value) != len(packers):
            raise ValueError("struct shape changed")
        return b"".join([p(f[2]) for p, f in zip(packers, value, strict=False)])

    return pack_struct


def _scalar_field(name: str, kind: int) -> tuple[bytes, Packer, int]:
    """The metadata, packer and logical field count of one field of a scalar or array kind."""
    return name_bytes(name) + _KIND_META[kind], _PACKERS[kind], 2 if kind & ARRAY else _ROWS[kind].fields


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


def _scalar_meta(name: str, kind: int) -> bytes:
    """The metadata of one scalar field (what :func:`_compile` writes for it)."""
    return name_bytes(name) + _KIND_META[kind]


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
                out.append((f[0], JSON, CODEC.piece(JSON, _json_text(original[2]))))
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


_TRUE: Final = _ROWS[BOOL].body(True)
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


#: A header's *scope* (``shapes.TieredEncoder``): no bytes before the data (``b""``) and the tag
#: (part of a shape: the metadata holds it), ``None`` for tag 0 (a header of no part).
_Scope = tuple[bytes, int | None]
#: The scope of each plain header (tag 0), by the header.
_PLAIN_CHECKED: Final[dict[HeaderValue, _Scope]] = {plain_header(lv): (b"", None) for lv in range(256)}
#: The scope of every header checked already, by the header: the plain ones and up to
#: :data:`_CHECKED_MAX` recent others (an activity's events share one); back to the plain ones
#: when full (each under 200 bytes whatever the header: the count bounds the bytes).  A header
#: found here needs no check.
_CHECKED_MAX: Final = 512
_CHECKED: Final[dict[HeaderValue, _Scope]] = dict(_PLAIN_CHECKED)
#: :data:`_CHECKED`'s books (a start-over keeps the plain ones).
_CHECKED_CACHE: Final[BoundedCache[HeaderValue, _Scope]] = BoundedCache(
    _CHECKED_MAX, _CHECKED_MAX, lambda: _CHECKED.update(_PLAIN_CHECKED), entries=_CHECKED
)


def _checked(header: HeaderValue) -> _Scope:
    """The scope of a header not checked yet, kept (a thread that misses it checks again);
    ``ValueError`` outside its ranges (the ids are not in the blobs: only their sizes count)."""
    problem = header_problem(header, 28)
    if problem is not None:
        raise ValueError(problem)
    scope = (b"", header[2] or None)
    with contextlib.suppress(TypeError):  # an id of an unhashable type: not kept
        _CHECKED_CACHE.store(header, scope)
    return scope


class TraceLoggingEncoder(BaseEncoder):
    """Encodes events of one provider as TraceLogging metadata + data.

    ``traits`` is the provider traits blob (passed once to EventSetInformation and with every
    write).  ``truncated`` counts events written with values cut or fields left off by the size
    policy.  ``cache_limit`` bounds the entries of each cache (typed-field plans, event-dict
    shapes), ``cache_bytes`` their bytes; only written events are cached, and no shape whose names
    pass :data:`structlog_etw.write.shapes.MAX_KEY_CHARS` characters.
    """

    #: The format's codec table (:mod:`._codec`), for the tier dispatcher (``shapes.encode_dict``).
    _codec: ClassVar[Codec] = CODEC

    __slots__ = ("_budget", "_cache", "_plans", "_truncated", "cache_limit", "max_size", "traits")

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
        # encode_dict's shapes; a header's scope is its tag (part of the shape: the metadata
        # holds it; the headers checked already here, others: _new_scope); an event is three
        # blobs, these traits the first
        super().__init__(ShapeCache(cache_limit, cache_bytes), _CHECKED, self.traits)

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
            scope = _CHECKED.get(header)
        except TypeError:  # an id of an unhashable type (a bytearray): checked all the same
            scope = None
        tag = (_checked(header) if scope is None else scope)[1] or 0
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

    def _new_scope(self, header: HeaderValue) -> _Scope:
        """The scope of a header not checked yet; ``ValueError`` outside its ranges."""
        return _checked(header)

    def _interpreted(
        self, name: str, event: Mapping[Any, Any], skip: str | None, scope: _Scope
    ) -> tuple[TraceLoggingEvent | None, list[tuple[tuple[str, int], bytes]] | None]:
        """The interpreted route (``shapes.walk``): the event (None for the general route: field
        count, metadata or data past their limits) and the field metadata it had to build."""
        fresh: list[tuple[tuple[str, int], bytes]] = []
        metas, values, count = walk(event, skip, CODEC.walker, CODEC.fields.first, _scalar_meta, fresh)
        metadata = _metadata_within(name, metas, scope[1] or 0)
        if not metadata or count > MAX_FIELDS:
            return None, None
        data = b"".join(values)
        if len(data) > self._budget - len(metadata):
            return None, None
        return (self.traits, metadata, data), fresh

    def _entry_parts(
        self, name: str, template: list[tuple[str, int, None]], scope: _Scope
    ) -> tuple[bytes, bytes, int] | None:
        """A hot shape's lead (none: the function writes the data alone), its metadata and the room
        left for its data; ``None`` when it breaks the field-count or metadata limits."""
        metas, _, count = _compile(template)
        metadata = _metadata_within(name, metas, scope[1] or 0)
        if count <= MAX_FIELDS and metadata:
            return b"", metadata, self._budget - len(metadata)
        return None

    def _none_kinds(self, name: str) -> None:
        """TraceLogging has no nullable forms: a None is always the text ``"None"``."""
        return None

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
        work = normalize(fields, lambda kind, value: CODEC.piece(kind, value, limit))
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
