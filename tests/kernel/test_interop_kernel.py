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

from structlog_etw import EtwRenderer, add_otel_ids, etw_activity
from structlog_etw._provider import Provider
from structlog_etw.decoded import DecodedField

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
    provider = Provider(provider_name)
    renderer = EtwRenderer(provider_name, provider=provider, schema="common")
    log = structlog.wrap_logger(None, processors=[renderer])
    try:
        with perf_session([f"{provider_name}_L4K1"]) as session:
            wait_until(lambda: provider.enabled(4, 1), what="perf to enable")
            with TRACER.start_as_current_span("request") as span:
                log.info("user_login", user="ann")
                with etw_activity(log, "Outer") as outer, etw_activity(log, "Inner", job=3) as inner:
                    log.info("work", n=1)
    finally:
        provider.close()
    ctx = span.get_span_context()
    trace_hex, span_hex = f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"
    login, work, inner_span, outer_span = decoded_capture(session, provider_name)
    assert outer.id is not None
    assert inner.id is not None

    assert login.name == "user_login"
    assert _shape(login.field_list) == [
        "__csver__",
        ("PartA", ["time", ("ext_dt", ["traceId", "spanId"])]),
        ("PartB", ["_typeName", "name", "eventTime"]),
        ("PartC", ["Body", "user"]),
    ]
    assert login.fields["__csver__"] == 0x0401
    assert login.fields["PartA"]["ext_dt"] == {"traceId": trace_hex, "spanId": span_hex}
    assert login.fields["PartB"]["_typeName"] == "Log"
    assert login.fields["PartC"] == {"Body": "user_login", "user": "ann"}

    # inside an activity the spanId is the activity's: the Log joins the Span event written for it
    assert work.fields["PartA"]["ext_dt"] == {"traceId": trace_hex, "spanId": inner.id.hex}

    assert inner_span.name == "Inner"
    assert _shape(inner_span.field_list) == [
        "__csver__",
        ("PartA", ["time", ("ext_dt", ["traceId", "spanId"])]),
        ("PartB", ["_typeName", "parentId", "name", "startTime"]),
        ("PartC", ["job", "duration_ns", "outcome"]),
    ]
    assert inner_span.fields["PartA"]["ext_dt"] == {"traceId": trace_hex, "spanId": inner.id.hex}
    assert inner_span.fields["PartB"]["parentId"] == outer.id.hex
    assert outer_span.name == "Outer"
    assert _shape(outer_span.field_list)[2] == ("PartB", ["_typeName", "name", "startTime"])
    assert all(e.opcode == 0 and e.activity_id is None for e in (login, work, inner_span, outer_span))
