"""The one bounded cache: bounds by count and cost, the start-over, over-size entries, the try-lock."""

from __future__ import annotations

import os
import threading
import warnings

import pytest

from structlog_etw._util import bounded
from structlog_etw._util.bounded import BoundedCache


class TestBounds:
    def test_entries_are_an_exact_dict(self) -> None:
        """A stored entry is found by plain dict reads of ``entries``, an exact ``dict`` (CPython's
        specialised look-ups apply)."""
        cache: BoundedCache[str, int] = BoundedCache(4, 100)
        assert cache.store("a", 1)
        entries = cache.entries
        assert entries.get("a") == 1 and entries["a"] == 1 and "a" in entries
        assert type(entries) is dict

    def test_count_bound_starts_over(self) -> None:
        """Storing one entry past ``max_entries`` forgets every entry, then stores the new one."""
        cache: BoundedCache[int, int] = BoundedCache(3, 1000)
        for i in range(3):
            cache.store(i, i)
        assert len(cache.entries) == 3 and cache.cost == 3
        assert cache.store(3, 3)
        assert cache.entries == {3: 3}
        assert cache.cost == 1

    def test_cost_bound_starts_over(self) -> None:
        """Storing an entry whose cost would pass ``max_cost`` forgets every entry first."""
        cache: BoundedCache[str, str] = BoundedCache(100, 10)
        cache.store("a", "x", 4)
        cache.store("b", "y", 4)
        assert cache.cost == 8
        cache.store("c", "z", 3)
        assert cache.entries == {"c": "z"}
        assert cache.cost == 3

    def test_exactly_at_the_bound_is_kept(self) -> None:
        """An entry that brings the cost exactly to ``max_cost`` is kept with the others."""
        cache: BoundedCache[str, int] = BoundedCache(100, 10)
        cache.store("a", 1, 6)
        cache.store("b", 2, 4)
        assert cache.entries == {"a": 1, "b": 2} and cache.cost == 10

    def test_never_passes_either_bound(self) -> None:
        """Whatever is stored, the entries and their reckoned cost stay within the bounds."""
        cache: BoundedCache[int, int] = BoundedCache(7, 50)
        for i in range(1000):
            cache.store(i, i, i % 13)
            assert len(cache.entries) <= 7
            assert cache.cost <= 50

    def test_oversize_entry_not_stored(self) -> None:
        """An entry costing more than the whole budget is not stored and forgets nothing."""
        cache: BoundedCache[str, int] = BoundedCache(10, 10)
        cache.store("a", 1, 2)
        assert not cache.store("big", 2, 11)
        assert "big" not in cache.entries
        assert cache.entries == {"a": 1} and cache.cost == 2

    def test_known_key_replaced_and_reckoned_again(self) -> None:
        """Storing a key already held replaces its value without a start-over at the count bound,
        and reckons its cost again (never too low)."""
        cache: BoundedCache[str, int] = BoundedCache(2, 100)
        cache.store("a", 1, 5)
        cache.store("b", 1, 5)
        assert cache.store("a", 2, 5)
        assert cache.entries == {"a": 2, "b": 1} and cache.cost == 15

    def test_clear_resets_the_cost_and_calls_on_clear(self) -> None:
        """``clear`` forgets the entries and the reckoning, and calls ``on_clear``; so does a start-over."""
        calls: list[int] = []
        cache: BoundedCache[int, int] = BoundedCache(2, 100, on_clear=lambda: calls.append(1))
        cache.store(1, 1, 50)
        cache.clear()
        assert not cache.entries and cache.cost == 0 and calls == [1]
        cache.store(1, 1)
        cache.store(2, 2)
        cache.store(3, 3)
        assert calls == [1, 1] and cache.entries == {3: 3}

    def test_missing_subclass(self) -> None:
        """Given a dict subclass as ``entries``, its ``__missing__`` computes a value once and stores it."""
        made: list[str] = []

        class Upper(dict[str, str]):
            __slots__ = ("books",)

            def __init__(self) -> None:
                self.books: BoundedCache[str, str] = BoundedCache(10, 100, entries=self)

            def __missing__(self, key: str) -> str:
                made.append(key)
                value = key.upper()
                self.books.store(key, value, len(key))
                return value

        table = Upper()
        assert table["ab"] == "AB" and table["ab"] == "AB"
        assert made == ["ab"] and table.books.cost == 2
        table.books.clear()
        assert table == {}


class TestSharing:
    def test_shared_budget(self) -> None:
        """Caches sharing a budget reckon one cost, and a start-over of either clears both."""
        first: BoundedCache[str, int] = BoundedCache(10, 10)
        second = first.sharing(10)
        first.store("a", 1, 4)
        second.store("b", 2, 4)
        assert first.cost == second.cost == 8
        second.store("c", 3, 4)
        assert first.entries == {} and second.entries == {"c": 3}
        assert first.cost == 4

    def test_own_count_bound(self) -> None:
        """Each cache of a shared budget keeps its own ``max_entries``."""
        first: BoundedCache[int, int] = BoundedCache(100, 1000)
        second = first.sharing(2)
        for i in range(5):
            first.store(i, i)
        second.store(0, 0)
        second.store(1, 1)
        assert len(first.entries) == 5
        second.store(2, 2)
        assert first.entries == {} and second.entries == {2: 2}

    def test_clear_clears_the_group(self) -> None:
        """``clear`` on one cache of a budget forgets the entries of all of them."""
        first: BoundedCache[int, int] = BoundedCache(10, 10)
        second = first.sharing(10)
        first.store(1, 1)
        second.store(2, 2)
        second.clear()
        assert not first.entries and not second.entries and first.cost == 0


class TestTryLock:
    def test_store_skipped_while_books_taken(self) -> None:
        """A store that finds the books taken (another thread, an interrupted holder) is skipped."""
        cache: BoundedCache[str, int] = BoundedCache(10, 10)
        assert cache._books.lock.acquire(False)
        try:
            assert not cache.store("a", 1)
            assert "a" not in cache.entries and cache.cost == 0
        finally:
            cache._books.lock.release()
        assert cache.store("a", 1)

    def test_store_from_on_clear_is_skipped_not_hung(self) -> None:
        """A store made while a start-over runs (re-entry under the books' lock) is skipped, never waited."""
        cache: BoundedCache[int, int] = BoundedCache(1, 10)
        results: list[bool] = []
        cache._books.on_clear = lambda: results.append(cache.store(99, 99))
        cache.store(1, 1)
        cache.store(2, 2)
        assert results == [False] and cache.entries == {2: 2}

    def test_threads_never_pass_the_bounds(self) -> None:
        """Threads storing at once never pass either bound nor lose the reckoning of what is held."""
        cache: BoundedCache[tuple[int, int], int] = BoundedCache(50, 400)

        def work(t: int) -> None:
            for i in range(3000):
                cache.store((t, i), i, 1 + i % 7)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(cache.entries) <= 50 and cache.cost <= 400
        assert cache.cost == sum(1 + key[1] % 7 for key in cache.entries)

    def test_a_lock_held_before_a_fork_is_renewed_in_the_child(self) -> None:
        """A lock taken when the process forked (by a thread the child does not have) does not
        stop the child's stores: found taken in a later generation, it is renewed once."""
        cache: BoundedCache[str, int] = BoundedCache(10, 10)
        assert cache._books.lock.acquire(False)  # the parent's other thread, mid-store
        assert not cache.store("a", 1)  # same process: really taken, skipped
        bounded._forked()  # what the at-fork hook does in the child
        try:
            assert cache.store("a", 1)
            assert cache.entries == {"a": 1}
            assert cache._books.lock.acquire(False)  # the new lock is free again after the store
            cache._books.lock.release()
        finally:
            bounded._GENERATION[0] -= 1

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
    def test_a_real_fork_child_stores_while_the_parent_holds_the_lock(self) -> None:
        """A real fork child of a process whose other thread holds the books stores all the same."""
        cache: BoundedCache[str, int] = BoundedCache(10, 10)
        held, done = threading.Event(), threading.Event()

        def hold() -> None:
            with cache._books.lock:
                held.set()
                done.wait(10)

        thread = threading.Thread(target=hold)
        thread.start()
        held.wait(10)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # fork with a thread running
                pid = os.fork()
            if pid == 0:  # pragma: no cover - the child reports through its exit status
                os._exit(0 if cache.store("a", 1) and cache.entries == {"a": 1} else 1)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            assert not cache.store("b", 1)  # the parent's lock is still held by its thread
        finally:
            done.set()
            thread.join()

    def test_unhashable_key_raises_and_releases(self) -> None:
        """An unhashable key raises ``TypeError`` and leaves the books free for the next store."""
        cache: BoundedCache[object, int] = BoundedCache(10, 10)
        try:
            cache.store([], 1)  # type: ignore[arg-type]
        except TypeError:
            pass
        else:
            raise AssertionError("no TypeError")
        assert cache.store("a", 1)


class TestOneReader:
    def test_same_bounds_and_start_over(self) -> None:
        """A one-reader cache keeps the same bounds and starts over as a locked one does."""
        for make in (BoundedCache, BoundedCache.of_one_reader):
            cache: BoundedCache[int, int] = make(7, 50)
            for i in range(1000):
                cache.store(i, i, i % 13)
                assert len(cache.entries) <= 7 and cache.cost <= 50
            assert cache.cost == sum(key % 13 for key in cache.entries)

    def test_oversize_and_known_keys(self) -> None:
        """An entry past the whole budget is not stored; a known key at the count bound is replaced
        without a start-over and reckoned again."""
        cache: BoundedCache[str, int] = BoundedCache.of_one_reader(2, 20)
        assert not cache.store("big", 1, 21)
        cache.store("a", 1, 5)
        cache.store("b", 1, 5)
        assert cache.store("a", 2, 5)
        assert cache.entries == {"a": 2, "b": 1} and cache.cost == 15
        cache.store("c", 3, 1)
        assert cache.entries == {"c": 3} and cache.cost == 1

    def test_no_lock_taken_and_sharing_keeps_the_kind(self) -> None:
        """Its stores take no lock (one reader: nothing to wait for), and a cache sharing its budget
        is of the same kind."""
        cache: BoundedCache[str, int] = BoundedCache.of_one_reader(10, 100)
        other = cache.sharing(10)
        assert type(other) is type(cache)
        assert cache._books.lock.acquire(False)
        try:
            assert cache.store("a", 1) and other.store("b", 2)
        finally:
            cache._books.lock.release()
        assert cache.cost == 2
