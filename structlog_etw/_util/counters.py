"""Counts and a set-up lock that a signal handler or a ``__del__`` may re-enter without waiting.

A log call can run anywhere: in a signal handler that fires while the main thread is inside the
provider (an alarm watchdog, a SIGTERM handler that logs "shutting down"), in a ``__del__`` that
the garbage collector calls in the middle of a write.  A plain lock held across Python code
there is a deadlock: the interrupted frame cannot run until the handler returns, and the handler
waits for the interrupted frame's lock.  So nothing on the write path takes a lock:

* :class:`Tally` counts by reason with one :func:`itertools.count` per reason: ``next()`` is one
  C call (atomic under the GIL, a compare-and-swap on free-threaded CPython), a new reason is added
  with ``dict.setdefault`` (one C call too), and a snapshot copies the table in one C call and
  reads each count without changing it.  No count is lost when a handler counts in the middle
  of another count.
* :class:`Guard` is the lock of set-up paths (registering a slot, the process registry).  It tells
  a re-entry from the thread that holds it (a handler, a ``__del__``) instead of blocking: the
  caller then does what needs no lock, or counts the event as dropped (``reentrant``).

Stdlib only (layer 1).
"""

from __future__ import annotations

import itertools
import threading
from typing import Final

__all__ = ["Guard", "Tally", "count_value"]

_PREFIX: Final = len("count(")


def count_value(counter: itertools.count[int]) -> int:
    """The next value ``counter`` would give (how many times ``next()`` was called on a
    ``count()``), read without calling ``next()``: ``repr`` is one C call and changes nothing."""
    return int(repr(counter)[_PREFIX:-1])


class Tally:
    """Counts by reason (``str`` keys), safe to add to from a signal handler or another thread."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, itertools.count[int]] = {}

    def add(self, key: str) -> None:
        """Count one ``key``."""
        counter = self._counts.get(key)
        if counter is None:  # setdefault: a handler that added the key meanwhile shares its counter
            counter = self._counts.setdefault(key, itertools.count())
        next(counter)

    def snapshot(self) -> dict[str, int]:
        """``{key: count}`` of the keys counted at least once."""
        out = {key: count_value(counter) for key, counter in self._counts.copy().items()}
        return {key: n for key, n in out.items() if n}

    def total(self) -> int:
        """The sum of every count."""
        return sum(self.snapshot().values())


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
