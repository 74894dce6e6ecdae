"""OpenTelemetry correlation with the real opentelemetry-sdk: span ids on events and activities."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider

from structlog_etw import current_activity_id, etw_activity
from structlog_etw.context import _activity
from structlog_etw.context import _correlation as _otel

TRACER = TracerProvider().get_tracer("structlog-etw-tests")


@pytest.fixture
def seen() -> Iterator[list[tuple[dict[str, Any], Any]]]:
    """Every event dict after add_otel_ids, with the activity current then; OTel activity ids off after."""
    got: list[tuple[dict[str, Any], Any]] = []

    def record(_logger: Any, _name: str, event_dict: dict[str, Any]) -> Any:
        got.append((dict(event_dict), _activity.CURRENT_ACTIVITY.get()))
        raise structlog.DropEvent

    structlog.configure(processors=[_otel.add_otel_ids, record], cache_logger_on_first_use=False)
    try:
        yield got
    finally:
        structlog.reset_defaults()
        _otel.use_otel_activity_ids(False)


def test_processor_adds_trace_id_and_span_id_hex_of_the_current_span(seen: Any) -> None:
    """add_otel_ids adds the current span's 32/16-hex trace and span ids, and nothing outside a span."""
    log = structlog.get_logger()
    with TRACER.start_as_current_span("request") as span:
        log.info("inside")
        ctx = span.get_span_context()
    log.info("outside")
    inside, outside = seen[0][0], seen[1][0]
    assert inside["trace_id"] == format(ctx.trace_id, "032x")
    assert inside["span_id"] == format(ctx.span_id, "016x")
    assert len(inside["trace_id"]) == 32
    assert len(inside["span_id"]) == 16
    assert "trace_id" not in outside
    assert "span_id" not in outside


def test_processor_follows_the_innermost_span_and_keeps_explicit_keys(seen: Any) -> None:
    """add_otel_ids takes the innermost span's id and keeps a span_id the call gave."""
    log = structlog.get_logger()
    with TRACER.start_as_current_span("outer") as outer, TRACER.start_as_current_span("inner") as inner:
        log.info("in_inner")
        log.info("explicit", span_id="mine")
    e1, e2 = seen[0][0], seen[1][0]
    assert e1["span_id"] == format(inner.get_span_context().span_id, "016x")
    assert e1["trace_id"] == format(outer.get_span_context().trace_id, "032x")
    assert e2["span_id"] == "mine"


def test_activity_takes_its_id_from_the_current_span_when_enabled(seen: Any) -> None:
    """With use_otel_activity_ids the activity id is built from the span's trace and span ids."""
    log = structlog.get_logger()
    _otel.use_otel_activity_ids()
    with TRACER.start_as_current_span("download") as span, etw_activity(log, "Download") as act:
        ctx = span.get_span_context()
        expected = _otel.activity_id_from_span(ctx.trace_id, ctx.span_id)
        assert act.id == uuid.UUID(bytes=expected)
        hexid = act.id.hex
        assert hexid[:16] == format(ctx.trace_id, "032x")[:16]
        assert hexid[16:] == format(ctx.span_id, "016x")
    assert seen[0][1][0] == expected  # the Start event's activity id


def test_nested_activities_inside_one_span_get_fresh_unique_ids(seen: Any) -> None:
    """Only the first activity in a span takes its id; nested ones get fresh ids, a child span its own."""
    log = structlog.get_logger()
    _otel.use_otel_activity_ids()
    with TRACER.start_as_current_span("one_span") as span:
        ctx = span.get_span_context()
        from_span = uuid.UUID(bytes=_otel.activity_id_from_span(ctx.trace_id, ctx.span_id))
        with etw_activity(log, "A") as a, etw_activity(log, "B") as b, etw_activity(log, "C") as c:
            ids = [a.id, b.id, c.id]
            assert b.related_id == a.id
            assert c.related_id == b.id
        with TRACER.start_as_current_span("child_span") as child, etw_activity(log, "D") as d:
            cc = child.get_span_context()
            assert d.id == uuid.UUID(bytes=_otel.activity_id_from_span(cc.trace_id, cc.span_id))
    assert ids[0] == from_span
    assert len(set(ids)) == 3
    assert current_activity_id() is None
    assert _otel.SPAN_ID_TAKEN.get() is None


def test_per_activity_etw_otel_overrides_the_process_setting(seen: Any) -> None:
    """etw_otel=True/False overrides the process setting per activity and is not written as a field."""
    log = structlog.get_logger()
    with TRACER.start_as_current_span("s") as span:
        ctx = span.get_span_context()
        expected = uuid.UUID(bytes=_otel.activity_id_from_span(ctx.trace_id, ctx.span_id))
        with etw_activity(log, "Off") as off:
            assert off.id != expected
        with etw_activity(log, "On", etw_otel=True) as on:
            assert on.id == expected
        _otel.use_otel_activity_ids()
        with etw_activity(log, "ForcedOff", etw_otel=False) as forced:
            assert forced.id != expected
    assert all("etw_otel" not in e for e, _ in seen)


def test_activity_outside_any_span_gets_a_generated_id_even_when_enabled(seen: Any) -> None:
    """Outside any span an activity gets a random (version 4) id even with OTel ids enabled."""
    _otel.use_otel_activity_ids()
    with etw_activity(structlog.get_logger(), "NoSpan") as act:
        assert act.id is not None
        assert act.id.version == 4


def test_without_opentelemetry_installed_nothing_is_added_and_nothing_raises() -> None:
    """Without opentelemetry importable no ids are added, nothing raises, activities get random ids."""
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from structlog_etw.context import _correlation as _otel\n"
        "from structlog_etw.context._activity import etw_activity\n"
        "assert _otel.current_span_ids() is None\n"
        "assert _otel.add_otel_ids(None, 'info', {'event': 'x'}) == {'event': 'x'}\n"
        "_otel.use_otel_activity_ids()\n"
        "import structlog\n"
        "with etw_activity(structlog.get_logger(), 'A', etw_otel=True) as a: pass\n"
        "print('ok', a.id.version)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True, timeout=120
    )
    assert "ok 4" in out.stdout
