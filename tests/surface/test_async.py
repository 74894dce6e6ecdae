"""``await log.ainfo(...)``: the chain runs in an executor thread; context and activity follow."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import structlog

from structlog_etw import make_etw_bound_logger
from structlog_etw.context._activity import CURRENT_ACTIVITY
from structlog_etw.testing import EtwCapture
from tests.helpers.surface import SpyRenderer, bound, unique_provider


class ThreadSpy(SpyRenderer):
    """Also records the thread each event dict was rendered on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads: list[int] = []

    def __call__(self, logger: Any, method_name: str, event_dict: Any) -> Any:
        self.threads.append(threading.get_ident())
        return super().__call__(logger, method_name, event_dict)


def _logger(**context: Any) -> tuple[ThreadSpy, Any]:
    spy = ThreadSpy(unique_provider())  # the renderer records what reaches it
    log = bound(
        make_etw_bound_logger(spy),
        [structlog.contextvars.merge_contextvars, spy],
        **context,
    )
    return spy, log


def test_ainfo_writes_the_event_from_an_executor_thread(etw_capture: EtwCapture) -> None:
    """ainfo runs the chain in an executor thread and writes the event, named by its template."""
    spy, log = _logger(user="ann")

    async def main() -> None:
        await log.ainfo("async_login %s", "ok", attempts=2)

    asyncio.run(main())
    (event,) = etw_capture.events
    assert event.name == "async_login %s"  # the template names the event (issue 26, item 8)
    assert event.level == 4
    assert event.fields == {"user": "ann", "attempts": 2, "message": "async_login ok"}
    assert spy.threads != [threading.get_ident()]


def test_every_async_method_exists_and_maps_its_level(etw_capture: EtwCapture) -> None:
    """Every async method (acritical .. adebug, alog) exists and writes at its level."""
    _, log = _logger()

    async def main() -> None:
        await log.acritical("c")
        await log.afatal("f")
        await log.aerror("e")
        await log.awarning("w")
        await log.awarn("w2")
        await log.ainfo("i")
        await log.amsg("m")
        await log.adebug("d")
        await log.alog(25, "l25")

    asyncio.run(main())
    assert [(e.name, e.level) for e in etw_capture.events] == [
        ("c", 1),
        ("f", 1),
        ("e", 2),
        ("w", 3),
        ("w2", 3),
        ("i", 4),
        ("m", 4),
        ("d", 5),
        ("l25", 4),
    ]


def test_contextvars_and_etw_keyword_follow_into_the_executor(etw_capture: EtwCapture) -> None:
    """A task's contextvars and etw_keyword follow into the executor and do not leak out of the task."""
    spy, log = _logger()
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x4)

    async def handle_request() -> None:
        structlog.contextvars.bind_contextvars(request_id="r-9", etw_keyword=0x4)
        await log.ainfo("in_request")

    async def main() -> None:
        await asyncio.create_task(handle_request())
        await log.ainfo("outside_request")  # the task's contextvars did not leak here

    asyncio.run(main())
    (event,) = etw_capture.events
    assert (event.name, event.keyword) == ("in_request", 0x4)
    assert event.fields == {"request_id": "r-9"}
    assert len(spy.calls) == 1


def test_current_activity_follows_into_the_executor(etw_capture: EtwCapture) -> None:
    """The current activity follows into the executor (related id on Start only), not as a field."""
    _, log = _logger()
    activity, related = uuid.uuid4(), uuid.uuid4()

    async def main() -> None:
        token = CURRENT_ACTIVITY.set((activity.bytes, related.bytes))
        try:
            await log.ainfo("start", etw_opcode=1)
            await log.ainfo("in_activity")
        finally:
            CURRENT_ACTIVITY.reset(token)
        await log.ainfo("no_activity")

    asyncio.run(main())
    start, inside, outside = etw_capture.events
    assert (start.activity_id, start.related_id) == (activity, related)  # related id: Start only
    assert (inside.activity_id, inside.related_id) == (activity, None)
    assert (outside.activity_id, outside.related_id) == (None, None)
    # the chain merges structlog's contextvars: the activity must not leak in as a field
    assert inside.fields == {}


def test_aexception_captures_the_exception_before_leaving_the_thread(etw_capture: EtwCapture) -> None:
    """aexception writes level 2 with the exception caught in the caller's thread."""
    _, log = _logger()

    async def main() -> None:
        try:
            raise LookupError("no such user")
        except LookupError:
            await log.aexception("lookup_failed")

    asyncio.run(main())
    (event,) = etw_capture.events
    assert event.level == 2
    assert "LookupError: no such user" in event.fields["exception"]


def test_disabled_async_call_returns_without_running_the_chain(etw_capture: EtwCapture) -> None:
    """Unlistened async calls return None without running the chain or writing."""
    spy, log = _logger()
    etw_capture.set_enabled(False)

    async def main() -> list[Any]:
        return [await log.ainfo("nobody"), await log.aerror("nobody"), await log.aexception("nobody")]

    assert asyncio.run(main()) == [None, None, None]
    assert spy.calls == []
    assert etw_capture.records == []
