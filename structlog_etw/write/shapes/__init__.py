"""Per-shape encode functions: what both encoders share to go from an event dict to bytes directly.

The general route of an event is ``dict_fields(event.items(), skip)`` (one typed field per key)
and then the encoder.  For the keys and value classes nearly every log call has, an encoder can
skip the typed fields: it builds, once per *shape*, a function that takes the event dict itself,
checks each value's class, and packs the values with straight-line code (a ``struct`` call per run
of fixed-size values, the UTF-8 bytes of each string), writing the same bytes the general route
writes.  This module holds the parts both formats share:

* :data:`SHAPE_KINDS`: the value classes a shape function takes, with the kind the type table
  gives them (``None`` is :data:`NONE`, a null); any other class, a key that is not a ``str``
  and a dict that is not flat sends the event down the general route;
* :func:`layout`: the kinds of an event dict's values in order (``SKIP`` for ``exc_info`` and the
  skipped key), or ``None`` when the shape has no shape function;
* :func:`compile_shape_function`: the generated function for a layout, given how a format writes each
  kind (:class:`Step`).  Its source is built only from the format's step table and positions,
  never from keys or values.  The one code generator of the package;
* :func:`compiled_packer`: where the optional compiled module is built (:data:`SPEEDUPS`,
  ``structlog_etw/write/shapes/_speedups.c``), a layout's packer in C instead of its generated function: the
  same bytes, ``None`` and errors, for layouts of ``str``/``int``/``float``/``bool``/``None``/
  ``bytes`` values (nothing compiled: a program is the layout's op string);
* :class:`LayoutFunctions`: a format's generated functions, one per layout, compiled only once
  the layout is hot and a compile budget allows it, bounded by count and by bytes;
* :class:`ShapeCache`: an encoder's shape entries (shape key -> what its shape function needs),
  made only for shapes written :data:`SHAPE_HOT` times, bounded by count and by bytes, never
  for a key longer than :data:`MAX_KEY_CHARS`;
* :func:`walk`: the interpreted shape function (a loop, no code compiled) both formats run for
  a layout that has no generated function yet.

**Tiers.**  An event dict whose shape has no entry is written by :func:`walk` when its values
are of the classes above, else by the general route (typed fields, the encoder's non-generated
packers): neither compiles anything.  When that route wrote the event, the
shape is *seen*; at its :data:`SHAPE_HOT`-th written event it gets an entry, if its layout has a
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
here leans on the GIL: every change (counts, the compile budget, stores and their byte
reckoning) runs under the object's own :class:`~structlog_etw._util.counters.TryLock`, only ever
tried.  It is never waited for, so no thread, signal handler or ``__del__`` can hang on it;
whoever finds it taken skips the bookkeeping (a count, a credit, a store: a later recompute),
never the event.  Lookups are single dict reads, safe on every build.  docs/reliability.md
lists every such place.

Stdlib only (layer 1, next to :mod:`structlog_etw.write.fields`).
"""

from __future__ import annotations

import datetime as _dt
import os
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple

from ..._util.counters import TryLock
from ..fields import BOOL, BYTES, F64, I64, NULL, STR, TIME, UUID

__all__ = [
    "COMPILE_COST",
    "CREDIT_CAP",
    "LAYOUT_HOT",
    "MAX_KEY_CHARS",
    "NONE",
    "NULLABLE",
    "SHAPE_HOT",
    "SHAPE_KINDS",
    "SKIP",
    "SPEEDUPS",
    "U16_BYTES",
    "HotShape",
    "LayoutFunctions",
    "ShapeCache",
    "Step",
    "compile_shape_function",
    "compiled_packer",
    "key_chars",
    "layout",
    "layout_function",
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
    return module if getattr(module, "ABI_VERSION", None) == _SPEEDUPS_ABI else None


#: The op version of ``_speedups.c`` this module speaks.
_SPEEDUPS_ABI: Final = 1
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
    codes = SPEEDUPS.OPS
    try:
        program = SPEEDUPS.Program(bytes(codes["skip" if kind == SKIP else ops[kind]] for kind in kinds))
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
    ``max_bytes`` (reckoned per value written) are kept; past either the table starts over.

    Threads (free-threaded builds too): looking a function up is one dict read; what changes the
    table, the counts and the budget runs under the object's lock, only ever *tried* (the
    module's *Threads*): a thread or a signal handler that finds it taken goes on without (a
    credit not earned, a layout not compiled this time), so a race costs a later compile, never a
    wait, a budget overspent or a bound passed.
    """

    __slots__ = (
        "_asked", "_build", "_bytes", "_credit", "_fns", "_lock", "max_bytes", "max_entries",
    )  # fmt: skip

    def __init__(
        self,
        build: Callable[[tuple[int, ...]], Callable[..., bytes | None]],
        max_entries: int = 1024,
        max_bytes: int = 8 << 20,
    ) -> None:
        self._build = build
        self._fns: dict[tuple[int, ...], Callable[..., bytes | None]] = {}
        self._asked: dict[tuple[int, ...], int] = {}
        self._bytes = 0
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
        fn = self._fns.get(kinds)
        if fn is not None:
            return fn
        if not self._lock.acquire():  # another thread (or this one, re-entered) keeps books
            return None
        try:
            return self._count_or_build(kinds)
        finally:
            self._lock.release()

    def _count_or_build(self, kinds: tuple[int, ...]) -> Callable[..., bytes | None] | None:
        fn = self._fns.get(kinds)
        if fn is not None:  # built by another thread meanwhile
            return fn
        asked = self._asked
        n = asked.get(kinds, 0) + 1
        if n < LAYOUT_HOT or self._credit < COMPILE_COST:
            if len(asked) >= self.max_entries:
                asked.clear()
            asked[kinds] = n
            return None
        asked.pop(kinds, None)
        self._credit -= COMPILE_COST
        fn = self._build(kinds)
        size = max(_FUNCTION_BYTES_MIN, _FUNCTION_BYTES_PER_VALUE * len(kinds))
        if len(self._fns) >= self.max_entries or self._bytes + size > self.max_bytes:
            self._fns.clear()
            self._bytes = 0
        self._fns[kinds] = fn
        self._bytes += size
        return fn

    def compiled(self) -> int:
        """How many functions are held."""
        return len(self._fns)


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
    counted nor stored.  The counts and the entries share one byte budget (``max_bytes``,
    reckoned from the names, the metadata and an overhead per item) and ``max_entries`` each;
    past a bound the cache starts over.

    Threads (free-threaded builds too): an encoder reads the dicts directly (one dict read each);
    what counts and stores runs under the object's lock, only ever tried (the module's
    *Threads*: a thread that finds it taken does not count, store or remember this time, and the
    entry is built again later), so the byte reckoning is never lost and no bound is passed.
    :meth:`clear` takes no lock (it must happen, from a handler too): a store racing it can only
    make the reckoning too high (an earlier start-over), never too low.
    """

    __slots__ = (
        "_bytes",
        "_lock",
        "_recent_keys",
        "by_class",
        "first",
        "max_bytes",
        "max_entries",
        "recent",
        "seen_counts",
    )

    def __init__(self, max_entries: int, max_bytes: int = 4 << 20) -> None:
        self.first: dict[tuple[Any, ...], Any] = {}
        self.by_class: dict[tuple[Any, ...], Any] = {}
        self.seen_counts: dict[tuple[Any, ...], int] = {}
        #: Event name -> the last entry of :attr:`first` found for it: ``(options, keys, key,
        #: entry)`` (see :meth:`remember`).
        self.recent: dict[object, tuple[Any, list[Any], tuple[Any, ...], Any]] = {}
        self._recent_keys = 0
        self._bytes = 0
        self._lock = TryLock()
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    def remember(self, name: object, options: Any, key: tuple[Any, ...], entry: Any, keys: list[Any]) -> None:
        """Keep ``entry`` (just found in :attr:`first` under ``key``) as ``name``'s recent one.

        An encoder looks an event up in :attr:`recent` first: same ``options`` (compared with
        ``==``: the format's skip key, tag...) and the same keys in the same order (``list(event)
        == keys``: each compared with ``==``, as a dict compares keys of equal hashes) give the
        entry without building and hashing the shape key.  At most ``max_entries`` names and
        :data:`_RECENT_KEYS` keys are held (then it starts over); :meth:`clear` forgets them with
        the entries.
        """
        if not self._lock.acquire():
            return
        try:
            if len(self.recent) >= self.max_entries or self._recent_keys + len(keys) > _RECENT_KEYS:
                self.recent.clear()
                self._recent_keys = 0
            self.recent[name] = (options, keys, key, entry)
            self._recent_keys += len(keys)
        finally:
            self._lock.release()

    def seen(self, key: tuple[Any, ...], chars: int) -> bool:
        """Count one written event of ``key``'s shape; True when it is now hot (build its entry).
        ``chars``: :func:`key_chars` of the key (past :data:`MAX_KEY_CHARS`: never counted)."""
        if chars > MAX_KEY_CHARS or not self._lock.acquire():
            return False
        try:
            counts = self.seen_counts
            n = counts.get(key, 0) + 1
            if n >= SHAPE_HOT:
                counts.pop(key, None)
                return True
            if n == 1:
                self._charge(counts, chars)
            counts[key] = n
            return False
        finally:
            self._lock.release()

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
        if chars > MAX_KEY_CHARS or not self._lock.acquire():
            return
        try:
            table = self.first if first else self.by_class
            self._charge(table, chars + meta_bytes)
            table[key] = entry
        finally:
            self._lock.release()

    def _charge(self, table: dict[tuple[Any, ...], Any], chars: int) -> None:
        """Reckon ``chars`` more (starting over past a bound); the caller holds the lock."""
        size = _ENTRY_OVERHEAD + chars
        if len(table) >= self.max_entries or self._bytes + size > self.max_bytes:
            self.clear()
        self._bytes += size

    def clear(self) -> None:
        """Forget every entry and count."""
        self.recent.clear()
        self._recent_keys = 0
        self.first.clear()
        self.by_class.clear()
        self.seen_counts.clear()
        self._bytes = 0

    @property
    def bytes(self) -> int:
        """The bytes the cache reckons it holds."""
        return self._bytes


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
