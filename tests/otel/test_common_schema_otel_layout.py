"""The OpenTelemetry exporters' Common Schema layout (schema="common"), format by format, as fields."""

from __future__ import annotations

import json
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw import EtwRenderer, Provider, etw_activity
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.otel import _common_schema as cs
from structlog_etw.testing import decode_record
from structlog_etw.write.fields import (
    BOOL,
    I16,
    I64,
    JSON,
    MAX_STRUCT_FIELDS,
    STR,
    STRUCT,
    U8,
    U16,
    U32,
    Field,
    to_fields,
)

T0 = 1_764_436_337_123_456_789  # 2025-11-29T17:12:17.123456789Z
EH, TL = "eventheader", "tracelogging"


def names(fields: list[Field]) -> list[str]:
    return [f[0] for f in fields]


def part(fields: list[Field], name: str) -> list[Field]:
    (value,) = [f[2] for f in fields if f[0] == name]
    return value  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (T0, "2025-11-29T17:12:17.123456789Z"),
        (T0 - 789, "2025-11-29T17:12:17.123456Z"),
        (T0 - 456_789, "2025-11-29T17:12:17.123Z"),
        (T0 - 123_456_789, "2025-11-29T17:12:17Z"),
        (0, "1970-01-01T00:00:00Z"),
    ],
)
def test_time_has_the_fewest_exact_fraction_digits_like_chrono_autosi(ns: int, text: str) -> None:
    """Every timestamp is RFC 3339 with 0, 3, 6 or 9 fraction digits, the fewest exact, as chrono's AutoSi."""
    assert cs.rfc3339_autosi(ns) == text


def test_log_layout_on_user_events() -> None:
    """A user_events Log event has __csver__ u32, PartA time/ids, PartC attributes, then PartB in order."""
    fields = to_fields({"user": "ann", "event_id": 20, "attempts": 3}.items())
    out = cs.otel_log_fields(
        fields,
        fmt=EH,
        time_ns=T0,
        level=2,
        body="failed",
        name="LoginFailed",
        trace_id="a" * 32,
        span_id="b" * 16,
    )
    assert names(out) == ["__csver__", "PartA", "PartC", "PartB"]
    assert out[0] == ("__csver__", U32, 0x400)
    assert part(out, "PartA") == [
        ("time", STR, "2025-11-29T17:12:17.123456789Z"),
        ("ext_dt_traceId", STR, "a" * 32),
        ("ext_dt_spanId", STR, "b" * 16),
    ]
    assert part(out, "PartC") == [("user", STR, "ann"), ("attempts", I64, 3)]
    assert part(out, "PartB") == [
        ("_typeName", STR, "Log"),
        ("body", STR, "failed"),
        ("severityNumber", I16, 17),
        ("severityText", STR, "ERROR"),
        ("eventId", I64, 20),
        ("name", STR, "LoginFailed"),
    ]


def test_log_layout_on_etw_nests_ext_dt_and_ext_cloud_before_time() -> None:
    """On ETW __csver__ is u16 and PartA nests ext_dt and ext_cloud structs before the time."""
    out = cs.otel_log_fields(
        [], fmt=TL, time_ns=T0, level=4, body="m", trace_id="a" * 32, span_id="b" * 16, cloud=("r", "i")
    )
    assert names(out) == ["__csver__", "PartA", "PartB"]
    assert out[0] == ("__csver__", U16, 0x400)
    assert part(out, "PartA") == [
        ("ext_dt", STRUCT, [("traceId", STR, "a" * 32), ("spanId", STR, "b" * 16)]),
        ("ext_cloud", STRUCT, [("role", STR, "r"), ("roleInstance", STR, "i")]),
        ("time", STR, "2025-11-29T17:12:17.123456789Z"),
    ]


def test_a_message_field_is_the_body_when_there_is_no_event_text_and_an_explicit_body_wins() -> None:
    """A message field becomes the body only when there is no body; otherwise it stays in PartC."""
    moved = cs.otel_log_fields(
        to_fields({"message": "m", "x": 1}.items()), fmt=EH, time_ns=T0, level=4, body=None
    )
    assert part(moved, "PartB")[1] == ("body", STR, "m")
    assert part(moved, "PartC") == [("x", I64, 1)]
    kept = cs.otel_log_fields(to_fields({"message": "m"}.items()), fmt=EH, time_ns=T0, level=4, body="text")
    assert part(kept, "PartB")[1] == ("body", STR, "text")
    assert part(kept, "PartC") == [("message", STR, "m")]


def test_a_non_integer_event_id_stays_in_part_c() -> None:
    """A non-integer event_id stays in PartC and no eventId is written in PartB."""
    out = cs.otel_log_fields(to_fields({"event_id": "abc"}.items()), fmt=EH, time_ns=T0, level=4, body=None)
    assert part(out, "PartC") == [("event_id", STR, "abc")]
    assert "eventId" not in names(part(out, "PartB"))


def test_an_unknown_level_has_severity_zero_and_no_text() -> None:
    """An unknown level gives severityNumber 0 and no severityText."""
    out = cs.otel_log_fields([], fmt=EH, time_ns=T0, level=0, body=None)
    assert part(out, "PartB") == [("_typeName", STR, "Log"), ("severityNumber", I16, 0)]


def test_span_layout_per_format() -> None:
    """A Span event has the exporters' PartB field order and types per format (EventHeader vs ETW)."""
    kw: dict[str, Any] = {
        "start_ns": T0 - 1_000_000,
        "stop_ns": T0,
        "trace_id": "a" * 32,
        "span_id": "b" * 16,
        "parent_id": "c" * 16,
        "success": False,
        "status_message": "KeyError",
    }
    eh = cs.otel_span_fields("Job", to_fields({"n": 1}.items()), fmt=EH, **kw)
    assert names(eh) == ["__csver__", "PartA", "PartB", "PartC"]
    assert part(eh, "PartB") == [
        ("_typeName", STR, "Span"),
        ("name", STR, "Job"),
        ("startTime", STR, "2025-11-29T17:12:17.122456789Z"),
        ("success", BOOL, False),
        ("kind", U32, 0),
        ("parentId", STR, "c" * 16),
        ("statusMessage", STR, "KeyError"),
    ]
    tl = cs.otel_span_fields("Job", [], fmt=TL, **kw)
    assert names(tl) == ["__csver__", "PartA", "PartB"]
    assert names(part(tl, "PartA")) == ["time", "ext_dt"]
    assert part(tl, "PartB") == [
        ("_typeName", STR, "Span"),
        ("name", STR, "Job"),
        ("kind", U8, 0),
        ("startTime", STR, "2025-11-29T17:12:17.122456789Z"),
        ("parentId", STR, "c" * 16),
        ("statusMessage", STR, "KeyError"),
        ("success", BOOL, False),
    ]


def test_more_than_127_attributes_spill_into_more_instead_of_wrapping_the_count() -> None:
    """Past 127 attributes PartC holds 126 and a _more JSON of the rest, the count never wrapping."""
    many = to_fields((f"f{i}", i) for i in range(300))
    part_c = part(cs.otel_log_fields(many, fmt=EH, time_ns=T0, level=4, body=None), "PartC")
    assert len(part_c) == MAX_STRUCT_FIELDS
    assert part_c[-1][:2] == ("_more", JSON)
    assert list(json.loads(part_c[-1][2])) == [f"f{i}" for i in range(MAX_STRUCT_FIELDS - 1, 300)]


def _check_structs(fields: list[Field]) -> None:
    for f in fields:
        if f[1] == STRUCT:
            assert 1 <= len(f[2]) <= MAX_STRUCT_FIELDS
            _check_structs(f[2])


@settings(deadline=None, max_examples=60)
@given(
    st.dictionaries(st.text(max_size=5), st.integers(-5, 5) | st.text(max_size=3), max_size=200),
    st.none() | st.text(max_size=4),
    st.sampled_from([EH, TL]),
    st.integers(0, 6),
)
def test_every_struct_holds_between_1_and_127_fields(
    d: dict[str, Any], body: str | None, fmt: str, level: int
) -> None:
    """For any attributes, body, format and level every Log and Span struct holds 1 to 127 fields."""
    _check_structs(cs.otel_log_fields(to_fields(d.items()), fmt=fmt, time_ns=T0, level=level, body=body))
    span = cs.otel_span_fields(
        "s", to_fields(d.items()), fmt=fmt, start_ns=T0, stop_ns=T0, trace_id="t" * 32, span_id="s" * 16
    )
    _check_structs(span)


class _Linux:
    def __init__(self) -> None:
        self.backend = CaptureBackend("CsOtel", format=EH)
        self.provider = Provider("CsOtel", backend=self.backend)
        self.log = structlog.wrap_logger(
            None, processors=[EtwRenderer("CsOtel", provider=self.provider, schema="common")]
        )

    def fields(self) -> list[dict[str, Any]]:
        return [decode_record(r).fields for r in self.backend.records]


def test_an_activity_whose_start_nobody_saw_still_gets_w3c_sized_ids() -> None:
    """An activity whose Start nobody saw is its own trace with 32/16-hex ids, parented to the outer span."""
    linux = _Linux()
    slot = linux.provider.slot(4, 1)
    slot.word[0] = 0  # nobody listens when the activity starts
    with etw_activity(linux.log, "Outer") as outer, etw_activity(linux.log, "Late") as late:
        slot.word[0] = 1  # a session attaches
        linux.log.info("inside")
    inside, late_span, outer_span = linux.fields()
    assert outer.id is not None and late.id is not None
    # no Start seen: the activity is a trace of its own, its parent the enclosing activity's span
    assert inside["PartA"]["ext_dt_traceId"] == late.id.hex
    assert inside["PartA"]["ext_dt_spanId"] == late.id.hex[16:]
    assert late_span["PartB"]["parentId"] == outer.id.hex[16:]
    assert outer_span["PartA"]["ext_dt_traceId"] == outer.id.hex


def test_deep_nesting_keeps_a_bounded_record_and_every_level_its_own_span() -> None:
    """100 nested activities keep at most 64 traces recorded; the log gets the innermost span id."""
    linux = _Linux()
    acts = []
    stack = []
    for i in range(100):
        a = etw_activity(linux.log, f"L{i}")
        stack.append(a.__enter__())
        acts.append(a)
    assert len(cs._TRACES.get()) <= 64
    linux.log.info("deepest")
    for a in reversed(stack):
        a.__exit__(None, None, None)
    deepest = linux.fields()[0]
    innermost = acts[-1].id
    assert innermost is not None
    assert deepest["PartA"]["ext_dt_spanId"] == innermost.hex[16:]
    assert len(deepest["PartA"]["ext_dt_traceId"]) == 32
