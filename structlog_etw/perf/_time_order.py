"""Time order for a perf.data reader: samples in ``perf script``'s order, in a bounded window.

perf writes each CPU's buffer in turn and a FINISHED_ROUND record after every pass over the
buffers.  An event read after round *k* ended cannot be older than the newest event read before
round *k-1* ended, so at each FINISHED_ROUND the samples up to that time are released in
timestamp order (equal times in file order) and the rest wait for the next round; everything
left is released at the end.  What is held is bounded by a window of bytes
(:data:`REORDER_WINDOW_BYTES`): past it (a file without rounds, or with larger rounds) the oldest
held samples are released.  A sample older than one already released (a file not written by
perf's rules, or disorder wider than the window) comes out late, right away, and is counted.

:class:`TimeOrder` takes what the sample reader hands on: lists of held items
``(time or 0, file offset, sample, raw size)`` with their raw bytes, and a None at every
FINISHED_ROUND.  Pure Python; every OS.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ._sample_reader import Sample

#: How much :meth:`PerfDataFile.samples_by_time <structlog_etw.perf.datafile.PerfDataFile.samples_by_time>`
#: holds back to put samples in time order: about this many bytes of samples (each counted as its
#: data twice plus the objects around it).  perf flushes its buffers in rounds and the reorder
#: needs two of them; a file without FINISHED_ROUND records, or with rounds larger than this, is
#: ordered within this window and what comes out older than an event already written is written
#: at once and counted as late.
REORDER_WINDOW_BYTES: Final = 32 << 20
#: What one held sample costs besides its bytes (the Sample, its ints, the heap entry).
_HELD_OVERHEAD: Final = 400
#: Greater than any file offset: ``(t, _AFTER_ALL)`` sorts after every held sample of time t.
_AFTER_ALL: Final = float("inf")
#: The time, the sample and the raw size of a held ``(time, file offset, sample, raw size)``.
_TIME: Final = itemgetter(0)
_SAMPLE: Final = itemgetter(2)
_SIZE: Final = itemgetter(3)

_Held = tuple[int, int, "Sample", int]


class TimeOrder:
    """Samples put in time order within ``window`` bytes (see the module docstring).

    Held samples are a list sorted once per round (a sorted list is a heap); only past the window
    (no rounds) is it kept a heap sample by sample.  Unless it is a heap, the list is what was left
    sorted by the last round, then samples in file order (offsets past all those held): a stable
    sort by time alone puts it in (time, offset) order, comparing ints instead of tuples.
    """

    __slots__ = ("held", "held_bytes", "horizon", "is_heap", "late", "newest", "released", "window")

    def __init__(self, window: int = REORDER_WINDOW_BYTES) -> None:
        self.window = window
        #: Samples that came out late (older than one already released).
        self.late = 0
        self.held: list[_Held] = []
        self.held_bytes = 0
        self.is_heap = False
        #: Newest time seen when the previous round ended.
        self.horizon: int | None = None
        #: Newest time seen (of the samples held whole in batches: when a round ends).
        self.newest = -1
        #: Newest time released so far.
        self.released: int | None = None

    def release(self, batches: Iterable[tuple[list[_Held], int] | None]) -> Iterator[Sample]:
        """The samples of ``batches`` in time order, as soon as each can be released."""
        for batch in batches:
            if batch is None:
                yield from self._round_ended()
                continue
            items, raw_bytes = batch
            cost = raw_bytes * 2 + _HELD_OVERHEAD * len(items)
            released = self.released
            if (
                not self.is_heap
                and self.held_bytes + cost <= self.window
                and (released is None or min(items)[0] >= released)
            ):  # the whole batch is held (none late, the window not reached): as sample by sample
                self.held += items
                self.held_bytes += cost
                continue
            yield from self._one_by_one(items)
        held = self.held
        held.sort(key=None if self.is_heap else _TIME)
        yield from map(_SAMPLE, held)
        held.clear()

    def _round_ended(self) -> Iterator[Sample]:
        """A round ended: what is older than the previous round's end goes out (returned, not
        yielded: the caller's ``yield from`` hands each sample on without a second generator)."""
        held = self.held
        out: list[_Held] = []
        if held:
            if self.is_heap:
                held.sort()
                self.is_heap = False  # sorted: a heap until the next append
            else:  # sorted leftovers, then file order: sorted by time alone (see the class)
                held.sort(key=_TIME)
            self.newest = max(self.newest, held[-1][0])  # once a round
            horizon = self.horizon
            k = bisect.bisect_right(held, (horizon, _AFTER_ALL)) if horizon is not None else 0
            if k:
                out = held[:k]
                del held[:k]
                self.released = out[-1][0]
                self.held_bytes -= sum(map(_SIZE, out)) * 2 + _HELD_OVERHEAD * k
        if self.newest >= 0:
            self.horizon = self.newest
        return map(_SAMPLE, out)

    def _one_by_one(self, items: list[_Held]) -> Iterator[Sample]:
        """Hold ``items`` one at a time: late ones out at once; past the window, the held samples
        become a heap and the oldest go out until what is held fits again.  (The state is kept in
        locals, per sample, and written back at the end: nothing reads it in between.)"""
        held, window = self.held, self.window
        push, pop = heapq.heappush, heapq.heappop
        released, newest, held_bytes, is_heap = self.released, self.newest, self.held_bytes, self.is_heap
        for item in items:
            t, _, sample, size = item
            if released is not None and t < released:
                self.late += 1
                yield sample
                continue
            if is_heap:
                push(held, item)
            else:
                held.append(item)
            held_bytes += size * 2 + _HELD_OVERHEAD
            if t > newest:  # noqa: PLR1730 - a comparison, not a call, per sample
                newest = t
            if held_bytes > window:
                if not is_heap:
                    heapq.heapify(held)
                    is_heap = self.is_heap = True
                while held_bytes > window and held:
                    t_out, _, out, out_size = pop(held)
                    held_bytes -= out_size * 2 + _HELD_OVERHEAD
                    released = t_out
                    if t_out > newest:  # noqa: PLR1730 - it may have come in a batch
                        newest = t_out
                    yield out
        self.released, self.newest, self.held_bytes = released, newest, held_bytes
