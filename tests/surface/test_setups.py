"""structlog and stdlib set-ups (issue 26): one trace event per call, the right name, and loggers
that survive queues, pickling, copies and renames."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import logging.config
import logging.handlers
import multiprocessing
import os
import pickle
import queue
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.contextvars import merge_contextvars

from structlog_etw import (
    EtwEarlyDrop,
    EtwHandler,
    EtwQueueHandler,
    EtwRenderer,
    KeywordsByLogger,
    add_otel_ids,
    etw_activity,
    get_provider,
    make_etw_bound_logger,
)
from structlog_etw.testing import CapturedEvent, EtwCapture, capture_etw_events
from tests.helpers.forking import bounded_pool
from tests.helpers.surface import unique_provider

WRAP = structlog.stdlib.ProcessorFormatter.wrap_for_formatter
ROOT = Path(__file__).resolve().parents[2]
#: Every call-site parameter structlog has, less QUAL_NAME before Python 3.11 (structlog reads
#: ``co_qualname``, which 3.10's code objects lack: its own processor fails there).
_CALLSITE = {
    p for p in structlog.processors.CallsiteParameter if sys.version_info >= (3, 11) or p.value != "qual_name"
}


def private_logger(name: str = "") -> logging.Logger:
    """A stdlib logger outside logging's manager: only the handlers the test adds."""
    logger = logging.Logger(name or f"setups.{uuid.uuid4().hex[:8]}", level=1)
    logger.propagate = False
    return logger


def stdlib_bound(logger: logging.Logger, processors: list[Any]) -> Any:
    """A ``structlog.stdlib.BoundLogger`` over *logger* running *processors*."""
    return structlog.wrap_logger(logger, processors=processors, wrapper_class=structlog.stdlib.BoundLogger)


def view(event: CapturedEvent, activity: uuid.UUID | None = None) -> tuple[Any, ...]:
    """What a session sees of an event (no timestamps, no thread ids; *activity*: "in it")."""
    fields = dict(event.fields)
    for key in ("exception", "stack"):  # the last line: the frames above differ per test
        if isinstance(fields.get(key), str):
            fields[key] = fields[key].splitlines()[-1]
    in_activity = event.activity_id is not None and event.activity_id == activity
    return (event.name, event.level, event.keyword, in_activity, fields)


class TestWrittenOnce:
    """A pass-through renderer in front of ``wrap_for_formatter`` and an ``EtwHandler`` of the same
    provider on the logger: one trace event per structlog call."""

    def test_passthrough_renderer_and_handler_write_each_call_once(self, etw_capture: EtwCapture) -> None:
        """Each structlog call is one event (the renderer's); a foreign record is still written."""
        name = unique_provider()
        logger = private_logger()
        logger.addHandler(EtwHandler(name))
        log = stdlib_bound(logger, [EtwRenderer(name, passthrough=True), WRAP])
        log.info("charge_captured", amount=12)
        log.warning("slow", ms=3)
        logger.info("third party %s", "x")
        assert [(e.name, e.level) for e in etw_capture.events] == [
            ("charge_captured", 4),
            ("slow", 3),
            ("third party %s", 4),
        ]
        assert etw_capture.events[0].fields == {"amount": 12}

    def test_handler_with_an_etw_processor_formatter_does_not_write_it_again(
        self, etw_capture: EtwCapture
    ) -> None:
        """The handler's own ``ProcessorFormatter`` chain does not write a written event again."""
        name = unique_provider()
        renderer = EtwRenderer(name)
        handler = EtwHandler(renderer)
        handler.setFormatter(structlog.stdlib.ProcessorFormatter(processors=[renderer]))
        logger = private_logger()
        logger.addHandler(handler)
        stdlib_bound(logger, [EtwRenderer(name, passthrough=True), WRAP]).info("once")
        assert [e.name for e in etw_capture.events] == ["once"]

    def test_a_handler_of_another_provider_still_writes(self, etw_capture: EtwCapture) -> None:
        """The marker names the provider: a handler of a second provider writes its own event."""
        first, second = unique_provider(), unique_provider()
        logger = private_logger()
        logger.addHandler(EtwHandler(second))
        stdlib_bound(logger, [EtwRenderer(first, passthrough=True), WRAP]).info("both")
        assert sorted(e.provider for e in etw_capture.events) == sorted([first, second])

    def test_the_marker_survives_pickling_and_is_a_dict_for_later_processors(self) -> None:
        """What the pass-through renderer returns is a ``dict`` equal to the event, and pickles."""
        renderer = EtwRenderer(unique_provider(), passthrough=True)
        out = renderer(None, "info", {"event": "e", "n": 1, "etw_keyword": 2})
        assert isinstance(out, dict)
        assert out == {"event": "e", "n": 1}
        again = pickle.loads(pickle.dumps(out))
        assert type(again) is type(out)
        assert again.providers == out.providers == (renderer.provider.name,)

    def test_console_beside_tracing_still_prints(self, etw_capture: EtwCapture) -> None:
        """A console handler beside the root ``EtwHandler`` prints every structlog call."""
        name = unique_provider()
        logger = private_logger()
        logger.addHandler(EtwHandler(name))
        lines: list[str] = []
        console = logging.Handler()
        console.emit = lambda record: lines.append(console.format(record))  # type: ignore[method-assign]
        console.setFormatter(
            structlog.stdlib.ProcessorFormatter(processors=[structlog.dev.ConsoleRenderer(colors=False)])
        )
        logger.addHandler(console)
        stdlib_bound(logger, [EtwRenderer(name, passthrough=True), WRAP]).info("shown", n=1)
        assert [e.name for e in etw_capture.events] == ["shown"]
        assert len(lines) == 1 and "shown" in lines[0] and "n=1" in lines[0]


def _calls(logger: logging.Logger) -> None:
    """The same four calls for the direct and the queued handler."""
    structlog.contextvars.bind_contextvars(request_id="r-1")
    try:
        with etw_activity(get_provider_for(logger), "Request"):
            logger.info("user %s logged in", "ann")
            try:
                1 / 0  # noqa: B018
            except ZeroDivisionError:
                logger.exception("failed %d times", 3)
            logger.warning("bad %s %s", "one")  # noqa: PLE1206 - a record that cannot be formatted
            logger.info("plain", extra={"host": "db1", "etw_keyword": 0x4}, stack_info=True)
    finally:
        structlog.contextvars.clear_contextvars()


_PROVIDERS: dict[str, Any] = {}


def get_provider_for(logger: logging.Logger) -> Any:
    """The provider the test attached to *logger* (for the activity)."""
    return _PROVIDERS[logger.name]


class TestQueueHandler:
    """``EtwQueueHandler`` in front of a ``QueueListener`` gives the events the direct handler gives."""

    def _views(self, events: list[CapturedEvent]) -> list[tuple[Any, ...]]:
        activity = next(e.activity_id for e in events if e.name == "Request")
        return [view(e, activity) for e in events if e.name != "Request"]

    def _direct(self, name: str) -> list[tuple[Any, ...]]:
        logger = private_logger("setups.queue")
        handler = EtwHandler(name)
        _PROVIDERS[logger.name] = handler.provider
        logger.addHandler(handler)
        with capture_etw_events() as capture:
            _calls(logger)
        return self._views(capture.events)

    def _queued(
        self, name: str, queue_handler: logging.handlers.QueueHandler, q: Any
    ) -> list[tuple[Any, ...]]:
        logger = private_logger("setups.queue")
        handler = EtwHandler(name)
        _PROVIDERS[logger.name] = handler.provider
        logger.addHandler(queue_handler)
        listener = logging.handlers.QueueListener(q, handler)
        with capture_etw_events() as capture:
            listener.start()
            try:
                _calls(logger)
            finally:
                listener.stop()
        return self._views(capture.events)

    def test_queued_events_equal_direct_ones(self) -> None:
        """Template names, message, exception, stack, extras, contextvars and the activity id match."""
        name = unique_provider()
        direct = self._direct(name)
        q: queue.Queue[Any] = queue.Queue()
        queued = self._queued(name, EtwQueueHandler(q), q)
        assert [d[0] for d in direct] == ["user %s logged in", "failed %d times", "bad %s %s", "plain"]
        direct_lines = [{**d[4], "lineno": None} for d in direct]
        queued_lines = [{**d[4], "lineno": None} for d in queued]
        assert queued_lines == direct_lines
        assert [d[:4] for d in queued] == [d[:4] for d in direct]
        assert direct[0][4]["request_id"] == "r-1"
        assert direct[1][4]["exception"] == "ZeroDivisionError: division by zero"
        assert all(d[3] for d in direct)  # inside the activity

    def test_a_process_queue_keeps_the_contextvars(self, etw_capture: EtwCapture) -> None:
        """A prepared record pickles (a ``multiprocessing`` queue) with the structlog contextvars."""
        logger = private_logger()
        prepared: list[logging.LogRecord] = []
        queue_handler = EtwQueueHandler(queue.Queue())
        queue_handler.enqueue = prepared.append  # type: ignore[method-assign]
        logger.addHandler(queue_handler)
        structlog.contextvars.bind_contextvars(request_id="r-2")
        try:
            logger.error("query %s failed", "SELECT", exc_info=ValueError("x"))
        finally:
            structlog.contextvars.clear_contextvars()
        record = pickle.loads(pickle.dumps(prepared[0]))
        EtwHandler(unique_provider()).handle(record)
        (event,) = etw_capture.events
        assert event.name == "query %s failed"
        assert event.fields["message"] == "query SELECT failed"
        assert event.fields["request_id"] == "r-2"
        assert (
            event.fields["exception"].endswith("ValueError: x\n")
            or "ValueError: x" in event.fields["exception"]
        )

    def test_structlog_records_through_the_queue(self, etw_capture: EtwCapture) -> None:
        """A structlog event dict crosses the queue with ``log.exception``'s traceback resolved."""
        name = unique_provider()
        q: queue.Queue[Any] = queue.Queue()
        logger = private_logger()
        logger.addHandler(EtwQueueHandler(q))
        listener = logging.handlers.QueueListener(q, EtwHandler(name))
        listener.start()
        try:
            log = stdlib_bound(logger, [WRAP])
            try:
                {}["k"]
            except KeyError:
                log.exception("lookup_failed", key="k")
        finally:
            listener.stop()
        (event,) = etw_capture.events
        assert event.name == "lookup_failed"
        assert "KeyError: 'k'" in event.fields["exception"]

    def test_dictconfig_queue_handler(self, etw_capture: EtwCapture) -> None:
        """3.12's dictConfig ``queue_handler`` recipe with ``EtwQueueHandler`` keeps the template."""
        if sys.version_info < (3, 12):
            reason = "dictConfig builds queue listeners from 3.12 (nox -s queue_handler runs it)"
            if os.environ.get("STRUCTLOG_ETW_NO_SKIP"):
                pytest.fail(reason)
            pytest.skip(reason)
        name = unique_provider()
        logger_name = f"setups.dict.{uuid.uuid4().hex[:8]}"
        logging.config.dictConfig(
            {
                "version": 1,
                "disable_existing_loggers": False,
                "handlers": {
                    "etw": {"()": "structlog_etw.EtwHandler", "provider_or_name": name},
                    "queue": {"class": "structlog_etw.EtwQueueHandler", "handlers": ["etw"]},
                },
                "loggers": {logger_name: {"handlers": ["queue"], "level": "INFO", "propagate": False}},
            }
        )
        handler: Any = logging.getHandlerByName("queue")  # type: ignore[attr-defined,unused-ignore]
        handler.listener.start()
        try:
            logging.getLogger(logger_name).info("user %s", "ann")
        finally:
            handler.listener.stop()
        (event,) = etw_capture.events
        assert (event.name, event.fields["message"]) == ("user %s", "user ann")


def _worker_logger(name: str, wrapper: str = "filtering") -> Any:
    renderer = EtwRenderer(name, keywords_by_logger={"db": 0x2}, event_key="msg")
    if wrapper == "etw":
        wrapper_class = make_etw_bound_logger(renderer, min_level=logging.INFO)
    else:
        wrapper_class = structlog.make_filtering_bound_logger(logging.INFO)
    return structlog.wrap_logger(
        structlog.PrintLogger(),
        processors=[structlog.processors.EventRenamer("msg"), renderer],
        wrapper_class=wrapper_class,
    ).bind(logger="db")


class Worker:
    """An object holding a logger, as applications send to a process pool."""

    def __init__(self, name: str, wrapper: str) -> None:
        self.log = _worker_logger(name, wrapper)

    def run(self) -> list[tuple[str, int, str]]:
        """Log one event in the worker under a capture; what was written."""
        with capture_etw_events() as capture:
            self.log.info("worked", n=1)
        return [(e.name, e.keyword, e.provider) for e in capture.events]


class CountingRenderer(EtwRenderer):
    """A subclass of the renderer, as applications write them."""


class TestPickling:
    """Loggers with an ``EtwRenderer`` in their chain pickle and copy as structlog's do."""

    @pytest.mark.parametrize("wrapper", ["filtering", "etw"])
    @pytest.mark.parametrize("method", ["fork", "spawn"])
    def test_process_pool_worker_holding_a_logger(self, method: str, wrapper: str) -> None:
        """``ProcessPoolExecutor.submit(worker.run)`` runs and writes with the renderer's options."""
        if method not in multiprocessing.get_all_start_methods():
            pytest.skip(f"no {method} start method on this platform")
        name = unique_provider()
        worker = Worker(name, wrapper)
        with bounded_pool(method) as pool:
            assert pool.submit(worker.run).result(timeout=120) == [("worked", 0x2, name)]

    @pytest.mark.parametrize("wrapper", ["filtering", "etw"])
    def test_pickle_copy_and_deepcopy_keep_every_option(self, etw_capture: EtwCapture, wrapper: str) -> None:
        """Each copy writes the same event as the original (keyword map, event key, pass-through)."""
        name = unique_provider()
        log = _worker_logger(name, wrapper)
        copies = [log, pickle.loads(pickle.dumps(log)), copy.deepcopy(log), copy.copy(log)]
        for each in copies:
            each.info("same", n=2)
        assert {(e.name, e.keyword, e.provider, tuple(e.fields.items())) for e in etw_capture.events} == {
            ("same", 0x2, name, (("logger", "db"), ("n", 2)))
        }
        assert len(etw_capture.events) == 4

    def test_a_deep_copy_shares_the_provider(self) -> None:
        """Deep-copying a renderer never copies its provider (registrations are process-wide)."""
        renderer = EtwRenderer(unique_provider(), passthrough="warning", default_keyword=0x8)
        clone = copy.deepcopy(renderer)
        assert clone.provider is renderer.provider
        assert (clone.passthrough_level, clone.default_keyword) == (logging.WARNING, 0x8)

    def test_a_subclass_stays_its_class(self) -> None:
        """A renderer subclass pickles and copies as its own class."""
        renderer = CountingRenderer(unique_provider(), event_key="msg")
        for clone in (pickle.loads(pickle.dumps(renderer)), copy.deepcopy(renderer), copy.copy(renderer)):
            assert type(clone) is CountingRenderer and clone.event_key == "msg"

    def test_a_replaced_keyword_map_is_what_pickles(self) -> None:
        """The current ``keywords_by_logger`` travels, not the one given at construction."""
        renderer = EtwRenderer(unique_provider())
        renderer.keywords_by_logger = {"http": 0x4}
        assert pickle.loads(pickle.dumps(renderer)).keywords_by_logger == KeywordsByLogger({"http": 0x4})


class TestKeywordsByLoggerArgument:
    """A ``KeywordsByLogger`` is accepted wherever a mapping is; anything else is a ``TypeError``."""

    def test_renderer_wrapper_and_handler_take_one(self, etw_capture: EtwCapture) -> None:
        """The renderer, the wrapper and the handler route by a ``KeywordsByLogger`` argument."""
        name = unique_provider()
        names = KeywordsByLogger({"db": 0x2})
        renderer = EtwRenderer(name, keywords_by_logger=names)
        log = structlog.wrap_logger(
            structlog.PrintLogger(),
            processors=[renderer],
            wrapper_class=make_etw_bound_logger(name, keywords_by_logger=names),
        )
        log.info("from_renderer", logger="db")
        logger = private_logger("db.pool")
        logger.addHandler(EtwHandler(unique_provider(), keywords_by_logger=names))
        logger.info("from_handler")
        assert [(e.name, e.keyword) for e in etw_capture.events] == [
            ("from_renderer", 0x2),
            ("from_handler", 0x2),
        ]

    def test_it_is_a_mapping_itself(self) -> None:
        """``dict()``, ``==`` and item access see the keys given, so it goes where a dict goes."""
        names = KeywordsByLogger({"db": 0x2, "app_*": 0x4})
        assert dict(names) == {"db": 0x2, "app_*": 0x4} == names
        assert (names["db"], len(names), names.lookup("db.pool")) == (0x2, 2, 0x2)

    def test_the_property_takes_a_mapping(self) -> None:
        """``renderer.keywords_by_logger = {...}`` is normalised to a ``KeywordsByLogger``."""
        renderer = EtwRenderer(unique_provider())
        renderer.keywords_by_logger = {"http": 0x4}
        assert isinstance(renderer.keywords_by_logger, KeywordsByLogger)
        assert renderer.keywords_by_logger.lookup("http.client") == 0x4

    @pytest.mark.parametrize("bad", [[("db", 2)], "db", 2])
    def test_anything_else_is_a_clear_type_error(self, bad: Any) -> None:
        """A list, a string or a number is refused with a ``TypeError`` that says what is wanted."""
        for build in (
            lambda: EtwRenderer(unique_provider(), keywords_by_logger=bad),
            lambda: EtwHandler(unique_provider(), keywords_by_logger=bad),
            lambda: make_etw_bound_logger(unique_provider(), keywords_by_logger=bad),
        ):
            with pytest.raises(TypeError, match="keywords_by_logger must be a mapping"):
                build()
        renderer = EtwRenderer(unique_provider())
        with pytest.raises(TypeError, match="keywords_by_logger must be a mapping"):
            renderer.keywords_by_logger = bad


class TestEventKey:
    """``EventRenamer`` before the renderer: ``event_key=`` names the trace event by the new key."""

    def test_renderer_names_by_the_renamed_key(self, etw_capture: EtwCapture) -> None:
        """``EventRenamer("msg")`` + ``EtwRenderer(event_key="msg")``: the name, not a ``msg`` field."""
        log = structlog.wrap_logger(
            structlog.PrintLogger(),
            processors=[
                structlog.processors.EventRenamer("msg"),
                EtwRenderer(unique_provider(), event_key="msg"),
            ],
        )
        log.info("user_login", user="ann")
        log.info("named", etw_name="Explicit")
        first, second = etw_capture.events
        assert (first.name, first.fields) == ("user_login", {"user": "ann"})
        assert (second.name, second.fields) == ("Explicit", {"msg": "named"})

    def test_common_schema_body_comes_from_the_key(self, etw_capture: EtwCapture) -> None:
        """The Common Schema body is the renamed key's text too."""
        log = structlog.wrap_logger(
            structlog.PrintLogger(),
            processors=[
                structlog.processors.EventRenamer("msg"),
                EtwRenderer(unique_provider(), event_key="msg", schema="common"),
            ],
        )
        log.info("user_login", user="ann")
        (event,) = etw_capture.events
        assert event.fields["PartB"]["body"] == "user_login"

    def test_handler_names_structlog_and_foreign_records_by_the_key(self, etw_capture: EtwCapture) -> None:
        """``EtwHandler(event_key="msg")``: renamed structlog dicts and foreign templates alike."""
        logger = private_logger()
        logger.addHandler(EtwHandler(unique_provider(), event_key="msg"))
        stdlib_bound(logger, [structlog.processors.EventRenamer("msg"), WRAP]).info("renamed", n=1)
        logger.info("foreign %s", "x")
        first, second = etw_capture.events
        assert (first.name, first.fields) == ("renamed", {"n": 1})
        assert second.name == "foreign %s" and "msg" not in second.fields

    def test_a_bad_event_key_is_refused(self) -> None:
        """``event_key`` must be a non-empty ``str``."""
        with pytest.raises(TypeError, match="event_key must be a non-empty str"):
            EtwRenderer(unique_provider(), event_key="")


class TestOneNamingRule:
    """``%`` arguments of ``structlog.stdlib.BoundLogger``: the template names the event, the text is
    ``message`` (as ``EtwHandler`` names stdlib records)."""

    def test_renderer_names_by_the_template(self, etw_capture: EtwCapture) -> None:
        """Without ``PositionalArgumentsFormatter`` the renderer keeps the template as the name."""
        log = stdlib_bound(private_logger(), [EtwRenderer(unique_provider())])
        log.info("query %s took %d ms", "SELECT", 12)
        log.info("user %(name)s", {"name": "ann"})
        log.info("bad %s %s", "one")  # noqa: PLE1206 - arguments that do not fit
        first, second, third = etw_capture.events
        assert (first.name, first.fields) == ("query %s took %d ms", {"message": "query SELECT took 12 ms"})
        assert (second.name, second.fields) == ("user %(name)s", {"message": "user ann"})
        assert third.name == "bad %s %s"
        assert third.fields["args"] == ["one"] and third.fields["message_error"].startswith("TypeError")

    def test_handler_and_renderer_agree(self, etw_capture: EtwCapture) -> None:
        """The same call through ``wrap_for_formatter`` and the handler gives the renderer's event."""
        logger = private_logger()
        logger.addHandler(EtwHandler(unique_provider()))
        stdlib_bound(logger, [WRAP]).info("query %s", "SELECT")
        stdlib_bound(private_logger(), [EtwRenderer(unique_provider())]).info("query %s", "SELECT")
        via_handler, via_renderer = etw_capture.events
        assert (via_handler.name, via_handler.fields) == (via_renderer.name, via_renderer.fields)
        assert via_renderer.fields == {"message": "query SELECT"}

    def test_passthrough_leaves_the_arguments_for_later_processors(self) -> None:
        """The event dict passed on keeps ``positional_args`` (a console may still format them)."""
        renderer = EtwRenderer(unique_provider(), passthrough=True)
        with capture_etw_events():
            out = renderer(None, "info", {"event": "q %s", "positional_args": ("x",)})
        assert out == {"event": "q %s", "positional_args": ("x",)}


_OTEL_SCRIPT = r"""
import json, sys
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
try:
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as Exporter
except ImportError:
    from opentelemetry.sdk._logs.export import InMemoryLogExporter as Exporter
from opentelemetry.instrumentation.structlog import StructlogInstrumentor
from structlog_etw import EtwRenderer, add_otel_ids, make_etw_bound_logger
from structlog_etw.testing import capture_etw_events

wrapper, order, listening = sys.argv[1], sys.argv[2], sys.argv[3] == "on"
tracer = TracerProvider().get_tracer("setups")
exporter = Exporter()
logs = LoggerProvider()
logs.add_log_record_processor(SimpleLogRecordProcessor(exporter))
renderer = EtwRenderer("Setups_Otel")
if wrapper == "etw":
    wrapper_class = make_etw_bound_logger(renderer)
else:
    wrapper_class = structlog.make_filtering_bound_logger(0)
config = dict(
    processors=[structlog.contextvars.merge_contextvars, add_otel_ids, renderer],
    wrapper_class=wrapper_class,
    cache_logger_on_first_use=True,
)
if order == "instrument-first":
    StructlogInstrumentor().instrument(logger_provider=logs)
    structlog.configure(**config)
else:
    structlog.configure(**config)
    StructlogInstrumentor().instrument(logger_provider=logs)
log = structlog.get_logger()
with capture_etw_events(enabled=listening) as capture:
    with tracer.start_as_current_span("request") as span:
        log.info("first", n=1)
        log.warning("second", n=2)
    ids = span.get_span_context()
print(json.dumps({
    "processors": [type(p).__name__ for p in structlog.get_config()["processors"]],
    "otel": [
        (r.log_record.body, format(r.log_record.trace_id, "032x")) for r in exporter.get_finished_logs()
    ],
    "etw": [(e.name, e.fields.get("trace_id"), e.fields.get("span_id")) for e in capture.events],
    "trace_id": format(ids.trace_id, "032x"),
    "span_id": format(ids.span_id, "016x"),
}))
"""


class TestOpenTelemetryInstrumentation:
    """``opentelemetry-instrumentation-structlog`` inserts its processor before the last one: with
    ``EtwRenderer`` last both see every event once, and the trace ids reach the trace event."""

    @pytest.mark.parametrize("wrapper", ["etw", "filtering"])
    @pytest.mark.parametrize("order", ["instrument-first", "configure-first"])
    @pytest.mark.parametrize("listening", ["on", "off"])
    def test_both_see_every_event_once(self, wrapper: str, order: str, listening: str) -> None:
        """OTel logs every call once; a listening session gets each once, with the span's ids."""
        pytest.importorskip("opentelemetry.instrumentation.structlog")
        proc = subprocess.run(
            [sys.executable, "-c", _OTEL_SCRIPT, wrapper, order, listening],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout.splitlines()[-1])
        assert got["processors"][-2:] == ["StructlogProcessor", "EtwRenderer"]
        trace_id, span_id = got["trace_id"], got["span_id"]
        assert got["otel"] == [["first", trace_id], ["second", trace_id]]
        expected = [["first", trace_id, span_id], ["second", trace_id, span_id]] if listening == "on" else []
        assert got["etw"] == expected


class Counter:
    """A processor of the application's own (not on the wrapper's allow-list): counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, logger: Any, method_name: str, event_dict: Any) -> Any:
        self.calls.append(event_dict.get("event"))
        return event_dict


class SpyRenderer(EtwRenderer):
    """An ``EtwRenderer`` that counts the events it is given (whether or not it writes them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen = 0

    def __call__(self, logger: Any, method_name: str, event_dict: Any) -> Any:
        self.seen += 1
        return super().__call__(logger, method_name, event_dict)


class StampingCounter(structlog.processors.TimeStamper):
    """A subclass of an allow-listed processor: it may do more than its base, so it is not trusted."""

    def __init__(self) -> None:
        super().__init__(fmt="iso")
        self.calls = 0

    def __call__(self, logger: Any, method_name: str, event_dict: Any) -> Any:
        self.calls += 1
        return super().__call__(logger, method_name, event_dict)


def _etw_logger(processors: list[Any]) -> Any:
    """A ``make_etw_bound_logger`` logger over *processors* (whose renderer comes last)."""
    wrapper_class = make_etw_bound_logger(processors[-1])
    return structlog.wrap_logger(structlog.PrintLogger(), processors=processors, wrapper_class=wrapper_class)


class TestSkipOnlyPureChains:
    """The wrapper skips a call nobody listens to only when every processor before the renderer is
    known to be side-effect-free; any other processor there sees every call."""

    def test_unknown_processor_sees_every_call_with_nobody_listening(self) -> None:
        """A custom processor before the renderer sees each sync call; nothing is written."""
        with capture_etw_events(enabled=False) as capture:
            counter = Counter()
            log = _etw_logger([merge_contextvars, counter, EtwRenderer(unique_provider())])
            log.debug("d")
            log.info("i", n=1)
            log.warning("w %s", "x")
            log.error("e")
            log.critical("c")
        assert counter.calls == ["d", "i", "w x", "e", "c"]
        assert capture.events == []

    def test_unknown_processor_sees_async_calls_with_nobody_listening(self) -> None:
        """The ``a``-methods run the chain too, so the custom processor sees them."""

        async def calls(log: Any) -> None:
            await log.ainfo("ai")
            await log.awarning("aw")

        with capture_etw_events(enabled=False) as capture:
            counter = Counter()
            log = _etw_logger([counter, EtwRenderer(unique_provider())])
            asyncio.run(calls(log))
        assert counter.calls == ["ai", "aw"]
        assert capture.events == []

    def test_unknown_processor_sees_every_call_with_a_listener(self) -> None:
        """With a session listening the custom processor sees each call once and each is written."""
        with capture_etw_events() as capture:
            counter = Counter()
            log = _etw_logger([counter, EtwRenderer(unique_provider())])
            log.info("one")
            log.info("two")
        assert counter.calls == ["one", "two"]
        assert [e.name for e in capture.events] == ["one", "two"]

    def test_a_pure_chain_still_skips(self) -> None:
        """structlog's own pure processors before the renderer: nobody listening, the chain never runs."""
        with capture_etw_events(enabled=False) as capture:
            renderer = SpyRenderer(unique_provider())
            chain = [
                merge_contextvars,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso"),
                structlog.processors.StackInfoRenderer(),
                structlog.processors.format_exc_info,
                structlog.processors.dict_tracebacks,
                structlog.processors.CallsiteParameterAdder(_CALLSITE),
                structlog.processors.EventRenamer("event"),
                structlog.stdlib.PositionalArgumentsFormatter(),
                structlog.processors.UnicodeDecoder(),
                add_otel_ids,
                EtwEarlyDrop(renderer),
                renderer,
            ]
            log = _etw_logger(chain)
            for method in ("debug", "info", "warning", "error", "critical"):
                getattr(log, method)("skipped", n=1)
            skipped = renderer.seen
            capture.set_enabled(True)
            log.info("written")
        assert skipped == 0
        assert renderer.seen == 1
        assert [e.name for e in capture.events] == ["written"]

    def test_a_subclass_of_a_pure_processor_runs(self) -> None:
        """A subclass of an allow-listed class may do more in ``__call__``: it sees every call."""
        with capture_etw_events(enabled=False):
            stamper = StampingCounter()
            log = _etw_logger([stamper, EtwRenderer(unique_provider())])
            log.info("a")
            log.info("b")
        assert stamper.calls == 2

    @pytest.mark.parametrize("held", [True, False], ids=["held-logger", "new-logger"])
    def test_a_processor_inserted_in_place_before_the_renderer_sees_calls(self, held: bool) -> None:
        """A chain edited in place to get a processor before the renderer runs it: in a held logger
        (the renderer's index check) and in a logger made after the edit (its plan is rebuilt)."""
        with capture_etw_events(enabled=False) as capture:
            renderer = SpyRenderer(unique_provider())
            chain: list[Any] = [merge_contextvars, renderer]
            log = _etw_logger(chain)
            if held:
                log = log.bind()  # the lazy proxy makes a logger per call; this one is kept
            log.info("skipped")
            counter = Counter()
            chain.insert(1, counter)  # as an instrumentation that edits the configured list
            log.info("seen")
        assert counter.calls == ["seen"]
        assert renderer.seen == 1
        assert capture.events == []


class TestCountersAcrossBackendSwitches:
    """``stats()`` counts are cumulative across backend switches (a capture and back)."""

    def test_truncated_stays_counted_after_a_capture(self) -> None:
        """Inside a capture and after it ``truncated`` reads what ``written`` reads: 1, then 2."""
        renderer = EtwRenderer(unique_provider())
        log = structlog.wrap_logger(structlog.PrintLogger(), processors=[renderer])
        provider = get_provider(renderer.provider.name)
        assert provider is renderer.provider
        with capture_etw_events():
            log.info("long", text="x" * 100_000)
            inside = provider.stats()
        after = provider.stats()
        with capture_etw_events("tracelogging"):
            log.info("long", text="x" * 100_000)
        again = provider.stats()
        assert (inside["written"], inside["truncated"]) == (1, 1)
        assert (after["written"], after["truncated"]) == (1, 1)
        assert (again["written"], again["truncated"]) == (2, 2)
