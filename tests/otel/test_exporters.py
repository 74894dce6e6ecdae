"""structlog_etw.otel: the OpenTelemetry SDK's log records and spans as Common Schema events.

An OpenTelemetry app (the SDK's LoggerProvider fed by the stdlib LoggingHandler, a TracerProvider
with spans and links) exports through EtwLogExporter and EtwSpanExporter into a capture; the
events are read with the collectors' rules (tests/helpers/common_schema_collectors.py) and compared byte for
byte with the model of the Rust user_events exporters (tests/helpers/common_schema_exporters.py).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

from structlog_etw.otel import EtwLogExporter, EtwSpanExporter, level_of_severity
from structlog_etw.testing import capture_etw_events
from tests.helpers import common_schema_exporters as model
from tests.helpers.common_schema_collectors import otel_arrow_attributes, read_like_geneva

pytestmark = [
    pytest.mark.filterwarnings("ignore::structlog_etw.EtwUnavailableWarning"),
    pytest.mark.filterwarnings("ignore:.*LoggingHandler.*:DeprecationWarning"),
]
_names = itertools.count()
RESOURCE = Resource.create({"service.name": "checkout", "service.instance.id": "pod-7", "region": "eu"})
T_START = 1_764_436_337_000_000_000
T_LOG = 1_764_436_337_123_456_789  # 2025-11-29T17:12:17.123456789Z


def _name() -> str:
    return f"SlEtwOtelExp{next(_names)}"


class App:
    """An OpenTelemetry app: a LoggerProvider fed by the stdlib LoggingHandler, a TracerProvider."""

    def __init__(self, provider: str, **log_options: Any) -> None:
        self.log_exporter = EtwLogExporter(provider, resource_attributes=("region",), **log_options)
        self.span_exporter = EtwSpanExporter(provider)
        self.logger_provider = LoggerProvider(resource=RESOURCE)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_exporter))
        self.tracer_provider = TracerProvider(resource=RESOURCE)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.tracer = self.tracer_provider.get_tracer("shop.tracer")
        self.handler = LoggingHandler(level=logging.DEBUG, logger_provider=self.logger_provider)

    def logger(self, name: str) -> logging.Logger:
        log = logging.getLogger(name)
        log.handlers = [self.handler]
        log.propagate = False
        log.setLevel(logging.DEBUG)
        return log

    def close(self) -> None:
        self.logger_provider.shutdown()
        self.tracer_provider.shutdown()


@pytest.fixture
def app() -> Iterator[App]:
    """An OpenTelemetry SDK app exporting to a fresh provider name, shut down after the test."""
    made = App(_name())
    yield made
    made.close()


def _run(app: App) -> tuple[trace.Span, trace.Span]:
    """A request span linked to an earlier span, with a warning and an error log inside it."""
    log = app.logger("shop.db")
    with app.tracer.start_as_current_span("warmup") as warmup:
        pass
    with app.tracer.start_as_current_span(
        "GET /cart",
        kind=SpanKind.SERVER,
        links=[trace.Link(warmup.get_span_context())],
        attributes={"http.request.method": "GET", "tags": ("a", "b"), "retries": 2},
    ) as request:
        log.warning("cart %s slow", "c-1", extra={"n": 1, "event_id": 7, "sizes": [1, 2], "meta": {"k": "v"}})
        with app.tracer.start_as_current_span("query") as query:
            query.set_status(Status(StatusCode.ERROR, "timeout"))
            log.error("query failed", extra={"table": "carts"})
    return request, query


class TestTheAppThroughBothExporters:
    """The exporters write every log record and span of a real SDK app, as the collectors read them."""

    def test_every_log_event_is_recognised_and_promoted_by_the_collectors(self, app: App) -> None:
        """Each stdlib log record becomes a Log event the Geneva rules recognise, with body, severity,
        the span's ids, the cloud role and the attributes promoted."""
        with capture_etw_events() as capture:
            request, query = _run(app)
        logs = [e for e in capture.events if e.name == "Log"]
        assert len(logs) == 2
        warn, error = (read_like_geneva(e.raw) for e in logs)
        for rec in (warn, error):
            assert rec.common_schema
            assert rec.role == "checkout" and rec.role_instance == "pod-7"
        assert (warn.body, warn.severity_number, warn.severity_text) == ("cart c-1 slow", 13, "WARN")
        assert warn.trace_id == request.get_span_context().trace_id.to_bytes(16, "big")
        assert warn.span_id == request.get_span_context().span_id.to_bytes(8, "big")
        assert warn.timestamp_ns > 0
        columns = dict(warn.columns)
        assert columns["n"] == 1 and columns["eventId"] == 7 and columns["region"] == "eu"
        assert [v for k, v in warn.columns if k == "sizes"] == [1, 2]  # a list kept: one per element
        assert columns["meta.k"] == "v"  # a map kept: a struct, flattened by the receiver
        assert (error.body, error.severity_number, error.severity_text) == ("query failed", 17, "ERROR")
        assert error.span_id == query.get_span_context().span_id.to_bytes(8, "big")
        assert [e.level for e in logs] == [3, 2]
        assert {e.keyword for e in logs} == {1}

    def test_every_span_event_reaches_the_receiver_whole(self, app: App) -> None:
        """Each span becomes a Span event whose every value the receiver reads (nothing dropped), with
        ids, parent, kind, status, links, well-known attributes and the rest in PartC."""
        with capture_etw_events() as capture:
            request, _ = _run(app)
        spans = {e.fields["PartB"]["name"]: e for e in capture.events if e.name == "Span"}
        assert set(spans) == {"warmup", "GET /cart", "query"}
        for event in spans.values():
            attrs = otel_arrow_attributes(event.raw)
            assert len(attrs) == _leaves(event.fields)  # every value survives the receiver
            assert ("__csver__", 0x400) in attrs and ("PartB._typeName", "Span") in attrs
            assert event.level == 4 and event.keyword == 1
        req = dict(otel_arrow_attributes(spans["GET /cart"].raw))
        ctx = request.get_span_context()
        warm = spans["warmup"].fields["PartA"]
        assert req["PartA.ext_dt_traceId"] == f"{ctx.trace_id:032x}"
        assert req["PartA.ext_dt_spanId"] == f"{ctx.span_id:016x}"
        assert req["PartA.ext_cloud_role"] == "checkout"
        assert req["PartB.kind"] == 1 and req["PartB.success"] is True
        assert req["PartB.links"] == (
            f'[{{"toTraceId":"{warm["ext_dt_traceId"]}","toSpanId":"{warm["ext_dt_spanId"]}"}}]'
        )
        assert req["PartB.httpMethod"] == "GET"
        assert spans["GET /cart"].fields["PartC"] == {"tags": ["a", "b"], "retries": 2}
        q = spans["query"].fields["PartB"]
        assert q["parentId"] == f"{ctx.span_id:016x}"
        assert q["success"] is False and q["statusMessage"] == "timeout"
        assert q["startTime"] < spans["query"].fields["PartA"]["time"]

    def test_etw_events_have_the_etw_exporters_layout(self, app: App) -> None:
        """On ETW (TraceLogging) the same app's events have the ETW exporters' nested PartA and order."""
        with capture_etw_events("tracelogging") as capture:
            request, _ = _run(app)
        log = next(e for e in capture.events if e.name == "Log")
        assert list(log.fields) == ["__csver__", "PartA", "PartC", "PartB"]
        assert list(log.fields["PartA"]) == ["ext_dt", "ext_cloud", "time"]
        assert log.fields["PartA"]["ext_dt"]["spanId"] == f"{request.get_span_context().span_id:016x}"
        assert log.fields["PartA"]["ext_cloud"] == {"role": "checkout", "roleInstance": "pod-7"}
        assert next(iter(log.fields["PartC"])) == "region"  # ETW: resource attributes first
        span = next(
            e for e in capture.events if e.name == "Span" and e.fields["PartB"]["name"] == "GET /cart"
        )
        assert list(span.fields) == ["__csver__", "PartA", "PartC", "PartB"]
        assert list(span.fields["PartB"]) == [
            "_typeName", "name", "kind", "startTime", "links", "httpMethod", "success",
        ]  # fmt: skip


def _leaves(fields: dict[str, Any]) -> int:
    n = 0
    for value in fields.values():
        if isinstance(value, dict):
            n += _leaves(value)
        elif isinstance(value, list):
            n += len(value)
        else:
            n += 1
    return n


class TestBytesAsTheRustExporters:
    """For what the Rust user_events exporters can write, our events are their bytes exactly."""

    def test_a_log_record_is_byte_identical(self) -> None:
        """A record with scalar attributes, ids, event name and cloud role: the exporter's bytes."""
        name = _name()
        provider = LoggerProvider(resource=RESOURCE)
        provider.add_log_record_processor(SimpleLogRecordProcessor(EtwLogExporter(name)))
        span = trace.NonRecordingSpan(
            trace.SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xF067AA0BA902B7, False)
        )
        ctx = trace.set_span_in_context(span)
        with capture_etw_events() as capture:
            provider.get_logger("shop").emit(
                LogRecord(
                    timestamp=T_LOG,
                    context=ctx,
                    severity_number=SeverityNumber.ERROR2,
                    severity_text="ERROR",
                    body="payment failed",
                    attributes={"user": "ann", "attempts": 3, "ok": False, "ratio": 0.5, "event_id": 20},
                    event_name="PaymentFailed",
                )
            )
        provider.shutdown()
        (ours,) = capture.events
        expected = model.log_event(
            model.LogRecord(
                time="2025-11-29T17:12:17.123456789Z",
                severity_number=18,
                level=2,
                body="payment failed",
                severity_text="ERROR",
                event_name="PaymentFailed",
                trace_id="0af7651916cd43dd8448eb211c80319c",
                span_id="00f067aa0ba902b7",
                attributes=(
                    ("user", "ann"),
                    ("attempts", 3),
                    ("ok", False),
                    ("ratio", 0.5),
                    ("event_id", 20),
                ),
                cloud_role="checkout",
                cloud_role_instance="pod-7",
            )
        )
        assert ours.raw == expected

    def test_a_span_with_links_and_well_known_attributes_is_byte_identical(self) -> None:
        """A client span with a parent, a link, an error status and well-known attributes: the bytes of
        the Rust user_events trace exporter (which drops statusMessage when httpStatusCode is there)."""
        name = _name()
        provider = TracerProvider(resource=RESOURCE)
        provider.add_span_processor(SimpleSpanProcessor(EtwSpanExporter(name)))
        tracer = provider.get_tracer("shop")
        with capture_etw_events() as capture:
            other = tracer.start_span("other", start_time=T_START)
            other.end(end_time=T_START + 5)
            parent = tracer.start_span("parent", start_time=T_START)
            child = tracer.start_span(
                "call",
                context=trace.set_span_in_context(parent),
                kind=SpanKind.CLIENT,
                links=[trace.Link(other.get_span_context())],
                attributes={"peer": "db", "http.request.method": "POST", "http.response.status_code": 503},
                start_time=T_START + 1_000_000,
            )
            child.set_status(Status(StatusCode.ERROR, "unavailable"))
            child.end(end_time=T_LOG)
        provider.shutdown()
        ours = next(e for e in capture.events if e.fields["PartB"]["name"] == "call")
        cc, pc, oc = child.get_span_context(), parent.get_span_context(), other.get_span_context()
        expected = model.span_event(
            model.SpanRecord(
                name="call",
                start_time="2025-11-29T17:12:17.001Z",
                end_time="2025-11-29T17:12:17.123456789Z",
                trace_id=f"{cc.trace_id:032x}",
                span_id=f"{cc.span_id:016x}",
                parent_id=f"{pc.span_id:016x}",
                success=False,
                kind=2,
                status_message="unavailable",
                attributes=(("peer", "db"),),
                links=((f"{oc.trace_id:032x}", f"{oc.span_id:016x}"),),
                well_known=(("httpMethod", "POST"), ("httpStatusCode", 503)),
                cloud_role="checkout",
                cloud_role_instance="pod-7",
            )
        )
        assert ours.raw == expected


class TestOnlyWhatASessionWants:
    """An export nobody listens to builds nothing; what fails is counted, never raised."""

    def test_a_disabled_record_is_not_converted(self) -> None:
        """With no session at the record's level and keyword, export reads nothing past the severity
        and scope: attributes that would raise are never touched, and nothing is counted."""
        name = _name()
        exporter = EtwLogExporter(name)
        with capture_etw_events(enabled=False) as capture:
            assert exporter.export([_record(_Exploding())]) is _result(exporter, "SUCCESS")
        assert capture.events == []
        stats = exporter.provider.stats()
        assert stats["dropped"] == {} and stats["written"] == 0

    def test_a_record_that_cannot_be_converted_is_counted_not_raised(self) -> None:
        """A record whose attributes raise while a session listens: FAILURE, counted as internal_error."""
        name = _name()
        exporter = EtwLogExporter(name)
        with capture_etw_events() as capture:
            assert exporter.export([_record(_Exploding()), _record({"a": 1})]) is _result(exporter, "FAILURE")
        assert len(capture.events) == 1  # the good record of the batch is still written
        assert exporter.provider.stats()["dropped"] == {"internal_error": 1}

    def test_a_span_that_cannot_be_converted_is_counted_not_raised(self) -> None:
        """A span object the exporter cannot read: FAILURE, counted, no exception into the SDK."""
        exporter = EtwSpanExporter(_name())
        with capture_etw_events():
            assert exporter.export([object()]) is SpanExportResult.FAILURE  # type: ignore[list-item]
        assert exporter.provider.stats()["dropped"] == {"internal_error": 1}

    def test_a_batch_that_is_no_sequence_is_counted_not_raised(self) -> None:
        """``export`` of something that cannot be iterated: FAILURE and one internal_error, no raise."""
        exporter = EtwLogExporter(_name())
        with capture_etw_events():
            assert exporter.export(None) is _result(exporter, "FAILURE")  # type: ignore[arg-type]
        assert exporter.provider.stats()["dropped"] == {"internal_error": 1}

    def test_the_enabled_level_decides_per_record(self, app: App) -> None:
        """A session at warning and above gets the warning and the error, not the info record."""
        log = app.logger("shop.web")
        with capture_etw_events(enabled=False) as capture:
            for level in (1, 2, 3):
                capture.set_enabled(True, level, 1)
            log.info("ignored")
            log.warning("kept")
            log.error("kept too")
        assert [read_like_geneva(e.raw).body for e in capture.events] == ["kept", "kept too"]


class _Exploding(dict[str, Any]):
    def items(self) -> Any:
        raise RuntimeError("boom")

    def __bool__(self) -> bool:
        return True


def _record(attributes: Any) -> Any:
    provider = LoggerProvider(resource=RESOURCE)
    got: list[Any] = []

    class Keep(SimpleLogRecordProcessor):
        def on_emit(self, log_record: Any) -> None:
            got.append(log_record)

    provider.add_log_record_processor(Keep(EtwLogExporter(_name())))
    provider.get_logger("shop").emit(LogRecord(severity_number=SeverityNumber.INFO, body="b"))
    (rec,) = got
    rec.log_record.attributes = attributes
    return rec


def _result(exporter: EtwLogExporter, which: str) -> Any:
    return type(exporter.export([])).__members__[which]


class TestKeywordsAndNames:
    """Keywords per scope or severity (documented mapping, default 1) and event names are the user's."""

    def test_keywords_by_scope_route_by_the_loggers_dotted_name(self) -> None:
        """``keywords_by_scope`` maps the instrumentation scope (the stdlib logger's name) to a keyword."""
        app = App(_name(), keywords_by_scope={"shop.db": 0x2, "audit": 0x8})
        with capture_etw_events() as capture:
            app.logger("shop.db.pool").info("a")
            app.logger("audit").info("b")
            app.logger("shop.web").info("c")
        app.close()
        assert [e.keyword for e in capture.events] == [0x2, 0x8, 1]
        assert "_L4K8" in " ".join(capture.registered(app.log_exporter.provider.name))  # registered up front

    def test_keyword_for_routes_by_severity_and_counts_bad_answers(self) -> None:
        """``keyword_for(scope, severity)`` chooses; an invalid answer or an exception means the default."""

        def choose(scope: str | None, severity: int) -> int:
            if severity >= 17:
                return 0x4
            if severity >= 13:
                raise ValueError("no")
            return -1 if scope == "bad" else 0x10

        app = App(_name(), keyword_for=choose)
        with capture_etw_events() as capture:
            app.logger("x").error("e")
            app.logger("x").warning("w")
            app.logger("bad").info("i")
            app.logger("x").info("ok")
        app.close()
        assert [e.keyword for e in capture.events] == [0x4, 1, 1, 0x10]
        assert app.log_exporter.provider.stats()["invalid"] == {"keyword": 2}

    def test_event_names_are_the_users(self) -> None:
        """``event_name`` names the events (the Rust exporters' are always Log / Span)."""
        name = _name()
        logs = LoggerProvider(resource=RESOURCE)
        logs.add_log_record_processor(SimpleLogRecordProcessor(EtwLogExporter(name, event_name="ShopLog")))
        spans = TracerProvider(resource=RESOURCE)
        spans.add_span_processor(SimpleSpanProcessor(EtwSpanExporter(name, event_name="ShopSpan", level=5)))
        with capture_etw_events() as capture:
            logs.get_logger("s").emit(LogRecord(severity_number=SeverityNumber.INFO, body="b"))
            spans.get_tracer("s").start_span("x").end()
        logs.shutdown()
        spans.shutdown()
        assert [(e.name, e.level) for e in capture.events] == [("ShopLog", 4), ("ShopSpan", 5)]
        assert read_like_geneva(capture.events[0].raw).common_schema

    def test_severity_numbers_map_to_levels_as_the_exporters_do(self) -> None:
        """FATAL..DEBUG/TRACE severity numbers give levels 1..5; unspecified is verbose."""
        got = [level_of_severity(n) for n in (0, 1, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24)]
        assert got == [5, 5, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1]

    def test_setup_mistakes_raise_at_construction(self) -> None:
        """Bad keywords, names and mappings are set-up errors, raised by the constructor."""
        with pytest.raises(ValueError, match="keyword"):
            EtwLogExporter(_name(), keyword=-1)
        with pytest.raises(ValueError, match="event_name"):
            EtwSpanExporter(_name(), event_name="")
        with pytest.raises(ValueError, match="level"):
            EtwSpanExporter(_name(), level=9)
        with pytest.raises(TypeError, match="keywords_by_scope"):
            EtwLogExporter(_name(), keywords_by_scope=[("a", 1)])  # type: ignore[arg-type]


class TestShutdownAndFlush:
    """``shutdown``/``force_flush`` as the SDK expects them."""

    def test_after_shutdown_exports_write_nothing_and_fail(self) -> None:
        """After ``shutdown`` both exporters return FAILURE and write nothing; ``force_flush`` is True."""
        logs = EtwLogExporter(_name())
        spans = EtwSpanExporter(_name())
        assert logs.force_flush() and spans.force_flush(10)
        logs.shutdown()
        spans.shutdown()
        with capture_etw_events() as capture:
            assert logs.export([_record({"a": 1})]) is _result(logs, "FAILURE")
            assert spans.export([]) is SpanExportResult.FAILURE
        assert capture.events == []

    def test_a_shut_down_sdk_provider_shuts_the_exporter_down(self) -> None:
        """The SDK's LoggerProvider.shutdown reaches the exporter: later records are not written."""
        app = App(_name())
        app.close()
        with capture_etw_events() as capture:
            app.logger("late").warning("after shutdown")
        assert capture.events == []


RESULTS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / "otel_exporters.json"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "otel-exporters.md"


def speed_rows(results: dict[str, Any]) -> list[str]:
    """The rows of docs/otel-exporters.md's speed table, from the benchmark's results file."""
    rows = []
    for key, r in results["results"].items():
        kind, size = key.split("_batch")
        what = f"{kind}, {size} per export"
        ratios = f"{r['ours_vs_console']:.2f} | {r['ours_vs_otlp']:.2f} | {r['disabled_vs_console']:.3f}"
        rows.append(f"| {what} | {ratios} |")
    return rows


class TestTheSpeedFigures:
    """The figures docs/otel-exporters.md shows are the benchmark's results file, one for one."""

    def test_the_page_shows_every_row_of_the_results_file(self) -> None:
        """Each comparison of benchmarks/otel_exporters.py's last full run is a row of the page's table."""
        results = json.loads(RESULTS.read_text())
        assert not results["quick"]
        page = PAGE.read_text()
        for row in speed_rows(results):
            assert row in page, row
