"""Counts and a set-up lock that a signal handler or a ``__del__`` may re-enter without waiting.

A log call can run anywhere: in a signal handler that fires while the main thread is inside the
provider (an alarm watchdog, a SIGTERM handler that logs "shutting down"), in a ``__del__`` that
the garbage collector calls in the middle of a write, and on a free-threaded CPython in many
threads at once with no GIL between them.  A plain lock held across Python code there is a
deadlock: the interrupted frame cannot run until the handler returns, and the handler waits for
the interrupted frame's lock.  So nothing on the write path takes a lock:

* :class:`Count` is one count.  With the GIL it is one :func:`itertools.count` (``next()`` is one
  C call: atomic under the GIL, and no handler can run inside it).  On a free-threaded build it is
  one :func:`itertools.count` *per thread*, summed when read: each thread (and the handlers that
  run in it, between its bytecodes) adds only to its own, so no add is lost and no cache line is
  fought over by threads writing at once.  Which one is decided when the count is made.
* :class:`Tally` counts by reason, per thread on every build (drops and errors are not the hot
  path): a thread's table is found by its identity (:func:`threading.get_ident`), a new reason is
  added with ``dict.setdefault`` (one C call, atomic with or without the GIL: a free-threaded
  dict locks itself), and a snapshot copies each table in one C call and reads each count
  without changing it.  No count is lost when a handler counts in the middle of another count,
  or another thread at the same time.
* :class:`TryLock` is the lock of bounded caches' bookkeeping (a count, a byte reckoning, a
  store), which nothing else serialises without the GIL: only ever *tried*, never waited for, so
  whoever finds it taken (another thread, a handler that interrupted the holder) skips the
  bookkeeping, and what that costs is a later recompute.  A fork child gets fresh ones.
* :class:`Guard` is the lock of set-up paths (registering a slot, the process registry).  It tells
  a re-entry from the thread that holds it (a handler, a ``__del__``) instead of blocking: the
  caller then does what needs no lock, or counts the event as dropped (``reentrant``).

Per-thread tables are kept per thread *identity*, which the system reuses once a thread has
ended: there are about as many as the most threads that ever counted at once, never one per
thread ever started.  docs/reliability.md lists every place that relied on the GIL.

Stdlib only (layer 1).
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Final

__all__ = ["FREE_THREADED", "Count", "Guard", "Tally", "TryLock", "count_value"]


def _free_threaded_build() -> bool:
    """Whether this interpreter was built free-threaded (``Py_GIL_DISABLED``): the ABI flag ``t``
    where the interpreter has ``sys.abiflags`` (POSIX; Windows from 3.14), else ``sysconfig``'s
    build variable (imported only then: it costs a start-up about a millisecond)."""
    abiflags = getattr(sys, "abiflags", None)
    if isinstance(abiflags, str):
        return "t" in abiflags
    import sysconfig  # noqa: PLC0415

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


#: Whether this interpreter is a free-threaded build (``Py_GIL_DISABLED``): the GIL may be off, so
#: a count shared by threads is a compare-and-swap every thread fights over.
FREE_THREADED: Final = _free_threaded_build()

_PREFIX: Final = len("count(")


def count_value(counter: itertools.count[int]) -> int:
    """The next value ``counter`` would give (how many times ``next()`` was called on a
    ``count()``), read without calling ``next()``: ``repr`` is one C call and changes nothing."""
    return int(repr(counter)[_PREFIX:-1])


class Count:
    """One count, added to from any thread or signal handler without a lock and without a loss.

    ``add()`` counts one (bound when the count is made: no per-call decision), :meth:`value` is
    the sum.  ``per_thread`` (default: :data:`FREE_THREADED`) picks per-thread counts summed on
    read over one shared :func:`itertools.count`.
    """

    __slots__ = ("_shared", "_tables", "add")

    def __init__(self, per_thread: bool = FREE_THREADED) -> None:
        self._tables: dict[int, itertools.count[int]] | None = None
        self._shared: itertools.count[int] | None = None
        self.add: Callable[[], object]
        if per_thread:
            tables: dict[int, itertools.count[int]] = {}
            get, setdefault, ident = tables.get, tables.setdefault, threading.get_ident

            def add() -> object:
                counter = get(ident())
                if counter is None:  # this thread's first: setdefault, as a handler may race it
                    counter = setdefault(ident(), itertools.count())
                return next(counter)

            self._tables, self.add = tables, add
        else:
            self._shared = itertools.count()
            self.add = self._shared.__next__

    def value(self) -> int:
        """How many were counted."""
        if self._shared is not None:
            return count_value(self._shared)
        assert self._tables is not None
        return sum(map(count_value, self._tables.copy().values()))


class Tally:
    """Counts by reason (``str`` keys), safe to add to from a signal handler or another thread:
    each thread counts in a table of its own, summed on read."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[int, dict[str, itertools.count[int]]] = {}

    def add(self, key: str) -> None:
        """Count one ``key``."""
        ident = threading.get_ident()
        table = self._tables.get(ident)
        if table is None:  # setdefault: a handler that made the table meanwhile shares it
            table = self._tables.setdefault(ident, {})
        counter = table.get(key)
        if counter is None:  # setdefault: a handler that added the key meanwhile shares its counter
            counter = table.setdefault(key, itertools.count())
        next(counter)

    def snapshot(self) -> dict[str, int]:
        """``{key: count}`` of the keys counted at least once."""
        out: dict[str, int] = {}
        for table in self._tables.copy().values():
            for key, counter in table.copy().items():
                out[key] = out.get(key, 0) + count_value(counter)
        return {key: n for key, n in out.items() if n}

    def total(self) -> int:
        """The sum of every count."""
        return sum(self.snapshot().values())


class TryLock:
    """A lock that is only ever tried: ``acquire()`` takes it and returns True, or returns False
    at once when it is taken (by another thread, or by the very frame a signal handler or a
    ``__del__`` interrupted); ``release()`` after a True.  Never waits, so never hangs.  A fork
    child gets a free one (another thread of the parent may have held it)."""

    __slots__ = ("__weakref__", "acquire", "release")

    def __init__(self) -> None:
        self.acquire: Callable[[], bool]
        self.release: Callable[[], None]
        self._renew()
        _TRY_LOCKS.add(self)

    def _renew(self) -> None:
        lock = threading.Lock()
        self.acquire, self.release = functools.partial(lock.acquire, False), lock.release


_TRY_LOCKS: weakref.WeakSet[TryLock] = weakref.WeakSet()


def _renew_try_locks() -> None:
    for lock in list(_TRY_LOCKS):
        lock._renew()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_try_locks)


class Guard:
    """A lock for set-up code that knows when the thread holding it re-enters it.

    :meth:`enter` returns ``True`` when the caller now holds the guard (it must call
    :meth:`leave`), ``False`` when this very thread already holds it further up its stack: a
    signal handler or a ``__del__`` interrupted the holder.  Another thread waits as for any lock.

    The re-entry is seen through a depth read under an :class:`threading.RLock` (whose acquire
    records the owner atomically): a handler that fires before the holder set the depth, or after
    it cleared it, finds the holder outside its critical part and may run the whole of its own.
    """

    __slots__ = ("_depth", "_lock")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0

    def enter(self) -> bool:
        """Hold the guard (True), or tell that this thread holds it already (False, not held again)."""
        self._lock.acquire()
        if self._depth:
            self._lock.release()
            return False
        self._depth = 1
        return True

    def leave(self) -> None:
        """Release the guard taken by an :meth:`enter` that returned True."""
        self._depth = 0
        self._lock.release()

    def renew(self) -> None:
        """A fresh, free lock (a fork child: another thread of the parent may have held it)."""
        self._lock = threading.RLock()
        self._depth = 0
