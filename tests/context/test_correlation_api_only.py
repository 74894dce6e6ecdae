"""OpenTelemetry correlation with opentelemetry-api only: no SDK, no TracerProvider.

The current span is a ``NonRecordingSpan`` made from a ``SpanContext`` (what a service gets
from propagated headers without an SDK), set current with ``set_span_in_context`` +
``context.attach``.  The ids must reach the decoded events and activities.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

from structlog_etw import EtwRenderer, add_otel_ids, etw_activity, use_otel_activity_ids
from structlog_etw.context import _correlation as _otel
from structlog_etw.testing import capture_etw_events

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN_ID = 0x00F067AA0BA902B7


@pytest.fixture
def api_only_span() -> Iterator[None]:
    """Make a NonRecordingSpan with fixed ids current (opentelemetry-api only)."""
    span_context = otel_trace.SpanContext(
        trace_id=TRACE_ID,
        span_id=SPAN_ID,
        is_remote=False,
        trace_flags=otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED),
    )
    token = otel_context.attach(otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(span_context)))
    try:
        yield
    finally:
        otel_context.detach(token)
        use_otel_activity_ids(False)


@pytest.mark.parametrize("fmt", ["eventheader", "tracelogging"])
def test_api_only_span_ids_are_on_the_decoded_event(api_only_span: None, fmt: str) -> None:
    """In both formats an API-only span's trace and span ids reach the decoded event as fields."""
    with capture_etw_events(fmt) as capture:
        log = structlog.wrap_logger(None, processors=[add_otel_ids, EtwRenderer("OtelApiOnly_Events")])
        log.info("charge", amount=3)
    (event,) = capture.events
    assert event.fields == {
        "amount": 3,
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "span_id": "00f067aa0ba902b7",
    }


@pytest.mark.parametrize("fmt", ["eventheader", "tracelogging"])
def test_api_only_span_gives_the_activity_its_id(api_only_span: None, fmt: str) -> None:
    """In both formats an API-only span gives the activity its id, carried by Start, log and Stop."""
    use_otel_activity_ids()
    expected = uuid.UUID("4bf92f35-77b3-4da6-00f0-67aa0ba902b7")
    assert expected.bytes == _otel.activity_id_from_span(TRACE_ID, SPAN_ID)
    with capture_etw_events(fmt) as capture:
        log = structlog.wrap_logger(None, processors=[add_otel_ids, EtwRenderer("OtelApiOnly_Activity")])
        with etw_activity(log, "Download") as act:
            log.info("chunk", n=1)
    assert act.id == expected
    start, chunk, stop = capture.events
    assert (start.name, chunk.name, stop.name) == ("Download", "chunk", "Download")
    assert [e.activity_id for e in (start, chunk, stop)] == [expected] * 3
    assert chunk.fields["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert chunk.fields["span_id"] == "00f067aa0ba902b7"


def test_api_only_span_ids_without_the_sdk_importable() -> None:
    """Same, in a fresh interpreter where ``opentelemetry.sdk`` cannot even be imported."""
    code = (
        "import sys; sys.modules['opentelemetry.sdk'] = None\n"
        "import structlog\n"
        "from opentelemetry import context, trace\n"
        "from structlog_etw import EtwRenderer, add_otel_ids\n"
        "from structlog_etw.testing import capture_etw_events\n"
        f"sc = trace.SpanContext(trace_id={TRACE_ID}, span_id={SPAN_ID}, is_remote=False,"
        " trace_flags=trace.TraceFlags(1))\n"
        "context.attach(trace.set_span_in_context(trace.NonRecordingSpan(sc)))\n"
        "with capture_etw_events() as cap:\n"
        "    structlog.wrap_logger(None, processors=[add_otel_ids, EtwRenderer('OtelNoSdk')]).info('x')\n"
        "(e,) = cap.events\n"
        "assert not any(m.startswith('opentelemetry.sdk') and sys.modules[m] for m in sys.modules)\n"
        "print(e.fields['trace_id'], e.fields['span_id'])\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True, timeout=120
    )
    assert out.stdout.split() == ["4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"]
