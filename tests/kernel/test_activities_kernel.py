"""Activities in a real kernel: nested activities across two threads and several asyncio tasks,
written through structlog to user_events, captured by ``perf record`` and decoded by the
project's perf.data reader and EventHeader decoder (marker ``kernel``).

It proves, from the captured bytes alone: every Start has exactly one Stop with the same id and
name; each Start's related id is its parent activity's id; every event logged inside an activity
carries that activity's id (and no related id); concurrent threads and tasks never see each
other's ids; after an activity ends the enclosing one is current again.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from kernel_harness import PerfSession, wait_until

from structlog_etw import EtwRenderer, Provider, etw_activity
from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.read.decoded import DecodedEvent

pytestmark = pytest.mark.kernel

THREADS = 2
TASKS = 4
STEPS = 3


def decoded_capture(session: PerfSession, provider_name: str) -> list[DecodedEvent]:
    """The provider's events in the perf.data file, read by ``_perfdata`` and decoded, in file order."""
    perf = PerfDataFile.open(session.path)
    prefix = f"user_events:{provider_name}_"
    events = [decode_event(s.name, s.data) for s in perf.samples() if s.name.startswith(prefix)]
    assert not perf.problems, perf.problems
    assert perf.lost == 0
    return events


def _workload(log: Any) -> None:
    """Run (main thread) > Thread t (2 threads) > Task t,k (4 asyncio tasks each) > Sub t,k."""

    async def task(t: int, k: int) -> None:
        async with etw_activity(log, "Task", t=t, k=k):
            for step in range(STEPS):
                await asyncio.sleep(0.001)  # let the other tasks of this thread interleave
                log.info("task_event", t=t, k=k, step=step)
            async with etw_activity(log, "Sub", t=t, k=k) as sub:
                await asyncio.sleep(0)
                log.warning("sub_event", t=t, k=k)
                sub.record(done=True)
            log.info("task_after_sub", t=t, k=k)

    async def tasks(t: int) -> None:
        await asyncio.gather(*(task(t, k) for k in range(TASKS)))

    def thread(t: int, barrier: threading.Barrier) -> None:
        barrier.wait()  # both threads inside their activities at the same time
        with etw_activity(log, "Thread", t=t):
            log.info("thread_event", t=t)
            asyncio.run(tasks(t))
        log.info("thread_after", t=t)

    with etw_activity(log, "Run"):
        barrier = threading.Barrier(THREADS)
        workers = [
            threading.Thread(target=contextvars.copy_context().run, args=(thread, t, barrier))
            for t in range(THREADS)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        log.info("run_event")
    log.info("after_all")


def test_activities_across_threads_and_tasks_pair_chain_and_never_leak_in_perf(
    provider_name: str, perf_session: Callable[..., PerfSession]
) -> None:
    """Across threads and tasks each Start has one Stop, related ids chain, and no activity leaks in perf."""
    provider = Provider(provider_name)
    assert type(provider.backend).__name__ == "UserEventsBackend"
    log = structlog.wrap_logger(None, processors=[EtwRenderer(provider_name, provider=provider)])
    try:
        with perf_session([f"{provider_name}_L4K1", f"{provider_name}_L3K1"]) as session:
            wait_until(lambda: provider.enabled(4, 1) and provider.enabled(3, 1), what="perf to enable")
            _workload(log)
    finally:
        provider.close()
    events = decoded_capture(session, provider_name)
    stats = provider.stats()
    assert stats["written"] == len(events), (stats, len(events))
    _check(events)


def _key(e: DecodedEvent) -> tuple[Any, ...]:
    return (e.name, e.fields.get("t"), e.fields.get("k"))


def _check(events: list[DecodedEvent]) -> None:
    starts = [e for e in events if e.opcode == 1]
    stops = [e for e in events if e.opcode == 2]
    infos = [e for e in events if e.opcode == 0]
    n_activities = 1 + THREADS + 2 * THREADS * TASKS
    assert len(starts) == len(stops) == n_activities
    assert len(infos) == 1 + 1 + THREADS * 2 + THREADS * TASKS * (STEPS + 2)

    # every Start has one Stop with the same id and name; ids are unique
    start_by_id = {e.activity_id: e for e in starts}
    assert len(start_by_id) == n_activities
    assert None not in start_by_id
    stop_ids = Counter(e.activity_id for e in stops)
    assert set(stop_ids) == set(start_by_id)
    assert set(stop_ids.values()) == {1}
    for stop in stops:
        assert stop.name == start_by_id[stop.activity_id].name
        assert stop.related_id is None  # the related id is on Start only
        assert stop.fields["outcome"] == "ok"
        assert stop.fields["duration_ns"] >= 0

    # related ids chain Run > Thread > Task > Sub
    act = {_key(e): e.activity_id for e in starts}
    assert len(act) == n_activities
    run = act[("Run", None, None)]
    for e in starts:
        name, t, k = _key(e)
        parent = {
            "Run": None,
            "Thread": run,
            "Task": act.get(("Thread", t, None)),
            "Sub": act.get(("Task", t, k)),
        }[name]
        assert e.related_id == parent, (name, t, k)
    for e in stops:
        if e.name == "Sub":
            assert e.fields["done"] is True

    # every inner event carries exactly its own activity's id, never a sibling's
    expected: dict[str, Callable[[DecodedEvent], uuid.UUID | None]] = {
        "thread_event": lambda e: act[("Thread", e.fields["t"], None)],
        "thread_after": lambda e: run,  # back in the Run activity the thread's context copied
        "task_event": lambda e: act[("Task", e.fields["t"], e.fields["k"])],
        "sub_event": lambda e: act[("Sub", e.fields["t"], e.fields["k"])],
        "task_after_sub": lambda e: act[("Task", e.fields["t"], e.fields["k"])],
        "run_event": lambda e: run,
        "after_all": lambda e: None,
    }
    for e in infos:
        assert e.activity_id == expected[e.name](e), (e.name, e.fields)
        assert e.related_id is None
    sub_levels = {e.level for e in infos if e.name == "sub_event"}
    assert sub_levels == {3}
