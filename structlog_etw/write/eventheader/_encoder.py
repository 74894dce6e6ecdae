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

How each value kind is written (its encoding and format, its packers) is one row of the codec
table, :mod:`structlog_etw.write.eventheader._codec`.  Three routes, one result:

* :meth:`EventHeaderEncoder.encode_dict` takes the event dict itself (a log call's fields): the
  tier dispatcher both encoders share (:func:`structlog_etw.write.shapes.encode_dict`) writes the
  common shapes with their layout's function (compiled packer or generated function), a shape
  without one yet with the interpreted route, straight from the dict's values; anything else goes
  through ``dict_fields`` and :meth:`EventHeaderEncoder.encode_fields`;
* there, the **fast path** packs the values with the shape's cached plan (metadata and the codec
  table's packer per leaf, nothing compiled); it is taken when every value is what its kind
  expects and the event fits;
* anything else (a value the packers cannot write, an event too large) takes the one
  **general path**: :func:`~structlog_etw.write.fields.normalize` turns each value into a piece (a
  value that cannot be written as its kind is written as its text), and the pieces are joined
  whole when they fit, or cut by the shared size policy (:mod:`structlog_etw.write._size_policy`).

Size policy (docs/limits.md): an event never exceeds ``max_size`` bytes (default
:data:`PERF_MAX_EVENT_SIZE`, what perf keeps of one event).  When the values do not fit, the
longest variable-size values (strings, binaries, arrays) are cut to a common cap: strings end
with :data:`~structlog_etw.write.fields.TRUNCATION_MARKER` (a cut string is never shorter than the
marker), JSON fields become plain strings (cut JSON is not JSON), and the event gets an extra
``_truncated=True`` field.  If
even the fixed part (header, metadata with the field names, fixed-size values) does not fit, or
leaves no room for the markers of the strings to cut, ``encode`` returns ``None`` and the caller
counts the event dropped (``too_large``).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from ..._util.bounded import BoundedCache
from ..._util.counters import Count, TryLock
from ...formats.eventheader import (
    DYN_MAX_EVENT_SIZE,
    ENC_STRUCT,
    ENCODING_CARRAY,
    ENCODING_CHAIN,
    EXT_ACTIVITY_ID,
    EXT_METADATA,
    EXTENSION_CHAIN,
    EXTENSION_STRUCT,
    FORMAT_CHAIN,
    HEADER,
    HEADER_FLAGS,
    PERF_MAX_EVENT_SIZE,
)
from ...formats.header import INFO_HEADER, HeaderValue, header_problem, plain_header
from .._size_policy import Piece, joined, water_level, whole_size
from ..fields import (
    BOOL,
    MAX_STRUCT_FIELDS,
    NULL,
    STRUCT,
    TRUNCATED_FIELD,
    Field,
    clean_name,
    json_as_str,
    leaf_values,
    normalize,
    safe_str,
)
from ..shapes import NULLABLE, BaseEncoder, Codec, ShapeCache, key_chars, walk
from ._codec import CODEC, NULLABLE_KINDS, NULLABLE_WALK, null_of, utf8

__all__ = [
    "EventHeaderEncoder",
    "assemble_event",
    "field_metadata",
    "sanitize_name",
]

_U16_MAX: Final = 0xFFFF

_HEADER: Final = HEADER
_EXT: Final = EXTENSION_STRUCT
_U16 = struct.Struct("<H")


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


def _name_bytes(name: str) -> bytes:
    return utf8(sanitize_name(name)) + b"\0"


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


# --- the fast path: metadata and per-value packers per event shape (nothing compiled) ------------


class _FieldPlan:
    """Prebuilt metadata extension and the per-leaf packers of one event shape."""

    __slots__ = ("kinds", "meta_block", "packers")

    def __init__(self, meta_block: bytes, kinds: list[int]) -> None:
        self.meta_block = meta_block
        self.kinds = kinds
        self.packers = [_PACKERS[k] for k in kinds]  # a kind without one raises: the general path

    def pack(self, values: Sequence[Any]) -> bytes:
        """The payload of the leaf values (one per packer)."""
        return b"".join([p(v) for p, v in zip(self.packers, values)])  # noqa: B905 - same length by the shape key


_PACKERS: Final = CODEC.packers
_KIND_META: Final = CODEC.meta
FieldParts = list[tuple[tuple[str, int], bytes]]


def _field_meta(
    fields: list[Field], out: list[bytes], kinds: list[int], fresh: FieldParts | None = None
) -> None:
    """Append each field's metadata to ``out`` and its leaf kinds (flattened) to ``kinds``; the
    metadata of scalar and array fields built here (not known yet) is added to ``fresh``."""
    known = CODEC.fields.first  # filled from written events (Codec.remember)
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
            meta = _name_bytes(name) + _KIND_META[kind]
            if fresh is not None and type(name) is str:
                fresh.append(((name, kind), meta))
        out.append(meta)
        kinds.append(kind)


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


#: A header's *scope* (``shapes.TieredEncoder``): its head (the header bytes and the activity
#: extension, written before the metadata) and ``None`` (nothing of it is part of a shape).
_Scope = tuple[bytes, None]
#: The scope of each level's plain header (opcode 0, tag 0, no activity), by the header.
_HEADS: Final[dict[HeaderValue, _Scope]] = {
    plain_header(lv): (_HEADER.pack(HEADER_FLAGS, 0, 0, 0, 0, lv), None) for lv in range(256)
}


def _head(header: HeaderValue) -> bytes:
    """The header and the activity extension; ``ValueError`` for values outside their ranges."""
    try:
        scope = _HEADS.get(header)
    except TypeError:  # an id of an unhashable type (a bytearray): written all the same
        scope = None
    return (_new_head(header) if scope is None else scope)[0]


#: The scopes of recent headers that are not plain ones (an activity's events share one): at
#: most :data:`_RECENT_MAX` entries, each under 200 bytes whatever the header (so the count bounds
#: the bytes), cleared when full.
_RECENT_MAX: Final = 256
_RECENT: Final[BoundedCache[HeaderValue, _Scope]] = BoundedCache(_RECENT_MAX, _RECENT_MAX)
_recent: Final = _RECENT.entries


def _new_head(header: HeaderValue) -> _Scope:
    """The scope of a header that is not a plain one (kept among the recent ones); ``ValueError``
    for values outside their ranges."""
    try:
        scope = _recent.get(header)
    except TypeError:  # an id of an unhashable type (a bytearray): built, not kept
        return _build_head(header), None
    if scope is None:
        scope = (_build_head(header), None)
        _RECENT.store(header, scope)
    return scope


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


# --- the encoder ----------------------------------------------------------------------------------

_TRUE: Final = CODEC.rows[BOOL].body(True)
#: The field a cut event ends with (its value is already the piece the general path writes).
_TRUNCATED: Final[Field] = (TRUNCATED_FIELD, BOOL, _TRUE)
#: Bytes a learned nullable key is reckoned at besides its names (as a shape cache entry).
_ENTRY_BYTES: Final = 200


class EventHeaderEncoder(BaseEncoder):
    """Encode events for one provider; caches metadata and a packing plan per event shape.

    ``max_size`` bounds the whole event (header, extensions, payload); it defaults to what perf
    keeps (:data:`PERF_MAX_EVENT_SIZE`) and may not exceed :data:`DYN_MAX_EVENT_SIZE`.
    ``truncated`` counts events written with values cut by the size policy.  ``cache_limit``
    bounds the entries of each cache (typed-field plans, event-dict shapes), ``cache_bytes``
    their bytes; only written events are cached, and no shape whose names pass
    :data:`structlog_etw.write.shapes.MAX_KEY_CHARS` characters.
    """

    #: The format's codec table (:mod:`._codec`), for the tier dispatcher (``shapes.encode_dict``).
    _codec: ClassVar[Codec] = CODEC

    __slots__ = (
        "_cache",
        "_dict_shapes",
        "_learning",
        "_nullable",
        "_nullable_books",
        "_nullable_walk",
        "_plans",
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
        # encode_dict's shapes; a header's scope is its head (the plain headers' here, others:
        # _new_scope); one blob per event (a shape function writes head, metadata and values)
        self._dict_shapes = ShapeCache(cache_limit, cache_bytes)  # cleared when a key turns nullable
        super().__init__(self._dict_shapes, _HEADS, None)
        # event name -> {field name: the kind its None is written as (NULL: none known yet)}, for
        # the top-level fields that have been None in a written event (bounded like the caches)
        self._nullable: dict[str, dict[str, int]] = {}
        # event name -> the interpreted route's table of those keys (``NULLABLE_WALK``)
        self._nullable_walk: dict[str, dict[str, Any]] = {}
        # the books of both: one entry per (event name, key) learned, reckoned like a shape cache
        # entry; a start-over forgets both tables (and the plans, which learn their keys again)
        self._nullable_books: BoundedCache[tuple[str, str], None] = BoundedCache(
            cache_limit, cache_bytes, self._forget_nullable
        )
        self._learning = TryLock()  # one learner at a time (only ever tried: else learned later)

    @property
    def truncated(self) -> int:
        """Events written with values cut by the size policy."""
        return self._truncated.value()

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

    def _new_scope(self, header: HeaderValue) -> _Scope:
        """The scope of a header that is not a plain one; ``ValueError`` out of its ranges."""
        return _new_head(header)

    def _interpreted(
        self, name: str, event: Mapping[Any, Any], skip: str | None, scope: _Scope
    ) -> tuple[bytes | None, FieldParts | None]:
        """The interpreted route (``shapes.walk``): the event (None for the general route:
        metadata or event past their limits) and the field metadata it had to build."""
        fresh: FieldParts = []
        keyed = self._nullable_walk.get(name)  # keys that have been None: their nullable kinds
        metas, values, _ = walk(event, skip, CODEC.walker, CODEC.fields.first, _scalar_meta, fresh, keyed)
        meta = b"".join((_name_bytes(name), *metas))
        if len(meta) > _U16_MAX:
            return None, None
        out = b"".join((scope[0], _EXT.pack(len(meta), EXT_METADATA), meta, *values))
        if len(out) > self.max_size:
            return None, None
        return out, fresh

    def _entry_parts(
        self, name: str, template: list[tuple[str, int, None]], scope: _Scope
    ) -> tuple[bytes, bytes, int] | None:
        """A hot shape's metadata block (the function writes it after the head), again as its
        metadata, and the room of its events (``max_size``); ``None`` when the metadata passes
        u16 (the general route drops such an event)."""
        try:
            meta = _meta_block(name, list(template), [])
        except OverflowError:
            return None
        return meta, meta, self.max_size

    def _none_kinds(self, name: str) -> Mapping[str, int] | None:
        """The keys of ``name`` that have been None, with the kind their None is written as."""
        return self._nullable.get(name)

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
                out.append((f[0], null_of(as_null), None))
            elif kind in NULLABLE_KINDS:
                if as_null == NULL:  # the key's first number: learned if this event is written
                    if first is None:
                        first = []
                    first.append((f[0], kind))
                out.append((f[0], kind | NULLABLE, f[2]))
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
                self._nullable_walk.setdefault(name, {})[key] = NULLABLE_WALK[kind]
        self._dict_shapes.clear()  # (entries wrote its None as a nullable int64)

    def _learn(self, name: str, fields: list[Field]) -> None:
        """A written event of ``name`` had NULL fields: their keys are nullable from now on.  A new
        key forgets the shape entries (built without it); past the caches' bounds all is forgotten.
        (Another thread learning meanwhile: nothing learned now; a later written event teaches it.)"""
        if not self._learning.acquire():
            return
        try:
            for f in fields:
                key = f[0]
                if f[1] != NULL or type(key) is not str or key in self._nullable.get(name, ()):
                    continue
                # reckoned like a shape cache entry; a start-over empties the tables first
                if not self._nullable_books.store((name, key), None, _ENTRY_BYTES + len(name) + len(key)):
                    continue  # longer than the whole budget: never nullable (written as NULL)
                self._nullable.setdefault(name, {})[key] = NULL
                self._nullable_walk.setdefault(name, {})[key] = NULLABLE_WALK[NULL]
                self._dict_shapes.clear()
        finally:
            self._learning.release()

    def _forget_nullable(self) -> None:
        """The nullable keys' books started over: forget every learned key."""
        self._nullable.clear()
        self._nullable_walk.clear()
        self._plans.clear()  # plans learn their keys again when rebuilt

    def _encode_general(self, name: str, fields: list[Field], head: bytes) -> bytes | None:
        """The general path: any field list, the pieces built once, then joined whole or cut.

        ``head`` is the header and activity extension; a cut event gets the ``_truncated`` field.
        Nothing is cached here (an event on this path may be one that is never written).
        """
        if type(name) is not str:
            name = safe_str(name)
        limit = self.max_size
        work = normalize(fields, lambda kind, value: CODEC.piece(kind, value, limit))
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
