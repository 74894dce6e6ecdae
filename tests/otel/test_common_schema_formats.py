"""tracing-etw's Common Schema layout (``schema="tracing-etw"``) in both formats, decoded field by field."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider

from structlog_etw import EtwRenderer, Provider, etw_activity
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.read.decoded import DecodedEvent, DecodedField
from structlog_etw.testing import decode_record

TRACER = TracerProvider().get_tracer("structlog-etw-cs-tests")
RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class CS:
    def __init__(self, fmt: str) -> None:
        name = f"CsTest_{fmt}"
        self.backend = CaptureBackend(name, format=fmt)
        self.provider = Provider(name, backend=self.backend)
        renderer = EtwRenderer(name, provider=self.provider, schema="tracing-etw")
        self.log = structlog.wrap_logger(None, processors=[renderer])

    def events(self) -> list[DecodedEvent]:
        return [decode_record(r).decoded for r in self.backend.records]


@pytest.fixture(params=["eventheader", "tracelogging"])
def cs(request: Any) -> CS:
    """A tracing-etw schema renderer on a capture backend of each format."""
    return CS(request.param)


def shape(fields: tuple[DecodedField, ...] | list[DecodedField]) -> list[Any]:
    """Field names in order, structs as (name, [children]) - what the declared counts produced."""
    out: list[Any] = []
    for f in fields:
        if isinstance(f.value, list) and f.value and isinstance(f.value[0], DecodedField):
            out.append((f.name, shape(f.value)))
        else:
            out.append(f.name)
    return out


def parse_time(text: str) -> dt.datetime:
    assert RFC3339_UTC.match(text), text
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_log_event_has_csver_part_a_b_c_with_body(cs: CS) -> None:
    """In both formats a Log event decodes to __csver__, PartA time, PartB and PartC with Body."""
    before = dt.datetime.now(dt.timezone.utc)
    cs.log.info("user_login", user="ann", attempts=3)
    (ev,) = cs.events()
    assert ev.name == "user_login"
    assert ev.opcode == 0
    assert ev.activity_id is None
    assert shape(ev.field_list) == [
        "__csver__",
        ("PartA", ["time"]),
        ("PartB", ["_typeName", "name", "eventTime"]),
        ("PartC", ["Body", "user", "attempts"]),
    ]
    f = ev.fields
    assert f["__csver__"] == 0x0401
    assert f["PartB"]["_typeName"] == "Log"
    assert f["PartB"]["name"] == "user_login"
    assert f["PartA"]["time"] == f["PartB"]["eventTime"]
    assert (
        before - dt.timedelta(seconds=1) <= parse_time(f["PartA"]["time"]) <= before + dt.timedelta(minutes=1)
    )
    assert f["PartC"] == {"Body": "user_login", "user": "ann", "attempts": 3}


def test_etw_name_names_the_event_and_the_event_text_is_the_body(cs: CS) -> None:
    """In both formats etw_name names the event and PartB, and the event text is PartC's Body."""
    cs.log.warning("Disk almost full on /var", etw_name="DiskFull", pct=97.5)
    (ev,) = cs.events()
    assert ev.name == "DiskFull"
    assert ev.level == 3
    assert ev.fields["PartB"]["name"] == "DiskFull"
    assert ev.fields["PartC"] == {"Body": "Disk almost full on /var", "pct": 97.5}


def test_log_event_in_an_otel_span_carries_trace_and_span_ids_in_ext_dt(cs: CS) -> None:
    """In both formats a log in an OTel span carries its trace and span ids in PartA ext_dt."""
    with TRACER.start_as_current_span("req") as span:
        cs.log.info("in_span")
        ctx = span.get_span_context()
    (ev,) = cs.events()
    assert shape(ev.field_list)[1] == ("PartA", ["time", ("ext_dt", ["traceId", "spanId"])])
    assert ev.fields["PartA"]["ext_dt"] == {
        "traceId": format(ctx.trace_id, "032x"),
        "spanId": format(ctx.span_id, "016x"),
    }


def test_activity_is_one_span_event_at_stop_and_inner_logs_point_at_it(cs: CS) -> None:
    """In both formats an activity is one Span event at its Stop, parented, and its logs carry its id."""
    with etw_activity(cs.log, "Outer", job=1) as outer, etw_activity(cs.log, "Inner") as inner:
        cs.log.info("work", n=2)
        inner.record(bytes=10)
    work, inner_span, outer_span = cs.events()
    assert [e.name for e in (work, inner_span, outer_span)] == ["work", "Inner", "Outer"]
    assert all(e.opcode == 0 and e.activity_id is None for e in (work, inner_span, outer_span))
    assert inner.id is not None
    assert outer.id is not None
    assert work.fields["PartA"]["ext_dt"] == {"spanId": inner.id.hex}
    assert shape(inner_span.field_list) == [
        "__csver__",
        ("PartA", ["time", ("ext_dt", ["spanId"])]),
        ("PartB", ["_typeName", "parentId", "name", "startTime"]),
        ("PartC", ["bytes", "duration_ns", "outcome"]),
    ]
    b = inner_span.fields["PartB"]
    assert b["_typeName"] == "Span"
    assert b["parentId"] == outer.id.hex
    assert b["name"] == "Inner"
    assert inner_span.fields["PartA"]["ext_dt"] == {"spanId": inner.id.hex}
    assert parse_time(b["startTime"]) <= parse_time(inner_span.fields["PartA"]["time"])
    assert inner_span.fields["PartC"]["outcome"] == "ok"
    # the top-level span has no parentId: PartB declares 3 fields, not 4
    assert shape(outer_span.field_list)[2] == ("PartB", ["_typeName", "name", "startTime"])
    assert outer_span.fields["PartC"]["job"] == 1


def test_activity_in_an_otel_span_carries_the_trace_id_and_its_logs_join_its_span(cs: CS) -> None:
    """In both formats an activity in an OTel span carries its trace id, its logs the activity's span."""
    with TRACER.start_as_current_span("req") as span, etw_activity(cs.log, "Job") as act:
        cs.log.info("inside")
    inside, ev = cs.events()
    assert act.id is not None
    expected = {"traceId": format(span.get_span_context().trace_id, "032x"), "spanId": act.id.hex}
    assert ev.fields["PartB"]["_typeName"] == "Span"
    assert ev.fields["PartA"]["ext_dt"] == expected
    assert inside.fields["PartA"]["ext_dt"] == expected


def test_event_without_fields_has_body_only_part_c(cs: CS) -> None:
    """In both formats an event without fields has a PartC of Body alone."""
    cs.log.info("ping")
    (ev,) = cs.events()
    assert shape(ev.field_list)[3] == ("PartC", ["Body"])


def test_span_without_any_fields_still_declares_matching_counts(cs: CS) -> None:
    """In both formats a bare span's PartC holds duration_ns and outcome, its counts matching."""
    # duration_ns and outcome are always there, so PartC is never empty for a span
    with etw_activity(cs.log, "Bare"):
        pass
    (ev,) = cs.events()
    assert shape(ev.field_list)[3] == ("PartC", ["duration_ns", "outcome"])


def test_unknown_schema_is_a_setup_error() -> None:
    """An unknown schema name raises ValueError naming schema."""
    with pytest.raises(ValueError, match="schema"):
        EtwRenderer("CsTest_bad", schema="cs4", provider=Provider("CsTest_bad", backend=CaptureBackend("x")))
