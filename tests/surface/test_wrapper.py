"""make_etw_bound_logger: calls nobody listens to return before any event dict exists;
calls someone listens to behave like structlog's own bound logger.  EtwEarlyDrop likewise."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from typing import Any

import pytest
import structlog

from structlog_etw import EtwEarlyDrop, EtwRenderer, make_etw_bound_logger
from structlog_etw.testing import EtwCapture, capture_etw_events
from tests.helpers.surface import Exploding, Spy, SpyRenderer, bound, unique_provider


def _setup(etw_capture: EtwCapture, **wrapper_kw: Any) -> tuple[EtwRenderer, Spy, Any]:
    renderer = SpyRenderer(unique_provider())
    cls = make_etw_bound_logger(renderer, **wrapper_kw)
    return renderer, renderer, cls


def test_disabled_call_builds_no_event_dict_and_formats_nothing(etw_capture: EtwCapture) -> None:
    """When nobody listens every log method returns None without running processors or formatting."""
    renderer, spy, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    log = bound(cls, [renderer])
    arg = Exploding()
    for method in ("debug", "info", "msg", "warning", "warn", "error", "critical", "fatal"):
        assert getattr(log, method)("event %s", arg, user="ann") is None
    assert log.exception("boom") is None
    assert log.log(logging.ERROR, "event %s", arg) is None
    assert spy.calls == []
    assert arg.formatted == 0
    assert etw_capture.records == []


def test_plain_structlog_logger_would_have_run_the_chain(etw_capture: EtwCapture) -> None:
    """The control for the test above: without the wrapper the chain runs while nobody listens."""
    renderer, spy, _ = _setup(etw_capture)
    etw_capture.set_enabled(False)
    log = bound(structlog.make_filtering_bound_logger(logging.NOTSET), [renderer])
    log.info("event")
    assert len(spy.calls) == 1
    assert etw_capture.records == []


def test_enabled_call_runs_processors_and_writes_event(etw_capture: EtwCapture) -> None:
    """A listened call runs the chain with %-formatted message and writes the event named by its template."""
    renderer, spy, cls = _setup(etw_capture)
    log = bound(cls, [renderer], request="r1")
    assert log.warning("user %s logged in", "ann", attempts=3) is None
    # The template names the trace event, the formatted text is the message field (issue 26, 8).
    assert spy.calls == [
        (
            "warning",
            {"request": "r1", "attempts": 3, "message": "user ann logged in", "event": "user %s logged in"},
        )
    ]
    (event,) = etw_capture.events
    assert event.name == "user %s logged in"
    assert event.level == 3
    assert event.keyword == 1
    assert event.fields == {"request": "r1", "attempts": 3, "message": "user ann logged in"}


def test_each_method_writes_at_its_level(etw_capture: EtwCapture) -> None:
    """Each log method and log() with stdlib or custom numeric levels writes at its mapped ETW level."""
    renderer, _, cls = _setup(etw_capture)
    log = bound(cls, [renderer])
    for method in ("critical", "fatal", "error", "exception", "warning", "warn", "info", "msg", "debug"):
        getattr(log, method)(method)
    log.log(logging.INFO, "log")
    log.log(45, "custom45")
    log.log(5, "custom5")
    got = [(e.name, e.level) for e in etw_capture.events]
    assert got == [
        ("critical", 1),
        ("fatal", 1),
        ("error", 2),
        ("exception", 2),
        ("warning", 3),
        ("warn", 3),
        ("info", 4),
        ("msg", 4),
        ("debug", 5),
        ("log", 4),
        ("custom45", 2),
        ("custom5", 5),
    ]


def test_min_level_drops_below_even_when_listening(etw_capture: EtwCapture) -> None:
    """min_level drops calls below it though listened, and is_enabled_for/get_effective_level agree."""
    renderer, spy, cls = _setup(etw_capture, min_level="warning")
    log = bound(cls, [renderer])
    log.debug("d")
    log.info("i")
    log.log(logging.INFO, "l")
    log.warning("w")
    assert [e.name for e in etw_capture.events] == ["w"]
    assert [c[0] for c in spy.calls] == ["warning"]
    log.log(35, "custom35")
    log.log(25, "custom25_below_min")
    assert [e.name for e in etw_capture.events] == ["w", "custom35"]
    assert log.is_enabled_for(logging.WARNING)
    assert not log.is_enabled_for(logging.INFO)
    assert log.get_effective_level() == logging.WARNING


def test_log_with_a_custom_level_at_min_level_is_written(etw_capture: EtwCapture) -> None:
    """log() at a custom level equal to min_level is written, though its ETW level maps below min_level."""
    renderer, _, cls = _setup(etw_capture, min_level=25)
    log = bound(cls, [renderer])
    log.log(25, "custom25")  # >= min_level, maps down to info (which is below min_level)
    log.info("info_below")
    assert [(e.name, e.level) for e in etw_capture.events] == [("custom25", 4)]


def test_per_call_keyword_is_checked_against_its_own_slot(etw_capture: EtwCapture) -> None:
    """A per-call etw_keyword is checked against that keyword's slot, not the default keyword's."""
    renderer, spy, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x4)
    log = bound(cls, [renderer])
    log.info("default_keyword_nobody_listens")
    log.info("keyword4", etw_keyword=0x4)
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("keyword4", 0x4)]
    assert len(spy.calls) == 1


def test_bound_keyword_is_resolved_at_bind_and_after_unbind(etw_capture: EtwCapture) -> None:
    """A bound keyword selects its slot; unbind, try_unbind and new go back to the default keyword's."""
    renderer, spy, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x8)
    log = bound(cls, [renderer])
    k8 = log.bind(etw_keyword=0x8)
    k8.info("bound8")
    k8.unbind("etw_keyword").info("unbound")
    k8.try_unbind("etw_keyword", "missing").info("try_unbound")
    k8.new(user="x").info("new_context")
    k8.bind(etw_keyword=0x8).info("rebound8")
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("bound8", 8), ("rebound8", 8)]
    assert [c[1]["event"] for c in spy.calls] == ["bound8", "rebound8"]


def test_bound_level_override_selects_the_slot(etw_capture: EtwCapture) -> None:
    """A bound or per-call etw_level selects the slot of that level, not the method's."""
    renderer, _, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, level=1)
    log = bound(cls, [renderer])
    log.info("info_nobody_listens")
    log.bind(etw_level=1).info("promoted")
    log.info("promoted_per_call", etw_level=1)
    assert [(e.name, e.level) for e in etw_capture.events] == [("promoted", 1), ("promoted_per_call", 1)]


def test_contextvar_keyword_is_honoured_by_the_fast_path(etw_capture: EtwCapture) -> None:
    """An etw_keyword bound in contextvars selects the slot only while it is bound."""
    renderer, spy, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x10)
    log = bound(cls, [structlog.contextvars.merge_contextvars, renderer])
    log.info("before")
    with structlog.contextvars.bound_contextvars(etw_keyword=0x10):
        log.info("inside")
    log.info("after")
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("inside", 0x10)]
    assert len(spy.calls) == 1


_FRESH_PROCESS = """
import structlog
from structlog_etw import EtwRenderer, make_etw_bound_logger
from structlog_etw.surface._contextvars import WATCH
from structlog_etw.testing import capture_etw_events

with capture_etw_events() as etw_capture:
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x10)
    renderer = EtwRenderer("SurfaceFresh_Cv")
    cls = make_etw_bound_logger(renderer)
    log = structlog.wrap_logger(
        None, wrapper_class=cls, processors=[structlog.contextvars.merge_contextvars, renderer]
    )
    structlog.contextvars.bind_contextvars(request_id="r1")  # no etw_* key: stays off
    log.info("returns_early")
    print("before", bool(WATCH.etw_variables()))
    # The first etw_* key bound through contextvars counts for the class built before it.
    structlog.contextvars.bind_contextvars(etw_keyword=0x10)
    print("after", bool(WATCH.etw_variables()))
    log.info("honoured_by_default")
    later = structlog.wrap_logger(
        None, wrapper_class=make_etw_bound_logger(renderer), processors=[renderer]
    )
    later.info("honoured_by_a_class_built_later")
    print("events", [(e.name, e.keyword) for e in etw_capture.events])
"""


def test_default_fast_path_honours_a_contextvar_keyword_bound_first_after_class_build() -> None:
    """In a fresh process (no ``etw_*`` contextvar yet): a class built before the first
    ``bind_contextvars(etw_keyword=...)`` honours it from the next call on (structlog's registry
    grew, so the fast path looks at the new variable)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS],
        capture_output=True,
        text=True,
        cwd=root,
        check=True,
        timeout=120,
    )
    assert out.stdout.splitlines() == [
        "before False",
        "after True",
        "events [('honoured_by_default', 16), ('honoured_by_a_class_built_later', 16)]",
    ]


def test_default_fast_path_honours_contextvars_and_keeps_call_keys_exact(etw_capture: EtwCapture) -> None:
    """Call > bound > contextvars: the contextvar keyword counts by default, a per-call one wins."""
    renderer, spy, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x10)
    log = bound(cls, [structlog.contextvars.merge_contextvars, renderer])
    with structlog.contextvars.bound_contextvars(etw_keyword=0x10):
        log.info("contextvar_key_is_honoured")
        log.info("per_call_key_wins", etw_keyword=0x20)
    with structlog.contextvars.bound_contextvars(etw_keyword=0x20):
        log.info("per_call_key_is_exact", etw_keyword=0x10)
    assert [(e.name, e.keyword) for e in etw_capture.events] == [
        ("contextvar_key_is_honoured", 0x10),
        ("per_call_key_is_exact", 0x10),
    ]
    assert len(spy.calls) == 2


def test_contextvar_level_is_honoured_by_default(etw_capture: EtwCapture) -> None:
    """An etw_level bound in contextvars selects the slot of that level."""
    renderer, _, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, level=1)
    log = bound(cls, [renderer])
    with structlog.contextvars.bound_contextvars(etw_level=1):
        log.debug("promoted_by_contextvar")
    assert [(e.name, e.level) for e in etw_capture.events] == [("promoted_by_contextvar", 1)]


def test_bound_keyword_wins_over_contextvar(etw_capture: EtwCapture) -> None:
    """A bound etw_keyword wins over the contextvars one: its unlistened slot drops the call."""
    renderer, _, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x10)
    log = bound(cls, [structlog.contextvars.merge_contextvars, renderer], etw_keyword=0x20)
    with structlog.contextvars.bound_contextvars(etw_keyword=0x10):
        log.info("bound_wins")
    assert etw_capture.records == []


def test_invalid_bound_keyword_falls_back_and_never_raises(etw_capture: EtwCapture) -> None:
    """A bad bound or per-call etw_keyword falls back to the default, never raises, and is counted invalid."""
    renderer, _, cls = _setup(etw_capture)
    log = bound(cls, [renderer], etw_keyword="not-a-keyword")
    log.info("fallback")
    log.info("fallback_call", etw_keyword=-1)
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("fallback", 1), ("fallback_call", 1)]
    assert renderer.provider.stats()["invalid"]["etw_keyword"] == 2


def test_exception_adds_formatted_traceback(etw_capture: EtwCapture) -> None:
    """exception() passes exc_info=True down the chain and writes level 2 with the formatted traceback."""
    renderer, spy, cls = _setup(etw_capture)
    log = bound(cls, [renderer])
    try:
        raise ValueError("bad input")
    except ValueError:
        log.exception("failed", step=2)
    assert spy.calls[0][1]["exc_info"] is True
    (event,) = etw_capture.events
    assert event.level == 2
    assert event.fields["step"] == 2
    assert "ValueError: bad input" in event.fields["exception"]
    assert "Traceback (most recent call last)" in event.fields["exception"]


def test_class_built_before_capture_follows_the_new_backend() -> None:
    """Slots are resolved at bind time but re-pointed in place when the backend changes."""
    renderer = EtwRenderer(unique_provider())
    cls = make_etw_bound_logger(renderer)
    log = bound(cls, [renderer])
    log.info("before_capture")
    with capture_etw_events() as cap:
        log.info("during_capture")
        cap.set_enabled(False)
        log.info("disabled_in_capture")
    assert [e.name for e in cap.events] == ["during_capture"]


def test_provider_name_and_default_keyword(etw_capture: EtwCapture) -> None:
    """A wrapper made from a provider name uses its default_keyword's slot."""
    name = unique_provider()
    cls = make_etw_bound_logger(name, default_keyword=0x40)
    renderer = EtwRenderer(name, default_keyword=0x40)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x40)
    bound(cls, [renderer]).info("k40")
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("k40", 0x40)]


def test_setup_errors_are_clear() -> None:
    """Bad default_keyword, min_level, keyword map values or provider names raise ValueError/TypeError."""
    with pytest.raises(ValueError, match="default_keyword"):
        make_etw_bound_logger(unique_provider(), default_keyword=-1)
    with pytest.raises(ValueError, match="min_level"):
        make_etw_bound_logger(unique_provider(), min_level="chatty")
    with pytest.raises(TypeError):
        make_etw_bound_logger(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keyword"):
        make_etw_bound_logger(unique_provider(), keywords_by_logger={"db": 2**64})
    with pytest.raises(ValueError):
        make_etw_bound_logger("not a valid name!")


def test_early_drop_stops_the_chain_when_nobody_listens(etw_capture: EtwCapture) -> None:
    """EtwEarlyDrop stops the chain when nobody listens and lets per-call or contextvar keywords through."""
    renderer = EtwRenderer(unique_provider())
    spy = Spy()
    chain = [EtwEarlyDrop(renderer), spy, renderer]
    log = bound(structlog.make_filtering_bound_logger(logging.NOTSET), chain)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x2)
    log.info("dropped_early")
    log.info("passes", etw_keyword=0x2)
    with structlog.contextvars.bound_contextvars(etw_keyword=0x2):
        log.info("passes_contextvar")
    assert [c[1]["event"] for c in spy.calls] == ["passes", "passes_contextvar"]
    # the renderer reads contextvar control keys itself, merged or not
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("passes", 2), ("passes_contextvar", 2)]


def test_early_drop_reads_contextvars_before_merge(etw_capture: EtwCapture) -> None:
    """EtwEarlyDrop placed before merge_contextvars still honours a contextvars keyword."""
    renderer = EtwRenderer(unique_provider())
    chain = [EtwEarlyDrop(renderer), structlog.contextvars.merge_contextvars, renderer]
    log = bound(structlog.make_filtering_bound_logger(logging.NOTSET), chain)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x2)
    with structlog.contextvars.bound_contextvars(etw_keyword=0x2):
        log.info("contextvar_keyword")
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("contextvar_keyword", 2)]


class _CountingSlot:
    """Wraps a provider's ``slot`` method to count per-event slot resolutions."""

    def __init__(self, provider: Any) -> None:
        self.calls = 0
        self._slot = provider.slot

    def __call__(self, level: int, keyword: int) -> Any:
        self.calls += 1
        return self._slot(level, keyword)


def test_early_drop_without_control_keys_resolves_no_slot_per_event(
    etw_capture: EtwCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events without ``etw_*`` keys use the slots prebuilt per method (and per name keyword)."""
    renderer = EtwRenderer(unique_provider(), keywords_by_logger={"db": 0x4})
    drop = EtwEarlyDrop(renderer)
    spy = Spy()
    counting = _CountingSlot(renderer.provider)
    monkeypatch.setattr(renderer.provider, "slot", counting)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, level=2)
    etw_capture.set_enabled(True, keyword=0x4)
    plain = bound(structlog.make_filtering_bound_logger(logging.NOTSET), [drop, spy])
    db = bound(structlog.make_filtering_bound_logger(logging.NOTSET), [drop, spy], logger="db.pool")
    for _ in range(3):
        plain.info("dropped")
        plain.error("kept_error")
        plain.msg("dropped_msg")
        db.debug("kept_db")
    assert counting.calls == 0
    assert [c[1]["event"] for c in spy.calls] == ["kept_error", "kept_db"] * 3


def test_early_drop_with_control_keys_is_exact(etw_capture: EtwCapture) -> None:
    """EtwEarlyDrop with etw_level/etw_keyword keys passes exactly the calls whose slot is listened."""
    renderer = EtwRenderer(unique_provider(), keywords_by_logger={"db": 0x4})
    spy = Spy()
    log = bound(structlog.make_filtering_bound_logger(logging.NOTSET), [EtwEarlyDrop(renderer), spy])
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, level=1, keyword=0x8)
    log.info("dropped")
    log.info("promoted", etw_level=1, etw_keyword=0x8)
    log.info("wrong_keyword", etw_level=1)
    log.info("invalid_level_falls_back", etw_level="x", etw_keyword=0x8)
    with structlog.contextvars.bound_contextvars(etw_level=1):
        log.info("contextvar_level", etw_keyword=0x8)
    assert [c[1]["event"] for c in spy.calls] == ["promoted", "contextvar_level"]


def test_is_etw_enabled_reports_the_slot(etw_capture: EtwCapture) -> None:
    """is_etw_enabled(method) reports whether that method's level slot is enabled now."""
    renderer, _, cls = _setup(etw_capture)
    log = bound(cls, [renderer])
    assert log.is_etw_enabled("info")
    etw_capture.set_enabled(False, level=4)
    assert not log.is_etw_enabled("info")
    assert log.is_etw_enabled("error")


# --- one rule with the renderer: the wrapper never drops an event the renderer would write ---------


def test_invalid_call_level_means_the_method_level_not_the_bound_one(etw_capture: EtwCapture) -> None:
    """Bound ``etw_level=1`` (nobody listens) and a bad per-call ``etw_level``: the renderer writes
    at the method's level (4, listened to), so the wrapper must let the call through."""
    renderer, _, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, level=4)
    log = bound(cls, [renderer], etw_level=1)
    log.info("bad_level", etw_level="x")
    assert [(e.name, e.level) for e in etw_capture.events] == [("bad_level", 4)]
    assert renderer.provider.stats()["invalid"] == {"etw_level": 1}


def test_invalid_call_keyword_is_not_replaced_by_the_bound_keyword(etw_capture: EtwCapture) -> None:
    """Bound ``etw_keyword=0x2`` (nobody listens) and a bad per-call one: the renderer writes at
    the default keyword (listened to), so the wrapper must let the call through."""
    renderer, spy, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=1)
    log = bound(cls, [renderer], etw_keyword=0x2)
    log.info("bound_keyword")
    log.info("bad_keyword", etw_keyword=-1)
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("bad_keyword", 1)]
    assert [c[1]["event"] for c in spy.calls] == ["bad_keyword"]


def test_bound_invalid_keyword_hides_a_contextvar_keyword(etw_capture: EtwCapture) -> None:
    """A bound value, even an invalid one, is the first place: contextvars do not count then."""
    renderer, spy, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x2)
    log = bound(cls, [renderer], etw_keyword="bad", etw_level=4)
    with structlog.contextvars.bound_contextvars(etw_keyword=0x2):
        log.info("dropped_early")
    assert etw_capture.records == []
    assert spy.calls == []


def test_per_call_logger_name_selects_its_keyword(etw_capture: EtwCapture) -> None:
    """A per-call logger= name selects its keywords_by_logger keyword for the enable check."""
    renderer = SpyRenderer(unique_provider(), keywords_by_logger={"db": 0x4})
    cls = make_etw_bound_logger(renderer)
    spy = renderer
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x4)
    log = bound(cls, [renderer])
    log.info("no_name")
    log.info("named_per_call", logger="db.pool")
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("named_per_call", 0x4)]
    assert [c[1]["event"] for c in spy.calls] == ["named_per_call"]


def test_early_drop_invalid_keyword_means_the_default_not_the_contextvar(etw_capture: EtwCapture) -> None:
    """EtwEarlyDrop takes a bad per-call keyword as the default keyword, not the contextvars one."""
    renderer = EtwRenderer(unique_provider())
    spy = Spy()
    log = bound(
        structlog.make_filtering_bound_logger(logging.NOTSET), [EtwEarlyDrop(renderer), spy, renderer]
    )
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=1)
    with structlog.contextvars.bound_contextvars(etw_keyword=0x2):
        log.info("bad_keyword", etw_keyword="x")
        log.info("contextvar_keyword")
    assert [c[1]["event"] for c in spy.calls] == ["bad_keyword"]
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("bad_keyword", 1)]


@pytest.mark.parametrize("method", ["debug", "info", "warning", "error", "critical"])
def test_async_methods_make_the_same_decision_as_sync_ones(etw_capture: EtwCapture, method: str) -> None:
    """Every async method (adebug .. acritical) drops and passes the same calls as its sync twin."""
    renderer, spy, cls = _setup(etw_capture)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x2)
    log = bound(cls, [renderer])

    async def run() -> None:
        await getattr(log, "a" + method)("dropped")
        await getattr(log, "a" + method)("kept", etw_keyword=0x2)
        with structlog.contextvars.bound_contextvars(etw_keyword=0x2):
            await getattr(log, "a" + method)("kept_by_contextvar")

    asyncio.run(run())
    assert [c[1]["event"] for c in spy.calls] == ["kept", "kept_by_contextvar"]


class TestBindTimeClasses:
    """A logger's class follows its chain's plan, chosen when it is bound (structlog's
    bind/unbind/new all build a new logger), never per call: one class per chain plan of a
    configuration, built once, every one a subclass of the class the factory returned."""

    def test_loggers_of_one_chain_share_one_class_whatever_they_bind(self, etw_capture: EtwCapture) -> None:
        """Bound ``etw_*`` keys no longer pick a class: the class is the chain's, and the same
        arguments give the same factory class."""
        renderer, _, cls = _setup(etw_capture)
        plain = bound(cls, [renderer])
        assert isinstance(plain, cls) and type(plain) is not cls
        keyed = plain.bind(etw_keyword=0x4)
        assert type(keyed) is type(plain)
        assert type(keyed.unbind("etw_keyword")) is type(plain)
        assert type(keyed.new(user="ann")) is type(plain)
        assert type(bound(cls, [renderer])) is type(plain)  # another list, the same plan
        assert make_etw_bound_logger(renderer) is cls

    def test_each_logger_decides_with_its_own_slots(self, etw_capture: EtwCapture) -> None:
        """A bound keyword selects the slot of that logger; unbinding it goes back to the default."""
        renderer, _, cls = _setup(etw_capture)
        etw_capture.set_enabled(False)
        etw_capture.set_enabled(True, keyword=0x4)
        plain = bound(cls, [renderer])
        plain.info("default_keyword")  # keyword 1: nobody listens
        keyed = plain.bind(etw_keyword=0x4)
        keyed.info("bound_keyword")
        keyed.unbind("etw_keyword").info("default_again")
        assert [(e.name, e.keyword) for e in etw_capture.events] == [("bound_keyword", 0x4)]

    def test_with_keywords_by_logger_every_logger_resolves_its_name(self, etw_capture: EtwCapture) -> None:
        """The renderer's map gives a named logger its keyword, unnamed ones the default."""
        renderer = EtwRenderer(unique_provider(), keywords_by_logger={"db": 0x2})
        cls = make_etw_bound_logger(renderer)  # the renderer's map
        etw_capture.set_enabled(False)
        etw_capture.set_enabled(True, keyword=0x2)
        log = bound(cls, [renderer])
        log.info("unnamed")
        log.bind(logger="db").info("named")
        assert [(e.name, e.keyword) for e in etw_capture.events] == [("named", 0x2)]


#: The wrapper's decisions, by the name the tests give the chain that makes them.
_DECISIONS: dict[str, str] = {"run": "run the chain", "skip": "skip", "direct": "direct write"}


def _logger_deciding(chain: str, **context: Any) -> tuple[SpyRenderer | None, Any]:
    """A bound logger whose plan makes decision ``_DECISIONS[chain]`` at info level (checked),
    and the spy renderer that sees its events (None for the direct write, which calls no
    renderer: a subclass's ``__call__`` must run, so only the plain renderer is written directly)."""
    provider = EtwRenderer(unique_provider()).provider
    name = provider.name
    spy: SpyRenderer | None = None
    if chain == "run":  # a renderer that passes every level on: the chain runs for each call
        spy = SpyRenderer(name, provider=provider, passthrough="debug")
        processors: list[Any] = [spy, structlog.processors.JSONRenderer()]
    elif chain == "skip":
        spy = SpyRenderer(name, provider=provider)
        processors = [spy]
    else:
        processors = [structlog.contextvars.merge_contextvars, EtwRenderer(name, provider=provider)]
    log = bound(make_etw_bound_logger(processors[-1] if spy is None else spy), processors, **context)
    assert type(log)._etw_plan.decisions[4] == _DECISIONS[chain]
    return spy, log


class TestEventKeyword:
    """The log methods take ``self`` and ``event`` positional-only (the keywords of a call are
    then never compared with parameter names: the disabled path's cost); a call that passes its
    event as ``event=`` still means what it means to structlog, on every decision."""

    @pytest.mark.parametrize("chain", list(_DECISIONS))
    def test_event_keyword_is_the_event(self, etw_capture: EtwCapture, chain: str) -> None:
        """``log.info(event="x", a=1)`` gives the event dict and trace event of ``log.info("x", a=1)``."""
        spy, log = _logger_deciding(chain, request="r1")
        log.info(event="user_login", attempts=3)
        log.info("user_login", attempts=3)
        first, second = etw_capture.events
        fields = {"request": "r1", "attempts": 3}
        assert (first.name, first.fields) == (second.name, second.fields) == ("user_login", fields)
        if spy is not None:
            assert spy.calls[0] == spy.calls[1] == ("info", {**fields, "event": "user_login"})

    def test_event_keyword_with_args_and_async(self, etw_capture: EtwCapture) -> None:
        """The keyword event takes ``%``-arguments and the async methods' path too."""
        renderer, _spy, cls = _setup(etw_capture)
        log = bound(cls, [renderer])
        log.warning("user %s", "ann", n=1)
        asyncio.run(log.ainfo(event="async_event", n=2))
        assert [(e.name, e.fields) for e in etw_capture.events] == [
            ("user %s", {"n": 1, "message": "user ann"}),
            ("async_event", {"n": 2}),
        ]

    def test_event_given_twice_keeps_the_positional_one_and_counts_it(self, etw_capture: EtwCapture) -> None:
        """``log.info("a", event="b")`` (a ``TypeError`` for structlog's signature) never raises:
        the positional event is written, the keyword counted in ``stats()["invalid"]["event"]``."""
        renderer, _spy, cls = _setup(etw_capture)
        log = bound(cls, [renderer])
        assert log.info("a", event="b", n=1) is None
        assert log.exception("c", event="d") is None
        assert [e.name for e in etw_capture.events] == ["a", "c"]
        assert renderer.provider.stats()["invalid"]["event"] == 2

    def test_disabled_call_with_event_keyword_returns_none(self, etw_capture: EtwCapture) -> None:
        """Nobody listening: any spelling of the call returns ``None`` before the chain."""
        renderer, spy, cls = _setup(etw_capture)
        etw_capture.set_enabled(False)
        log = bound(cls, [renderer])
        assert log.info(event="x") is None
        assert log.info("a", event="b") is None
        assert spy.calls == []
        assert renderer.provider.stats()["invalid"].get("event", 0) == 0

    @pytest.mark.parametrize("chain", list(_DECISIONS))
    def test_keys_named_like_parameters_are_fields(self, etw_capture: EtwCapture, chain: str) -> None:
        """``self=``, ``method_name=`` (parameters of structlog's ``_proxy_to_logger``) are fields
        of the trace event on every decision, sync and async, never a ``TypeError``."""
        _, log = _logger_deciding(chain)
        log.info("a", self=1, method_name=2)
        log.exception("b", self=3)
        asyncio.run(log.ainfo("c", method_name=4))
        got = [(e.name, e.fields.get("self"), e.fields.get("method_name")) for e in etw_capture.events]
        assert got == [("a", 1, 2), ("b", 3, None), ("c", None, 4)]
