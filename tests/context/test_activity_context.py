"""etw_activity through a structlog logger: what reaches the processor chain and which activity is current.

These tests look at the event dicts the activity hands to the logger's chain and at the
activity the chain sees (``_activity.CURRENT_ACTIVITY``, what the EtwRenderer reads); the
encoded events are checked in test_activity_formats.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from structlog_etw import current_activity_id, etw_activity
from structlog_etw.context import _activity

Seen = list[tuple[dict[str, Any], tuple[bytes, bytes | None] | None]]

#: Seconds a thread of a test waits for the other: a failure in one fails the test, never hangs it.
WAIT = 30.0


@pytest.fixture
def seen() -> Iterator[Seen]:
    """Every event dict the chain is handed, with the activity current then; each event dropped."""
    got: Seen = []

    def record(_logger: Any, _name: str, event_dict: dict[str, Any]) -> Any:
        got.append((dict(event_dict), _activity.CURRENT_ACTIVITY.get()))
        raise structlog.DropEvent

    structlog.configure(processors=[record], cache_logger_on_first_use=False)
    try:
        yield got
    finally:
        structlog.reset_defaults()


def test_with_block_logs_start_and_stop_with_opcode_fields_duration_and_outcome(seen: Seen) -> None:
    """A with block logs Start (opcode 1) and Stop (opcode 2, fields, duration, outcome "ok") in its id."""
    log = structlog.get_logger()
    with etw_activity(log, "DownloadFile", url="http://x/") as act:
        assert act.id is not None
        log.info("chunk", n=1)
        act.record(bytes=123)
    (start, s_cur), (inner, i_cur), (stop, e_cur) = seen
    assert start == {"event": "DownloadFile", "url": "http://x/", "etw_opcode": 1}
    assert inner == {"event": "chunk", "n": 1}
    assert stop["event"] == "DownloadFile"
    assert stop["etw_opcode"] == 2
    assert stop["url"] == "http://x/"
    assert stop["bytes"] == 123
    assert stop["outcome"] == "ok"
    assert type(stop["duration_ns"]) is int
    assert stop["duration_ns"] >= 0
    assert s_cur is not None
    assert s_cur == i_cur == e_cur
    assert s_cur[0] == act.id.bytes
    assert s_cur[1] is None  # top level: no related id
    assert _activity.CURRENT_ACTIVITY.get() is None  # reset on exit
    assert act.id is not None  # the finished activity's id stays readable


def test_exception_in_body_propagates_unchanged_and_stop_outcome_is_its_type_name(seen: Seen) -> None:
    """An exception in the body propagates as is, the Stop's outcome is its type name, the id is reset."""
    log = structlog.get_logger()
    err = KeyError("missing")
    with pytest.raises(KeyError) as info, etw_activity(log, "Lookup"):
        raise err
    assert info.value is err
    stop = seen[-1][0]
    assert stop["etw_opcode"] == 2
    assert stop["outcome"] == "KeyError"
    assert _activity.CURRENT_ACTIVITY.get() is None


def test_nested_activity_has_parent_id_as_related_id_and_restores_parent_on_exit(seen: Seen) -> None:
    """A nested activity has the outer id as related id, and the outer one is current again after it."""
    log = structlog.get_logger()
    with etw_activity(log, "Outer") as outer:
        with etw_activity(log, "Inner") as inner:
            assert inner.related_id == outer.id
            assert current_activity_id() == inner.id
        assert current_activity_id() == outer.id
        log.info("after_inner")
    assert current_activity_id() is None
    by_event = [(e["event"], e.get("etw_opcode"), cur) for e, cur in seen]
    outer_id = by_event[0][2][0]  # type: ignore[index]
    inner_id = by_event[1][2][0]  # type: ignore[index]
    assert by_event[1][2] == (inner_id, outer_id)
    assert by_event[3] == ("after_inner", None, (outer_id, None))


def test_control_keys_given_to_the_activity_pass_to_the_chain_and_are_not_fields(seen: Seen) -> None:
    """etw_* keys given to the activity reach the chain as control keys next to the Start's opcode."""
    log = structlog.get_logger()
    with etw_activity(log, "Job", etw_keyword=0x4, etw_tags=7, job=1):
        pass
    start = seen[0][0]
    assert start == {"event": "Job", "job": 1, "etw_keyword": 4, "etw_tags": 7, "etw_opcode": 1}


def test_a_failing_processor_chain_never_raises_out_of_the_activity() -> None:
    """A processor that raises never makes the activity raise, and the current id is reset after it."""

    def boom(_l: Any, _n: str, _e: dict[str, Any]) -> Any:
        raise RuntimeError("broken processor")

    structlog.configure(processors=[boom], cache_logger_on_first_use=False)
    try:
        with etw_activity(structlog.get_logger(), "Survives") as act:
            assert act.id is not None
        assert current_activity_id() is None
    finally:
        structlog.reset_defaults()


def test_activity_follows_copy_context_into_a_thread_and_does_not_leak_back(seen: Seen) -> None:
    """A copied context carries the activity into a thread; its sub-activity does not leak back."""
    log = structlog.get_logger()
    in_thread: list[Any] = []
    with etw_activity(log, "Request") as act:
        ctx = contextvars.copy_context()

        def work() -> None:
            in_thread.append(current_activity_id())
            with etw_activity(log, "Sub") as sub:
                in_thread.append((sub.id, sub.related_id))

        t = threading.Thread(target=ctx.run, args=(work,))
        t.start()
        t.join()
        assert current_activity_id() == act.id
        outer_id = act.id
    assert in_thread[0] == outer_id
    assert in_thread[1][1] == outer_id
    assert in_thread[1][0] != outer_id


def test_concurrent_asyncio_tasks_each_see_only_their_own_activity(seen: Seen) -> None:
    """Five gathered asyncio tasks each see and log only their own activity id, under the batch's."""
    log = structlog.get_logger()

    async def task(i: int) -> tuple[Any, list[Any]]:
        observed = []
        async with etw_activity(log, "Task", i=i) as act:
            for _ in range(3):
                await asyncio.sleep(0)
                observed.append(current_activity_id())
                log.info("step", i=i)
            return act.id, observed

    async def main() -> list[tuple[Any, list[Any]]]:
        async with etw_activity(log, "Batch") as batch:
            results = await asyncio.gather(*(task(i) for i in range(5)))
            assert current_activity_id() == batch.id
            return results

    results = asyncio.run(main())
    ids = [r[0] for r in results]
    assert len(set(ids)) == 5
    for act_id, observed in results:
        assert observed == [act_id] * 3
    for event, cur in seen:
        if event["event"] == "step":
            assert cur is not None
            assert cur[0] == ids[event["i"]].bytes
    assert current_activity_id() is None


def test_decorator_gives_each_call_its_own_activity_sync_and_async(seen: Seen) -> None:
    """As a decorator, each sync or async call runs its own activity, and the name is kept."""
    log = structlog.get_logger()

    @etw_activity(log, "Handle", kind="sync")
    def handle(x: int) -> Any:
        return x, current_activity_id()

    @etw_activity(log, "AHandle", kind="async")
    async def ahandle(x: int) -> Any:
        await asyncio.sleep(0)
        return x, current_activity_id()

    r1 = handle(1)
    r2 = handle(2)
    assert r1[0] == 1
    assert r1[1] is not None
    assert r1[1] != r2[1]
    assert handle.__name__ == "handle"
    a1, a2 = asyncio.run(_gather(ahandle(1), ahandle(2)))
    assert a1[1] != a2[1]
    assert None not in (a1[1], a2[1])
    starts = [e for e, _ in seen if e.get("etw_opcode") == 1]
    assert [e["event"] for e in starts] == ["Handle", "Handle", "AHandle", "AHandle"]
    assert all(e["kind"] in ("sync", "async") for e in starts)
    assert current_activity_id() is None


async def _gather(*aws: Any) -> list[Any]:
    return list(await asyncio.gather(*aws))


def test_decorated_function_exception_propagates_and_stop_records_it(seen: Seen) -> None:
    """A decorated function's exception propagates and its type name is the Stop's outcome."""
    log = structlog.get_logger()

    @etw_activity(log, "Fails")
    def fails() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        fails()
    assert seen[-1][0]["outcome"] == "ValueError"


def test_record_before_enter_sets_start_fields_and_record_inside_updates_stop_only(seen: Seen) -> None:
    """record() before entry adds Start fields; record() inside changes only the Stop's fields."""
    log = structlog.get_logger()
    act = etw_activity(log, "Rec", a=1)
    act.record(b=2)
    with act:
        act.record(a=10, c=3)
    start, stop = seen[0][0], seen[1][0]
    assert (start["a"], start["b"]) == (1, 2)
    assert "c" not in start
    assert (stop["a"], stop["b"], stop["c"]) == (10, 2, 3)


def test_exit_in_another_context_does_not_raise_and_leaves_that_context_clean(seen: Seen) -> None:
    """Exiting in another context than the one entered does not raise and still logs the Stop."""
    log = structlog.get_logger()
    act = etw_activity(log, "Handed")
    ctx = contextvars.copy_context()
    ctx.run(act.__enter__)
    act.__exit__(None, None, None)  # exited here, entered in ctx
    assert current_activity_id() is None
    assert seen[-1][0]["etw_opcode"] == 2


def test_exit_without_enter_is_a_no_op(seen: Seen) -> None:
    """__exit__ without __enter__ logs nothing."""
    act = etw_activity(structlog.get_logger(), "Never")
    act.__exit__(None, None, None)
    assert seen == []


def test_event_key_in_fields_does_not_break_the_start_event(seen: Seen) -> None:
    """An "event" keyword among the fields is ignored: the Start is named by the activity."""
    with etw_activity(structlog.get_logger(), "Evt", event="dropped", x=1):
        pass
    assert seen[0][0] == {"event": "Evt", "x": 1, "etw_opcode": 1}


class TestSharedInstanceAcrossTasks:
    """One ``Activity`` object entered by two overlapping asyncio tasks (or threads) runs one
    activity per task: each Stop carries its own task's id and the fields its own task recorded."""

    def test_two_overlapping_tasks_keep_their_own_ids_and_fields(self, seen: Seen) -> None:
        """Two overlapping tasks in one instance each see their own id and Stop with their own fields."""
        log = structlog.get_logger()
        shared = etw_activity(log, "Shared")

        async def main() -> dict[str, Any]:
            a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()
            ids: dict[str, Any] = {}

            async def task_a() -> None:
                async with shared:
                    ids["a"] = shared.id
                    a_in.set()
                    await b_in.wait()  # B enters while A runs
                    shared.record(who="a")
                    ids["a_seen"] = shared.id
                a_out.set()  # A stops while B still runs

            async def task_b() -> None:
                await a_in.wait()
                async with shared:
                    ids["b"] = shared.id
                    b_in.set()
                    await a_out.wait()
                    shared.record(who="b")
                    ids["b_seen"] = shared.id

            await asyncio.gather(task_a(), task_b())
            return ids

        ids = asyncio.run(main())
        assert ids["a"] != ids["b"]
        assert ids["a_seen"] == ids["a"] and ids["b_seen"] == ids["b"]
        stops = [(event, cur) for event, cur in seen if event["etw_opcode"] == 2]
        assert [(event["who"], cur[0] if cur else None) for event, cur in stops] == [
            ("a", ids["a"].bytes),
            ("b", ids["b"].bytes),
        ]
        assert current_activity_id() is None

    def test_two_threads_in_one_instance_stop_their_own_activities(self, seen: Seen) -> None:
        """Two overlapping threads in one instance each Stop their own activity with their own fields."""
        log = structlog.get_logger()
        shared = etw_activity(log, "Shared")
        first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
        ids: dict[str, Any] = {}

        def first() -> None:
            try:
                with shared:  # enters first, stops first, while the second still runs
                    ids["first"] = shared.id
                    first_in.set()
                    assert second_in.wait(WAIT)
                    shared.record(thread="first")
                    ids["first_seen"] = shared.id  # its own, not the one entered last
            finally:
                first_in.set()  # a failure here must not leave the other thread waiting
                first_out.set()

        def second() -> None:
            try:
                assert first_in.wait(WAIT)
                with shared:
                    ids["second"] = shared.id
                    second_in.set()
                    assert first_out.wait(WAIT)
                    shared.record(thread="second")
            finally:
                second_in.set()

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(2 * WAIT)
        assert not any(t.is_alive() for t in threads), "a thread of the test is stuck"
        stops = [(ev["thread"], cur[0] if cur else None) for ev, cur in seen if ev["etw_opcode"] == 2]
        assert stops == [("first", ids["first"].bytes), ("second", ids["second"].bytes)]
        assert ids["first_seen"] == ids["first"] != ids["second"]


class TestEtwOtelFromData:
    """``etw_otel`` that is neither a bool nor None (e.g. from request data, or an object whose
    ``__bool__`` raises) means the default, counted on a provider; ``etw_activity`` never raises."""

    def test_a_hostile_etw_otel_is_counted_and_the_activity_runs(self) -> None:
        """An etw_otel whose bool() raises is counted invalid, and Start and Stop are still written."""
        from structlog_etw import Provider  # noqa: PLC0415
        from structlog_etw.backends.capture import CaptureBackend  # noqa: PLC0415

        class NoTruth:
            def __bool__(self) -> bool:
                raise RuntimeError("no truth")

        backend = CaptureBackend("Co_Otel")
        provider = Provider("Co_Otel", backend=backend)
        with etw_activity(provider, "Req", etw_otel=NoTruth(), n=1) as act:
            assert act.id is not None
        assert len(backend.records) == 2  # Start and Stop
        assert provider.stats()["invalid"] == {"etw_otel": 1}
        provider.close()
