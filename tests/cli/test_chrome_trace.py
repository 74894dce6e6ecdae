"""``decode --format chrome-trace``: activities as slices, other events as instants, in the
Chrome / Perfetto trace-event format (checked by tests/helpers/trace_event.py)."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest

from structlog_etw.cli import main
from structlog_etw.cli.decode import decode_file
from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import to_fields
from tests.helpers.perfdata import ROUND, Event, Tracepoint, eventheader_format, perf_data
from tests.helpers.shared_data import REPO
from tests.helpers.trace_event import check_trace

TP = Tracepoint("user_events", eventheader_format("Shop_L4K1", 1500), 1500)
A, B, C, D, E, F = (uuid.UUID(int=n) for n in range(1, 7))
CAPTURE = REPO / "tests" / "data" / "structlog-etw-capture.perf.data"


def _ev(name: str, t: int, *, opcode: int = 0, aid: uuid.UUID | None = None,
        rel: uuid.UUID | None = None, tid: int = 10, **fields: Any) -> Event:  # fmt: skip
    data = EventHeaderEncoder().encode(
        name,
        to_fields(fields.items()),
        4,
        opcode=opcode,
        activity_id=aid.bytes if aid else None,
        related_id=rel.bytes if rel else None,
    )
    assert data is not None
    return Event(TP, data, t, pid=10, tid=tid)


def _timeline(events: list[Event | None]) -> dict[str, Any]:
    out = io.StringIO()
    _written, problems = decode_file(PerfDataFile.from_bytes(perf_data(events)), out, mode="chrome-trace")
    assert problems == []
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


SHOP = [
    _ev("request", 1_000, opcode=1, aid=A, method="GET"),
    _ev("db_query", 2_000, opcode=1, aid=B, rel=A),
    _ev("row", 2_500, aid=B, n=3),
    _ev("db_query", 3_000, opcode=2, aid=B, rows=3),
    None,  # FINISHED_ROUND
    _ev("request", 9_000, opcode=2, aid=A, status=200),
    # thread 11: two interleaved activities (async work): the second cannot nest in the first
    _ev("task", 1_500, opcode=1, aid=C, tid=11),
    _ev("task", 2_200, opcode=1, aid=D, rel=C, tid=11),
    _ev("task", 2_600, opcode=2, aid=C, tid=11),
    _ev("task", 4_000, opcode=2, aid=D, tid=11),
    # an activity that never stops, and a Stop whose Start is not in the capture
    _ev("job", 5_000, opcode=1, aid=E, tid=12),
    _ev("orphan", 6_000, opcode=2, aid=F, tid=12),
]


class TestTraceEventFormat:
    """The document is valid trace-event JSON: required keys, balanced slices, monotonic time."""

    def test_the_shop_timeline_is_valid(self) -> None:
        """The shop timeline passes the Trace Event Format check, with displayTimeUnit "ns"."""
        doc = _timeline(SHOP)
        assert check_trace(doc) == []
        assert doc["displayTimeUnit"] == "ns"

    def test_the_checker_catches_broken_documents(self) -> None:
        """The validation can fail: unbalanced, unordered and incomplete events are reported."""
        broken = {
            "traceEvents": [
                {"ph": "B", "name": "x", "ts": 5, "pid": 1, "tid": 1},
                {"ph": "E", "ts": 4, "pid": 1, "tid": 2},
                {"ph": "i", "ts": 3, "pid": 1, "tid": 1, "s": "q"},
                {"ph": "b", "ts": 6, "pid": 1, "tid": 1, "name": "y"},
            ]
        }
        problems = check_trace(broken)
        assert any("E without an open B" in p for p in problems)
        assert any("before the previous" in p for p in problems)
        assert any("scope" in p for p in problems)
        assert any("without cat or id" in p for p in problems)
        assert any("never ended" in p for p in problems)


class TestActivitiesAsSlices:
    """Start/Stop pairs by activity id become slices, nested on their thread's track."""

    def test_nested_activities_are_duration_slices_on_the_thread(self) -> None:
        """Nested activities become B/E slices on their thread, with start and stop fields and related id."""
        events = _timeline(SHOP)["traceEvents"]
        track = [e for e in events if e["tid"] == 10 and e["ph"] in "BE"]
        assert [(e["ph"], e.get("name"), e["ts"]) for e in track] == [
            ("B", "request", 1.0),
            ("B", "db_query", 2.0),
            ("E", None, 3.0),
            ("E", None, 9.0),
        ]
        request = track[0]["args"]
        assert request["method"] == "GET" and request["stop"] == {"status": 200}
        assert track[1]["args"]["related_id"] == str(A)

    def test_other_events_are_instants_with_their_fields(self) -> None:
        """An event outside start/stop is a thread-scoped instant with its fields and activity id."""
        events = _timeline(SHOP)["traceEvents"]
        (row,) = [e for e in events if e.get("name") == "row"]
        assert (row["ph"], row["s"], row["ts"], row["args"]) == (
            "i",
            "t",
            2.5,
            {"n": 3, "activity_id": str(B)},
        )

    def test_interleaved_activities_become_async_slices_under_their_root(self) -> None:
        """Activities that interleave on a thread become async b/e slices under their root activity's id."""
        events = _timeline(SHOP)["traceEvents"]
        thread = [e for e in events if e["tid"] == 11]
        assert [(e["ph"], e["ts"]) for e in thread if e["ph"] in "BE"] == [("B", 1.5), ("E", 2.6)]
        (begin,) = [e for e in thread if e["ph"] == "b"]
        (end,) = [e for e in thread if e["ph"] == "e"]
        assert (begin["id"], begin["ts"], end["ts"]) == (str(C), 2.2, 4.0)  # the root activity's id

    def test_unfinished_and_orphan_events(self) -> None:
        """An unfinished activity is closed at the capture's end and marked; a stray stop is an instant."""
        events = _timeline(SHOP)["traceEvents"]
        (job,) = [e for e in events if e.get("name") == "job"]
        assert job["ph"] == "B" and job["args"]["unfinished"] is True
        assert max(e["ts"] for e in events if e["tid"] == 12 and e["ph"] == "E") == 9.0  # the capture's end
        (orphan,) = [e for e in events if e.get("name") == "orphan"]
        assert orphan["ph"] == "i" and "unpaired" in orphan["args"]

    def test_timestamps_are_microseconds_of_the_perf_clock_in_order(self) -> None:
        """Timestamps are perf-clock microseconds, and events come out in time order."""
        events = _timeline([_ev("a", 1_234_567), ROUND, _ev("b", 1_000)])["traceEvents"]
        assert [(e["name"], e["ts"]) for e in events] == [("b", 1.0), ("a", 1234.567)]


class TestRealCapture:
    """A real kernel capture (tests/data, recorded by perf in the user_events guest)."""

    def test_the_capture_becomes_a_valid_timeline_with_its_request_slice(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The real capture becomes a valid timeline: one request slice with stop fields, four instants."""
        assert main(["decode", "--format", "chrome-trace", str(CAPTURE)]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert check_trace(doc) == []
        slices = [e for e in doc["traceEvents"] if e["ph"] == "B"]
        assert [(s["name"], s["pid"], s["tid"]) for s in slices] == [("request", 66, 66)]
        assert slices[0]["args"]["stop"] == {"status": 200, "duration_ms": 12.5}
        instants = [e["name"] for e in doc["traceEvents"] if e["ph"] == "i"]
        assert instants == ["service_started", "user_login", "payment_failed", "cache_stats"]


class TestRealActivitiesCapture:
    """tests/data/activities.perf.data: perf's capture of tests/kernel/listen_writer.py's
    ``activities`` workload in the user_events guest (the data of docs/cli/timeline.png)."""

    def test_its_timeline_has_the_nested_requests_and_the_interleaved_job(self) -> None:
        """The activities capture gives two workers' nested request slices and one interleaved async job."""
        out = io.StringIO()
        _written, problems = decode_file(
            PerfDataFile.open(REPO / "tests" / "data" / "activities.perf.data"), out, mode="chrome-trace"
        )
        assert problems == []
        doc = json.loads(out.getvalue())
        assert check_trace(doc) == []
        events = doc["traceEvents"]
        workers = sorted({e["tid"] for e in events if e.get("name") == "request"})
        assert len(workers) == 2
        for tid in workers:
            track = [(e["ph"], e.get("name")) for e in events if e["tid"] == tid and e["ph"] in "BE"]
            one = [
                ("B", "request"),
                ("B", "db_query"),
                ("E", None),
                ("B", "render"),
                ("E", None),
                ("E", None),
            ]
            assert track == one * 3
        jobs = sorted(e["ph"] for e in events if e.get("name") == "job")
        assert jobs == ["B", "b", "e"]  # one on the thread, the interleaved one async
        db = next(e for e in events if e.get("name") == "db_query" and e["ph"] == "B")
        request_ids = {
            e["args"]["activity_id"] for e in events if e.get("name") == "request" and e["ph"] == "B"
        }
        assert db["args"]["related_id"] in request_ids
        assert {"duration_ns", "outcome"} <= set(db["args"]["stop"])
