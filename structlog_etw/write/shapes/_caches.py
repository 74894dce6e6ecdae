"""The shape functions' caches: a format's compiled layouts and an encoder's shape entries.

:class:`LayoutFunctions` holds a format's functions, one per layout, compiled only once the layout
is hot and the compile budget allows it; :class:`ShapeCache` holds an encoder's shape entries,
made only for shapes written :data:`SHAPE_HOT` times, never for a key longer than
:data:`MAX_KEY_CHARS`.  Both are bounded by count and by bytes
(:class:`~structlog_etw._util.bounded.BoundedCache`).

**Threads.**  Nothing serialises threads on a free-threaded build, so no change to a shared table
here leans on the GIL: every store and its byte reckoning is a
:class:`~structlog_etw._util.bounded.BoundedCache` store, and the compile budget runs under the
object's own :class:`~structlog_etw._util.counters.TryLock`; both are only ever tried.  Never
waited for, so no thread, signal handler or ``__del__`` can hang on them; whoever finds one taken
skips the bookkeeping (a count, a credit, a store: a later recompute), never the event.
Lookups are single dict reads, safe on every build.  docs/reliability.md lists every such place.

Stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple

from ..._util.bounded import BoundedCache
from ..._util.counters import TryLock
from ..fields import NULL
from ._layout import NONE, SKIP, layout

__all__ = [
    "COMPILE_COST",
    "CREDIT_CAP",
    "LAYOUT_HOT",
    "MAX_KEY_CHARS",
    "SHAPE_HOT",
    "HotShape",
    "LayoutFunctions",
    "ShapeCache",
    "key_chars",
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
    def held_bytes(self) -> int:
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
