"""The one bounded cache: a ``dict`` whose stores start over when they would pass its bounds.

Every cache of the package (shape entries, generated functions, event names, logger keywords,
header scopes, the read side's texts and plans) is bounded the same way: by a number of entries
and by a *cost*, a reckoning in bytes or characters of what an entry holds.  When storing one
more entry would pass either bound, the cache forgets everything and starts over: no order to
keep, no eviction to decide, and a stream of new keys costs one clear per full cache, so memory
stays bounded whatever the data.  An entry costing more than the whole budget is never stored.

:class:`BoundedCache` keeps the books of a plain ``dict``, its :attr:`~BoundedCache.entries`:
readers look entries up in that dict directly (an exact ``dict``, so CPython's specialised
look-ups apply: no speed lost against a bare dict), and only :meth:`BoundedCache.store` writes
it.  Several caches may share one budget (:meth:`BoundedCache.sharing`): a start-over then
clears them all.  A reader's own cache (a decode's texts and plans: one thread, no signal
handler) is made by :meth:`BoundedCache.of_one_reader`: the same books, no lock.

**Threads.**  A store's bookkeeping (the bound checks, the start-over, the cost) runs under a
lock only ever *tried* (as :class:`~structlog_etw._util.counters.TryLock`; a fork child renews
one its parent's thread held): a thread, a signal handler or a ``__del__`` that finds it taken
skips the store (a later look-up computes the value again), so
nothing waits, no reckoning is lost on a free-threaded build, and no bound is passed.  A plain
:meth:`BoundedCache.clear` takes no lock (it must happen, from a handler too): a store racing it
can only make the reckoning too high (an earlier start-over), never too low.

Stdlib only (layer 1).
"""

from __future__ import annotations

import _thread
import os
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["BoundedCache"]

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")

#: How many times this process is a fork child of a fork child...: a lock made in an earlier
#: generation may have been held by a thread of the parent, which the child does not have.
_GENERATION: list[int] = [0]


def _forked() -> None:
    _GENERATION[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class _Books:
    """The reckoning of one budget: its bound, what is spent, its lock, the tables it bounds and
    what else a start-over forgets (``on_clear``).

    The lock is a :class:`threading.Lock` (made by :func:`_thread.allocate_lock`, the same lock
    type: a reader that loads this module need not import :mod:`threading`) only ever *tried* (as
    :class:`~structlog_etw._util.counters.TryLock`; made here for a few dozen nanoseconds, as the
    read side makes caches per plan): found taken in a fork child and made in the parent's
    generation, it is renewed (the thread that held it is not in the child), so a fork never
    leaves a cache that cannot store."""

    __slots__ = ("born", "cost", "lock", "max_cost", "on_clear", "tables")

    def __init__(self, max_cost: int, on_clear: Callable[[], object] | None) -> None:
        self.lock = _thread.allocate_lock()
        self.born = _GENERATION[0]
        self.max_cost = max_cost
        self.cost = 0
        self.tables: list[dict[Any, Any]] = []
        self.on_clear = on_clear

    def renewed(self) -> _thread.LockType | None:
        """The lock was found taken: a fresh one, taken, when it was made before this process
        was forked (its holder is not here); ``None`` when it is really taken now."""
        if self.born == _GENERATION[0]:
            return None
        lock = _thread.allocate_lock()
        lock.acquire()
        self.lock, self.born = lock, _GENERATION[0]
        return lock

    def start_over(self) -> None:
        """Forget every entry of every table of this budget."""
        for table in self.tables:
            dict.clear(table)
        self.cost = 0
        if self.on_clear is not None:
            self.on_clear()


class BoundedCache(Generic[_K, _V]):
    """A table of at most ``max_entries`` entries costing at most ``max_cost`` together.

    :attr:`entries` is the table: read it as the plain ``dict`` it is (``get``, ``[]``, ``in``:
    one C call, the speed of any dict); write it only with :meth:`store`, which reckons the
    entry's cost and starts over (every entry of the budget forgotten, then ``on_clear`` called)
    when the entry would pass a bound.  ``entries`` may be given: a ``dict`` subclass whose
    ``__missing__`` computes a value and stores it.  ``cost`` is in the unit the owner chooses
    (bytes, characters).  A value that changes in place (a count) is stored once and changed
    where it is: no bookkeeping per change.
    """

    __slots__ = ("_books", "entries", "max_entries")

    def __init__(
        self,
        max_entries: int,
        max_cost: int,
        on_clear: Callable[[], object] | None = None,
        entries: dict[_K, _V] | None = None,
    ) -> None:
        #: The table (a ``dict``; read it directly).
        self.entries: dict[_K, _V] = {} if entries is None else entries
        self.max_entries = max_entries
        self._books = _Books(max_cost, on_clear)
        self._books.tables.append(self.entries)

    def sharing(self, max_entries: int, entries: dict[Any, Any] | None = None) -> BoundedCache[Any, Any]:
        """A new cache of at most ``max_entries`` entries that spends this cache's budget (its
        cost, its lock, its start-over: storing in either may clear both)."""
        other: BoundedCache[Any, Any] = type(self)(max_entries, 0, entries=entries)
        other._books = self._books
        self._books.tables.append(other.entries)
        return other

    @classmethod
    def of_one_reader(
        cls,
        max_entries: int,
        max_cost: int,
        on_clear: Callable[[], object] | None = None,
        entries: dict[_K, _V] | None = None,
    ) -> BoundedCache[_K, _V]:
        """A cache only ever used by the thread that owns it and never from a signal handler (a
        decoder's, a writer's): the same bounds, the same start-over, its stores without the lock
        (a reader's miss path, once per new value, costs what the bare dict's did)."""
        return _OneReader(max_entries, max_cost, on_clear, entries)

    @property
    def max_cost(self) -> int:
        """The most the entries of this cache's budget may cost together."""
        return self._books.max_cost

    @property
    def cost(self) -> int:
        """What the entries of this cache's budget are reckoned to cost."""
        return self._books.cost

    def store(self, key: _K, value: _V, cost: int = 1) -> bool:
        """Keep ``value`` under ``key``: True when stored.

        The entry is reckoned at ``cost``; when it would pass the budget, or a new key would pass
        ``max_entries``, every entry of the budget is forgotten first (start over).  A key already
        held gets the new value and is reckoned again (too high at worst: an earlier start-over,
        never a bound passed).  Not stored (False): an entry costing more than the whole budget,
        or the books taken by another thread or by the frame a handler interrupted.  An
        unhashable key raises ``TypeError``.
        """
        books = self._books
        if cost > books.max_cost:
            return False
        lock = books.lock
        if not lock.acquire(False):
            renewed = books.renewed()
            if renewed is None:  # another thread, or the frame a handler interrupted, keeps the books
                return False
            lock = renewed
        try:
            entries = self.entries
            full = len(entries) >= self.max_entries and key not in entries
            if full or books.cost + cost > books.max_cost:
                books.start_over()
            entries[key] = value  # (an unhashable key raises here: nothing reckoned)
            books.cost += cost
        finally:
            lock.release()
        return True

    def clear(self) -> None:
        """Forget every entry of this cache's budget (every cache sharing it too), no lock taken."""
        self._books.start_over()


class _OneReader(BoundedCache[_K, _V]):
    """:meth:`BoundedCache.of_one_reader`: stores keep the books without the lock."""

    __slots__ = ()

    def store(self, key: _K, value: _V, cost: int = 1) -> bool:
        """:meth:`BoundedCache.store`, for one thread: no lock tried."""
        books, entries = self._books, self.entries
        spent = books.cost + cost
        if spent > books.max_cost or len(entries) >= self.max_entries:  # rare: a bound reached
            if cost > books.max_cost:
                return False
            if spent > books.max_cost or key not in entries:
                books.start_over()
                spent = cost
        entries[key] = value
        books.cost = spent
        return True
