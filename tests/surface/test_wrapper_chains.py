"""make_etw_bound_logger reads the chain it would run: it skips a call only when that chain ends in
its EtwRenderer (or passes on nothing below a level), writes an ETW-only chain's events directly,
and behaves like structlog's make_filtering_bound_logger with any other chain.  A log call never
raises, also with %-args that do not fit the event text."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture, capture_logs

from structlog_etw import EtwRenderer, Provider, etw_activity, get_provider, make_etw_bound_logger
from structlog_etw.backends.capture import CaptureRecord
from structlog_etw.backends.null import NullBackend
from structlog_etw.testing import EtwCapture, capture_etw_events, decode_record
from tests.helpers.surface import Spy, SpyRenderer, bound, unique_provider


@pytest.fixture
def structlog_config() -> Iterator[None]:
    """structlog's global configuration, restored after the test."""
    structlog.reset_defaults()
    try:
        yield
    finally:
        structlog.reset_defaults()


def _configure_etw_only(renderer: EtwRenderer, *, cache: bool = False) -> None:
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, renderer],
        wrapper_class=make_etw_bound_logger(renderer),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=cache,
    )


# --- capture_logs(), LogCapture, a reconfigured application ------------------------------------


@pytest.mark.usefixtures("structlog_config")
@pytest.mark.parametrize("listening", [False, True])
def test_capture_logs_captures_with_the_wrapper_class(etw_capture: EtwCapture, listening: bool) -> None:
    """Listened or not, capture_logs() captures every call made through the wrapper class, none written."""
    renderer = EtwRenderer(unique_provider())
    etw_capture.set_enabled(listening)
    _configure_etw_only(renderer)
    log = structlog.get_logger()
    with capture_logs() as logs:
        log.info("user_login", user="ann")
        log.debug("detail %s", "x")
        structlog.get_logger().bind(request="r1").warning("slow", ms=12)
    assert logs == [
        {"event": "user_login", "user": "ann", "log_level": "info"},
        {"event": "detail x", "log_level": "debug"},
        {"request": "r1", "event": "slow", "ms": 12, "log_level": "warning"},
    ]
    assert etw_capture.records == []  # the chain was LogCapture alone: nothing reached the renderer


@pytest.mark.usefixtures("structlog_config")
def test_capture_logs_captures_a_logger_bound_and_cached_before_it(etw_capture: EtwCapture) -> None:
    """capture_logs() replaces the contents of the configured list in place: a logger bound before
    (or cached on first use) holds that list and must see the change on its next call."""
    renderer = EtwRenderer(unique_provider())
    etw_capture.set_enabled(False)
    _configure_etw_only(renderer, cache=True)
    cached = structlog.get_logger()
    cached.info("warm_up")  # cached on first use
    held = structlog.get_logger().bind(user="ann")
    keyed = held.bind(etw_keyword=0x2)  # the per-logger class
    with capture_logs() as logs:
        cached.info("from_cached")
        held.info("from_held", n=1)
        keyed.error("from_keyed")
    assert [e["event"] for e in logs] == ["from_cached", "from_held", "from_keyed"]
    assert logs[1] == {"user": "ann", "n": 1, "event": "from_held", "log_level": "info"}
    # outside capture_logs the chain ends in the renderer again: the call is skipped
    spy_calls = len(logs)
    held.info("skipped_again")
    assert len(logs) == spy_calls
    etw_capture.set_enabled(True)
    held.info("written_again")
    assert [e.name for e in etw_capture.events] == ["written_again"]


def test_log_capture_processor_sees_every_call_above_min_level(etw_capture: EtwCapture) -> None:
    """A LogCapture chain sees every call at or above min_level though nobody listens."""
    renderer = EtwRenderer(unique_provider())
    etw_capture.set_enabled(False)
    cap = LogCapture()
    log = bound(make_etw_bound_logger(renderer, min_level="info"), [cap])
    log.debug("below_min_level")
    log.info("kept", a=1)
    log.log(logging.ERROR, "kept_by_number")
    log.exception("kept_exception")
    assert [(e["event"], e["log_level"]) for e in cap.entries] == [
        ("kept", "info"),
        ("kept_by_number", "error"),
        ("kept_exception", "error"),
    ]


def test_a_chain_without_an_etw_renderer_behaves_like_make_filtering_bound_logger(
    etw_capture: EtwCapture,
) -> None:
    """A chain without an EtwRenderer returns what make_filtering_bound_logger returns, level for level."""
    renderer = EtwRenderer(unique_provider())
    etw_capture.set_enabled(False)
    chain = [structlog.processors.JSONRenderer()]
    ours = bound(make_etw_bound_logger(renderer, min_level="info"), chain, request="r1")
    theirs = bound(structlog.make_filtering_bound_logger(logging.INFO), chain, request="r1")
    for log in (ours, theirs):
        assert log.debug("below") is None
    assert ours.info("user %s", "ann", n=1) == theirs.info("user %s", "ann", n=1)
    assert ours.info("user %s", "ann", n=1) == '{"request": "r1", "n": 1, "event": "user ann"}'
    assert ours.warning("w") == theirs.warning("w")


def test_a_renderer_of_another_provider_at_the_end_is_not_skipped_for(etw_capture: EtwCapture) -> None:
    """The wrapper can only answer for its own provider's slots."""
    ours = EtwRenderer(unique_provider())
    other = EtwRenderer(unique_provider())
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x8)
    spy = Spy()
    log = bound(make_etw_bound_logger(ours), [spy, other])
    log.info("runs_the_chain")
    assert [c[1]["event"] for c in spy.calls] == ["runs_the_chain"]


def test_an_etw_only_chain_is_still_skipped_before_any_processor(etw_capture: EtwCapture) -> None:
    """The control of the tests above: the chain ending in the renderer is skipped when nobody
    listens (the renderer, a spy, sees nothing; so would structlog's pure processors before it)."""
    renderer = SpyRenderer(unique_provider())
    etw_capture.set_enabled(False)
    log = bound(make_etw_bound_logger(renderer), [structlog.processors.add_log_level, renderer])
    log.info("skipped")
    assert renderer.calls == []


def test_a_chain_emptied_later_runs_and_never_raises(etw_capture: EtwCapture) -> None:
    """A chain emptied after binding runs (as structlog's own logger does) and never raises."""
    renderer = EtwRenderer(unique_provider())
    etw_capture.set_enabled(False)
    chain: list[Any] = [renderer]
    log = bound(make_etw_bound_logger(renderer), chain)
    chain.clear()
    theirs = bound(structlog.make_filtering_bound_logger(logging.NOTSET), [])
    assert log.info("no_chain", n=1) == theirs.info("no_chain", n=1) == ((), {"n": 1, "event": "no_chain"})


# --- %-args that do not fit ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "args"),
    [
        ("disk at 100%", ("sda",)),  # ValueError: incomplete format
        ("no placeholder", ("sda",)),  # TypeError: not all arguments converted
        ("%d items", ("many",)),  # TypeError: a number is required
        ("%(name)s", ({"other": 1},)),  # KeyError
    ],
)
def test_bad_percent_args_are_written_as_a_field_and_counted(
    etw_capture: EtwCapture, event: str, args: tuple[Any, ...]
) -> None:
    """Every %-args that do not fit the template: the event is written with format_args and counted."""
    renderer = EtwRenderer(unique_provider())
    log = bound(make_etw_bound_logger(renderer), [structlog.contextvars.merge_contextvars, renderer])
    assert log.info(event, *args, user="ann") is None
    (written,) = etw_capture.events
    assert written.name == event
    assert written.fields["user"] == "ann"
    assert "format_args" in written.fields
    assert renderer.provider.stats()["invalid"] == {"format_args": 1}


def test_bad_percent_args_never_raise_in_any_chain_or_method(etw_capture: EtwCapture) -> None:
    """Misfitting %-args never raise in any chain or method, sync or async; each is counted once."""
    renderer = EtwRenderer(unique_provider())
    cap = LogCapture()
    cls = make_etw_bound_logger(renderer)
    composed = EtwRenderer(renderer.provider.name, provider=renderer.provider, passthrough="warning")
    for chain in ([renderer], [Spy(), renderer], [cap], [composed, cap]):
        log = bound(cls, chain)
        log.warning("disk at 100%", "sda")
        log.exception("disk at 100%", "sda")
        log.log(logging.ERROR, "disk at 100%", "sda")
        asyncio.run(log.ainfo("disk at 100%", "sda"))
    assert renderer.provider.stats()["invalid"] == {"format_args": 16}
    assert cap.entries[0] == {"event": "disk at 100%", "format_args": ("sda",), "log_level": "warning"}


def test_good_percent_args_are_unchanged(etw_capture: EtwCapture) -> None:
    """Formatted as structlog formats them, into the ``message`` field; the template names the
    trace event (one name per call site, as ``EtwHandler`` names records: issue 26, item 8)."""
    renderer = EtwRenderer(unique_provider())
    log = bound(make_etw_bound_logger(renderer), [renderer])
    log.info("disk at 100%% on %s", "sda")
    log.info("%(dev)s full", {"dev": "sda"})
    assert [(e.name, e.fields) for e in etw_capture.events] == [
        ("disk at 100%% on %s", {"message": "disk at 100% on sda"}),
        ("%(dev)s full", {"message": "sda full"}),
    ]
    assert renderer.provider.stats()["invalid"] == {}


# --- the direct-write path: identical events without running the chain ------------------------


def _calls_of(function_name: str, action: Any) -> int:
    """How many times a Python function called *function_name* ran during *action()*."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event == "call" and frame.f_code.co_name == function_name:
            count += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count


def _log_everything(log: Any, ours: bool) -> None:
    """One call of each kind the direct path must write exactly as the chain does (structlog's own
    logger raises for %-args that do not fit: it is given the field ours writes instead)."""
    log.info("plain")
    log.info("fields", user="ann", attempts=3, latency_ms=12.5, ok=True, region="eu-west-1")
    if ours:  # the template names the event, the text is the message field (issue 26, item 8)
        log.warning("user %s logged in", "ann", n=2)
    else:
        log.warning("user %s logged in", n=2, message="user ann logged in")
    if ours:
        log.info("disk at 100%", "sda", user="ann")
    else:
        log.info("disk at 100%", user="ann", format_args=("sda",))
    log.bind(request="r1", user="bound").info("override_bound", user="call", extra=[1, 2])
    log.bind(event="bound_event_text").info(None, x=1)
    log.info("keyword_call", etw_keyword=0x2)
    log.bind(etw_level=2).debug("level_bound")
    log.info("control_keys", etw_opcode=7, etw_tags=3, etw_name="Renamed")
    with structlog.contextvars.bound_contextvars(cv_user="ctx", user="ctx_loses"):
        log.info("contextvars", user="call_wins")
        with structlog.contextvars.bound_contextvars(etw_keyword=0x2):
            log.info("contextvar_keyword")
    try:
        raise ValueError("bad input")
    except ValueError:
        log.exception("failed", step=2)
    with etw_activity(log, "Job", job=1):
        log.info("inside_activity")
    log.critical("critical")
    # Ours maps fatal to critical on every structlog; structlog's own filtering logger made fatal
    # an alias of error before 25.1 (docs/stdlib.md), so the chain is given critical explicitly.
    (log.fatal if ours else log.critical)("fatal")
    log.log(25 if ours else logging.INFO, "custom_level")  # ours maps 25 down to info


def _comparable(record: CaptureRecord) -> tuple[Any, ...]:
    """A record's bytes with the parts that differ between two runs zeroed: the provider name and
    the (random) activity id; activity Start/Stop events are left out by the caller."""
    event = record.event
    activity = decode_record(record).activity_id
    if activity is not None:
        event = event.replace(activity.bytes, bytes(16))
    level_keyword = record.tracepoint.rsplit("_", 1)[-1]
    return (level_keyword, event, record.descriptor, record.metadata, record.data, record.activity_id is None)


@pytest.mark.parametrize("fmt", ["eventheader", "tracelogging"])
@pytest.mark.parametrize("merge", [True, False])
def test_direct_write_gives_the_bytes_the_processor_chain_gives(fmt: str, merge: bool) -> None:
    """The same calls through the direct path and through structlog's own chain machinery
    (``make_filtering_bound_logger``, same processors) hand the backend identical events."""
    captured: dict[str, list[Any]] = {}
    for kind in ("direct", "chain"):
        with capture_etw_events(fmt) as cap:  # type: ignore[arg-type]
            renderer = EtwRenderer(unique_provider("Direct"))
            chain = [structlog.contextvars.merge_contextvars, renderer] if merge else [renderer]
            if kind == "direct":
                log = bound(make_etw_bound_logger(renderer), chain)
                assert _calls_of("_process_event", lambda log=log: _log_everything(log, True)) == 0
            else:
                log = bound(structlog.make_filtering_bound_logger(logging.NOTSET), chain)
                _log_everything(log, False)
            captured[kind] = [_comparable(r) for r in cap.records if decode_record(r).opcode not in (1, 2)]
            assert renderer.provider.stats()["dropped"] == {}
    assert len(captured["direct"]) == 16
    assert captured["direct"] == captured["chain"]


def test_direct_write_is_left_when_the_chain_changes(etw_capture: EtwCapture) -> None:
    """A processor inserted into the chain after binding makes the next call run the chain."""
    renderer = EtwRenderer(unique_provider())
    chain: list[Any] = [structlog.contextvars.merge_contextvars, renderer]
    log = bound(make_etw_bound_logger(renderer), chain)
    assert _calls_of("_process_event", lambda: log.info("direct")) == 0
    spy = Spy()
    chain.insert(1, spy)  # same last processor, one more before it
    assert _calls_of("_process_event", lambda: log.info("through_the_chain")) == 1
    assert [c[1]["event"] for c in spy.calls] == ["through_the_chain"]
    assert [e.name for e in etw_capture.events] == ["direct", "through_the_chain"]


def test_direct_write_is_not_used_for_other_chains(etw_capture: EtwCapture) -> None:
    """Only ``[merge_contextvars, EtwRenderer]`` or ``[EtwRenderer]``: with any other processor,
    a pass-through renderer or a subclass the chain runs."""

    class Sub(EtwRenderer):
        pass

    name = unique_provider()
    renderer = EtwRenderer(name)
    for chain in (
        [structlog.processors.add_log_level, renderer],
        [renderer, structlog.processors.JSONRenderer()],
        [EtwRenderer(name, provider=renderer.provider, passthrough=True)],
        [Sub(name, provider=renderer.provider)],
    ):
        log = bound(make_etw_bound_logger(renderer), chain)
        assert _calls_of("_process_event", lambda log=log: log.info("x")) == 1


# --- console beside tracing ---------------------------------------------------------------------


def _composition(
    provider: Provider, stream: io.StringIO, renderer_kind: str = "json"
) -> tuple[Any, SpyRenderer]:
    """The documented composition: trace events at every level while someone listens, console or
    JSON output at info and above always (the renderer records what reaches it)."""
    renderer = SpyRenderer(provider.name, provider=provider, passthrough="info")
    last: Any = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if renderer_kind == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    log = structlog.wrap_logger(
        structlog.PrintLogger(stream),
        wrapper_class=make_etw_bound_logger(renderer, min_level="debug"),
        processors=[structlog.processors.add_log_level, renderer, last],
    ).bind()
    return log, renderer


def test_console_beside_tracing_while_a_session_listens(etw_capture: EtwCapture) -> None:
    """While listened, every level is traced and info and above also reach the JSON console."""
    stream = io.StringIO()
    log, spy = _composition(get_provider(unique_provider()), stream)
    log.debug("trace_only", n=1)
    log.info("both", n=2)
    log.error("both_error", n=3)
    assert [(e.name, e.level) for e in etw_capture.events] == [
        ("trace_only", 5),
        ("both", 4),
        ("both_error", 2),
    ]
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines == [
        {"event": "both", "level": "info", "n": 2},
        {"event": "both_error", "level": "error", "n": 3},
    ]
    assert len(spy.calls) == 3


def test_console_beside_tracing_while_nobody_listens(etw_capture: EtwCapture) -> None:
    """While nobody listens, debug is skipped and info and above still reach the console."""
    stream = io.StringIO()
    etw_capture.set_enabled(False)
    log, spy = _composition(get_provider(unique_provider()), stream, "console")
    log.debug("skipped")
    log.info("console_only", n=2)
    log.warning("console_warning")
    assert etw_capture.records == []
    assert [c[1]["event"] for c in spy.calls] == ["console_only", "console_warning"]  # debug: skipped
    out = stream.getvalue()
    assert "console_only" in out and "n=2" in out and "console_warning" in out
    assert "skipped" not in out


def test_console_beside_tracing_keeps_the_console_without_a_trace_facility() -> None:
    """A machine without user_events/ETW (the null backend): the trace side writes nothing, the
    console side keeps everything at info and above; nothing raises."""
    stream = io.StringIO()
    provider = Provider(unique_provider(), backend=NullBackend("no user_events on this kernel"))
    log, spy = _composition(provider, stream)
    log.debug("skipped")
    log.info("kept", n=1)
    log.critical("kept_critical")
    assert [json.loads(line)["event"] for line in stream.getvalue().splitlines()] == ["kept", "kept_critical"]
    assert [c[1]["event"] for c in spy.calls] == ["kept", "kept_critical"]
    assert provider.stats()["written"] == 0


def test_without_the_composition_a_machine_without_the_facility_shows_nothing() -> None:
    """The control for the test above: the default (ETW-only) chain writes nothing anywhere."""
    stream = io.StringIO()
    provider = Provider(unique_provider(), backend=NullBackend("no user_events on this kernel"))
    renderer = EtwRenderer(provider.name, provider=provider)
    log = structlog.wrap_logger(
        structlog.PrintLogger(stream),
        wrapper_class=make_etw_bound_logger(renderer),
        processors=[renderer],
    ).bind()
    log.info("lost")
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    ("passthrough", "passed"),
    [
        (False, []),
        (True, ["debug", "info", "warning", "error", "critical"]),
        ("warning", ["warning", "error", "critical"]),
        (logging.ERROR, ["error", "critical"]),
        (0, ["debug", "info", "warning", "error", "critical"]),
    ],
)
def test_renderer_passthrough_level(etw_capture: EtwCapture, passthrough: Any, passed: list[str]) -> None:
    """passthrough passes on exactly the levels at or above it (True/0 all, False none); all written."""
    renderer = EtwRenderer(unique_provider(), passthrough=passthrough)
    got = []
    for method in ("debug", "info", "warning", "error", "critical"):
        try:
            renderer(None, method, {"event": method, "etw_keyword": 1})
        except structlog.DropEvent:
            continue
        got.append(method)
    assert got == passed
    assert len(etw_capture.events) == 5  # written at every level either way
    assert renderer.passthrough is bool(passed)


def test_renderer_passthrough_rejects_nonsense() -> None:
    """An unknown passthrough level name raises ValueError, a float TypeError, naming passthrough."""
    with pytest.raises(ValueError, match="passthrough"):
        EtwRenderer(unique_provider(), passthrough="chatty")
    with pytest.raises(TypeError, match="passthrough"):
        EtwRenderer(unique_provider(), passthrough=2.5)  # type: ignore[arg-type]


def test_a_processor_inserted_before_the_renderer_of_a_held_logger_runs(etw_capture: EtwCapture) -> None:
    """The skip checks that the renderer is still where it was when the logger was bound; a
    logger bound on the new chain runs it too (a processor of its own before the renderer)."""
    renderer = EtwRenderer(unique_provider())
    etw_capture.set_enabled(False)
    chain: list[Any] = [renderer]
    log = bound(make_etw_bound_logger(renderer), chain)
    spy = Spy()
    log.info("skipped")
    chain.insert(0, spy)
    log.info("runs_the_new_chain")
    assert [c[1]["event"] for c in spy.calls] == ["runs_the_new_chain"]
    assert bound(make_etw_bound_logger(renderer), chain).info("runs_when_bound_now") is None
    assert [c[1]["event"] for c in spy.calls] == ["runs_the_new_chain", "runs_when_bound_now"]


def test_a_logger_can_be_copied(etw_capture: EtwCapture) -> None:
    """The class is chosen in ``__new__``; ``copy`` re-creates an object without arguments."""
    import copy  # noqa: PLC0415

    renderer = EtwRenderer(unique_provider())
    log = bound(make_etw_bound_logger(renderer), [renderer], user="ann").bind(etw_keyword=0x2)
    other = copy.copy(log)
    assert type(other) is type(log)
    other.info("copied")
    assert [(e.name, e.keyword, e.fields) for e in etw_capture.events] == [("copied", 2, {"user": "ann"})]


# --- the plain direct write: one frame, the chain's bytes ---------------------------------------


class TestPlainDirectWrite:
    """A plain call of an ETW-only chain is written by the log method itself; anything that is not
    plain takes the long way, and both give the bytes structlog's own chain gives."""

    def test_a_plain_call_writes_in_the_method_and_a_control_key_goes_the_long_way(
        self, etw_capture: EtwCapture
    ) -> None:
        """No ``_listening_call`` (nor renderer) for a call with plain fields and a plain bound
        context; an ``etw_keyword`` of the call, ``%``-args or ``event=`` take it, written alike."""
        renderer = EtwRenderer(unique_provider())
        log = bound(make_etw_bound_logger(renderer), [renderer], user="ann")
        assert _calls_of("_listening_call", lambda: log.info("plain", n=1)) == 0
        assert _calls_of("_render", lambda: log.info("plain", n=2)) == 0
        assert _calls_of("_listening_call", lambda: log.info("keyed", etw_keyword=0x2)) == 1
        assert _calls_of("_listening_call", lambda: log.info("args %s", "x")) == 1
        assert _calls_of("_listening_call", lambda: log.info(event="by_keyword")) == 1
        assert [(e.name, e.keyword, e.fields) for e in etw_capture.events] == [
            ("plain", 1, {"user": "ann", "n": 1}),
            ("plain", 1, {"user": "ann", "n": 2}),
            ("keyed", 2, {"user": "ann"}),
            ("args %s", 1, {"user": "ann", "message": "args x"}),
            ("by_keyword", 1, {"user": "ann"}),
        ]

    def test_the_renderer_and_the_direct_write_share_the_one_plain_write(
        self, etw_capture: EtwCapture
    ) -> None:
        """A plain event is written by the renderer's ``_write_plain`` whether the renderer runs
        (structlog's own logger, an activity's event) or the wrapper writes it directly."""
        renderer = EtwRenderer(unique_provider())
        direct = bound(make_etw_bound_logger(renderer), [renderer])
        chain = bound(structlog.make_filtering_bound_logger(logging.NOTSET), [renderer])
        assert _calls_of("_write_plain", lambda: direct.info("plain", n=1)) == 1
        assert _calls_of("_write_plain", lambda: chain.info("plain", n=1)) == 1
        with etw_activity(direct, "Job"):
            assert _calls_of("_write_plain", lambda: direct.info("inside", n=2)) == 1
            assert _calls_of("_write_plain", lambda: chain.info("inside", n=2)) == 1
        assert _calls_of("_write_plain", lambda: direct.info("keyed", etw_keyword=0x2)) == 0
        names = [e.name for e in etw_capture.events if e.opcode not in (1, 2)]
        assert names == ["plain", "plain", "inside", "inside", "keyed"]
        activity = [e.activity_id for e in etw_capture.events if e.name == "inside"]
        assert activity[0] is not None and activity[0] == activity[1]

    def test_merge_contextvars_runs_only_when_the_context_holds_a_variable(
        self, etw_capture: EtwCapture
    ) -> None:
        """With nothing in the current contextvars context there is nothing to merge and the
        processor is not called; with a variable bound it runs and its keys are written."""
        renderer = EtwRenderer(unique_provider())
        log = bound(make_etw_bound_logger(renderer), [structlog.contextvars.merge_contextvars, renderer])

        def empty_context() -> None:
            import contextvars  # noqa: PLC0415

            contextvars.Context().run(log.info, "empty")

        assert _calls_of("merge_contextvars", empty_context) == 0
        with structlog.contextvars.bound_contextvars(request="r1"):
            assert _calls_of("merge_contextvars", lambda: log.info("bound")) == 1
        assert [(e.name, e.fields) for e in etw_capture.events] == [
            ("empty", {}),
            ("bound", {"request": "r1"}),
        ]

    @pytest.mark.parametrize("fmt", ["eventheader", "tracelogging"])
    def test_keys_merged_from_contextvars_that_are_not_plain_give_the_chains_bytes(self, fmt: str) -> None:
        """``exc_info``, ``positional_args`` and ``event`` bound through contextvars (merged after
        the plain check) are written as structlog's own chain writes them."""
        captured: dict[str, list[Any]] = {}
        for kind in ("direct", "chain"):
            with capture_etw_events(fmt) as cap:  # type: ignore[arg-type]
                renderer = EtwRenderer(unique_provider("Merged"))
                chain = [structlog.contextvars.merge_contextvars, renderer]
                wrapper = make_etw_bound_logger(renderer) if kind == "direct" else None
                log = bound(wrapper or structlog.make_filtering_bound_logger(logging.NOTSET), chain)
                with structlog.contextvars.bound_contextvars(exc_info=False, n=1):
                    log.info("no_traceback")
                with structlog.contextvars.bound_contextvars(positional_args=("x",)):
                    log.info("text %s")
                with structlog.contextvars.bound_contextvars(event="from_context"):
                    log.info(None, m=2)
                captured[kind] = [_comparable(r) for r in cap.records]
                assert renderer.provider.stats()["dropped"] == {}
        assert len(captured["direct"]) == 3
        assert captured["direct"] == captured["chain"]

    @pytest.mark.parametrize("fmt", ["eventheader", "tracelogging"])
    @pytest.mark.parametrize("merge", [True, False])
    def test_plain_calls_of_every_size_give_the_chains_bytes_with_and_without_a_variable(
        self, fmt: str, merge: bool
    ) -> None:
        """Plain calls of 0 to 12 fields (around the sizes where a kwargs dict grows), a ``None``
        event, a bound context, each often enough for its shape to get a function, in an empty
        contextvars context (the dict written without its ``event`` key) and with a variable bound
        (``event`` inserted, then merged): the events equal structlog's own chain's."""
        import contextvars  # noqa: PLC0415

        values = ["ann", 3, 12.5, True, None, b"\x00\x01", "é"]

        def calls(log: Any) -> None:
            for n in range(13):
                fields = {f"f{i}": values[i % len(values)] for i in range(n)}
                for _ in range(6):
                    log.info(f"e{n}", **fields)
            for _ in range(6):
                log.info(None, a=1)
                log.bind(user="bound", n=2).warning("bound_ctx", x="y")

        captured: dict[str, list[Any]] = {}
        for kind in ("direct", "chain"):
            with capture_etw_events(fmt) as cap:  # type: ignore[arg-type]
                renderer = EtwRenderer(unique_provider("Sizes"))
                chain = [structlog.contextvars.merge_contextvars, renderer] if merge else [renderer]
                wrapper = make_etw_bound_logger(renderer) if kind == "direct" else None
                log = bound(wrapper or structlog.make_filtering_bound_logger(logging.NOTSET), chain)
                contextvars.Context().run(calls, log)
                with structlog.contextvars.bound_contextvars(request="r1"):
                    calls(log)
                captured[kind] = [_comparable(r) for r in cap.records]
                assert renderer.provider.stats()["dropped"] == {}
        assert len(captured["direct"]) == 2 * (13 * 6 + 12)
        assert captured["direct"] == captured["chain"]


#: Every key the two paths kept off their plain write before they shared one definition (the
#: renderer's control keys and ``positional_args``; the direct write's, plus ``exc_info`` and
#: ``event``), spelled out here so that a key dropped from the shared set fails below; each with a
#: call that passes it and what is written for that call: (name, level, keyword, opcode, tags, fields).
_NOT_PLAIN_CALLS: dict[str, tuple[dict[str, Any], tuple[Any, ...]]] = {
    "etw_keyword": ({"etw_keyword": 0x2}, ("k", 4, 0x2, 0, 0, {"n": 1})),
    "etw_level": ({"etw_level": 2}, ("k", 2, 0x1, 0, 0, {"n": 1})),
    "etw_opcode": ({"etw_opcode": 7}, ("k", 4, 0x1, 7, 0, {"n": 1})),
    "etw_tags": ({"etw_tags": 3}, ("k", 4, 0x1, 0, 3, {"n": 1})),
    "etw_name": ({"etw_name": "Renamed"}, ("Renamed", 4, 0x1, 0, 0, {"event": "k", "n": 1})),
    "positional_args": ({"positional_args": ("x",)}, ("k %s", 4, 0x1, 0, 0, {"message": "k x", "n": 1})),
    "exc_info": ({"exc_info": True}, ("k", 4, 0x1, 0, 0, {"n": 1, "exception": "ValueError"})),
    "event": ({"event": "by_keyword"}, ("by_keyword", 4, 0x1, 0, 0, {"n": 1})),
}


class TestTheKeysThatAreNotPlain:
    """The renderer and the wrapper's direct write keep the same keys off their plain write, from
    one definition in ``context/_resolve.py``: each key of the two former sets is still a control,
    a message, a traceback or the event name in both paths (a path that forgot one writes it as a
    field, or with the plain header)."""

    @staticmethod
    def _call(log: Any, key: str, placed: str) -> None:
        keys, _ = _NOT_PLAIN_CALLS[key]
        event: Any = None if key == "event" else ("k %s" if key == "positional_args" else "k")
        if placed == "bound":
            log = log.bind(**keys)
            keys = {}
        try:
            raise ValueError("bad input")
        except ValueError:
            if "event" in keys:  # event= as a keyword only (structlog's signature binds it twice)
                log.info(n=1, **keys)
            else:
                log.info(event, n=1, **keys)

    @staticmethod
    def _written(event: Any) -> tuple[Any, ...]:
        fields = dict(event.fields)
        if "exception" in fields:
            fields["exception"] = "ValueError" if "ValueError: bad input" in fields["exception"] else "?"
        return (event.name, event.level, event.keyword, event.opcode, event.tags, fields)

    def test_the_list_covers_the_shared_sets(self) -> None:
        """The keys spelled out here are exactly the direct write's set, and the renderer's set is
        the control keys and ``positional_args`` (what each path kept off its plain write before)."""
        from structlog_etw.context import _resolve  # noqa: PLC0415

        assert set(_NOT_PLAIN_CALLS) == _resolve.DIRECT_NOT_PLAIN
        assert {*_resolve.CONTROL_KEYS, "positional_args"} == _resolve.RENDERER_NOT_PLAIN
        assert _resolve.DIRECT_NOT_PLAIN - {"event"} == _resolve.DIRECT_NOT_PLAIN_MERGED

    @pytest.mark.parametrize("placed", ["call", "bound"])
    @pytest.mark.parametrize("key", sorted(_NOT_PLAIN_CALLS))
    def test_each_key_is_written_as_before_by_the_renderer_and_the_direct_write(
        self, etw_capture: EtwCapture, key: str, placed: str
    ) -> None:
        """Passed by the call or bound, the key gives the same event through the renderer (run by
        structlog's own filtering logger) and through the direct write, which leaves it to the
        renderer's rule instead of its plain write."""
        expected = _NOT_PLAIN_CALLS[key][1]
        written = []
        for kind in ("chain", "direct"):
            renderer = EtwRenderer(unique_provider("NotPlain"))
            wrapper = (
                make_etw_bound_logger(renderer)
                if kind == "direct"
                else structlog.make_filtering_bound_logger(logging.NOTSET)
            )
            log = bound(wrapper, [renderer])
            long_way = _calls_of("_listening_call", lambda log=log: self._call(log, key, placed))
            if kind == "direct":
                assert long_way == 1, f"{key} {placed}: the direct write took its plain write"
            assert renderer.provider.stats()["dropped"] == {}
            written.append(
                [self._written(e) for e in etw_capture.events if e.provider == renderer.provider.name]
            )
        assert written[0] == written[1] == [expected]


class TestPlanCache:
    """A configuration reuses the plan of the last chain it saw only while that chain has the same
    members, each the same object."""

    def test_a_member_replaced_before_the_renderer_gives_loggers_bound_later_a_new_plan(
        self, etw_capture: EtwCapture
    ) -> None:
        """Replacing the first of two processors (same list, same length, same last member) makes
        a logger bound afterwards run the chain, so the new processor sees its events."""
        renderer = EtwRenderer(unique_provider())
        wrapper = make_etw_bound_logger(renderer)
        chain: list[Any] = [structlog.contextvars.merge_contextvars, renderer]
        before = bound(wrapper, chain)
        assert type(before)._etw_plan.decisions[4] == "direct write"
        spy = Spy()
        chain[0] = spy
        after = bound(wrapper, chain)
        assert type(after)._etw_plan.decisions[4] == "run the chain"
        after.info("seen_by_the_spy")
        assert [c[1]["event"] for c in spy.calls] == ["seen_by_the_spy"]
        assert [e.name for e in etw_capture.events] == ["seen_by_the_spy"]

    @pytest.mark.usefixtures("etw_capture")
    def test_another_list_of_the_same_members_shares_the_plan(self) -> None:
        """Two lists holding the same processors are one plan (and one class)."""
        renderer = EtwRenderer(unique_provider())
        wrapper = make_etw_bound_logger(renderer)
        one = bound(wrapper, [structlog.contextvars.merge_contextvars, renderer])
        two = bound(wrapper, [structlog.contextvars.merge_contextvars, renderer])
        assert type(one)._etw_plan is type(two)._etw_plan
        assert type(one) is type(two)
