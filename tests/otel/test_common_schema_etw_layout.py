"""Our ETW (TraceLogging) Common Schema events against the layout OpenTelemetry's ETW exporters write.

Derived from ``open-telemetry/opentelemetry-rust-contrib`` at commit
``e075a6c382cb9e46aa48e319c141d909692ed966``:

- logs: ``opentelemetry-etw-logs/src/exporter/mod.rs`` (``export_log_data``: event ``Log``,
  ``add_u16("__csver__", 1024, Unsigned)``, PartA, PartC, PartB), ``part_a.rs`` (``ext_dt``
  struct, ``ext_cloud`` struct, then ``time``), ``part_b.rs`` (``_typeName``, [``body``],
  ``add_i16("severityNumber")``, [``severityText``], [``add_i64("eventId")``], [``name``]),
  ``part_c.rs``, ``common.rs`` (attributes: bool32, i64, f64, str8);
- spans: ``opentelemetry-etw-traces/src/exporter/mod.rs`` (event ``Span``: ``__csver__``, PartA,
  PartC, PartB), ``part_a.rs`` (``time``, ``ext_dt``, [``ext_cloud``]), ``part_b.rs``
  (``_typeName``, ``name``, ``add_u8("kind")``, ``startTime``, [``parentId``],
  [``statusMessage``], ``success``).

Compared: field names, nesting and order, TraceLogging in-types and values.  Out-types are not
compared: the exporters pass ``OutType::Default`` for most strings, this project writes UTF8 (what
the bytes are); and ``success`` is a BOOL32 here, a UINT8 with OutType Boolean there (both read as
a boolean; see docs/common-schema.md).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from structlog_etw import EtwRenderer, Provider, etw_activity
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.formats.tracelogging import InType, OutType
from structlog_etw.read.decoded import DecodedField
from structlog_etw.testing import decode_record

T_END = 1_764_436_337_123_456_789
DURATION = 1_500_000
TRACE = 0x0AF7651916CD43DD8448EB211C80319C
SPAN = 0x00F067AA0BA902B7
STR8 = InType.COUNTEDANSISTRING  # tracelogging_dynamic's add_str8


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


class Windows:
    def __init__(self, **kw: Any) -> None:
        self.backend = CaptureBackend("EtwLayout", format="tracelogging")
        provider = Provider("EtwLayout", backend=self.backend)
        renderer = EtwRenderer("EtwLayout", provider=provider, schema="common", **kw)
        self.log = structlog.wrap_logger(None, processors=[renderer])

    def tree(self, i: int) -> tuple[str, list[Any]]:
        ev = decode_record(self.backend.records[i]).decoded
        return ev.name, _tree(ev.field_list)


def _tree(fields: tuple[DecodedField, ...] | list[DecodedField]) -> list[Any]:
    return [
        (f.name, InType.STRUCT, _tree(f.value)) if f.is_struct else (f.name, f.encoding, f.value)
        for f in fields
    ]


def test_log_event_has_the_etw_log_exporters_layout(clock: Callable[[int], None]) -> None:
    """A Log event has the OTel ETW log exporter's field names, nesting, order, in-types and values."""
    clock(T_END)
    win = Windows(cloud_role="checkout", cloud_role_instance="pod-7")
    with trace.use_span(NonRecordingSpan(SpanContext(TRACE, SPAN, is_remote=False))):
        win.log.warning("low disk", etw_name="LowDisk", pct=3.5, n=2, ok=True, event_id=7)
    name, fields = win.tree(0)
    assert name == "Log"
    assert fields == [
        ("__csver__", InType.UINT16, 0x400),
        (
            "PartA",
            InType.STRUCT,
            [
                (
                    "ext_dt",
                    InType.STRUCT,
                    [("traceId", STR8, f"{TRACE:032x}"), ("spanId", STR8, f"{SPAN:016x}")],
                ),
                ("ext_cloud", InType.STRUCT, [("role", STR8, "checkout"), ("roleInstance", STR8, "pod-7")]),
                ("time", STR8, "2025-11-29T17:12:17.123456789Z"),
            ],
        ),
        (
            "PartC",
            InType.STRUCT,
            [("pct", InType.DOUBLE, 3.5), ("n", InType.INT64, 2), ("ok", InType.BOOL32, True)],
        ),
        (
            "PartB",
            InType.STRUCT,
            [
                ("_typeName", STR8, "Log"),
                ("body", STR8, "low disk"),
                ("severityNumber", InType.INT16, 13),
                ("severityText", STR8, "WARN"),
                ("eventId", InType.INT64, 7),
                ("name", STR8, "LowDisk"),
            ],
        ),
    ]
    csver = decode_record(win.backend.records[0]).decoded.field_list[0]
    assert csver.format == OutType.UNSIGNED  # add_u16(.., OutType::Unsigned)


def test_span_event_has_the_etw_trace_exporters_layout(clock: Callable[[int], None]) -> None:
    """A nested activity's Span event has the OTel ETW trace exporter's layout, parent included."""
    clock(T_END - 2 * DURATION)  # Outer, Download start; Download, Outer stop
    win = Windows()
    with etw_activity(win.log, "Outer"), etw_activity(win.log, "Download", url="u") as act:
        pass
    assert act.id is not None and act.related_id is not None
    name, fields = win.tree(0)
    assert name == "Span"
    assert fields == [
        ("__csver__", InType.UINT16, 0x400),
        (
            "PartA",
            InType.STRUCT,
            [
                ("time", STR8, "2025-11-29T17:12:17.123456789Z"),
                (
                    "ext_dt",
                    InType.STRUCT,
                    [("traceId", STR8, act.related_id.hex), ("spanId", STR8, act.id.hex[16:])],
                ),
            ],
        ),
        ("PartC", InType.STRUCT, [("url", STR8, "u")]),
        (
            "PartB",
            InType.STRUCT,
            [
                ("_typeName", STR8, "Span"),
                ("name", STR8, "Download"),
                ("kind", InType.UINT8, 0),
                ("startTime", STR8, "2025-11-29T17:12:17.121956789Z"),
                ("parentId", STR8, act.related_id.hex[16:]),
                ("success", InType.BOOL32, True),
            ],
        ),
    ]


def test_a_failed_root_activity_has_status_and_no_parent(clock: Callable[[int], None]) -> None:
    """A failed root activity's Span has statusMessage, success False, no parentId and no PartC."""
    clock(T_END - DURATION)
    win = Windows()
    with pytest.raises(ValueError), etw_activity(win.log, "Job"):
        raise ValueError
    _, fields = win.tree(0)
    part_b = dict((f[0], f[2]) for f in fields[-1][2])
    assert "parentId" not in part_b
    assert part_b["statusMessage"] == "ValueError"
    assert part_b["success"] is False
    assert [f[0] for f in fields] == ["__csver__", "PartA", "PartB"]  # no attributes: no PartC
