"""The write side's one code generator, and the compiled packer that stands in for it.

:func:`compile_shape_function` builds a layout's function from a format's :class:`Step` table:
its source is made only of the steps and positions, never of keys or values (the package's one
``exec``).  :func:`compiled_packer` is the same layout's packer in C where the optional module
``structlog_etw.write.shapes._speedups`` (``_speedups.c`` beside this module) is built and loaded
(:data:`SPEEDUPS`): the same bytes, ``None`` and errors, for layouts of ``str``/``int``/``float``/
``bool``/``None``/``bytes`` values; nothing is compiled, a program is the layout's op string (the
ops are :data:`OPS`, the C module's enum, held equal to it by tests/write/shapes/test_speedups.py).
:func:`layout_function` picks one of the two for a layout.

Stdlib only.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from ._layout import CLASS_OF_KIND, NULLABLE, SKIP, U16_BYTES, U16_LIST

__all__ = ["OPS", "SPEEDUPS", "Op", "Step", "compile_shape_function", "compiled_packer", "layout_function"]


class Step(NamedTuple):
    """How a format writes one kind: ``fixed`` (a struct format, ``""`` when the value is a
    counted body) and ``expr`` (the Python expression of what is packed, ``{v}`` the value).

    A counted value (``fixed == ""``) is written as a little-endian u16 byte length and the bytes
    ``expr`` gives; a fixed one is packed with ``fixed``.
    """

    fixed: str
    expr: str


def compile_shape_function(
    kinds: tuple[int, ...],
    steps: Mapping[int, Step],
    lead: tuple[str, ...] = (),
    env: Mapping[str, Any] | None = None,
) -> Callable[..., bytes | None]:
    """Compile ``f(event, *lead) -> bytes | None`` for a layout: ``b"".join((*lead, values...))``.

    ``kinds``: a :func:`layout`; ``steps``: the format's :class:`Step` per kind; ``env``: names
    the expressions use besides ``_encode`` (``str.encode``: a plain call of it costs less than
    the method call ``{v}.encode()``, and the class check has made ``{v}`` an exact ``str``).
    The function unpacks ``event.values()`` (a shape with as many values as ``kinds``), returns
    ``None`` if a value's class is not its kind's, and otherwise packs runs of fixed-size values
    and the u16 length of the counted value that ends a run in one ``struct`` call; a counted
    value with no fixed value before it has its length looked up in a list of
    :data:`U16_BYTES`'s prebuilt range (no call; after a length past it the function uses
    :data:`U16_BYTES` itself, from then on).  It raises what the straight-line code raises
    (``struct.error``, ``UnicodeError``, ``AttributeError``, ...) for values it cannot write.
    """
    names = [f"x{i}" if kind != SKIP else "_" for i, kind in enumerate(kinds)]
    ns: dict[str, Any] = {
        "_class": type,
        "_encode": str.encode,
        "_join": b"".join,
        "_u16": U16_LIST,
        "_u16x": U16_BYTES,
        **(env or {}),
    }
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
        ns[f"_c{i}"] = CLASS_OF_KIND.get(kind) or CLASS_OF_KIND[kind & ~NULLABLE]
        checks.append(f"_class(x{i}) is not _c{i}")
        step = steps[kind]
        expr = step.expr.format(v=f"x{i}")
        if step.fixed:
            run_fmt += step.fixed
            run_args.append(expr)
            continue
        pre.append(f"b{i} = {expr}")
        if run_fmt:  # the length ends the run of fixed values before it: one struct call
            run_fmt += "H"
            run_args.append(f"len(b{i})")
            close_run()
        else:  # a length of its own (after a counted value, or first): a look-up, no call
            parts.append(f"_u16[len(b{i})]")
        parts.append(f"b{i}")
    close_run()
    unpack = f"({', '.join(names)},) = event.values()" if names else "if event: return None"
    listed = any(part.startswith("_u16[") for part in parts)  # a length from the prebuilt list
    lines = ["global _u16", unpack] if listed else [unpack]
    if checks:
        lines.append(f"if {' or '.join(checks)}: return None")
    lines += pre
    joined = f"return _join(({', '.join(parts)}{',' if parts else ''}))"
    if listed:
        # A length past the prebuilt list: this function (its own globals) switches to the
        # mapping, which packs such lengths, and joins the same parts again.  The try costs
        # nothing on CPython 3.11+ until something raises; after the switch a layout that has
        # long strings pays the mapping's look-up, not an exception per event.
        lines += ["try:", f"    {joined}", "except IndexError:", "    _u16 = _u16x", f"    {joined}"]
    else:
        lines.append(joined)
    args = ", ".join(("event", *lead))
    src = f"def pack({args}):\n" + "".join(f"    {line}\n" for line in lines)
    exec(compile(src, "<structlog_etw shape function>", "exec"), ns)
    fn: Callable[..., bytes | None] = ns["pack"]
    return fn


def _load_speedups() -> Any:
    """The compiled packer module, or ``None``: not built (no compiler where the package was
    installed), of another op version, or turned off by ``STRUCTLOG_ETW_PURE_PYTHON=1``."""
    if os.environ.get("STRUCTLOG_ETW_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:  # the import statement's machinery (importlib.import_module's is not seen by -X importtime)
        module = __import__(f"{__package__}._speedups", fromlist=["ABI_VERSION"])
    except ImportError:
        return None
    if getattr(module, "ABI_VERSION", None) != _SPEEDUPS_ABI:
        return None
    return module if getattr(module, "OPS", None) == {name: op.code for name, op in OPS.items()} else None


#: The op version of ``_speedups.c`` this module speaks.
_SPEEDUPS_ABI: Final = 1


class Op(NamedTuple):
    """One op of the compiled packer (the ``OP_*`` enum of ``_speedups.c``, held equal to this table
    by tests/write/shapes/test_speedups.py; a module whose ``OPS`` differ is not loaded)."""

    #: The op's code (its place in the enum).
    code: int
    #: The exact class of the value it writes (``None``: it writes nothing).
    cls: type | None
    #: The bytes it writes whatever the value: a fixed-size value's, or a counted value's u16 length.
    size: int


#: The compiled packer's ops by name, in the order of their codes.  A format's codec rows name the
#: op that writes their kind as the row's :class:`Step` does (:attr:`Codec.ops`).
OPS: Final[dict[str, Op]] = {
    name: Op(code, cls, size)
    for code, (name, cls, size) in enumerate(
        [
            ("skip", None, 0),  # a position not written (exc_info, the skipped key)
            ("str", str, 2),  # u16 length + UTF-8 (strict)
            ("bytes", bytes, 2),  # u16 length + the bytes
            ("i64", int, 8),  # int64
            ("f64", float, 8),  # IEEE 754 double
            ("bool8", bool, 1),  # 1 byte, 0 or 1
            ("bool32", bool, 4),  # int32 0 or 1
            ("null_empty", type(None), 2),  # u16 length 0
            ("null_text", type(None), 6),  # u16 length 4 + "None"
            ("i64_counted", int, 10),  # u16 length 8 + int64
            ("f64_counted", float, 10),  # u16 length 8 + double
        ]
    )
}
#: The compiled packer (``structlog_etw/write/shapes/_speedups.c``) when it is built and not turned off, else
#: ``None``: every layout then runs its generated Python function (the same bytes).
SPEEDUPS: Final[Any] = _load_speedups()


def compiled_packer(kinds: tuple[int, ...], ops: Mapping[int, str]) -> Callable[..., bytes | None] | None:
    """The compiled packer of a layout, ``f(event, *lead) -> bytes | None``, or ``None`` when
    :data:`SPEEDUPS` is not loaded or a kind has no op in ``ops`` (the format's kind -> op-name
    table, the op names of ``_speedups.OPS``).

    It writes what :func:`compile_shape_function` writes for the same kinds with the format's
    steps, and returns ``None`` and raises where that function does (tests/write/shapes/test_speedups.py);
    besides, an event that is not an exact ``dict`` raises ``TypeError`` (the general route then
    writes it).  No code is compiled: a program is the layout's op string.
    """
    if SPEEDUPS is None:
        return None
    try:
        program = SPEEDUPS.Program(bytes(OPS["skip" if kind == SKIP else ops[kind]].code for kind in kinds))
    except KeyError:  # a kind the compiled packer does not write
        return None
    fn: Callable[..., bytes | None] = program.pack
    return fn


def layout_function(
    kinds: tuple[int, ...],
    ops: Mapping[int, str],
    steps: Mapping[int, Step],
    lead: tuple[str, ...] = (),
    env: Mapping[str, Any] | None = None,
) -> Callable[..., bytes | None]:
    """A layout's function for :class:`LayoutFunctions`: its :func:`compiled_packer` where the
    compiled module is loaded and takes every kind, else its :func:`compile_shape_function`."""
    return compiled_packer(kinds, ops) or compile_shape_function(kinds, steps, lead, env)
