"""What both encoders share to go from an event dict to bytes: codec tables, tiers, shape functions.

The general route of an event is ``dict_fields(event.items(), skip)`` (one typed field per key)
and then the encoder.  For the keys and value classes nearly every log call has, an encoder can
skip the typed fields: it builds, once per *shape*, a function that takes the event dict itself,
checks each value's class, and packs the values with straight-line code (a ``struct`` call per run
of fixed-size values, the UTF-8 bytes of each string), writing the same bytes the general route
writes.  This module holds the parts both formats share:

* :class:`Row` and :class:`Codec`: a format's **codec table**, a row per value kind (its
  metadata, packer, general-path body, shape-function :class:`Step` and compiled op), and every
  table derived from the rows (array metadata and packers, the steps and ops per layout kind,
  the interpreted route's table, the layouts' functions, the field-metadata cache);
* :func:`encode_dict`: the **tier dispatcher**, both encoders' ``encode_dict`` (through
  :class:`BaseEncoder`), speaking to a format through the small :class:`TieredEncoder`
  protocol; :class:`ShapeEntry`: the one kind of shape-cache entry;
* :data:`SHAPE_KINDS`: the value classes a shape function takes, with the kind the type table
  gives them (``None`` is :data:`NONE`, a null); any other class, a key that is not a ``str``
  and a dict that is not flat sends the event down the general route;
* :func:`layout`: the kinds of an event dict's values in order (``SKIP`` for ``exc_info`` and the
  skipped key), or ``None`` when the shape has no shape function;
* :func:`compile_shape_function`: the generated function for a layout, given how a format writes each
  kind (:class:`Step`).  Its source is built only from the format's step table and positions,
  never from keys or values.  The write side's one code generator;
* :func:`compiled_packer`: where the optional compiled module is built (:data:`SPEEDUPS`,
  ``structlog_etw/write/shapes/_speedups.c``), a layout's packer in C instead of its generated function: the
  same bytes, ``None`` and errors, for layouts of ``str``/``int``/``float``/``bool``/``None``/
  ``bytes`` values (nothing compiled: a program is the layout's op string; the ops are
  :data:`OPS`, the C module's enum, held equal to it by tests/write/shapes/test_speedups.py);
* :class:`LayoutFunctions`: a format's generated functions, one per layout, compiled only once
  the layout is hot and a compile budget allows it, bounded by count and by bytes;
* :class:`ShapeCache`: an encoder's shape entries (shape key -> :class:`ShapeEntry`), made only
  for shapes written :data:`SHAPE_HOT` times, bounded by count and by bytes, never for a key
  longer than :data:`MAX_KEY_CHARS`;
* :func:`walk`: the interpreted shape function (a loop, no code compiled) both formats run for
  a layout that has no generated function yet.

**Tiers** (:func:`encode_dict`).  An event dict whose shape has an entry is written by the entry's
function (compiled packer or generated function).  One whose shape has no entry is written by
:func:`walk` when its values are of the classes above, else by the general route (typed fields,
the encoder's non-generated packers): neither compiles anything.  When that route wrote the event,
the shape is *seen*; at its :data:`SHAPE_HOT`-th written event it gets an entry, if its layout has a
function.  A layout gets its function after :data:`LAYOUT_HOT` such promotions were asked for
it, and only if the compile budget has the credit: every general-route event earns one credit
(up to :data:`CREDIT_CAP`), a compile spends :data:`COMPILE_COST`.  A stream of new layouts thus
spends at most about one compile per :data:`COMPILE_COST` general-route events, a bounded share
of its time; a fixed shape is compiled within its first few dozen events and runs at full speed.

Shapes are found by the event's keys compared by equality, as a dict compares them: a key of a
``str`` subclass that equals a ``str`` key shares that key's shape and is written under that name
(the general route writes ``str(key)``, the same text unless the subclass overrides ``__str__``).

A shape function returns ``None`` when a value's class is not the one its shape was built for
(the caller then looks the shape up with the classes in the key) and raises when a value of the
right class cannot be written by the straight-line code (an int past int64, a string with lone
surrogates, a length past u16, a datetime whose ``isoformat`` fails): the caller then takes the
general route, which decides what is written (:func:`~structlog_etw.write.fields.normalize`).

**Threads.**  Nothing serialises threads on a free-threaded build, so no change to a shared table
here leans on the GIL: every store and its byte reckoning is a
:class:`~structlog_etw._util.bounded.BoundedCache` store, and the compile budget runs under the
object's own :class:`~structlog_etw._util.counters.TryLock`; both are only ever tried.  Never
waited for, so no thread, signal handler or ``__del__`` can hang on them; whoever finds one taken
skips the bookkeeping (a count, a credit, a store: a later recompute), never the event.
Lookups are single dict reads, safe on every build.  docs/reliability.md lists every such place.

Stdlib only (next to :mod:`structlog_etw.write.fields`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple, Protocol, TypeVar

from ..._util.bounded import BoundedCache
from ..._util.counters import TryLock
from ...formats.header import INFO_HEADER, Header, HeaderValue
from .._size_policy import NO_LIMIT, Cuttable, Piece, leading_pieces
from ..fields import ARRAY, BOOL, BYTES, F64, I64, NULL, STR, TIME, TRUNCATION_MARKER, UUID, dict_fields

__all__ = [
    "BINARY",
    "COMPILE_COST",
    "CREDIT_CAP",
    "FIELD_NAME_MAX",
    "GENERAL",
    "LAYOUT_HOT",
    "MAX_KEY_CHARS",
    "NONE",
    "NULLABLE",
    "OPS",
    "SHAPE_HOT",
    "SHAPE_KINDS",
    "SKIP",
    "SPEEDUPS",
    "TEXT",
    "U16_BYTES",
    "WHOLE",
    "BaseEncoder",
    "Codec",
    "HotShape",
    "LayoutFunctions",
    "Op",
    "Packer",
    "Row",
    "ShapeCache",
    "ShapeEntry",
    "Step",
    "TieredEncoder",
    "compile_shape_function",
    "compiled_packer",
    "encode_dict",
    "key_chars",
    "layout",
    "layout_function",
    "shape_entry",
    "shape_kind",
    "walk",
]

#: Written events of a shape before it gets an entry (the general route serves the first ones).
SHAPE_HOT: Final = 4
#: Promotions asked for a layout before its function is compiled.
LAYOUT_HOT: Final = 4
#: Credits a compile spends; every general-route event earns one.
COMPILE_COST: Final = 64
#: Most credits the budget saves up (a long quiet stretch does not pay for a later storm).
CREDIT_CAP: Final = 16 * COMPILE_COST
#: Shape keys with more characters than this (event name and field names together) are never
#: cached, nor is anything built for them kept: such events always take the general route.
MAX_KEY_CHARS: Final = 8192
#: Bytes one cached entry or count is reckoned at besides its names and metadata (dict slot,
#: tuple, entry object).
_ENTRY_OVERHEAD: Final = 200
#: Bytes a generated function is reckoned at per value it writes, and at the least.
_FUNCTION_BYTES_PER_VALUE: Final = 400
_FUNCTION_BYTES_MIN: Final = 2000

_U16: Final = struct.Struct("<H")

#: The kind of a ``None`` value in a layout (the type table's NULL: each format writes its null).
NONE: Final = -2
#: The kind of a position a shape function does not write (``exc_info``, the skipped key).
SKIP: Final = -1
#: Or-ed into a layout's kind by a format that writes a key in a nullable form (EventHeader: a
#: key that has been ``None``): the value's class is the kind's, its step the format's own.
NULLABLE: Final = 0x100

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


class _U16Bytes(dict[int, bytes]):
    """``n -> struct.pack("<H", n)``: prebuilt for ``0..1023``, packed (not kept) past that; a
    number past u16 raises ``struct.error``, as the packing would."""

    __slots__ = ()

    def __missing__(self, n: int) -> bytes:
        return _U16.pack(n)


#: The little-endian u16 of a length, by the length: what a shape function writes before a
#: counted value that no fixed value precedes (a look-up instead of a ``struct`` call).
U16_BYTES: Final[Mapping[int, bytes]] = _U16Bytes((n, struct.pack("<H", n)) for n in range(1024))
#: :data:`U16_BYTES`'s prebuilt range as a ``list``: the table a shape function indexes first.
#: CPython specialises indexing an exact list by an int (no method call, no hash); a dict subclass
#: gets the generic subscript, about twice the time.  A length past the list raises
#: ``IndexError``: the function then switches to :data:`U16_BYTES` for good (a layout with long
#: strings costs what it cost before the list, not an exception per event) and joins again.
_U16_LIST: Final[list[bytes]] = [U16_BYTES[n] for n in range(len(U16_BYTES))]


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
        "_u16": _U16_LIST,
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
        ns[f"_c{i}"] = _CLASS_OF_KIND.get(kind) or _CLASS_OF_KIND[kind & ~NULLABLE]
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


def key_chars(name: object, keys: Iterable[object]) -> int:
    """Characters of a shape key's name and field names; ``MAX_KEY_CHARS + 1`` when a key has no
    length (such a key has no shape function anyway)."""
    try:
        return len(name) + sum(map(len, keys))  # type: ignore[arg-type]
    except Exception:
        return MAX_KEY_CHARS + 1


class LayoutFunctions:
    """A format's generated shape functions, one per layout, compiled when hot and paid for.

    ``build(kinds)`` compiles the function of a layout (with the format's steps).  :meth:`get`
    gives the function if compiled, else counts the request and compiles it once the layout was
    asked for :data:`LAYOUT_HOT` times and the budget holds :data:`COMPILE_COST` credits
    (:meth:`earn` adds one per general-route event).  At most ``max_entries`` functions and
    ``max_bytes`` (reckoned per value written) are kept, in a
    :class:`~structlog_etw._util.bounded.BoundedCache` (past either bound it starts over); the
    requests are counted in another (by the bytes of their layouts).

    Threads (free-threaded builds too): looking a function up is one dict read; the tables keep
    their books as every bounded cache does, and the budget and the compile decision run under
    the object's lock, only ever *tried* (the module's *Threads*): a thread or a signal handler
    that finds it taken goes on without (a credit not earned, a layout not compiled this time),
    so a race costs a later compile, never a wait, a budget overspent or a bound passed.
    """

    __slots__ = ("_asked", "_build", "_credit", "_find", "_fns", "_lock", "max_bytes", "max_entries")

    def __init__(
        self,
        build: Callable[[tuple[int, ...]], Callable[..., bytes | None]],
        max_entries: int = 1024,
        max_bytes: int = 8 << 20,
    ) -> None:
        self._build = build
        self._fns: BoundedCache[tuple[int, ...], Callable[..., bytes | None]]
        self._fns = BoundedCache(max_entries, max_bytes)
        #: Promotions asked per layout not compiled yet (a one-item list, counted in place).
        self._asked: BoundedCache[tuple[int, ...], list[int]] = BoundedCache(max_entries, max_bytes // 8)
        self._find = self._fns.entries.get
        self._credit = COMPILE_COST  # the first hot layout compiles at once
        self._lock = TryLock()
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    def earn(self) -> None:
        """One general-route event: one credit towards a compile (none while another thread
        changes the budget)."""
        if self._credit < CREDIT_CAP and self._lock.acquire():
            try:
                self._credit += 1
            finally:
                self._lock.release()

    def get(self, kinds: tuple[int, ...]) -> Callable[..., bytes | None] | None:
        """The function of ``kinds`` (compiled now if hot and paid for), or None for now."""
        fn = self._find(kinds)
        if fn is not None:
            return fn
        if not self._lock.acquire():  # another thread (or this one, re-entered) keeps books
            return None
        try:
            return self._count_or_build(kinds)
        finally:
            self._lock.release()

    def _count_or_build(self, kinds: tuple[int, ...]) -> Callable[..., bytes | None] | None:
        fn = self._find(kinds)
        if fn is not None:  # built by another thread meanwhile
            return fn
        asked = self._asked.entries.get(kinds)
        if asked is None:
            asked = [0]
            self._asked.store(kinds, asked, _ENTRY_OVERHEAD + 8 * len(kinds))
        asked[0] += 1
        if asked[0] < LAYOUT_HOT or self._credit < COMPILE_COST:
            return None
        self._asked.entries.pop(kinds, None)
        self._credit -= COMPILE_COST
        fn = self._build(kinds)
        self._fns.store(kinds, fn, max(_FUNCTION_BYTES_MIN, _FUNCTION_BYTES_PER_VALUE * len(kinds)))
        return fn

    def compiled(self) -> int:
        """How many functions are held."""
        return len(self._fns.entries)

    @property
    def bytes(self) -> int:
        """The bytes the held functions are reckoned at."""
        return self._fns.cost


_MISSING: Final[Any] = object()
#: The most keys :attr:`ShapeCache.recent` holds, all names together (a pointer each).
_RECENT_KEYS: Final = 1 << 16


class HotShape(NamedTuple):
    """What :meth:`ShapeCache.written` gives for a shape that just became hot."""

    #: The key to store the entry under (with the value classes when ``first`` is False).
    key: tuple[Any, ...]
    #: Whether the entry goes to :attr:`ShapeCache.first` (else :attr:`ShapeCache.by_class`).
    first: bool
    #: :func:`key_chars` of the key.
    chars: int
    #: The layout's generated function, or ``None`` when the shape has none.
    fn: Callable[..., bytes | None] | None
    #: The typed fields (values ``None``) whose metadata the entry holds.
    template: list[tuple[str, int, None]]


def _none_kind(key: str, nullable: Mapping[str, int] | None, null_of: Callable[[int], int] | None) -> int:
    """The kind a ``None`` at ``key`` is written as: its nullable kind, else NULL."""
    if not nullable or null_of is None:
        return NULL
    return null_of(nullable.get(key, NULL))


class ShapeCache:
    """An encoder's shape entries, bounded by count and bytes, made only for hot, written shapes.

    ``first`` maps a shape key (the event's name, options and keys) to the entry built for the
    value classes seen first; ``by_class`` maps the key with the classes appended to the entries
    of other classes.  Both dicts live as long as the cache (cleared, never replaced), so an
    encoder reads them directly on its hot path.  An entry is whatever the encoder stores (its
    metadata and shape function), or ``None``: the shape has no shape function (general route).

    :meth:`seen` is called after the general route wrote an event of a shape without an entry: it
    counts the shape, and at the :data:`SHAPE_HOT`-th time it returns True (the encoder then
    builds the entry and :meth:`put` s it).  A key longer than :data:`MAX_KEY_CHARS` is never
    counted nor stored.  The dicts are kept by :class:`~structlog_etw._util.bounded.BoundedCache` s: the
    counts and the entries share one byte budget (``max_bytes``, reckoned from the names, the
    metadata and an overhead per item) and hold ``max_entries`` each; past a bound the cache
    starts over (:attr:`recent` with it).

    Threads (free-threaded builds too): an encoder reads the dicts directly (one dict read each);
    every store keeps its books as every bounded cache does (a try-lock: a thread that finds it
    taken does not store or remember this time, and the entry is built again later), so the
    byte reckoning is never lost and no bound is passed.  A count is a one-item list changed in
    place (a count lost to a race is one more event on the general route).  :meth:`clear` takes
    no lock (it must happen, from a handler too).
    """

    __slots__ = ("_by_class", "_first", "_recent", "_seen", "by_class", "first", "recent", "seen_counts")

    def __init__(self, max_entries: int, max_bytes: int = 4 << 20) -> None:
        #: Event name -> the last entry of :attr:`first` found for it (see :meth:`remember`).
        self._recent: BoundedCache[object, tuple[Any, ...]] = BoundedCache(max_entries, _RECENT_KEYS)
        self.recent = self._recent.entries
        # one byte budget for the entries and the counts; a start-over forgets the recent ones too
        self._first: BoundedCache[tuple[Any, ...], Any]
        self._first = BoundedCache(max_entries, max_bytes, self._recent.clear)
        self._by_class = self._first.sharing(max_entries)
        self._seen = self._first.sharing(max_entries)
        self.first: dict[tuple[Any, ...], Any] = self._first.entries
        self.by_class: dict[tuple[Any, ...], Any] = self._by_class.entries
        #: Shape key -> how many written events it had (a one-item list, counted in place).
        self.seen_counts: dict[tuple[Any, ...], list[int]] = self._seen.entries

    @property
    def max_entries(self) -> int:
        """The most entries each table holds."""
        return self._first.max_entries

    @property
    def max_bytes(self) -> int:
        """The most bytes the entries and counts are reckoned at together."""
        return self._first.max_cost

    def remember(self, name: object, key: tuple[Any, ...], entry: Any, keys: list[Any]) -> None:
        """Keep ``entry`` (just found in :attr:`first` under ``key``, a shape key of
        :func:`encode_dict`: ``(name, None, skip, *keys)``, a header of no part) as ``name``'s
        recent one: ``(skip, keys, key, entry)``.

        :func:`encode_dict` looks an event of a header of no part up in :attr:`recent` first: the
        same skip key and the same keys in the same order (``list(event) == keys``: each compared
        with ``==``, as a dict compares keys of equal hashes) give the entry without building and
        hashing the shape key.  At most ``max_entries`` names and
        :data:`_RECENT_KEYS` keys are held (then it starts over); :meth:`clear` forgets them with
        the entries.
        """
        self._recent.store(name, (key[2], keys, key, entry), len(keys))

    def seen(self, key: tuple[Any, ...], chars: int) -> bool:
        """Count one written event of ``key``'s shape; True when it is now hot (build its entry).
        ``chars``: :func:`key_chars` of the key (past :data:`MAX_KEY_CHARS`: never counted)."""
        if chars > MAX_KEY_CHARS:
            return False
        counts = self.seen_counts
        count = counts.get(key)
        if count is None:
            count = [0]
        count[0] += 1  # in place: a count lost to a race is one more event on the general route
        if count[0] >= SHAPE_HOT:
            counts.pop(key, None)
            return True
        if count[0] == 1:  # the first: reckoned (not counted when the books are taken)
            self._seen.store(key, count, _ENTRY_OVERHEAD + chars)
        return False

    def written(
        self,
        key: tuple[Any, ...],
        name: object,
        event: Mapping[Any, Any],
        skip: str | None,
        fresh: list[Any] | None,
        remember: Callable[[list[Any]], None],
        general: object,
        functions: LayoutFunctions,
        nullable: Mapping[str, int] | None = None,
        null_of: Callable[[int], int] | None = None,
    ) -> HotShape | None:
        """The general route wrote an event of ``key``'s shape: count it; once hot, what its
        entry is built from (``None``: nothing to build yet).

        ``fresh``: the field metadata the interpreted route built for it, handed to ``remember``
        when the key was written before (one-off keys are not kept).  A key that has an entry for
        other value classes is counted with the classes appended (``general``: the format's entry
        of a shape written by the general route, never built again).  A shape without a layout
        gets :attr:`HotShape.fn` ``None`` (its entry is ``general``); one whose layout is not
        compiled yet gets nothing (it stays on the general route).

        ``nullable`` (a format that writes keys that have been ``None`` in a nullable form:
        EventHeader) maps such a key to the kind its ``None`` is written as, and ``null_of`` gives
        a kind's nullable form (the kind itself when it has none): their values' kinds and their
        ``None`` take that form; any other ``None`` is :data:`~structlog_etw.write.fields.NULL`.
        """
        first = self.first.get(key, _MISSING)
        if fresh and (first is not _MISSING or key in self.seen_counts):
            remember(fresh)
        if first is not _MISSING:  # the shape has an entry for other value classes
            key = (*key, *map(type, event.values()))
            if self.by_class.get(key) is general:
                return None
        chars = key_chars(name, event)
        if not self.seen(key, chars):
            return None
        kinds = layout(tuple(event), tuple(map(type, event.values())), skip) if type(name) is str else None
        if kinds is None:
            return HotShape(key, first is _MISSING, chars, None, [])
        if nullable and null_of is not None:  # keys that have been None: their nullable form
            kinds = tuple(
                null_of(kind) if kind >= 0 and k in nullable else kind
                for k, kind in zip(event, kinds, strict=True)
            )
        fn = functions.get(kinds)
        if fn is None:
            return None  # the layout is not compiled yet: the shape stays on the general route
        template = [
            (k, _none_kind(k, nullable, null_of) if kind == NONE else kind, None)
            for k, kind in zip(event, kinds, strict=True)
            if kind != SKIP
        ]
        return HotShape(key, first is _MISSING, chars, fn, template)

    def put(self, key: tuple[Any, ...], entry: Any, first: bool, chars: int, meta_bytes: int = 0) -> None:
        """Store ``entry`` under ``key`` (in :attr:`first` or :attr:`by_class`)."""
        if chars <= MAX_KEY_CHARS:
            (self._first if first else self._by_class).store(key, entry, _ENTRY_OVERHEAD + chars + meta_bytes)

    def clear(self) -> None:
        """Forget every entry and count."""
        self._first.clear()  # its budget's tables, and the recent ones

    @property
    def bytes(self) -> int:
        """The bytes the cache reckons it holds."""
        return self._first.cost


#: How the interpreted route writes a value of one class (``str`` aside: written inline): its
#: kind (the type table's), the function that packs it (u16 prefix included for counted values)
#: and its logical field count.
Walker = Mapping[type, tuple[int, Callable[[Any], bytes], int]]
_U16_MAX: Final = 0xFFFF


def walk(
    event: Mapping[Any, Any],
    skip: str | None,
    classes: Walker,
    known: Mapping[tuple[str, int], bytes],
    field_meta: Callable[[str, int], bytes],
    fresh: list[tuple[tuple[str, int], bytes]],
    keyed: Mapping[str, Walker] | None = None,
) -> tuple[list[bytes], list[bytes], int]:
    """The interpreted shape function: an event dict of ``str`` keys and values of ``classes``
    -> (field metadata, packed values, logical field count), no code compiled.

    ``keyed`` (a format's keys written in another kind, e.g. EventHeader's nullable keys) maps a
    key to the table (by value class, every class of ``classes``) used instead of ``classes`` for
    it (``str`` aside).

    It writes what a generated shape function writes (and so what the general route writes) for
    a layout that has no function yet: a new layout costs a loop over the values, not a compile.
    ``known`` maps (name, kind) to field metadata; ``field_meta`` builds a missing one (added to
    ``fresh``).  Raises (``KeyError`` for another class, ``TypeError`` for a key that is no
    ``str``, or what a packer raises) when the event needs the general route.
    """
    metas: list[bytes] = []
    values: list[bytes] = []
    add_meta, add_value, get_meta = metas.append, values.append, known.get
    u16 = U16_BYTES
    count = 0
    skipped = ("exc_info", skip)
    for key, value in event.items():
        if type(key) is not str:
            raise TypeError("a key that is no str")
        if key in skipped:
            continue
        cls = type(value)
        if cls is str:  # the common case inline: both formats write a u16 length and UTF-8
            if len(value) > _U16_MAX:
                raise OverflowError("text past u16")  # never whole: the general route cuts it
            body = value.encode()  # lone surrogates raise: the general route replaces them
            add_value(u16[len(body)])
            add_value(body)
            kind = STR
            count += 1
        else:
            kind, pack, n = (classes if keyed is None else keyed.get(key, classes))[cls]
            add_value(pack(value))
            count += n
        meta = get_meta((key, kind))
        if meta is None:
            meta = field_meta(key, kind)
            fresh.append(((key, kind), meta))
        add_meta(meta)
    return metas, values, count


# --- codec tables: a row per value kind, the rest derived -----------------------------------------

#: How the general path's size policy treats a row's :attr:`Row.body`: whole (a fixed-size value),
#: cut as text (it ends with the truncation marker) or cut as a binary.
WHOLE: Final = 0
#: See :data:`WHOLE`: a text (u16 length and UTF-8) that ends with the truncation marker when cut.
TEXT: Final = 1
#: See :data:`WHOLE`: a binary (u16 length and bytes), cut to its first bytes.
BINARY: Final = 2
_MARKER: Final = TRUNCATION_MARKER.encode()

#: A function writing one value (raises for a value it does not write).
Packer = Callable[[Any], bytes]


class Row(NamedTuple):
    """How a format writes one value kind: the one place a kind becomes bytes.

    Everything else the format's encoder uses for the kind (field metadata, the typed-field
    packers, the general path's pieces, the shape functions' steps, the interpreted route's
    packers, the compiled packer's op) is derived from its rows by :class:`Codec`.
    """

    #: The kind (:mod:`structlog_etw.write.fields`'s, or a format's own such as a nullable one).
    kind: int
    #: The field metadata after the field's name (encoding and format bytes).
    meta: bytes
    #: The value, whole (a counted value with its u16 length): the typed-field fast path and the
    #: interpreted route; raises for a value it does not write (the general path decides).
    pack: Packer
    #: The value as the general path writes it: whole, or a counted value's body (no length)
    #: that the size policy may cut (:attr:`cut`); raises when the value cannot be written as
    #: the kind (it is then written as its text, :func:`~structlog_etw.write.fields.normalize`).
    body: Packer
    #: :data:`WHOLE`, :data:`TEXT` or :data:`BINARY`.
    cut: int = WHOLE
    #: How a generated shape function writes it, or ``None`` (no shape function takes the kind).
    step: Step | None = None
    #: The compiled packer's op (a name of :data:`OPS`) writing it as :attr:`step` does, or ``None``.
    op: str | None = None
    #: Logical fields a value takes (TraceLogging's 128-field limit counts binaries twice).
    fields: int = 1
    #: The struct format of a fixed-size value packed by ``struct`` (``""`` for any other): an
    #: array of the kind is packed in one call.
    fixed: str = ""


def shape_kind(kind: int) -> int:
    """A row's kind in a layout: NULL is :data:`NONE` (the class of ``None``), any other itself."""
    return NONE if kind == NULL else kind


class Codec:
    """A format's codec table (its :class:`Row` s) and the tables derived from it.

    ``array_meta(row)``: the metadata of an array of the row's kind; ``array_pack(codec, kind)``:
    the packer of such an array (whole, u16 count included).  ``env``: the names the steps use.
    ``walk_none``: whether the interpreted route writes ``None`` (else such an event takes the
    general route).  ``null_of``: a kind's form at a key that has been ``None`` (a format with
    nullable forms), see :meth:`ShapeCache.written`.  A layout's function is
    ``f(event, *LEAD)``: :func:`encode_dict` passes the scope's lead and the entry's.
    """

    __slots__ = (
        "env",
        "fields",
        "functions",
        "lead",
        "meta",
        "null_of",
        "ops",
        "packers",
        "rows",
        "steps",
        "walker",
    )

    def __init__(
        self,
        rows: Iterable[Row],
        array_meta: Callable[[Row], bytes],
        array_pack: Callable[[Codec, int], Packer],
        env: Mapping[str, Any] | None = None,
        walk_none: bool = True,
        null_of: Callable[[int], int] | None = None,
    ) -> None:
        self.rows: dict[int, Row] = {row.kind: row for row in rows}
        arrays = [row for row in self.rows.values() if row.kind & NULLABLE == 0]
        #: kind -> field metadata after the name, scalar and array kinds.
        self.meta: dict[int, bytes] = {row.kind: row.meta for row in self.rows.values()}
        self.meta.update({row.kind | ARRAY: array_meta(row) for row in arrays})
        #: kind -> the typed-field fast path's packer, scalar and array kinds.
        self.packers: dict[int, Packer] = {row.kind: row.pack for row in self.rows.values()}
        self.packers.update({row.kind | ARRAY: array_pack(self, row.kind) for row in arrays})
        #: layout kind -> the generated shape functions' :class:`Step`.
        self.steps: dict[int, Step] = {
            shape_kind(row.kind): row.step for row in self.rows.values() if row.step is not None
        }
        #: layout kind -> the compiled packer's op name.
        self.ops: dict[int, str] = {shape_kind(row.kind): row.op for row in self.rows.values() if row.op}
        #: The interpreted route's table (:func:`walk`): the row of each class of :data:`SHAPE_KINDS`.
        self.walker: dict[type, tuple[int, Packer, int]] = {}
        for cls, kind in SHAPE_KINDS.items():
            row = self.rows.get(NULL if kind == NONE else kind)
            if cls is not str and row is not None and (walk_none or kind != NONE):
                self.walker[cls] = (row.kind, row.pack, row.fields)
        self.lead = LEAD
        self.env: dict[str, Any] = dict(env or {})
        self.null_of = null_of
        #: The layouts' shape functions (compiled packer or generated function).
        self.functions = LayoutFunctions(self.layout_function)
        #: (field name, kind) -> a field's whole metadata, shared by every encoder of the format,
        #: filled only from written events (:meth:`remember`).
        self.fields = ShapeCache(8192, 2 << 20)

    def layout_function(self, kinds: tuple[int, ...]) -> Callable[..., bytes | None]:
        """The function of a layout: :func:`layout_function` with this codec's ops and steps."""
        return layout_function(kinds, self.ops, self.steps, self.lead, self.env)

    def piece(self, kind: int, value: Any, limit: int = NO_LIMIT) -> Piece:
        """One value as the general path writes it: fixed bytes, or a cuttable text, binary or array.

        ``limit`` is the event's budget: an array's elements past it are not built, a text or
        binary longer is taken up to ``limit + 1`` characters or bytes (more than can ever be
        kept: the value is cut all the same, only the work follows what is written).  Raises when
        ``value`` cannot be written as ``kind`` (:func:`~structlog_etw.write.fields.normalize` then
        writes its text instead).
        """
        if kind & ARRAY:
            base = kind & ~ARRAY
            if base not in self.rows:
                raise ValueError(f"not an array kind: {kind!r}")
            return Cuttable.array(leading_pieces(value, lambda item: self.piece(base, item, limit), limit))
        row = self.rows[kind]
        if row.cut == TEXT:
            if type(value) is str and len(value) > limit:
                value = value[: limit + 1]
            return Cuttable(row.body(value), marker=_MARKER)
        if row.cut == BINARY:
            body = row.body(value)
            return Cuttable(body if len(body) <= limit else body[: limit + 1])
        return row.body(value)

    def remember(self, fresh: list[tuple[tuple[str, int], bytes]]) -> None:
        """Keep the field metadata of a written event (names up to :data:`FIELD_NAME_MAX`)."""
        for key, meta in fresh:
            if len(key[0]) <= FIELD_NAME_MAX:
                self.fields.put(key, meta, True, len(key[0]), len(meta))


#: The longest field name whose metadata :attr:`Codec.fields` keeps.
FIELD_NAME_MAX: Final = 256


# --- the tier dispatcher: encode_dict of both encoders --------------------------------------------


#: The names of the parts a shape function writes before the values (:class:`Codec`): the
#: scope's lead and the entry's (:class:`ShapeEntry`).
LEAD: Final = ("h", "m")


class ShapeEntry:
    """A shape's entry in an encoder's :class:`ShapeCache`, the one kind of entry of both formats.

    ``fn(event, scope lead, lead)`` is the layout's function; ``lead`` the bytes it writes after
    the scope's (EventHeader: the metadata after the head, the result is the whole event;
    TraceLogging: none, the result is the data); ``metadata`` the event's metadata (TraceLogging:
    the blob beside the data); ``room`` the most bytes the result may take (past it: the general
    route).
    """

    __slots__ = ("fn", "lead", "metadata", "room")

    def __init__(self, fn: Callable[..., bytes | None], lead: bytes, metadata: bytes, room: int) -> None:
        self.fn = fn
        self.lead = lead
        self.metadata = metadata
        self.room = room


#: The entry of a shape that has no shape function (its events take the general route).
GENERAL: Final = ShapeEntry(lambda *args: None, b"", b"", -1)

R_co = TypeVar("R_co", covariant=True)


class TieredEncoder(Protocol[R_co]):
    """What :func:`encode_dict` needs of an encoder: its caches, its codec and five format rules.

    ``_scopes`` maps a header to its *scope*, a pair: the bytes a shape function writes first and
    the part of the shape the header is (EventHeader: the head bytes, ``None``; TraceLogging:
    ``b""``, the tag, which the metadata holds, ``None`` for tag 0).  ``_traits``: ``None`` for a
    format whose event is one blob, else the traits blob that starts the format's three (traits,
    metadata, data).
    """

    _shapes: ShapeCache
    _recent: dict[object, tuple[Any, ...]]
    _by_keys: dict[tuple[Any, ...], ShapeEntry]
    _by_classes: dict[tuple[Any, ...], ShapeEntry]

    @property
    def _codec(self) -> Codec: ...

    @property
    def _scopes(self) -> Mapping[HeaderValue, tuple[bytes, Any]]: ...

    @property
    def _traits(self) -> bytes | None: ...

    def _new_scope(self, header: HeaderValue, /) -> tuple[bytes, Any]:
        """The scope of a header not in ``_scopes`` (kept there when worth it); ``ValueError``
        when it is out of its ranges."""

    def _interpreted(
        self, name: str, event: Mapping[Any, Any], skip: str | None, scope: tuple[bytes, Any], /
    ) -> tuple[R_co | None, list[tuple[tuple[str, int], bytes]] | None]:
        """:func:`walk` and the format's limits: the event (``None``: the general route) and the
        field metadata it built."""

    def _entry_parts(
        self, name: str, template: list[tuple[str, int, None]], scope: tuple[bytes, Any], /
    ) -> tuple[bytes, bytes, int] | None:
        """A hot shape's entry but its function (:class:`ShapeEntry`'s lead, metadata and room)
        for these typed fields, ``None`` when they break the format's limits (:data:`GENERAL`)."""

    def _none_kinds(self, name: str, /) -> Mapping[str, int] | None:
        """The keys of ``name`` written in a nullable form, with the kind of their ``None``
        (:meth:`ShapeCache.written`); ``None``: no such key."""

    def encode_fields(self, name: str, fields: list[Any], header: HeaderValue = ..., /) -> R_co | None:
        """The general route."""


def encode_dict(
    self: TieredEncoder[R_co],
    name: str,
    event: Mapping[Any, Any],
    skip: str | None,
    header: HeaderValue = INFO_HEADER,
) -> R_co | None:
    """``encode_fields(name, dict_fields(event.items(), skip), header)``, byte for byte, faster.

    ``event``'s items are the fields, except ``exc_info`` and the key ``skip`` (``None``: none
    skipped).  A hot shape (``str`` keys, values of the classes of
    :data:`structlog_etw.write.shapes.SHAPE_KINDS`, written :data:`~structlog_etw.write.shapes.SHAPE_HOT`
    times) is written by its layout's function straight from the dict's values, with the
    metadata cached with it; a shape without an entry yet by the interpreted route
    (:func:`~structlog_etw.write.shapes.walk`).  Anything else (another value class, a value the
    function cannot write, an event past its budget) takes the route of ``encode_fields``,
    which compiles nothing.  Same error contract as ``encode_fields``.
    """
    try:
        scope = self._scopes.get(header)  # a known header's (plain ones and recent others)
    except TypeError:  # an id of an unhashable type
        scope = None
    if scope is None:
        scope = self._new_scope(header)  # ValueError outside its ranges
    lead, part = scope  # the bytes a function writes first; the header's part of the shape
    key: tuple[Any, ...] | None = None
    entry: ShapeEntry | None = None
    try:
        # the name's last shape: no key to build and hash (kept for headers of no part only)
        recent = self._recent.get(name) if part is None else None
        if recent is not None and recent[0] == skip and list(event) == recent[1]:
            key, entry = recent[2], recent[3]
        else:
            key = (name, part, skip, *event)
            entry = self._by_keys.get(key)
            if entry is not None and entry is not GENERAL and part is None:
                self._shapes.remember(name, key, entry, list(event))
        if entry is not None:
            fn = entry.fn  # (a call of a local: an attribute called directly is not specialised)
            out = fn(event, lead, entry.lead)
            if out is None:  # the values' classes are not the ones of the first entry
                entry = self._by_classes.get((*key, *map(type, event.values())))
                if entry is not None:
                    fn = entry.fn
                    out = fn(event, lead, entry.lead)
            if out is not None and len(out) <= entry.room:  # type: ignore[union-attr]
                if self._traits is None:  # one blob per event
                    return out  # type: ignore[return-value]
                return (self._traits, entry.metadata, out)  # type: ignore[union-attr,return-value]
    except Exception:  # a value the shape function does not write: the general route decides
        pass
    return _general_routes(self, name, event, skip, header, scope, key, entry)


class BaseEncoder:
    """What both encoders share: :func:`encode_dict` (the tier dispatcher) with the tables it
    reads, and :meth:`encode`, the five-argument form of ``encode_fields``.

    The tables are slots (read on every event; a class attribute read through an instance costs
    more on 3.11): the shape entries (``_shapes`` and its dicts), the format's header -> scope
    table and its traits blob (``None``: one blob per event), see :class:`TieredEncoder`.
    """

    __slots__ = ("_by_classes", "_by_keys", "_recent", "_scopes", "_shapes", "_traits")

    def __init__(
        self, shapes: ShapeCache, scopes: Mapping[HeaderValue, tuple[bytes, Any]], traits: bytes | None
    ) -> None:
        # (name, scope part, skip, *keys) -> the entry built for the value classes seen first;
        # (name, scope part, skip, *keys, *classes) -> the entries of other classes
        self._shapes = shapes
        self._by_keys: dict[tuple[Any, ...], ShapeEntry] = self._shapes.first
        self._by_classes: dict[tuple[Any, ...], ShapeEntry] = self._shapes.by_class
        self._recent = self._shapes.recent  # event name -> its last shape entry (ShapeCache.remember)
        self._scopes = scopes
        self._traits = traits

    encode_dict = encode_dict

    def encode(
        self: TieredEncoder[R_co],
        name: str,
        fields: list[Any],
        level: int = 4,
        opcode: int = 0,
        tag: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> R_co | None:
        """``encode_fields(name, fields, Header(level, opcode, tag, activity_id, related_id))``."""
        return self.encode_fields(name, fields, Header(level, opcode, tag, activity_id, related_id))


def _general_routes(
    self: TieredEncoder[R_co],
    name: str,
    event: Mapping[Any, Any],
    skip: str | None,
    header: HeaderValue,
    scope: tuple[bytes, Any],
    key: tuple[Any, ...] | None,
    entry: ShapeEntry | None,
) -> R_co | None:
    """:func:`encode_dict` of an event no entry wrote: the interpreted route, else the general
    one; a written event counts its shape towards an entry (:meth:`ShapeCache.written`)."""
    out: R_co | None = None
    fresh: list[tuple[tuple[str, int], bytes]] | None = None
    if entry is not GENERAL and type(name) is str:  # no function for this shape yet
        try:
            out, fresh = self._interpreted(name, event, skip, scope)
        except Exception:  # a value it does not write: the general route decides
            out = None
    if out is None:
        out = self.encode_fields(name, dict_fields(event.items(), skip), header)
    if out is not None and key is not None:  # written: count the shape towards an entry
        codec = self._codec
        codec.functions.earn()
        with contextlib.suppress(Exception):
            hot = self._shapes.written(
                key, name, event, skip, fresh, codec.remember, GENERAL, codec.functions,
                self._none_kinds(name), codec.null_of,
            )  # fmt: skip
            if hot is not None:
                made = GENERAL
                parts = None if hot.fn is None else self._entry_parts(name, hot.template, scope)
                if parts is not None and hot.fn is not None:
                    made = ShapeEntry(hot.fn, *parts)
                self._shapes.put(hot.key, made, hot.first, hot.chars, len(made.metadata))
    return out


def shape_entry(
    encoder: TieredEncoder[object],
    name: str,
    event: Mapping[Any, Any],
    skip: str | None = None,
    *,
    header: HeaderValue = INFO_HEADER,
) -> ShapeEntry | None:
    """The entry :func:`encode_dict` writes this event with: its shape's entry for the values'
    classes, :data:`GENERAL` for a shape it writes by the general route, ``None`` when the shape
    has no entry (yet).  For tests and diagnostics: it reads the caches and changes nothing."""
    scope = encoder._scopes.get(header)
    if scope is None:
        scope = encoder._new_scope(header)
    key = (name, scope[1], skip, *event)
    entry = encoder._by_keys.get(key)
    if entry is not None and entry.fn(event, scope[0], entry.lead) is None:
        other = encoder._by_classes.get((*key, *map(type, event.values())))
        if other is not None or entry is not GENERAL:  # GENERAL: the general route, no other entry
            return other
    return entry
