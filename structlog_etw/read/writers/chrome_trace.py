"""``--format chrome-trace``: a capture as a Chrome / Perfetto trace-event JSON timeline.

ui.perfetto.dev and chrome://tracing open the file (docs/cli/timeline.md).  What it holds:

- every activity as a slice: its Start event (opcode 1) and its Stop event (opcode 2) paired by
  activity id, named after the Start event, on the track of the thread that started it;
  ``args`` hold both events' fields, the activity id and the related (parent) activity id.
  Slices of one thread that nest in time are duration events (``B``/``E``) on that thread's
  track, so a child activity shows under its parent.  An activity that overlaps another on its
  thread without nesting (interleaved async work) becomes an async slice (``b``/``e``) whose id
  is its root activity's (followed through the related ids), so it nests under its ancestors
  on their own track.  A Start without a Stop lasts to the end of the capture (``args``
  ``"unfinished": true``); a Stop without its Start is an instant event;
- every other event as a thread-scoped instant event (``i``) with its fields as ``args``;
- timestamps (``ts``) in microseconds of the perf clock (``-k monotonic``: CLOCK_MONOTONIC),
  with nanosecond digits; ``displayTimeUnit`` ``"ns"``; the events sorted by time.

The writer renders from :class:`~structlog_etw.read.decoded.DecodedEvent` and
:class:`~structlog_etw.read.decoded.EventMeta` alone, so any event source (perf.data, live rings,
ETW) can feed it; it keeps the events until :meth:`ChromeTraceWriter.close` (memory grows with
the capture, as the output does).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import IO, Any

from ...formats._levels import Opcode
from ..decoded import DecodedEvent, EventMeta
from .json_lines import json_fields

__all__ = ["ChromeTraceWriter", "trace_events"]


@dataclass
class _Slice:
    name: str
    cat: str
    start: int
    end: int | None
    pid: int
    tid: int
    activity: str
    related: str | None
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Collected:
    time: int
    pid: int
    tid: int
    event: DecodedEvent


def _us(ns: int) -> float:
    """Nanoseconds -> microseconds, keeping the nanosecond digits."""
    return round(ns / 1000, 3)


def _instant(c: _Collected, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    ev = c.event
    args: dict[str, Any] = {**json_fields(ev), **(extra or {})}
    if ev.activity_id is not None:
        args["activity_id"] = str(ev.activity_id)
    return {
        "name": ev.name,
        "cat": ev.provider,
        "ph": "i",
        "s": "t",
        "ts": _us(c.time),
        "pid": c.pid,
        "tid": c.tid,
        "args": args,
    }


def _slices(collected: list[_Collected]) -> tuple[list[_Slice], list[dict[str, Any]]]:
    """Pair Start and Stop events into slices; everything else becomes an instant event."""
    open_: dict[str, _Slice] = {}
    slices: list[_Slice] = []
    instants: list[dict[str, Any]] = []
    for c in collected:
        ev = c.event
        aid = str(ev.activity_id) if ev.activity_id is not None else None
        if ev.opcode == Opcode.ACTIVITY_START and aid is not None and aid not in open_:
            related = str(ev.related_id) if ev.related_id is not None else None
            args: dict[str, Any] = {"activity_id": aid, "related_id": related, **json_fields(ev)}
            s = _Slice(ev.name, ev.provider, c.time, None, c.pid, c.tid, aid, related, args)
            open_[aid] = s
            slices.append(s)
        elif ev.opcode == Opcode.ACTIVITY_STOP and aid is not None and aid in open_:
            s = open_.pop(aid)
            s.end = max(c.time, s.start)
            stop_fields = json_fields(ev)
            if stop_fields:
                s.args["stop"] = stop_fields
        elif ev.opcode == Opcode.ACTIVITY_STOP and aid is not None:
            instants.append(_instant(c, {"unpaired": "Stop without its Start in the capture"}))
        else:
            instants.append(_instant(c))
    return slices, instants


def _root(s: _Slice, by_id: dict[str, _Slice]) -> str:
    """The activity id at the top of ``s``'s related chain (a cycle or a gap ends the walk)."""
    seen = {s.activity}
    current = s
    while current.related is not None and current.related in by_id and current.related not in seen:
        current = by_id[current.related]
        seen.add(current.activity)
    return current.activity


def trace_events(collected_events: list[tuple[DecodedEvent, EventMeta]]) -> list[dict[str, Any]]:
    """The trace events (``traceEvents``) of a capture, sorted by time (see the module docstring)."""
    collected = [
        _Collected(m.time_ns or 0, m.pid if m.pid is not None else -1, m.tid if m.tid is not None else -1, ev)
        for ev, m in collected_events
    ]
    collected.sort(key=lambda c: c.time)
    slices, instants = _slices(collected)
    last = max((c.time for c in collected), default=0)
    for s in slices:
        if s.end is None:
            s.end = last
            s.args["unfinished"] = True
    by_id = {s.activity: s for s in slices}
    by_thread: dict[tuple[int, int], list[_Slice]] = {}
    for s in slices:
        by_thread.setdefault((s.pid, s.tid), []).append(s)
    out: list[dict[str, Any]] = []
    for (pid, tid), track in by_thread.items():
        track.sort(key=lambda s: (s.start, -(s.end or 0)))
        stack: list[_Slice] = []
        for s in track:
            end = s.end or s.start
            while stack and (stack[-1].end or 0) <= s.start:
                done = stack.pop()
                out.append({"ph": "E", "ts": _us(done.end or 0), "pid": pid, "tid": tid})
            if stack and end > (stack[-1].end or 0):  # overlaps without nesting: an async slice
                async_id = _root(s, by_id)
                common = {"cat": s.cat, "id": async_id, "pid": pid, "tid": tid, "name": s.name}
                out.append({**common, "ph": "b", "ts": _us(s.start), "args": s.args})
                out.append({**common, "ph": "e", "ts": _us(end)})
                continue
            out.append(
                {
                    "name": s.name,
                    "cat": s.cat,
                    "ph": "B",
                    "ts": _us(s.start),
                    "pid": pid,
                    "tid": tid,
                    "args": s.args,
                }
            )
            stack.append(s)
        while stack:
            done = stack.pop()
            out.append({"ph": "E", "ts": _us(done.end or 0), "pid": pid, "tid": tid})
    out.extend(instants)
    out.sort(key=lambda e: float(e["ts"]))  # stable: each track's B/E order is kept at equal times
    return out


class ChromeTraceWriter:
    """Collects events (:meth:`write`) and writes the trace-event JSON at :meth:`close`."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.events: list[tuple[DecodedEvent, EventMeta]] = []
        self.undecodable_count = 0

    def write(self, event: DecodedEvent, meta: EventMeta) -> None:
        """Keep ``event`` for the timeline."""
        self.events.append((event, meta))

    def undecodable(self, meta: EventMeta, error: str, raw: bytes) -> None:
        """Count an event that could not be decoded (the command reports it; it has no slice)."""
        self.undecodable_count += 1

    def close(self) -> None:
        """Write ``{"traceEvents": [...], "displayTimeUnit": "ns", ...}`` (ASCII JSON) and flush."""
        doc = {
            "traceEvents": trace_events(self.events),
            "displayTimeUnit": "ns",
            "otherData": {"source": "structlog-etw", "clock": "perf (CLOCK_MONOTONIC with -k monotonic)"},
        }
        json.dump(doc, self.out, ensure_ascii=True, separators=(",", ":"))
        self.out.write("\n")
        self.out.flush()
