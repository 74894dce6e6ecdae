"""Our Common Schema events read the way Microsoft's user_events collectors read them.

The readers (tests/helpers/common_schema_collectors.py) follow the rules of otel-arrow's user_events receiver
and the Geneva uploader's OTLP encoder, written down from their source.  Every Log event must be
recognised as Common Schema with its time, severity, body, trace id and span id promoted.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import time
import uuid
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider

from structlog_etw import EtwRenderer, Provider, etw_activity, use_otel_activity_ids
from structlog_etw.backends.capture import CaptureBackend
from tests.helpers.common_schema_collectors import geneva_record, otel_arrow_attributes, read_like_geneva

TRACER = TracerProvider().get_tracer("structlog-etw-cs-readers")


class Linux:
    """A Common Schema renderer on a capture of the bytes handed to user_events."""

    def __init__(self, schema: str = "common", **kw: Any) -> None:
        name = "CsReaders"
        self.backend = CaptureBackend(name, format="eventheader")
        self.provider = Provider(name, backend=self.backend)
        renderer = EtwRenderer(name, provider=self.provider, schema=schema, **kw)
        self.log = structlog.wrap_logger(None, processors=[renderer])

    def events(self) -> list[bytes]:
        return [r.event for r in self.backend.records]


@pytest.fixture
def linux() -> Linux:
    """A Common Schema renderer on a capture of the bytes handed to user_events."""
    return Linux()


def test_a_plain_log_event_is_recognised_with_time_severity_and_body(linux: Linux) -> None:
    """Geneva's rules read a plain event as Common Schema with its time, severity, body and columns."""
    before = time.time_ns()
    linux.log.warning("disk almost full", pct=97.5, mount="/var")
    after = time.time_ns()
    (event,) = linux.events()
    rec = read_like_geneva(event)
    assert rec.common_schema
    assert before <= rec.timestamp_ns <= after
    assert (rec.severity_number, rec.severity_text) == (13, "WARN")
    assert rec.body == "disk almost full"
    assert rec.name is None  # no event name given: none promoted
    assert rec.columns == [("pct", 97.5), ("mount", "/var")]


@pytest.mark.parametrize(
    ("method", "number", "text"),
    [
        ("critical", 21, "FATAL"),
        ("error", 17, "ERROR"),
        ("warning", 13, "WARN"),
        ("info", 9, "INFO"),
        ("debug", 5, "DEBUG"),
    ],
)
def test_severity_follows_the_level(linux: Linux, method: str, number: int, text: str) -> None:
    """Every log method gives the OTel severity number and text Geneva reads (FATAL 21 .. DEBUG 5)."""
    getattr(linux.log, method)("m")
    (event,) = linux.events()
    rec = read_like_geneva(event)
    assert rec.common_schema
    assert (rec.severity_number, rec.severity_text) == (number, text)


def test_ids_of_the_current_otel_span_are_promoted(linux: Linux) -> None:
    """The current OTel span's trace and span ids, etw_name and event_id are promoted as Geneva reads."""
    with TRACER.start_as_current_span("req") as span:
        linux.log.info("in span", etw_name="InSpan", event_id=42)
    ctx = span.get_span_context()
    rec = read_like_geneva(linux.events()[0])
    assert rec.common_schema
    assert rec.trace_id == ctx.trace_id.to_bytes(16, "big")
    assert rec.span_id == ctx.span_id.to_bytes(8, "big")
    assert rec.name == "InSpan"
    assert ("eventId", 42) in rec.columns


def test_logs_inside_activities_carry_w3c_sized_ids_of_one_trace(linux: Linux) -> None:
    """In nested activities trace id is the root's id, span id the innermost's; Span events agree."""
    with etw_activity(linux.log, "Outer") as outer, etw_activity(linux.log, "Inner") as inner:
        linux.log.info("deep")
    with etw_activity(linux.log, "Other") as other:
        linux.log.info("elsewhere")
    deep, inner_span, outer_span, elsewhere, other_span = linux.events()
    assert outer.id is not None and inner.id is not None and other.id is not None
    rec = read_like_geneva(deep)
    assert rec.common_schema
    # the trace is the root activity's id, the span the innermost activity's last 8 bytes
    assert rec.trace_id == outer.id.bytes
    assert rec.span_id == inner.id.bytes[8:]
    second = read_like_geneva(elsewhere)
    assert second.trace_id == other.id.bytes != outer.id.bytes
    assert second.span_id == other.id.bytes[8:]
    # the Span events carry the same ids in the same fields
    inner_attrs = dict(otel_arrow_attributes(inner_span))
    assert inner_attrs["PartA.ext_dt_traceId"] == outer.id.hex
    assert inner_attrs["PartA.ext_dt_spanId"] == inner.id.hex[16:]
    assert inner_attrs["PartB.parentId"] == outer.id.hex[16:]
    outer_attrs = dict(otel_arrow_attributes(outer_span))
    assert "PartB.parentId" not in outer_attrs
    assert dict(otel_arrow_attributes(other_span))["PartA.ext_dt_traceId"] == other.id.hex


def test_an_activity_in_an_otel_span_is_a_child_span_of_it(linux: Linux) -> None:
    """An activity inside an OTel span keeps its trace id and has the OTel span as parent."""
    with TRACER.start_as_current_span("req") as span, etw_activity(linux.log, "Job") as job:
        linux.log.info("inside")
    inside, job_span = linux.events()
    ctx = span.get_span_context()
    assert job.id is not None
    rec = read_like_geneva(inside)
    assert rec.trace_id == ctx.trace_id.to_bytes(16, "big")
    assert rec.span_id == job.id.bytes[8:]
    attrs = dict(otel_arrow_attributes(job_span))
    assert attrs["PartA.ext_dt_traceId"] == f"{ctx.trace_id:032x}"
    assert attrs["PartB.parentId"] == f"{ctx.span_id:016x}"


def test_an_activity_that_took_the_span_id_is_that_span(linux: Linux) -> None:
    """With use_otel_activity_ids the activity's span id is the OTel span's, with no parent of its own."""
    use_otel_activity_ids()
    try:
        with TRACER.start_as_current_span("req") as span, etw_activity(linux.log, "Job"):
            linux.log.info("inside")
    finally:
        use_otel_activity_ids(False)
    inside, job_span = linux.events()
    ctx = span.get_span_context()
    rec = read_like_geneva(inside)
    assert rec.span_id == ctx.span_id.to_bytes(8, "big")
    attrs = dict(otel_arrow_attributes(job_span))
    assert attrs["PartA.ext_dt_spanId"] == f"{ctx.span_id:016x}"
    assert "PartB.parentId" not in attrs  # not its own parent


def test_an_otel_span_inside_an_activity_is_the_innermost(linux: Linux) -> None:
    """An OTel span opened inside an activity gives the log event's trace and span ids."""
    with etw_activity(linux.log, "Job"), TRACER.start_as_current_span("req") as span:
        linux.log.info("inside")
    rec = read_like_geneva(linux.events()[0])
    ctx = span.get_span_context()
    assert rec.span_id == ctx.span_id.to_bytes(8, "big")
    assert rec.trace_id == ctx.trace_id.to_bytes(16, "big")


def test_cloud_role_and_instance_are_promoted() -> None:
    """cloud_role and cloud_role_instance are promoted to Geneva's role and role instance."""
    linux = Linux(cloud_role="checkout", cloud_role_instance="pod-7")
    linux.log.info("m")
    rec = read_like_geneva(linux.events()[0])
    assert (rec.role, rec.role_instance) == ("checkout", "pod-7")


def test_every_kind_of_field_keeps_the_event_recognised(linux: Linux) -> None:
    """An event with a field of every kind is still recognised, its values and nested columns read."""
    linux.log.error(
        "everything",
        i=-3,
        big=2**64 - 1,
        f=1.5,
        b=True,
        s="x",
        raw=b"\x00\x01",
        u=uuid.UUID(int=1),
        ip=ipaddress.IPv4Address("10.0.0.1"),
        when=dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc),
        nested={"a": {"b": 1}},
        ints=[1, 2],
        mixed=[1, "a"],
        message="a message field",
    )
    rec = read_like_geneva(linux.events()[0])
    assert rec.common_schema
    assert rec.body == "everything"
    assert (rec.severity_number, rec.severity_text) == (17, "ERROR")
    cols = dict(rec.columns)
    assert cols["i"] == -3
    assert cols["b"] is True
    assert cols["nested.a.b"] == 1
    assert cols["message"] == "a message field"


def test_an_event_with_more_fields_than_a_struct_holds_is_still_recognised(linux: Linux) -> None:
    """300 fields: the event is still recognised, the fields past the struct limit in _more as JSON."""
    linux.log.info("wide", **{f"k{i}": i for i in range(300)})
    rec = read_like_geneva(linux.events()[0])
    assert rec.common_schema
    assert rec.body == "wide"
    cols = dict(rec.columns)
    assert cols["k0"] == 0 and cols["k125"] == 125 and '"k299": 299' in cols["_more"]


def test_tracing_etw_layout_is_not_recognised_which_is_why_it_is_not_the_default() -> None:
    """The tracing-etw layout is not recognised as Common Schema by Geneva's rules (__csver__ 0x401)."""
    old = Linux(schema="tracing-etw")
    with TRACER.start_as_current_span("req"):
        old.log.info("m")
    rec = read_like_geneva(old.events()[0])
    assert not rec.common_schema
    assert ("__csver__", 0x0401) in rec.columns


def test_span_events_are_not_log_records_for_geneva(linux: Linux) -> None:
    """A Span event is typed "Span" and not taken by Geneva's reader as a log record."""
    # Geneva's OTLP log encoder recognises only PartB._typeName "Log" (spans reach it as OTLP
    # spans): a Span event read off user_events is kept as columns, as the exporter's would be.
    with etw_activity(linux.log, "Job"):
        pass
    attrs = otel_arrow_attributes(linux.events()[0])
    assert dict(attrs)["PartB._typeName"] == "Span"
    assert not geneva_record(attrs).common_schema


def test_padding_after_the_event_is_ignored_as_the_receiver_ignores_it(linux: Linux) -> None:
    """Zero padding after the event (perf's 8-byte alignment) does not change what is read."""
    linux.log.info("padded")
    (event,) = linux.events()
    rec = read_like_geneva(event + b"\0" * 7)  # perf pads a sample's raw data to 8 bytes
    assert rec.common_schema
    assert rec.body == "padded"
