"""Interleaved micro-benchmark timing: every figure is a ratio against a baseline timed in the same rounds.

Each case is a statement compiled into a ``timeit`` loop (no extra function call per iteration, the
same loop overhead on both sides of a ratio).  The cases of one comparison are timed round-robin:
round 1 times case A, then B, then C; round 2 again A, B, C; ... so a burst of load on the machine
hits every case of a comparison alike.  A case's figure is the median over rounds of ns per call.
The garbage collector stays enabled (allocation cost is part of what is measured).

The clock is the thread's CPU time (``time.thread_time``, CLOCK_THREAD_CPUTIME_ID: user + system
time of this thread, ns resolution), not wall time: on a shared machine other processes preempt
us, and wall time would charge their time slices to whichever case happened to be running.
"""

from __future__ import annotations

import statistics
import time
import timeit
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Case", "Measurement", "measure_group"]


@dataclass
class Case:
    """One timed statement: ``stmt`` runs ``number`` times per round with ``namespace`` as globals."""

    key: str
    label: str
    stmt: str
    namespace: dict[str, Any]
    setup: str = "gc.enable()"


@dataclass
class Measurement:
    """ns per call for one case, per round, and the median over rounds."""

    key: str
    label: str
    rounds_ns: list[float] = field(default_factory=list)

    @property
    def ns(self) -> float:
        """Median over rounds, ns per call."""
        return statistics.median(self.rounds_ns)

    @property
    def spread(self) -> float:
        """Interquartile range over the median (0.05 = 5 % spread)."""
        if len(self.rounds_ns) < 4:
            return 0.0
        q = statistics.quantiles(self.rounds_ns, n=4)
        return (q[2] - q[0]) / self.ns


def _timer(case: Case) -> timeit.Timer:
    ns = dict(case.namespace)
    ns.setdefault("gc", __import__("gc"))
    return timeit.Timer(case.stmt, setup=case.setup, timer=time.thread_time, globals=ns)


def _calibrate(timer: timeit.Timer, target_s: float) -> int:
    """Loop count so that one round takes about ``target_s``."""
    number = 1
    while True:
        t = timer.timeit(number)
        if t >= target_s / 4 or number >= 10_000_000:
            return max(1, int(number * target_s / max(t, 1e-9)))
        number *= 4


def measure_group(cases: list[Case], rounds: int, round_s: float) -> dict[str, Measurement]:
    """Time ``cases`` round-robin for ``rounds`` rounds of about ``round_s`` seconds each."""
    timers = [_timer(c) for c in cases]
    for t in timers:  # warm-up: caches, metadata, lazily opened slots
        t.timeit(200)
    numbers = [_calibrate(t, round_s) for t in timers]
    out = {c.key: Measurement(c.key, c.label) for c in cases}
    for r in range(rounds):
        order = range(len(cases)) if r % 2 == 0 else reversed(range(len(cases)))
        for i in order:
            elapsed = timers[i].timeit(numbers[i])
            out[cases[i].key].rounds_ns.append(elapsed / numbers[i] * 1e9)
    return out
