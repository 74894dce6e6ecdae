"""EventHeader encoding for Linux user_events (Microsoft's LinuxTracepoints convention).

An event is::

    eventheader (8 bytes: flags, version, id, tag, opcode, level)
    [ActivityId extension: u16 size (16 or 32), u16 kind 2 | chain, activity id [, related id]]
    Metadata extension:   u16 size, u16 kind 1, event name NUL, per field: name NUL, encoding, [format]
    payload:              little-endian field values

Tracepoints are named ``<Provider>_L<level>K<keyword>[G<group>]`` and registered with
:func:`register_command`.  :class:`EventHeaderEncoder` turns an event name and a list of
:data:`~structlog_etw.fields.Field` into the bytes handed to ``writev`` after the write
index.  Metadata and a packing plan are built once per *event shape* (name, field names,
kinds, nested) and cached; a bounded cache keeps high-cardinality names from growing memory.

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

import re
import struct
import sys
import threading
from array import array
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
)
from .spec import (
    DYN_MAX_EVENT_SIZE,
    ENC_BINARY_LENGTH16_CHAR8,
    ENC_STRING_LENGTH16_CHAR8,
    ENC_STRUCT,
    ENC_VALUE8,
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
}

# Fixed-size scalars: struct format char per kind.
_FIXED_CHAR: Final[dict[int, str]] = {BOOL: "?", I64: "q", U64: "Q", F64: "d"}
# Fixed-size arrays: array typecode per kind.
_ARRAY_CODE: Final[dict[int, str]] = {BOOL: "B", I64: "q", U64: "Q", F64: "d"}
_ELEM_SIZE: Final[dict[int, int]] = {BOOL: 1, I64: 8, U64: 8, F64: 8, UUID: 16, IPV4: 4, IPV6: 16}


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


# --- the plan: metadata and payload packing per event shape --------------------------------------

# Payload steps: (op, arg).  Values arrive flattened in field order (structs contribute their
# children, not themselves).
_OP_FIXED: Final = 0  # arg: (struct.Struct, count) - consecutive fixed-size scalars
_OP_STR: Final = 1  # str -> u16 length + UTF-8
_OP_BYTES: Final = 2  # bytes -> u16 length + bytes
_OP_UUID: Final = 3  # uuid.UUID -> 16 bytes
_OP_RAW: Final = 4  # arg: size - bytes of exactly that size (IPv4/IPv6)
_OP_TIME: Final = 5  # datetime -> isoformat() -> like STR
_OP_ARR_FIXED: Final = 6  # arg: array typecode
_OP_ARR_STR: Final = 7
_OP_ARR_BYTES: Final = 8
_OP_ARR_UUID: Final = 9
_OP_ARR_RAW: Final = 10  # arg: element size
_OP_ARR_TIME: Final = 11

_SCALAR_OP: Final[dict[int, int]] = {
    STR: _OP_STR,
    JSON: _OP_STR,
    BYTES: _OP_BYTES,
    UUID: _OP_UUID,
    TIME: _OP_TIME,
}
_ARRAY_OP: Final[dict[int, int]] = {
    STR: _OP_ARR_STR,
    JSON: _OP_ARR_STR,
    BYTES: _OP_ARR_BYTES,
    UUID: _OP_ARR_UUID,
    TIME: _OP_ARR_TIME,
}


class _Plan:
    """Prebuilt metadata extension and payload steps for one event shape."""

    __slots__ = ("flat", "meta_block", "nvalues", "pack", "pack_fields", "steps")

    def __init__(self, meta_block: bytes, kinds: list[int], flat: bool) -> None:
        self.meta_block = meta_block
        self.steps, self.pack, self.pack_fields = _packer(tuple(kinds))
        self.flat = flat
        self.nvalues = len(kinds)


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
        if kind & ARRAY:
            base = kind & ~ARRAY
            if base in _ARRAY_CODE:
                steps.append((_OP_ARR_FIXED, _ARRAY_CODE[base]))
            elif base in (IPV4, IPV6):
                steps.append((_OP_ARR_RAW, _ELEM_SIZE[base]))
            else:
                steps.append((_ARRAY_OP[base], None))
        elif kind in (IPV4, IPV6):
            steps.append((_OP_RAW, _ELEM_SIZE[kind]))
        else:
            steps.append((_SCALAR_OP[kind], None))
    if run:
        steps.append((_OP_FIXED, (struct.Struct("<" + run), len(run))))
    return steps


def _build_plan(name: str, fields: list[Field]) -> _Plan:
    out = [_name_bytes(name)]
    kinds: list[int] = []
    _field_meta(fields, out, kinds)
    meta = b"".join(out)
    if len(meta) > _U16_MAX:
        raise OverflowError("metadata larger than 65535 bytes")
    flat = all(f[1] != STRUCT for f in fields)
    return _Plan(_EXT.pack(len(meta), EXT_METADATA) + meta, kinds, flat)


Packer = Callable[[Sequence[Any]], bytes]
FieldsPacker = Callable[[Sequence[Any], bytes, bytes], bytes]
_PACKERS: dict[tuple[int, ...], tuple[list[tuple[int, Any]], Packer, FieldsPacker]] = {}
_PACKER_LIMIT: Final = 1024


def _packer(kinds: tuple[int, ...]) -> tuple[list[tuple[int, Any]], Packer, FieldsPacker]:
    """Steps and generated payload functions for a sequence of leaf kinds (shared by all
    shapes with the same kinds, whatever their names, so new event names cost no compilation).

    The first function takes the flat values; the second a flat field list (it reads each
    field's value in place, so the encoder need not collect the values first), the header and
    the metadata block, and returns the whole event.
    """
    hit = _PACKERS.get(kinds)
    if hit is None:
        steps = _steps(list(kinds))
        hit = (steps, _generate(steps, "v[{}]"), _generate(steps, "v[{}][2]", "h, m, "))
        if len(_PACKERS) >= _PACKER_LIMIT:
            _PACKERS.clear()
        _PACKERS[kinds] = hit
    return hit


def _raw_checker(size: int) -> Callable[[bytes], bytes]:
    def raw(b: bytes) -> bytes:
        if len(b) != size:
            raise ValueError(f"address must be {size} bytes")
        return b

    return raw


def _generate(steps: list[tuple[int, Any]], item: str, lead: str = "") -> Any:
    """Compile ``values -> payload bytes`` for ``steps``: straight-line code, no per-value dispatch.

    ``item`` is how value ``i`` is read from the argument ``v`` (``"v[{}]"`` for a value list,
    ``"v[{}][2]"`` for a flat field list).  With ``lead="h, m, "`` the function takes
    ``(v, h, m)`` and returns ``h + m + payload`` (the header and metadata joined in the same call).

    The source is built only from our own step table (indices and helper names, never from field
    names or values).  Raises on values a plan cannot hold (non-UTF-8-encodable text, lengths past
    u16, wrong types); the encoder then falls back to the general path.
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
        if op == _OP_STR:
            pre.append(f"b{k} = {vi}.encode('utf-8')")
            parts += [f"_u16(len(b{k}))", f"b{k}"]
        elif op == _OP_TIME:
            pre.append(f"b{k} = {vi}.isoformat().encode('utf-8')")
            parts += [f"_u16(len(b{k}))", f"b{k}"]
        elif op == _OP_BYTES:
            pre.append(f"b{k} = {vi}")
            parts += [f"_u16(len(b{k}))", f"b{k}"]
        elif op == _OP_UUID:
            parts.append(f"{vi}.bytes")
        elif op == _OP_RAW:
            env[f"_r{k}"] = _raw_checker(arg)
            parts.append(f"_r{k}({vi})")
        else:
            env[f"_a{k}"] = _array_function(op, arg)
            parts += [f"_u16(len({vi}))", f"_a{k}({vi})"]
        i += 1
    body = "".join(f"    {line}\n" for line in pre)
    args = f"v, {lead[:-2]}" if lead else "v"
    src = f"def pack({args}):\n{body}    return b''.join(({lead}{', '.join(parts)}{',' if parts else ''}))\n"
    exec(compile(src, "<structlog_etw eventheader packer>", "exec"), env)
    return env["pack"]


def _array_function(op: int, arg: Any) -> Callable[[list[Any]], bytes]:
    def arr(items: list[Any]) -> bytes:
        return _array_body(op, arg, items)

    return arr


def _flatten(fields: list[Field], out: list[Any]) -> None:
    for f in fields:
        if f[1] == STRUCT:
            _flatten(f[2], out)
        else:
            out.append(f[2])


def _shape(fields: list[Field]) -> tuple[Any, ...]:
    """Hashable shape of nested fields: (name, kind or nested shape) pairs."""
    key: list[Any] = []
    for f in fields:
        key.append(f[0])
        key.append(_shape(f[2]) if f[1] == STRUCT else f[1])
    return tuple(key)


def _fixed_array(code: str, items: list[Any]) -> bytes:
    a = array(code, items)
    if not _LITTLE:  # pragma: no cover - big-endian hosts
        a.byteswap()
    return a.tobytes()


def _counted(data: bytes) -> bytes:
    return _U16.pack(len(data)) + data


def _pack_payload(steps: list[tuple[int, Any]], values: Sequence[Any]) -> list[bytes]:
    """Payload pieces for ``values``; raises on a value a plan cannot hold (caller falls back)."""
    parts: list[bytes] = []
    append = parts.append
    i = 0
    for op, arg in steps:
        if op == _OP_STR:
            b = _utf8(values[i])
            append(_U16.pack(len(b)))
            append(b)
            i += 1
        elif op == _OP_FIXED:
            st, n = arg
            append(st.pack(*values[i : i + n]))
            i += n
        elif op == _OP_BYTES:
            b = values[i]
            append(_U16.pack(len(b)))
            append(b)
            i += 1
        elif op == _OP_UUID:
            append(values[i].bytes)
            i += 1
        elif op == _OP_RAW:
            b = values[i]
            if len(b) != arg:
                raise ValueError(f"address must be {arg} bytes")
            append(b)
            i += 1
        elif op == _OP_TIME:
            b = _utf8(values[i].isoformat())
            append(_U16.pack(len(b)))
            append(b)
            i += 1
        else:
            items = values[i]
            append(_U16.pack(len(items)))
            append(_array_body(op, arg, items))
            i += 1
    return parts


def _array_body(op: int, arg: Any, items: list[Any]) -> bytes:
    if op == _OP_ARR_FIXED:
        return _fixed_array(arg, items)
    if op == _OP_ARR_STR:
        return b"".join([_counted(_utf8(s)) for s in items])
    if op == _OP_ARR_BYTES:
        return b"".join([_counted(bytes(b)) for b in items])
    if op == _OP_ARR_UUID:
        return b"".join([u.bytes for u in items])
    if op == _OP_ARR_RAW:
        if any(len(b) != arg for b in items):
            raise ValueError(f"addresses must be {arg} bytes")
        return b"".join(items)
    if op == _OP_ARR_TIME:
        return b"".join([_counted(_utf8(t.isoformat())) for t in items])
    raise ValueError(f"unknown payload op {op}")  # pragma: no cover


# --- size policy (slow path) ----------------------------------------------------------------------


def _cut_text(body: bytes, limit: int) -> bytes:
    """UTF-8 ``body`` cut to ``limit`` bytes (``limit >= len(TRUNCATION_MARKER)``), ending in the marker.

    Cut on a character boundary, so the result is valid UTF-8 when ``body`` is.
    """
    keep = body[: limit - len(_MARKER_BYTES)].decode("utf-8", "ignore").encode("utf-8")
    return keep + _MARKER_BYTES


class _Var:
    """A variable-size value the size policy may cut: its encoded body and how to cut it.

    A string is never cut below the marker: its size under a cap is :meth:`size_at`, never less
    than ``min(len(body), len(TRUNCATION_MARKER))``, so no string is written emptied without it.
    """

    __slots__ = ("body", "elems", "op")

    def __init__(self, op: int, body: bytes, elems: list[bytes] | None) -> None:
        self.op = op  # _OP_STR / _OP_BYTES / array op
        self.body = body  # bytes after the u16 count/length
        self.elems = elems  # arrays: encoded elements (count = len(elems))

    def size_at(self, cap: int) -> int:
        """Body bytes :meth:`cut` writes for ``cap`` (arrays: the elements are not counted here)."""
        if self.op == _OP_STR:
            cap = max(cap, len(_MARKER_BYTES))
        return min(len(self.body), cap)

    def cut(self, cap: int) -> bytes:
        """Prefix+body with the body cut to at most :meth:`size_at` bytes (always well-formed).

        Strings keep the visible ``...[truncated]`` marker (at worst they are the marker alone);
        binaries are cut; arrays keep their first whole elements.
        """
        if self.elems is None:
            body = self.body
            if self.op == _OP_STR:
                cap = max(cap, len(_MARKER_BYTES))
                if len(body) > cap:
                    body = _cut_text(body, cap)
            elif len(body) > cap:
                body = body[:cap]
            return _U16.pack(len(body)) + body
        kept: list[bytes] = []
        size = 0
        for e in self.elems:
            if size + len(e) > cap or len(kept) == _U16_MAX:
                break
            kept.append(e)
            size += len(e)
        return _U16.pack(len(kept)) + b"".join(kept)


def _counted_elements(op: int, arg: Any, items: list[Any]) -> list[bytes]:
    """An array's encoded elements for the size policy.

    A string or binary element longer than its u16 length prefix allows is cut to 65535 bytes
    (strings with the marker) instead of raising: such an array can only be written cut anyway.
    """
    if op in (_OP_ARR_STR, _OP_ARR_TIME):
        texts = [_utf8(t.isoformat() if op == _OP_ARR_TIME else t) for t in items]
        return [_counted(b if len(b) <= _U16_MAX else _cut_text(b, _U16_MAX)) for b in texts]
    if op == _OP_ARR_BYTES:
        return [_counted(bytes(b)[:_U16_MAX]) for b in items]
    return [_array_body(op, arg, [e]) for e in items]


def _var_pieces(steps: list[tuple[int, Any]], values: Sequence[Any]) -> list[bytes | _Var]:
    """Like :func:`_pack_payload` but variable-size values stay cuttable :class:`_Var` objects."""
    pieces: list[bytes | _Var] = []
    i = 0
    for op, arg in steps:
        v = values[i]
        if op == _OP_FIXED:
            st, n = arg
            pieces.append(st.pack(*values[i : i + n]))
            i += n
            continue
        i += 1
        if op in (_OP_STR, _OP_TIME):
            pieces.append(_Var(_OP_STR, _utf8(v.isoformat() if op == _OP_TIME else v), None))
        elif op == _OP_BYTES:
            pieces.append(_Var(_OP_BYTES, bytes(v), None))
        elif op == _OP_UUID:
            pieces.append(v.bytes)
        elif op == _OP_RAW:
            if len(v) != arg:
                raise ValueError(f"address must be {arg} bytes")
            pieces.append(v)
        elif op == _OP_ARR_FIXED:
            body = _fixed_array(arg, v)
            size = array(arg).itemsize
            pieces.append(_Var(op, body, [body[j : j + size] for j in range(0, len(body), size)]))
        else:
            elems = _counted_elements(op, arg, v)
            pieces.append(_Var(op, b"".join(elems), elems))
    return pieces


def _json_as_str(fields: list[Field]) -> list[Field]:
    """``fields`` with JSON fields turned into plain strings (a cut JSON text is no longer JSON)."""
    out: list[Field] = []
    for f in fields:
        if f[1] == JSON:
            out.append((f[0], STR, f[2]))
        elif f[1] == STRUCT:
            out.append((f[0], STRUCT, _json_as_str(f[2])))
        else:
            out.append(f)
    return out


def _water_level(values: list[_Var], room: int) -> int | None:
    """Largest cap with ``sum(v.size_at(cap)) <= room``, or ``None`` if not even cap 0 fits.

    Values shorter than the cap stay whole and the longest ones are cut down to it; a cut string
    still takes the marker's bytes, so with many long strings and little room there may be no cap.
    """
    if sum(v.size_at(0) for v in values) > room:
        return None
    lo, hi = 0, max((len(v.body) for v in values), default=0)
    while lo < hi:  # total size grows with the cap: the largest cap that fits
        mid = (lo + hi + 1) // 2
        if sum(v.size_at(mid) for v in values) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo


# --- the encoder ----------------------------------------------------------------------------------


class EventHeaderEncoder:
    """Encode events for one provider; caches metadata and a packing plan per event shape.

    ``max_size`` bounds the whole event (header, extensions, payload); it defaults to what perf
    keeps (:data:`PERF_MAX_EVENT_SIZE`) and may not exceed :data:`DYN_MAX_EVENT_SIZE`.
    ``truncated`` counts events written with values cut by the size policy.
    """

    __slots__ = ("_cache", "_lock", "cache_limit", "max_size", "truncated")

    def __init__(self, max_size: int = PERF_MAX_EVENT_SIZE, cache_limit: int = 2048) -> None:
        if not 64 <= max_size <= DYN_MAX_EVENT_SIZE:
            raise ValueError(f"max_size must be in 64..{DYN_MAX_EVENT_SIZE}, got {max_size}")
        self.max_size = max_size
        self.cache_limit = cache_limit
        self.truncated = 0
        self._cache: dict[Any, _Plan] = {}
        self._lock = threading.Lock()

    def _plan(self, name: str, fields: list[Field]) -> tuple[_Plan, Sequence[Any]]:
        values: Sequence[Any]
        if fields:
            names, kinds, values = zip(*fields, strict=True)  # one C-level pass over the fields
        else:
            names = kinds = values = ()
        if STRUCT in kinds:
            key: Any = (name, _shape(fields))
            flat: list[Any] = []
            _flatten(fields, flat)
            values = flat
        else:
            key = (name, names, kinds)
        plan = self._cache.get(key)
        if plan is None:
            plan = self._store(key, _build_plan(name, fields))
        return plan, values

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

        Raises only on a malformed call (wrong value types for the field kinds, level or opcode
        outside a byte, ids not 16 bytes); the provider counts that as ``encode_error``.
        """
        # The common case first: flat fields (no struct), the shape key built in one pass and the
        # generated packer reading the values from the fields in place.
        key: list[Any] = [name]
        append = key.append
        flat = True
        for fname, kind, _ in fields:
            if kind == STRUCT:
                flat = False
                break
            append(fname)
            append(kind)
        values: Sequence[Any] | None = None
        try:
            if flat:
                shape = tuple(key)
                plan = self._cache.get(shape)
                if plan is None:
                    plan = self._store(shape, _build_plan(name, fields))
            else:
                plan, values = self._plan(name, fields)
        except OverflowError:  # the metadata alone is past the u16 extension size: too large
            return None
        head = _HEADER.pack(HEADER_FLAGS, 0, 0, tag, opcode, level)
        if activity_id is not None:
            if related_id is not None:
                ids = activity_id + related_id
                if len(ids) != 32:
                    raise ValueError("activity ids must be 16 bytes")
            else:
                ids = activity_id
                if len(ids) != 16:
                    raise ValueError("activity ids must be 16 bytes")
            head = head + _EXT.pack(len(ids), EXT_ACTIVITY_ID | EXTENSION_CHAIN) + ids
        meta = plan.meta_block
        if values is None:  # flat: header, metadata and payload joined by the packer at once
            try:
                event = plan.pack_fields(fields, head, meta)
            except Exception:  # the general path below decides
                values = [f[2] for f in fields]
            else:
                if len(event) <= self.max_size:
                    return event
                return self._fit(name, fields, head)
            try:
                payload = b"".join(_pack_payload(plan.steps, values))
            except struct.error:
                return self._fit(name, fields, head)  # a count or length beyond u16
            if len(head) + len(meta) + len(payload) <= self.max_size:
                return b"".join((head, meta, payload))
            return self._fit(name, fields, head)
        try:
            payload = plan.pack(values)
        except Exception:  # surrogates, lengths past u16, odd types: the general path decides
            try:
                payload = b"".join(_pack_payload(plan.steps, values))
            except struct.error:
                return self._fit(name, fields, head)  # a count or length beyond u16
        if len(head) + len(meta) + len(payload) <= self.max_size:
            return b"".join((head, meta, payload))
        return self._fit(name, fields, head)

    def _fit(self, name: str, fields: list[Field], pre: bytes) -> bytes | None:
        """Slow path: cut the longest variable-size values to fit, or give up (``None``).

        ``pre`` is the header and activity extension; the event gets the ``_truncated`` field.
        """
        marked = [*_json_as_str(fields), (TRUNCATED_FIELD, BOOL, True)]
        try:
            plan, values = self._plan(name, marked)
        except OverflowError:
            return None
        head = pre + plan.meta_block
        pieces = _var_pieces(plan.steps, values)
        fixed = len(head)
        cuttable: list[_Var] = []
        for p in pieces:
            if isinstance(p, _Var):
                fixed += 2
                cuttable.append(p)
            else:
                fixed += len(p)
        room = self.max_size - fixed
        if room < 0 or len(head) > _U16_MAX:
            return None
        level = _water_level(cuttable, room)
        if level is None:  # not even the markers of the cut strings fit: too large
            return None
        cap = min(level, _U16_MAX)
        out = [head]
        for p in pieces:
            out.append(p.cut(cap) if isinstance(p, _Var) else p)
        event = b"".join(out)
        if len(event) > self.max_size:  # pragma: no cover - guarded by the water level
            return None
        with self._lock:
            self.truncated += 1
        return event
