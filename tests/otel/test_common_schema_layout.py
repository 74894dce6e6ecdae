"""Common Schema 4.0 field layout (format-neutral): parts, names, order and struct counts."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.otel import _common_schema as cs
from structlog_etw.write.fields import I64, JSON, MAX_STRUCT_FIELDS, STR, STRUCT, Field, to_fields

T0 = 1_764_436_337_123_456_789  # 2025-11-29T17:12:17.123456789Z


def names(fields: list[Field]) -> list[str]:
    return [f[0] for f in fields]


def part(fields: list[Field], name: str) -> list[Field]:
    (value,) = [f[2] for f in fields if f[0] == name]
    return value  # type: ignore[no-any-return]


def test_rfc3339_is_utc_with_microseconds_and_z() -> None:
    """rfc3339 writes UTC time with six fraction digits and a Z suffix."""
    assert cs.rfc3339(T0) == "2025-11-29T17:12:17.123456Z"
    parsed = dt.datetime.fromisoformat(cs.rfc3339(T0).replace("Z", "+00:00"))
    assert parsed.utcoffset() == dt.timedelta(0)


def test_log_event_layout_with_otel_ids_and_message_as_body() -> None:
    """A Log event: __csver__ 0x401, PartA time and ext_dt ids, PartB in order, the message as PartC Body."""
    fields = to_fields({"user": "ann", "message": "ann logged in", "attempts": 3}.items())
    out = cs.log_fields("user_login", fields, time_ns=T0, body=None, trace_id="a" * 32, span_id="b" * 16)
    assert names(out) == ["__csver__", "PartA", "PartB", "PartC"]
    assert out[0] == ("__csver__", I64, 0x0401)
    assert part(out, "PartA") == [
        ("time", STR, "2025-11-29T17:12:17.123456Z"),
        ("ext_dt", STRUCT, [("traceId", STR, "a" * 32), ("spanId", STR, "b" * 16)]),
    ]
    assert part(out, "PartB") == [
        ("_typeName", STR, "Log"),
        ("name", STR, "user_login"),
        ("eventTime", STR, "2025-11-29T17:12:17.123456Z"),
    ]
    assert part(out, "PartC") == [("Body", STR, "ann logged in"), ("user", STR, "ann"), ("attempts", I64, 3)]


def test_explicit_body_wins_and_a_message_field_stays_a_field() -> None:
    """An explicit body is the Body; a message field then stays an ordinary PartC field."""
    out = cs.log_fields("e", to_fields({"message": "m", "x": 1}.items()), time_ns=T0, body="the text")
    assert part(out, "PartC") == [("Body", STR, "the text"), ("message", STR, "m"), ("x", I64, 1)]


def test_unknown_ids_leave_ext_dt_out_and_part_a_counts_one_field() -> None:
    """Without ids PartA holds only time; with a span id alone ext_dt holds only spanId."""
    out = cs.log_fields("e", to_fields({"x": 1}.items()), time_ns=T0, body=None)
    assert names(part(out, "PartA")) == ["time"]
    only_span = cs.log_fields("e", [], time_ns=T0, body=None, span_id="c" * 32)
    assert part(only_span, "PartA")[1] == ("ext_dt", STRUCT, [("spanId", STR, "c" * 32)])


def test_event_without_fields_or_body_has_no_empty_part_c() -> None:
    """An event without fields or body has no (empty) PartC."""
    out = cs.log_fields("bare", [], time_ns=T0, body=None)
    assert names(out) == ["__csver__", "PartA", "PartB"]


def test_span_layout_with_parent_and_without() -> None:
    """A Span event has stop time, ext_dt, parentId when it has a parent, and startTime, in order."""
    start, stop = T0, T0 + 2_500_000_000
    out = cs.span_fields(
        "Download",
        to_fields({"url": "u"}.items()),
        start_ns=start,
        stop_ns=stop,
        span_id="1" * 32,
        parent_id="2" * 32,
        trace_id="3" * 32,
    )
    assert names(out) == ["__csver__", "PartA", "PartB", "PartC"]
    assert part(out, "PartA") == [
        ("time", STR, "2025-11-29T17:12:19.623456Z"),
        ("ext_dt", STRUCT, [("traceId", STR, "3" * 32), ("spanId", STR, "1" * 32)]),
    ]
    assert part(out, "PartB") == [
        ("_typeName", STR, "Span"),
        ("parentId", STR, "2" * 32),
        ("name", STR, "Download"),
        ("startTime", STR, "2025-11-29T17:12:17.123456Z"),
    ]
    top = cs.span_fields("Top", [], start_ns=start, stop_ns=stop, span_id="1" * 32)
    assert names(part(top, "PartB")) == ["_typeName", "name", "startTime"]
    assert part(top, "PartA")[1] == ("ext_dt", STRUCT, [("spanId", STR, "1" * 32)])


def test_more_fields_than_a_struct_holds_spill_into_a_json_field() -> None:
    """Past 127 fields PartC holds 126 and a _more JSON field with the rest in order."""
    many = to_fields((f"f{i}", i) for i in range(300))
    part_c = part(cs.log_fields("big", many, time_ns=T0, body=None), "PartC")
    assert len(part_c) == MAX_STRUCT_FIELDS
    assert part_c[-1][0] == "_more"
    assert part_c[-1][1] == JSON
    rest = json.loads(part_c[-1][2])
    assert list(rest) == [f"f{i}" for i in range(MAX_STRUCT_FIELDS - 1, 300)]


def _check_structs(fields: list[Field]) -> None:
    for f in fields:
        if f[1] == STRUCT:
            assert 1 <= len(f[2]) <= MAX_STRUCT_FIELDS
            _check_structs(f[2])


@settings(deadline=None, max_examples=60)
@given(
    st.dictionaries(st.text(max_size=5), st.integers(-5, 5) | st.text(max_size=3), max_size=200),
    st.none() | st.text(max_size=4),
    st.none() | st.just("t" * 32),
    st.none() | st.just("s" * 16),
)
def test_every_struct_holds_between_1_and_127_fields(
    d: dict[str, Any], body: str | None, trace: str | None, span: str | None
) -> None:
    """For any fields, body and ids every Log and Span struct holds 1 to 127 fields."""
    out = cs.log_fields("e", to_fields(d.items()), time_ns=T0, body=body, trace_id=trace, span_id=span)
    _check_structs(out)
    sp = cs.span_fields("s", to_fields(d.items()), start_ns=T0, stop_ns=T0, span_id="x", parent_id=span)
    _check_structs(sp)
