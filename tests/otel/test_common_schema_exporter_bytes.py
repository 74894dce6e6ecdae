"""Byte for byte: our user_events Log and Span events against what OpenTelemetry's user_events
exporters would write for the same record (modelled from their source in
tests/helpers/common_schema_exporters.py)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from structlog_etw import EtwRenderer, Provider, etw_activity
from structlog_etw.backends.capture import CaptureBackend
from tests.helpers.common_schema_exporters import LogRecord, SpanRecord, log_event, span_event
from tests.helpers.eventheader_reader import parse

T_END = 1_764_436_337_123_456_789  # 2025-11-29T17:12:17.123456789Z
DURATION = 1_500_000
TRACE = 0x0AF7651916CD43DD8448EB211C80319C
SPAN = 0x00F067AA0BA902B7


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``clock(first)``: the wall clock reads ``first`` at its first call and DURATION later at each
    next one (one call per event rendered); the monotonic clock steps DURATION per call."""

    def start(first: int) -> None:
        wall = itertools.count(first, DURATION)
        ticks = itertools.count(step=DURATION)
        monkeypatch.setattr(time, "time_ns", lambda: next(wall))
        monkeypatch.setattr(time, "perf_counter_ns", lambda: next(ticks))

    return start


def capture(schema: str = "common") -> tuple[CaptureBackend, structlog.stdlib.BoundLogger]:
    backend = CaptureBackend("ExporterBytes", format="eventheader")
    provider = Provider("ExporterBytes", backend=backend)
    renderer = EtwRenderer("ExporterBytes", provider=provider, schema=schema)
    log = structlog.wrap_logger(None, processors=[renderer])
    return backend, log


def test_log_event_is_byte_identical_to_the_exporters(clock: Callable[[int], None]) -> None:
    """A Log event in an OTel span is byte-identical to what OTel's user_events exporter writes."""
    clock(T_END)
    backend, log = capture()
    span = NonRecordingSpan(SpanContext(TRACE, SPAN, is_remote=False))
    with trace.use_span(span):
        log.error("payment failed", etw_name="PaymentFailed", user="ann", attempts=3, ok=False, event_id=20)
    (ours,) = [r.event for r in backend.records]
    expected = log_event(
        LogRecord(
            time="2025-11-29T17:12:17.123456789Z",
            severity_number=17,
            level=2,
            body="payment failed",
            severity_text="ERROR",
            event_name="PaymentFailed",
            trace_id=f"{TRACE:032x}",
            span_id=f"{SPAN:016x}",
            attributes=(("user", "ann"), ("attempts", 3), ("ok", False), ("event_id", 20)),
        )
    )
    assert parse(ours).values() == parse(expected).values()  # a readable diff first
    assert ours == expected


def test_span_event_is_byte_identical_to_the_exporters(clock: Callable[[int], None]) -> None:
    """A nested activity's Span event is byte-identical to the exporter's, trace id the root's id."""
    clock(T_END - 2 * DURATION)  # Outer, Download start; Download, Outer stop
    backend, log = capture()
    with etw_activity(log, "Outer"), etw_activity(log, "Download", url="https://example.com/a") as act:
        pass
    inner, _outer = [r.event for r in backend.records]
    assert act.id is not None and act.related_id is not None
    expected = span_event(
        SpanRecord(
            name="Download",
            start_time="2025-11-29T17:12:17.121956789Z",
            end_time="2025-11-29T17:12:17.123456789Z",
            trace_id=act.related_id.hex,  # the root activity's id is the trace id
            span_id=act.id.hex[16:],
            parent_id=act.related_id.hex[16:],
            attributes=(("url", "https://example.com/a"),),
        )
    )
    assert parse(inner).values() == parse(expected).values()
    assert inner == expected


def test_a_failed_activity_is_an_unsuccessful_span_with_a_status(clock: Callable[[int], None]) -> None:
    """A failed activity is byte-identical to the exporter's unsuccessful span with its status message."""
    clock(T_END - DURATION)  # Job start, Job stop
    backend, log = capture()
    with pytest.raises(KeyError), etw_activity(log, "Job") as act:
        raise KeyError("x")
    (ours,) = [r.event for r in backend.records]
    assert act.id is not None
    expected = span_event(
        SpanRecord(
            name="Job",
            start_time="2025-11-29T17:12:17.121956789Z",
            end_time="2025-11-29T17:12:17.123456789Z",
            trace_id=act.id.hex,
            span_id=act.id.hex[16:],
            success=False,
            status_message="KeyError",
        )
    )
    assert ours == expected


def test_the_old_layout_differs_from_the_exporters(clock: Callable[[int], None]) -> None:
    """The tracing-etw layout's bytes differ from the exporter's (the comparison can fail)."""
    clock(T_END)
    # the comparison can fail: tracing-etw's layout is not what the exporter writes
    backend, log = capture("tracing-etw")
    log.info("m")
    (ours,) = [r.event for r in backend.records]
    when = "2025-11-29T17:12:17.123456789Z"
    expected = log_event(LogRecord(time=when, severity_number=9, level=4, body="m"))
    assert ours != expected


def test_the_start_time_is_when_the_start_passed_not_the_end_minus_the_duration(
    clock: Callable[[int], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Span's startTime is the Start's own wall time, not the end time minus the duration."""
    # the Stop is rendered DURATION after the activity measured its (zero) duration: the start is
    # still the Start's own time, not the end minus the duration
    clock(T_END - DURATION)
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    backend, log = capture()
    with etw_activity(log, "Job"):
        pass
    part_b = dict((n, v) for n, _e, _f, v in parse(backend.records[0].event).fields[2][3])
    assert part_b["startTime"] == "2025-11-29T17:12:17.121956789Z"
