"""The structlog surface against a real kernel, captured by real perf (marker ``kernel``).

Events from the stdlib handler (foreign and structlog-routed records) and from ``await
log.ainfo(...)`` reach perf intact (name, level, keyword, fields, activity ids); the wrapper's
fast path follows the kernel's enable words (the chain runs only while perf records), and its
direct-write path's events arrive as the chain's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from kernel_harness import PerfSession, wait_until

from structlog_etw import EtwHandler, EtwRenderer, get_provider, make_etw_bound_logger
from structlog_etw.context._activity import CURRENT_ACTIVITY

pytestmark = pytest.mark.kernel

PerfFactory = Callable[..., PerfSession]


class Spy(EtwRenderer):
    """A renderer that records the events that reached it (a processor of the application's own
    before the renderer would see every call: the wrapper runs such a chain, listening or not)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[str] = []

    def __call__(self, logger: Any, method_name: str, event_dict: Any) -> Any:
        self.events.append(str(event_dict.get("event")))
        return super().__call__(logger, method_name, event_dict)


def _ours(session: PerfSession, provider: str) -> list[Any]:
    return [e for e in session.events() if e.provider == provider]


def test_stdlib_handler_events_reach_perf_intact(provider_name: str, perf_session: PerfFactory) -> None:
    """EtwHandler records reach perf with level, logger keyword, message, record facts and exception."""
    handler = EtwHandler(provider_name, keywords_by_logger={"surface.db": 0x2})
    foreign = logging.Logger("surface.http", level=logging.DEBUG)
    db = logging.Logger("surface.db.pool", level=logging.DEBUG)
    routed = logging.Logger("surface.routed", level=logging.DEBUG)
    for logger in (foreign, db, routed):
        logger.addHandler(handler)
    slog = structlog.wrap_logger(
        routed,
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
    )
    tracepoints = [f"{provider_name}_L3K1", f"{provider_name}_L4K1", f"{provider_name}_L2K2"]
    with perf_session(tracepoints) as session:
        foreign.warning("disk %s at %d%%", "/var", 93, extra={"host": "db1"})
        try:
            raise KeyError("order-7")
        except KeyError:
            db.exception("lookup failed")
        slog.info("charge_captured", amount_cents=1299, currency="EUR", ok=True)
        foreign.debug("not recorded: level 5 is not in the session")
    events = _ours(session, provider_name)
    assert [(e.name, e.level, e.keyword) for e in events] == [
        ("disk %s at %d%%", 3, 0x1),
        ("lookup failed", 2, 0x2),
        ("charge_captured", 4, 0x1),
    ]
    disk, failed, charge = events
    assert disk.fields["message"] == "disk /var at 93%"
    assert disk.fields["logger"] == "surface.http"
    assert disk.fields["host"] == "db1"
    assert disk.fields["funcName"] == "test_stdlib_handler_events_reach_perf_intact"
    assert isinstance(disk.fields["lineno"], int)
    assert disk.fields["module"] == "test_surface_kernel"
    assert disk.fields["pathname"] == __file__
    assert "KeyError: 'order-7'" in failed.fields["exception"]
    assert charge.fields == {"amount_cents": 1299, "currency": "EUR", "ok": True}
    assert handler.errors == 0
    assert get_provider(provider_name).stats()["errors"] == {}


def test_ainfo_events_reach_perf_with_context_and_activity(
    provider_name: str, perf_session: PerfFactory
) -> None:
    """Async log calls reach perf with contextvars, keyword and activity; disabled ones skip the chain."""
    renderer = spy = Spy(provider_name, keywords=(0x4,))
    log = structlog.wrap_logger(
        structlog.ReturnLogger(),
        wrapper_class=make_etw_bound_logger(renderer),
        processors=[structlog.contextvars.merge_contextvars, renderer],
    ).bind(service="checkout")
    activity, related = uuid.uuid4(), uuid.uuid4()

    async def request() -> None:
        structlog.contextvars.bind_contextvars(request_id="r-42", etw_keyword=0x4)
        token = CURRENT_ACTIVITY.set((activity.bytes, related.bytes))
        try:
            await log.ainfo("request_done", status=204, ms=12.5)
        finally:
            CURRENT_ACTIVITY.reset(token)
        await log.adebug("not_recorded")  # L5K4: not in the session

    async def main() -> None:
        await asyncio.create_task(request())
        await log.awarning("outside_request")  # keyword 1: the task's contextvars stay in the task

    with perf_session([f"{provider_name}_L4K4", f"{provider_name}_L3K1"]) as session:
        asyncio.run(main())
    events = _ours(session, provider_name)
    assert [(e.name, e.level, e.keyword) for e in events] == [
        ("request_done", 4, 0x4),
        ("outside_request", 3, 0x1),
    ]
    done, outside = events
    assert done.fields == {"service": "checkout", "request_id": "r-42", "status": 204, "ms": 12.5}
    assert (done.activity_id, done.related_id) == (activity, None)  # related: Start events only
    assert outside.fields == {"service": "checkout"}
    assert outside.activity_id is None
    assert spy.events == ["request_done", "outside_request"]  # the disabled adebug never ran the chain


def test_wrapper_runs_the_chain_only_while_perf_records(
    provider_name: str, perf_session: PerfFactory
) -> None:
    """The ETW bound logger runs the processor chain only while perf records the event's tracepoint."""
    renderer = spy = Spy(provider_name)
    log = structlog.wrap_logger(
        structlog.ReturnLogger(), wrapper_class=make_etw_bound_logger(renderer), processors=[renderer]
    ).bind(pid=os.getpid())
    slot = renderer.provider.slot(4, 1)
    log.info("before")
    with perf_session([f"{provider_name}_L4K1"]) as session:
        log.info("during")
    wait_until(lambda: slot.word[0] == 0, what="the enable word to clear after perf exits")
    log.info("after")
    assert spy.events == ["during"]
    assert [e.name for e in _ours(session, provider_name)] == ["during"]


def test_structlog_logger_name_selects_keyword_in_perf(provider_name: str, perf_session: PerfFactory) -> None:
    """A logger name (bound or from LoggerFactory) selects its keyword's tracepoint in perf."""
    renderer = spy = Spy(provider_name, keywords_by_logger={"db": 0x2})
    wrapper = make_etw_bound_logger(renderer)
    bound_db = structlog.wrap_logger(
        structlog.ReturnLogger(), wrapper_class=wrapper, processors=[renderer]
    ).bind(logger="db.pool")
    # A stdlib logger from structlog's LoggerFactory: the keyword comes from its name.
    factory_db = structlog.wrap_logger(
        structlog.stdlib.LoggerFactory()("db"), wrapper_class=wrapper, processors=[renderer]
    )
    http = structlog.wrap_logger(structlog.ReturnLogger(), wrapper_class=wrapper, processors=[renderer]).bind(
        logger="http"
    )
    with perf_session([f"{provider_name}_L4K2"]) as session:
        bound_db.info("query_done", rows=3)
        factory_db.info("pool_checkout", size=5)
        http.info("not_recorded")  # keyword 1: nobody listens, the fast path returns early
    events = _ours(session, provider_name)
    assert [(e.name, e.level, e.keyword) for e in events] == [
        ("query_done", 4, 0x2),
        ("pool_checkout", 4, 0x2),
    ]
    ours = [s.name for s in session.samples() if s.name.startswith(f"user_events:{provider_name}_")]
    assert ours == [f"user_events:{provider_name}_L4K2"] * 2
    assert events[0].fields == {"logger": "db.pool", "rows": 3}
    assert events[1].fields == {"size": 5}
    assert spy.events == ["query_done", "pool_checkout"]


def test_direct_write_events_reach_perf_as_the_chains_do(
    provider_name: str, perf_session: PerfFactory
) -> None:
    """``[merge_contextvars, renderer]`` is written without running the chain: in perf its events
    equal, field by field, those of the same calls through structlog's own chain machinery."""
    renderer = EtwRenderer(provider_name)
    chain = [structlog.contextvars.merge_contextvars, renderer]
    direct = structlog.wrap_logger(
        structlog.ReturnLogger(), wrapper_class=make_etw_bound_logger(renderer), processors=chain
    ).bind(service="checkout")
    through_chain = structlog.wrap_logger(
        structlog.ReturnLogger(),
        wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET),
        processors=chain,
    ).bind(service="checkout")
    with perf_session([f"{provider_name}_L4K1", f"{provider_name}_L2K1"]) as session:
        for log in (direct, through_chain):
            with structlog.contextvars.bound_contextvars(request_id="r-7"):
                log.info("user_login", user="ann", attempts=3, latency_ms=12.5, ok=True)
            if log is direct:  # the template names the event, the text is its message field
                log.error("disk at %d%%", 100, device="sda")
            else:  # structlog's own chain formats the name: it is given what ours writes
                log.error("disk at %d%%", device="sda", message="disk at 100%")
    events = _ours(session, provider_name)
    assert len(events) == 4
    first, second = events[:2], events[2:]
    assert [(e.name, e.level, e.keyword, e.fields) for e in first] == [
        (e.name, e.level, e.keyword, e.fields) for e in second
    ]
    assert first[0].fields == {
        "service": "checkout",
        "user": "ann",
        "attempts": 3,
        "latency_ms": 12.5,
        "ok": True,
        "request_id": "r-7",
    }
    assert (first[1].name, first[1].level, first[1].fields["message"]) == ("disk at %d%%", 2, "disk at 100%")
