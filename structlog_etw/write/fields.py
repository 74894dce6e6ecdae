"""Typed fields: the format-neutral middle of the pipeline.

event dict -> :func:`to_fields` -> ``list[Field]`` -> an encoder (EventHeader or
TraceLogging) -> bytes -> a backend.  Nothing here knows about structlog or about
either byte format; this module owns the *type table* (docs/types.md): which
Python value becomes which kind of field.

A :data:`Field` is a plain tuple ``(name, kind, value)``:

========== ========================================= ===========================
kind       value                                     from
========== ========================================= ===========================
BOOL       ``bool``                                  bool
I64        ``int`` in [-2**63, 2**63)                int
U64        ``int`` in [2**63, 2**64)                 int
F64        ``float``                                 float (NaN/inf kept)
STR        ``str`` (may hold lone surrogates / NUL;  str, big ints, enums,
           the encoders make it valid UTF-8)         exceptions, anything else
BYTES      ``bytes``                                 bytes, bytearray, memoryview
UUID       ``uuid.UUID``                             uuid.UUID
IPV4       ``bytes`` (4, network order)              ipaddress.IPv4Address
IPV6       ``bytes`` (16, network order)             ipaddress.IPv6Address
TIME       ``datetime.datetime`` (as given)          datetime.datetime
JSON       ``str`` holding JSON text                 mixed / nested lists, ...
STRUCT     ``list[Field]`` (1..MAX_STRUCT_FIELDS)    dict
NULL       ``None``                                  None
kind|ARRAY ``list`` of values of ``kind``            homogeneous list/tuple/set
U8         ``int`` in [0, 2**8)                      (never: fixed-width layouts)
I16        ``int`` in [-2**15, 2**15)                (never: fixed-width layouts)
U16        ``int`` in [0, 2**16)                     (never: fixed-width layouts)
U32        ``int`` in [0, 2**32)                     (never: fixed-width layouts)
========== ========================================= ===========================

The narrow integer kinds ``U8``/``I16``/``U16``/``U32`` are never produced from a Python value;
they exist for layouts that prescribe a field's width (the Common Schema fields ``__csver__``,
``severityNumber`` and a span's ``kind``, as OpenTelemetry's exporters write them).  A value out
of a kind's range is written as its text, like any value that does not fit its kind.

``NULL`` is a value that is not there (``None``): EventHeader writes it as a nullable field (a
counted field of a fixed-size format with no bytes, which perf-decode prints as ``null``);
TraceLogging, which has no null, writes the text ``"None"`` (docs/types.md has both and why).

Field names are ``str`` (non-``str`` keys are turned into strings here); the
encoders make them valid for their metadata (no NUL).

The encoders share the helpers of their general (not fast) path here: :func:`normalize` (their
one error contract: a value that cannot be written as its kind is written as its text),
:func:`bytes_value`, :func:`leaf_values` and :func:`json_as_str` (the size policy writes a cut
JSON text as a string).
"""

from __future__ import annotations

import datetime as _dt
import enum
import ipaddress
import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Final

from ..formats._names import clean_name

__all__ = [
    "ARRAY",
    "BOOL",
    "BYTES",
    "F64",
    "I16",
    "I64",
    "IPV4",
    "IPV6",
    "JSON",
    "KIND_NAMES",
    "MAX_NESTING",
    "MAX_STRUCT_FIELDS",
    "NULL",
    "STR",
    "STRUCT",
    "TIME",
    "TRUNCATED_FIELD",
    "TRUNCATION_MARKER",
    "U8",
    "U16",
    "U32",
    "U64",
    "UUID",
    "Field",
    "bytes_value",
    "clean_name",
    "dict_fields",
    "json_as_str",
    "leaf_values",
    "normalize",
    "safe_str",
    "to_field",
    "to_fields",
]

BOOL: Final = 1
I64: Final = 2
U64: Final = 3
F64: Final = 4
STR: Final = 5
BYTES: Final = 6
UUID: Final = 7
IPV4: Final = 8
IPV6: Final = 9
TIME: Final = 10
JSON: Final = 11
STRUCT: Final = 12
#: Fixed-width integers, only for layouts that prescribe them (never from a Python value).
U8: Final = 13
I16: Final = 14
U16: Final = 15
U32: Final = 16
#: ``None``: a value that is not there (its field's type is the encoder's: docs/types.md).
NULL: Final = 17
#: Or-ed into a scalar kind: a variable-length array of that kind.
ARRAY: Final = 0x40

KIND_NAMES: Final[dict[int, str]] = {
    BOOL: "bool",
    I64: "int64",
    U64: "uint64",
    F64: "float64",
    STR: "str",
    BYTES: "bytes",
    UUID: "uuid",
    IPV4: "ipv4",
    IPV6: "ipv6",
    TIME: "datetime",
    JSON: "json",
    STRUCT: "struct",
    U8: "uint8",
    I16: "int16",
    U16: "uint16",
    U32: "uint32",
    NULL: "null",
}

#: A struct (dict) holds at most this many fields (both formats: 7-bit count);
#: a larger dict is written as a JSON string.
MAX_STRUCT_FIELDS: Final = 127
#: Dicts nested deeper than this are written as a JSON string.
MAX_NESTING: Final = 8
#: Both encoders' size policy: a string cut to fit ends with this marker ...
TRUNCATION_MARKER: Final = "...[truncated]"
#: ... and an event with any value cut carries this boolean field (true).
TRUNCATED_FIELD: Final = "_truncated"

Field = tuple[str, int, Any]

_I64_MIN: Final = -(1 << 63)
_I64_END: Final = 1 << 63
_U64_END: Final = 1 << 64
_INT_STR_LIMIT: Final = 4000  # CPython refuses str(int) past 4300 digits by default

# Exact types whose array element kind is fixed.
_SCALAR_KIND: Final[dict[type, int]] = {
    bool: BOOL,
    float: F64,
    str: STR,
    bytes: BYTES,
    uuid.UUID: UUID,
    ipaddress.IPv4Address: IPV4,
    ipaddress.IPv6Address: IPV6,
    _dt.datetime: TIME,
}


def safe_str(value: object) -> str:
    """``str(value)``, falling back to ``repr`` and then to a type marker.

    Never raises: an object whose ``__str__`` and ``__repr__`` both raise becomes
    ``"<unprintable TypeName>"``.
    """
    try:
        s = str(value)
        if type(s) is str:
            return s
    except Exception:
        pass
    try:
        s = repr(value)
        if type(s) is str:
            return s
    except Exception:
        pass
    try:
        name = type(value).__qualname__
    except Exception:
        name = "object"
    return f"<unprintable {name}>"


def _int_str(value: int) -> str:
    """Decimal text of an int, hex (``0x...``/``-0x...``) past CPython's digit limit."""
    if value.bit_length() < _INT_STR_LIMIT * 3:  # < ~4000 decimal digits
        return int.__repr__(value)
    return hex(value)


def _int_field(name: str, value: int) -> Field:
    if _I64_MIN <= value < _I64_END:
        return (name, I64, value)
    if 0 <= value < _U64_END:
        return (name, U64, value)
    return (name, STR, _int_str(value))


def _json_default(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).hex()
        except Exception:
            return safe_str(value)
    if isinstance(value, (set, frozenset)):
        return list(value)
    return safe_str(value)


def _json_or_str(name: str, value: object) -> Field:
    """A container that has no typed form: JSON text, or its ``repr`` if not JSON-able."""
    try:
        text = json.dumps(value, default=_json_default, ensure_ascii=False, allow_nan=False)
        return (name, JSON, text)
    except Exception:
        return (name, STR, safe_str(value))


def _array_field(name: str, items: list[Any]) -> Field:
    if not items:
        return (name, STR | ARRAY, [])
    t0 = type(items[0])
    for item in items:
        if type(item) is not t0:
            return _json_or_str(name, items)
    if t0 is int:
        lo = min(items)
        hi = max(items)
        if lo >= _I64_MIN and hi < _I64_END:
            return (name, I64 | ARRAY, items)
        if lo >= 0 and hi < _U64_END:
            return (name, U64 | ARRAY, items)
        return _json_or_str(name, items)
    kind = _SCALAR_KIND.get(t0)
    if kind is None:
        if t0 in (bytearray, memoryview):
            try:
                return (name, BYTES | ARRAY, [bytes(i) for i in items])
            except Exception:
                return (name, STR, safe_str(items))
        return _json_or_str(name, items)
    if kind in (IPV4, IPV6):
        return (name, kind | ARRAY, [i.packed for i in items])
    return (name, kind | ARRAY, items)


def _struct_field(name: str, value: dict[Any, Any], depth: int) -> Field:
    if not value or len(value) > MAX_STRUCT_FIELDS or depth >= MAX_NESTING:
        return _json_or_str(name, value)
    try:
        items = list(value.items())
    except Exception:
        return (name, STR, safe_str(value))
    return (name, STRUCT, [to_field(k, v, depth + 1) for k, v in items])


def to_field(key: object, value: object, depth: int = 0) -> Field:
    """Convert one ``key=value`` pair to a :data:`Field` per the type table. Never raises."""
    name = key if type(key) is str else safe_str(key)
    t = type(value)
    try:
        if t is str:
            return (name, STR, value)
        if t is int:
            if _I64_MIN <= value < _I64_END:  # type: ignore[operator]
                return (name, I64, value)
            return _int_field(name, value)  # type: ignore[arg-type]
        if t is float:
            return (name, F64, value)
        if t is bool:
            return (name, BOOL, value)
        if t is dict:
            return _struct_field(name, value, depth)  # type: ignore[arg-type]
        if t is list or t is tuple:
            return _array_field(name, list(value))  # type: ignore[call-overload]
        if t is bytes:
            return (name, BYTES, value)
        if t is uuid.UUID:
            return (name, UUID, value)
        if t is _dt.datetime:
            return (name, TIME, value)
        if value is None:
            return (name, NULL, None)
        return _slow_field(name, value, depth)
    except Exception:
        return (name, STR, safe_str(value))


def _slow_field(name: str, value: object, depth: int) -> Field:
    if isinstance(value, enum.Enum):
        return (name, STR, f"{type(value).__name__}.{value.name}")
    if isinstance(value, BaseException):
        return (name, STR, f"{type(value).__name__}: {safe_str(value)}")
    if isinstance(value, bool):
        return (name, BOOL, bool(value))
    if isinstance(value, int):
        return _int_field(name, int(value))
    if isinstance(value, float):
        return (name, F64, float(value))
    if isinstance(value, str):
        return (name, STR, str.__str__(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return (name, BYTES, bytes(value))
    if isinstance(value, uuid.UUID):
        return (name, UUID, value)
    if isinstance(value, ipaddress.IPv4Address):
        return (name, IPV4, value.packed)
    if isinstance(value, ipaddress.IPv6Address):
        return (name, IPV6, value.packed)
    if isinstance(value, _dt.datetime):
        return (name, TIME, value)
    if isinstance(value, (_dt.date, _dt.time)):
        return (name, STR, value.isoformat())
    if isinstance(value, dict):
        return _struct_field(name, value, depth)
    if isinstance(value, (list, tuple, set, frozenset)):
        return _array_field(name, list(value))
    return (name, STR, safe_str(value))


def to_fields(items: Iterable[tuple[object, object]]) -> list[Field]:
    """Convert ``(key, value)`` pairs (e.g. ``event_dict.items()``) to fields, in order. Never raises."""
    return [to_field(k, v) for k, v in items]


def dict_fields(items: Iterable[tuple[object, object]], skip: str | None) -> list[Field]:
    """Like :func:`to_fields`, leaving out ``exc_info`` and the key ``skip`` (may be ``None``).

    The exact ``str``/``int`` (int64)/``float``/``bool`` values of ``str`` keys - nearly every
    field of a log call - are converted inline, without a :func:`to_field` call each.  Never
    raises, whatever the keys do (a key whose ``__eq__``, ``__hash__`` or ``__class__`` raises is
    written under its :func:`safe_str`, as :func:`to_field` writes it).
    """
    out: list[Field] = []
    append = out.append
    for k, v in items:
        if type(k) is str:
            if k in ("exc_info", skip):
                continue
            t = type(v)
            if t is str:
                append((k, STR, v))
                continue
            if t is int:
                if _I64_MIN <= v < _I64_END:  # type: ignore[operator]
                    append((k, I64, v))
                    continue
            elif t is float:
                append((k, F64, v))
                continue
            elif t is bool:
                append((k, BOOL, v))
                continue
        elif issubclass(type(k), str) and (
            str.__eq__(k, "exc_info") or (skip is not None and str.__eq__(k, skip))  # type: ignore[operator]
        ):
            # a str subclass: compared as a str, never through a key's own __eq__ (may raise);
            # type(k), not isinstance: isinstance reads k.__class__, which a key may make raise
            continue
        append(to_field(k, v))
    return out


# --- what the encoders' general paths share ------------------------------------------------------

#: Structs nested deeper than this are written as text by :func:`normalize` (``to_fields`` never
#: nests deeper than :data:`MAX_NESTING`; this bounds hand-made or self-referencing field lists).
_NORMALIZE_DEPTH: Final = 32


def _text(kind: object, value: object) -> str:
    """The text a value is written as when it cannot be written as ``kind``."""
    if type(kind) is int and kind == TIME and isinstance(value, _dt.datetime):
        try:
            return value.isoformat()  # a datetime's text is its ISO 8601 form, as on Linux
        except Exception:
            pass
    return safe_str(value)


def normalize(fields: Iterable[Any], convert: Callable[[int, Any], Any], depth: int = 0) -> list[Field]:
    """``fields`` with each value replaced by ``convert(kind, value)``; never raises.

    The one error contract of both encoders (docs/limits.md): ``convert`` is how an encoder writes a
    value of a scalar or array kind, and raises when its format cannot (a value that does not fit
    its kind, such as ``("x", I64, "not an int")``, or one the format cannot represent, such as a
    datetime before 1601 as a Windows FILETIME).  Such a value is written as its text instead:
    ``(name, STR, convert(STR, text))``, the text being :func:`safe_str` of the value (a datetime's
    ISO 8601 text).  A struct keeps its kind with its members normalized, unless its value is not
    a list of 1..:data:`MAX_STRUCT_FIELDS` fields (or it is nested more than 32 deep): then it is
    text too.  A name that is not a ``str`` becomes its :func:`safe_str`; an item that is not a
    ``(name, kind, value)`` triple becomes a string field named ``"?"``.
    """
    out: list[Field] = []
    for f in fields:
        try:
            name, kind, value = f
        except Exception:
            out.append(("?", STR, convert(STR, safe_str(f))))
            continue
        if type(name) is not str:
            name = safe_str(name)
        try:
            if kind != STRUCT:
                out.append((name, kind, convert(kind, value)))
                continue
            if isinstance(value, list) and 1 <= len(value) <= MAX_STRUCT_FIELDS and depth < _NORMALIZE_DEPTH:
                out.append((name, STRUCT, normalize(value, convert, depth + 1)))
                continue
        except Exception:
            pass
        out.append((name, STR, convert(STR, _text(kind, value))))
    return out


def bytes_value(value: object) -> bytes:
    """The bytes of a BYTES field's value (``bytes``, ``bytearray`` or ``memoryview``, all of its
    bytes); ``TypeError`` for anything else (an ``int`` is not a length here)."""
    if type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"expected bytes, got {type(value).__name__}")


def leaf_values(fields: Iterable[Field]) -> list[Any]:
    """The values of ``fields`` in wire order: a struct contributes its members' values, not itself."""
    out: list[Any] = []
    _leaves(fields, out)
    return out


def _leaves(fields: Iterable[Field], out: list[Any]) -> None:
    for f in fields:
        if f[1] == STRUCT:
            _leaves(f[2], out)
        else:
            out.append(f[2])


def json_as_str(fields: Iterable[Field], which: Callable[[Any], bool] | None = None) -> list[Field]:
    """``fields`` with JSON fields (in structs too) made plain strings: a cut JSON text is not JSON.

    With ``which``, only the JSON fields whose value it accepts (e.g. the ones the size policy cut).
    """
    out: list[Field] = []
    for f in fields:
        if f[1] == JSON and (which is None or which(f[2])):
            out.append((f[0], STR, f[2]))
        elif f[1] == STRUCT:
            out.append((f[0], STRUCT, json_as_str(f[2], which)))
        else:
            out.append(f)
    return out
