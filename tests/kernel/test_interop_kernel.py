"""OpenTelemetry ids and Common Schema events in a real kernel, captured by perf and decoded by the
project's perf.data reader and EventHeader decoder (marker ``kernel``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import structlog
from kernel_harness import PerfSession, wait_until
from opentelemetry.sdk.trace import TracerProvider
from test_activities_kernel import decoded_capture

from structlog_etw import EtwRenderer, Provider, add_otel_ids, etw_activity
from structlog_etw.read.decoded import DecodedField
from tests.helpers.common_schema_collectors import read_like_geneva

pytestmark = pytest.mark.kernel

TRACER = TracerProvider().get_tracer("structlog-etw-kernel")


def _shape(fields: Any) -> list[Any]:
    out: list[Any] = []
    for f in fields:
        if isinstance(f.value, list) and f.value and isinstance(f.value[0], DecodedField):
            out.append((f.name, _shape(f.value)))
        else:
            out.append(f.name)
    return out


def test_otel_ids_on_plain_events_arrive_in_perf(
    provider_name: str, perf_session: Callable[..., PerfSession]
) -> None:
    """add_otel_ids puts the OpenTelemetry trace and span ids on events in a span, and none outside."""
    provider = Provider(provider_name)
    log = structlog.wrap_logger(
        None, processors=[add_otel_ids, EtwRenderer(provider_name, provider=provider)]
    )
    try:
        with perf_session([f"{provider_name}_L4K1"]) as session:
            wait_until(lambda: provider.enabled(4, 1), what="perf to enable")
            with TRACER.start_as_current_span("request") as span:
                log.info("in_span", n=1)
            log.info("no_span", n=2)
    finally:
        provider.close()
    in_span, no_span = decoded_capture(session, provider_name)
    ctx = span.get_span_context()
    assert in_span.fields == {"n": 1, "trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"}
    assert no_span.fields == {"n": 2}


def test_common_schema_log_and_span_events_arrive_in_perf_field_by_field(
    provider_name: str, perf_session: Callable[..., PerfSession]
) -> None:
    """Common Schema Log and Span events arrive in perf with every part and field, ids linked to spans."""
    provider = Provider(provider_name)
    renderer = EtwRenderer(provider_name, provider=provider, schema="common")
    log = structlog.wrap_logger(None, processors=[renderer])
    try:
        with perf_session([f"{provider_name}_L4K1"]) as session:
            wait_until(lambda: provider.enabled(4, 1), what="perf to enable")
            with TRACER.start_as_current_span("request") as span:
                log.info("user_login", user="ann")
                with etw_activity(log, "Outer") as outer, etw_activity(log, "Inner", job=3) as inner:
                    log.info("work", etw_name="Work", n=1, event_id=5)
    finally:
        provider.close()
    ctx = span.get_span_context()
    trace_hex, span_hex = f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"
    login, work, inner_span, outer_span = decoded_capture(session, provider_name)
    assert outer.id is not None
    assert inner.id is not None

    assert (login.name, work.name, inner_span.name, outer_span.name) == ("Log", "Log", "Span", "Span")
    assert _shape(login.field_list) == [
        "__csver__",
        ("PartA", ["time", "ext_dt_traceId", "ext_dt_spanId"]),
        ("PartC", ["user"]),
        ("PartB", ["_typeName", "body", "severityNumber", "severityText"]),
    ]
    assert login.fields["__csver__"] == 0x400
    assert login.fields["PartA"]["ext_dt_traceId"] == trace_hex
    assert login.fields["PartA"]["ext_dt_spanId"] == span_hex
    assert login.fields["PartB"]["body"] == "user_login"

    # inside an activity the span id is the activity's: the Log joins the Span event written for it
    assert work.fields["PartA"]["ext_dt_traceId"] == trace_hex
    assert work.fields["PartA"]["ext_dt_spanId"] == inner.id.hex[16:]
    assert work.fields["PartB"]["eventId"] == 5
    assert work.fields["PartB"]["name"] == "Work"

    assert _shape(inner_span.field_list) == [
        "__csver__",
        ("PartA", ["time", "ext_dt_traceId", "ext_dt_spanId"]),
        ("PartB", ["_typeName", "name", "startTime", "success", "kind", "parentId"]),
        ("PartC", ["job"]),
    ]
    assert inner_span.fields["PartA"]["ext_dt_spanId"] == inner.id.hex[16:]
    assert inner_span.fields["PartB"]["parentId"] == outer.id.hex[16:]
    assert outer_span.fields["PartB"]["parentId"] == span_hex  # the OpenTelemetry span encloses it
    assert all(e.opcode == 0 and e.activity_id is None for e in (login, work, inner_span, outer_span))

    # the perf samples' bytes, read as otel-arrow's receiver and the Geneva uploader read them
    prefix = f"user_events:{provider_name}_"
    samples = [s for s in session.samples() if s.name.startswith(prefix)]
    logs = [read_like_geneva(s.data) for s in samples[:2]]
    assert all(r.common_schema for r in logs)
    assert [(r.body, r.severity_number, r.trace_id) for r in logs] == [
        ("user_login", 9, ctx.trace_id.to_bytes(16, "big")),
        ("work", 9, ctx.trace_id.to_bytes(16, "big")),
    ]
    assert [r.span_id for r in logs] == [ctx.span_id.to_bytes(8, "big"), inner.id.bytes[8:]]
