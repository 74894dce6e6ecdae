"""Per-shape encode functions: what both encoders share to go from an event dict to bytes directly.

The general route of an event is ``dict_fields(event.items(), skip)`` (one typed field per key)
and then the encoder.  For the keys and value classes nearly every log call has, an encoder can
skip the typed fields: it builds, once per *shape*, a function that takes the event dict itself,
checks each value's class, and packs the values with straight-line code (a ``struct`` call per run
of fixed-size values, the UTF-8 bytes of each string), writing the same bytes the general route
writes.  This module holds the parts both formats share:

* :data:`SHAPE_KINDS`: the value classes a shape function takes, with the kind the type table
  gives them (``None`` is the string ``"None"``); any other class, a key that is not a ``str``
  and a dict that is not flat sends the event down the general route;
* :func:`layout`: the kinds of an event dict's values in order (``SKIP`` for ``exc_info`` and the
  skipped key), or ``None`` when the shape has no shape function;
* :func:`compile_packer`: the generated function for a layout, given how a format writes each
  kind (:class:`Step`).  Its source is built only from the format's step table and positions,
  never from keys or values.

Shapes are found by the event's keys compared by equality, as a dict compares them: a key of a
``str`` subclass that equals a ``str`` key shares that key's shape and is written under that name
(the general route writes ``str(key)``, the same text unless the subclass overrides ``__str__``).

A shape function returns ``None`` when a value's class is not the one its shape was built for
(the caller then looks the shape up with the classes in the key) and raises when a value of the
right class cannot be written by the straight-line code (an int past int64, a string with lone
surrogates, a length past u16, a datetime whose ``isoformat`` fails): the caller then takes the
general route, which decides what is written (:func:`~structlog_etw.fields.normalize`).

Stdlib only (layer 1, next to :mod:`structlog_etw.fields`).
"""

from __future__ import annotations

import datetime as _dt
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple

from .fields import BOOL, BYTES, F64, I64, STR, TIME, UUID

__all__ = ["NONE", "SHAPE_KINDS", "SKIP", "Step", "compile_packer", "layout"]

#: The kind of a ``None`` value in a layout: the type table writes it as the string ``"None"``.
NONE: Final = -2
#: The kind of a position a shape function does not write (``exc_info``, the skipped key).
SKIP: Final = -1

#: Value class -> kind, for the classes a shape function writes (exact classes: a subclass takes
#: the general route, as it does in the type table).  ``int`` is int64: a larger int makes the
#: shape function raise, and the general route writes it as uint64 or text.
SHAPE_KINDS: Final[dict[type, int]] = {
    str: STR,
    int: I64,
    float: F64,
    bool: BOOL,
    type(None): NONE,
    bytes: BYTES,
    uuid.UUID: UUID,
    _dt.datetime: TIME,
}
_CLASS_OF_KIND: Final[dict[int, type]] = {kind: cls for cls, kind in SHAPE_KINDS.items()}


def layout(keys: Iterable[object], classes: Iterable[type], skip: str | None) -> tuple[int, ...] | None:
    """The kinds of an event's values in order, or ``None`` if a shape function cannot write it.

    ``keys``/``classes``: the event dict's keys and the classes of its values.  ``exc_info`` and
    ``skip`` are :data:`SKIP`; a key that is not a ``str``, or a value class outside
    :data:`SHAPE_KINDS`, means ``None``.
    """
    out: list[int] = []
    for key, cls in zip(keys, classes, strict=True):
        if type(key) is not str:
            return None
        if key in ("exc_info", skip):
            out.append(SKIP)
            continue
        kind = SHAPE_KINDS.get(cls)
        if kind is None:
            return None
        out.append(kind)
    return tuple(out)


class Step(NamedTuple):
    """How a format writes one kind: ``fixed`` (a struct format, ``""`` when the value is a
    counted body) and ``expr`` (the Python expression of what is packed, ``{v}`` the value).

    A counted value (``fixed == ""``) is written as a little-endian u16 byte length and the bytes
    ``expr`` gives; a fixed one is packed with ``fixed``.
    """

    fixed: str
    expr: str


def compile_packer(
    kinds: tuple[int, ...],
    steps: Mapping[int, Step],
    lead: tuple[str, ...] = (),
    env: Mapping[str, Any] | None = None,
) -> Callable[..., bytes | None]:
    """Compile ``f(event, *lead) -> bytes | None`` for a layout: ``b"".join((*lead, values...))``.

    ``kinds``: a :func:`layout`; ``steps``: the format's :class:`Step` per kind; ``env``: names
    the expressions use.  The function unpacks ``event.values()`` (a shape with as many values as
    ``kinds``), returns ``None`` if a value's class is not its kind's, and otherwise packs runs of
    fixed-size values and the u16 length of the counted value that ends a run in one ``struct``
    call.  It raises what the straight-line code raises (``struct.error``, ``UnicodeError``,
    ``AttributeError``, ...) for values it cannot write.
    """
    names = [f"x{i}" if kind != SKIP else "_" for i, kind in enumerate(kinds)]
    ns: dict[str, Any] = {"_class": type, **(env or {})}
    checks: list[str] = []
    pre: list[str] = []
    parts: list[str] = list(lead)
    run_fmt = ""
    run_args: list[str] = []

    def close_run() -> None:
        nonlocal run_fmt, run_args
        if run_fmt:
            ns[f"_p{len(parts)}"] = struct.Struct("<" + run_fmt).pack
            parts.append(f"_p{len(parts)}({', '.join(run_args)})")
            run_fmt, run_args = "", []

    for i, kind in enumerate(kinds):
        if kind == SKIP:
            continue
        ns[f"_c{i}"] = _CLASS_OF_KIND[kind]
        checks.append(f"_class(x{i}) is not _c{i}")
        step = steps[kind]
        expr = step.expr.format(v=f"x{i}")
        if step.fixed:
            run_fmt += step.fixed
            run_args.append(expr)
            continue
        pre.append(f"b{i} = {expr}")
        run_fmt += "H"
        run_args.append(f"len(b{i})")
        close_run()
        parts.append(f"b{i}")
    close_run()
    unpack = f"({', '.join(names)},) = event.values()" if names else "if event: return None"
    lines = [unpack]
    if checks:
        lines.append(f"if {' or '.join(checks)}: return None")
    lines += pre
    lines.append(f"return b''.join(({', '.join(parts)}{',' if parts else ''}))")
    args = ", ".join(("event", *lead))
    src = f"def pack({args}):\n" + "".join(f"    {line}\n" for line in lines)
    exec(compile(src, "<structlog_etw shape function>", "exec"), ns)
    fn: Callable[..., bytes | None] = ns["pack"]
    return fn
