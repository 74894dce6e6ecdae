"""TraceLogging encoder: provider traits, event metadata, event data, EVENT_DESCRIPTOR, provider id.

Pure Python, no structlog.  One :class:`TraceLoggingEncoder` per provider; it turns a
name and a ``list[Field]`` (see :mod:`structlog_etw.fields`) into the two blobs a
TraceLogging event carries next to the provider traits: the event *metadata* (tags,
name, field names and types) and the event *data* (the packed values).  Metadata and
a packing plan are built once per event shape (name, tags, field names and kinds)
and cached.

Type mapping (``_fields`` kind -> InType / OutType)::

    BOOL   -> BOOL32                   I64  -> INT64           U64 -> UINT64
    F64    -> DOUBLE                   STR  -> COUNTEDANSISTRING / UTF8
    BYTES  -> COUNTEDBINARY            UUID -> GUID (bytes_le)
    IPV4   -> UINT32 / IPV4 (the 4 network-order bytes)
    IPV6   -> BINARY / IPV6 (scalar); COUNTEDBINARY / IPV6 (array: BINARY has no arrays)
    TIME   -> FILETIME / DATETIME_UTC (aware: converted to UTC; naive: taken as local time)
    JSON   -> COUNTEDANSISTRING / JSON
    STRUCT -> STRUCT (member count in OutMeta), nested
    kind|ARRAY -> the item type with VCount (u16 count in the data)

Size policy (ETW drops an event silently when it is too large, so we never hand it one):
the whole event (traits + metadata + data) must fit ``max_size`` (default 64,000 bytes, below
ETW's 64 KB limit with room for the ETW header and extended data); the metadata must be under
32 KB; at most 128 logical fields (BINARY, COUNTEDBINARY and arrays count 2, a struct 1 plus
its members).  An event over the field budget keeps its leading fields; an event over the size
budget has its longest values cut (strings end in ``...[truncated]``, binaries and arrays are
shortened).  Either way a trailing ``_truncated=True`` field is added and :attr:`truncated`
counts it.  If even that cannot fit (e.g. the names alone are too long), :meth:`encode` returns
``None`` and the provider counts the event as dropped (``too_large``).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import json
import math
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final

from ..fields import (
    ARRAY,
    BOOL,
    BYTES,
    F64,
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
    U64,
    UUID,
    Field,
    safe_str,
)
from .spec import (
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
_U16_MAX: Final = 0xFFFF
#: Suffix of a string value that was cut by the size policy.
_MARKER_BYTES: Final = TRUNCATION_MARKER.encode()
#: Name of the BOOL field appended to every truncated event.
_CACHE_MAX: Final = 1024

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
    b = value.encode()
    return _U16.pack(len(b)) + b


def _pack_bytes(value: bytes) -> bytes:
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


def _struct_packer(packers: list[Packer]) -> Packer:
    def pack_struct(value: list[Field]) -> bytes:
        if len(value) != len(packers):
            raise ValueError("struct shape changed")
        return b"".join([p(f[2]) for p, f in zip(packers, value, strict=False)])

    return pack_struct


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
        elif kind & ARRAY:
            base = kind & ~ARRAY
            in_type, out_type, _, _ = _SCALARS[base]
            if base == IPV6:
                in_type = InType.COUNTEDBINARY
            metas.append(field_metadata(name, in_type, out_type, vcount=True))
            packers.append(_array_packer(base))
            count += 2
        else:
            in_type, out_type, packer, _ = _SCALARS[kind]
            metas.append(field_metadata(name, in_type, out_type))
            packers.append(packer)
            count += 2 if in_type in (InType.BINARY, InType.COUNTEDBINARY) else 1
    return metas, packers, count


def _shape(fields: Sequence[Field]) -> tuple[Any, ...]:
    out: list[Any] = []
    for f in fields:
        out.append(f[0])
        out.append(f[1])
        if f[1] == STRUCT:
            out.append(_shape(f[2]))
    return tuple(out)


class _Plan:
    __slots__ = ("metadata", "ok", "packers")

    def __init__(self, metadata: bytes, packers: list[Packer], ok: bool) -> None:
        self.metadata = metadata
        self.packers = packers
        #: False when the shape breaks the field-count or metadata-size limits.
        self.ok = ok


# ---------------------------------------------------------------------------------------------
# Slow path helpers: normalisation and truncation


def _fix_value(kind: int, value: Any) -> tuple[int, Any]:
    """Make one scalar value packable for ``kind``; a value that is not becomes a string."""
    if kind in (STR, JSON):
        if type(value) is not str:
            return STR, safe_str(value)
        return kind, valid_text(value)
    if kind == BYTES:
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                return kind, bytes(value)
            except Exception:
                pass
        return STR, safe_str(value)
    try:
        _SCALARS[kind][2](value)
        return kind, value
    except Exception:
        if kind == TIME and isinstance(value, _dt.datetime):
            return STR, value.isoformat()
        return STR, safe_str(value)


def _normalize(fields: Sequence[Field], depth: int = 0) -> list[Field]:
    """Fields that pack without error: bad values become strings, bad arrays JSON-ish strings."""
    out: list[Field] = []
    for f in fields:
        try:
            name, kind, value = f
            name = name if type(name) is str else safe_str(name)
        except Exception:
            out.append(("?", STR, safe_str(f)))
            continue
        try:
            if kind == STRUCT:
                if isinstance(value, list) and 1 <= len(value) <= MAX_STRUCT_FIELDS and depth < 32:
                    out.append((name, STRUCT, _normalize(value, depth + 1)))
                else:
                    out.append((name, STR, safe_str(value)))
            elif isinstance(kind, int) and kind & ARRAY and (kind & ~ARRAY) in _SCALARS:
                base = kind & ~ARRAY
                items = list(value)
                fixed = [_fix_value(base, i) for i in items]
                if all(k == base for k, _ in fixed):
                    out.append((name, kind, [v for _, v in fixed]))
                else:
                    out.append((name, STR, safe_str(items)))
            elif kind in _SCALARS:
                k, v = _fix_value(kind, value)
                out.append((name, k, v))
            else:
                out.append((name, STR, safe_str(value)))
        except Exception:
            out.append((name, STR, safe_str(value)))
    return out


def _field_count(f: Field) -> int:
    kind = f[1]
    if kind == STRUCT:
        return 1 + sum(_field_count(s) for s in f[2])
    if kind & ARRAY or kind in (BYTES, IPV6):
        return 2
    return 1


def _limit_count(fields: list[Field], budget: int) -> list[Field]:
    """The leading fields whose logical count fits ``budget``.

    The first struct that does not fit is kept as JSON text (one field) when there is room.
    """
    out: list[Field] = []
    used = 0
    for f in fields:
        n = _field_count(f)
        if used + n > budget:
            if f[1] == STRUCT and used < budget:
                out.append((f[0], JSON, _json_text(f[2])))
            break
        out.append(f)
        used += n
    return out


def _plain_value(kind: int, value: Any) -> Any:
    """A field value as JSON-able Python data."""
    if kind == STRUCT:
        return {n: _plain_value(k, v) for n, k, v in value}
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
    return value


def _json_text(fields: list[Field]) -> str:
    """A struct's fields as JSON text (for a struct that cannot stay a struct)."""
    try:
        return valid_text(json.dumps(_plain_value(STRUCT, fields), ensure_ascii=False))
    except Exception:
        return valid_text(safe_str(fields))


def _var_size(f: Field) -> int:
    """Bytes a variable-size value occupies beyond its fixed part (what truncation can cut)."""
    kind, value = f[1], f[2]
    if kind in (STR, JSON):
        return len(value.encode())
    if kind == BYTES:
        return len(value)
    if kind & ARRAY:
        return _array_body_size(kind & ~ARRAY, value)
    return 0


def _array_body_size(kind: int, items: list[Any]) -> int:
    """Bytes of an array's items (without the u16 count)."""
    _, _, item, fmt = _SCALARS[kind]
    if fmt:
        return struct.calcsize("<" + fmt) * len(items)
    if kind == IPV6:
        return 18 * len(items)
    if kind in (STR, JSON):
        return sum(2 + len(i.encode()) for i in items)
    if kind == BYTES:
        return sum(2 + len(i) for i in items)
    return sum(len(item(i)) for i in items)


def _cut_text(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes including the truncation marker."""
    room = max(0, limit - len(_MARKER_BYTES))
    return text.encode()[:room].decode("utf-8", "ignore") + TRUNCATION_MARKER


def _cut(f: Field, limit: int) -> Field:
    """Field ``f`` with its variable part cut to about ``limit`` bytes."""
    name, kind, value = f
    if kind in (STR, JSON):
        return (name, STR, _cut_text(value, limit))
    if kind == BYTES:
        return (name, BYTES, value[:limit])
    items = list(value)
    base = kind & ~ARRAY
    lo, hi = 0, min(len(items), _U16_MAX)
    while lo < hi:  # the longest prefix that packs into limit bytes
        mid = (lo + hi + 1) // 2
        if _array_body_size(base, items[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return (name, kind, items[:lo])


def _leaves(fields: list[Field], path: tuple[int, ...], out: list[tuple[int, tuple[int, ...]]]) -> None:
    for i, f in enumerate(fields):
        if f[1] == STRUCT:
            _leaves(f[2], (*path, i), out)
        else:
            size = _var_size(f)
            if size:
                out.append((size, (*path, i)))


def _replace(fields: list[Field], path: tuple[int, ...], limit: int) -> list[Field]:
    out = list(fields)
    i = path[0]
    if len(path) == 1:
        out[i] = _cut(out[i], limit)
    else:
        name, kind, sub = out[i]
        out[i] = (name, kind, _replace(sub, path[1:], limit))
    return out


def _water_level(sizes: list[int], excess: int) -> int:
    """The largest cap T with sum(max(0, s - T)) >= excess (cutting the longest values first)."""
    ordered = sorted(sizes, reverse=True)
    removed = 0
    for i, s in enumerate(ordered):
        nxt = ordered[i + 1] if i + 1 < len(ordered) else 0
        # lowering the top i+1 values from s to nxt removes (i+1)*(s-nxt)
        step = (i + 1) * (s - nxt)
        if removed + step >= excess:
            need = excess - removed
            return s - -(-need // (i + 1))  # ceil division
        removed += step
    return 0


# ---------------------------------------------------------------------------------------------


class TraceLoggingEncoder:
    """Encodes events of one provider as TraceLogging metadata + data.

    ``traits`` is the provider traits blob (passed once to EventSetInformation and with every
    write).  :meth:`encode` never raises; ``truncated`` counts events written with a truncation
    marker.  The per-shape cache is bounded (it is cleared when it grows past 1024 shapes).
    """

    __slots__ = ("_budget", "_cache", "max_size", "traits", "truncated")

    def __init__(
        self,
        provider_name: str,
        group_id: uuid.UUID | str | None = None,
        max_size: int = DEFAULT_MAX_SIZE,
    ) -> None:
        if not isinstance(provider_name, str) or not provider_name:
            raise ValueError("provider_name must be a non-empty str")
        if "\0" in provider_name:
            raise ValueError("provider_name must not contain NUL")
        group_id = group_guid(group_id)
        if not isinstance(max_size, int) or not _MIN_MAX_SIZE <= max_size <= _MAX_MAX_SIZE:
            raise ValueError(f"max_size must be an int in [{_MIN_MAX_SIZE}, {_MAX_MAX_SIZE}]")
        self.traits: bytes = provider_traits(provider_name, group_id)
        self.max_size = max_size
        self.truncated = 0
        self._budget = max_size - len(self.traits)
        if self._budget < 256:
            raise ValueError("provider name too long for max_size")
        self._cache: dict[tuple[Any, ...], _Plan] = {}

    def _plan(self, name: str, fields: Sequence[Field], tags: int) -> _Plan:
        key = (name, tags, _shape(fields))
        plan = self._cache.get(key)
        if plan is None:
            metas, packers, count = _compile(fields)
            metadata = event_metadata(name, metas, tags)
            plan = _Plan(metadata, packers, count <= MAX_FIELDS and len(metadata) <= MAX_METADATA)
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[key] = plan
        return plan

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
        """``(traits, metadata, data)`` for one event, or ``None`` if it cannot fit even truncated.

        ``tag`` is the event's 28-bit tags value (in the metadata).  Level, opcode and the activity
        ids are not part of the TraceLogging blobs: the backend passes them to EventWriteTransfer
        (they are parameters here so that both encoders share one signature).  Never raises.
        """
        tags = tag
        try:
            plan = self._cache.get((name, tags, _shape(fields)))
            if plan is None:
                plan = self._plan(name, fields, tags)
            if plan.ok:
                # The shape key guarantees one packer per field (strict=False: no second check).
                data = b"".join([p(f[2]) for p, f in zip(plan.packers, fields, strict=False)])
                if len(plan.metadata) + len(data) <= self._budget:
                    return self.traits, plan.metadata, data
        except Exception:
            pass
        try:
            return self._encode_slow(name, fields, tags)
        except Exception:
            return None

    def _encode_slow(self, name: str, fields: list[Field], tags: int) -> TraceLoggingEvent | None:
        """Normalise bad values, apply the field-count and size limits (see the module docstring)."""
        if type(name) is not str:
            name = safe_str(name)
        tags = tags & 0x0FFFFFFF if isinstance(tags, int) else 0
        work = _normalize(fields)
        truncated = False
        if sum(_field_count(f) for f in work) > MAX_FIELDS:
            work = _limit_count(work, MAX_FIELDS - 1)
            truncated = True
        leaves: list[tuple[int, tuple[int, ...]]] = []
        _leaves(work, (), leaves)
        for s, path in leaves:  # no single value can be larger than the whole budget
            if s > self._budget:
                work = _replace(work, path, self._budget)
                truncated = True
        marker: list[Field] = [(TRUNCATED_FIELD, BOOL, True)]
        for _ in range(6):
            candidate = work + marker if truncated else work
            plan = self._plan(name, candidate, tags)
            if not plan.ok:
                # Names too long for the metadata budget: drop trailing fields, then give up.
                if not candidate or len(work) <= 1:
                    return None
                work = work[: len(work) // 2]
                truncated = True
                continue
            data = b"".join([p(f[2]) for p, f in zip(plan.packers, candidate, strict=True)])
            size = len(plan.metadata) + len(data)
            if size <= self._budget:
                if truncated:
                    self.truncated += 1
                return self.traits, plan.metadata, data
            excess = size - self._budget
            if not truncated:
                excess += len(field_metadata(TRUNCATED_FIELD, InType.BOOL32)) + 4
            leaves = []
            _leaves(work, (), leaves)
            if not leaves:
                return None
            level = _water_level([s for s, _ in leaves], excess)
            for s, path in leaves:
                if s > level:
                    work = _replace(work, path, level)
            truncated = True
        return None
