"""``structlog-etw decode FILE.etl``: an .etl file's TraceLogging events, in the outputs of ``decode``.

:mod:`structlog_etw.cli.decode` hands a file over here when its content is an .etl file
(:func:`structlog_etw.etw.etl.is_etl`, whatever the name).  The TraceLogging events are written
as ``decode`` writes perf.data events (``text``, ``json``, ``chrome-trace``; the same filters);
every other record (the session header, kernel, manifest-based, classic and WPP events) is
counted and listed on stderr as "not TraceLogging", which is no problem.

Exit codes as for perf.data: 0 every TraceLogging event decoded; 1 the file is damaged or
truncated, or some TraceLogging events could not be decoded (what could be is still written);
2 the file cannot be read or is not an .etl file, or ``--perf-json`` was asked for.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import TextIO

from ..etw.etl import EtlError, EtlEvent, EtlFile
from ..read.decoded import EventMeta
from ..read.writers.console import printable
from ._report import MAX_REPORTED, PROG, Outcome, cannot_open, report
from .output import EventFilter, EventWriter, event_filter, make_writer, use_color

__all__ = ["decode_etl", "run"]

_MAX_KEPT = 100  # problem texts kept
_MAX_KINDS = 1000  # distinct (kind, source) pairs counted one by one; the rest together


def _meta(event: EtlEvent) -> EventMeta:
    return EventMeta(event.time_ns, event.realtime_ns, event.cpu, event.pid, event.tid, None)


def decode_etl(
    f: EtlFile,
    out: TextIO,
    *,
    mode: str = "text",
    colors: bool = False,
    wanted: EventFilter | None = None,
    time_order: bool = True,
) -> tuple[int, list[str], int, Counter[tuple[str, str]]]:
    """Write the file's TraceLogging events to ``out``; return ``(written, problems, count, others)``.

    ``problems``: the texts of the first 100 problems (the file's, then undecodable events');
    ``count``: how many there were in all.  ``others`` counts the records that are not
    TraceLogging by ``(kind, source)``
    (:attr:`~structlog_etw.etw.etl.EtlEvent.kind`, :attr:`~structlog_etw.etw.etl.EtlEvent.source`).
    ``wanted``: the events to write (``decode``'s filter, built once from its arguments;
    None: every event).  Never raises for what the file holds.
    """
    if wanted is None:
        wanted = EventFilter()
    writer: EventWriter = make_writer(mode, out, colors=colors)
    problems: list[str] = []
    undecodable = 0
    others: Counter[tuple[str, str]] = Counter()
    written = 0
    for event in f.events_by_time() if time_order else f.events():
        if event.kind != "tracelogging":
            key = (event.kind, event.source)
            if key not in others and len(others) >= _MAX_KINDS:
                key = (event.kind, "other sources")
            others[key] += 1
            continue
        decoded = event.decoded
        if decoded is None:
            undecodable += 1
            if len(problems) < _MAX_KEPT:
                problems.append(f"TraceLogging event at offset {event.offset}: cannot decode: {event.error}")
            continue
        if not wanted.accepts(decoded):
            continue
        writer.write(decoded, _meta(event))
        written += 1
    writer.close()
    kept = [*f.problems, *problems][:_MAX_KEPT]
    return written, kept, f.problem_count + undecodable, others


def _others_text(others: Counter[tuple[str, str]]) -> str:
    total = sum(others.values())
    parts = [f"{n} {kind} {source}" for (kind, source), n in others.most_common(MAX_REPORTED)]
    if len(others) > MAX_REPORTED:
        parts.append(f"... ({len(others) - MAX_REPORTED} more sources)")
    return f"{total} events not TraceLogging (not decoded): " + ", ".join(parts)


def run(args: argparse.Namespace) -> int:
    """Decode the .etl file ``args.file`` to stdout; report problems on stderr (``cli._report``)."""
    name = printable(args.file)
    if args.format == "perf-json":
        print(f"{PROG}: {name}: --perf-json is for perf.data files; this is an .etl file", file=sys.stderr)
        return 2
    try:
        f = EtlFile.open(args.file)
    except Exception as exc:  # a crafted header too: a message, never a traceback
        return cannot_open(name, exc, EtlError, ".etl")
    with f:
        written, problems, count, others = decode_etl(
            f,
            sys.stdout,
            mode=args.format,
            colors=use_color(args.color, sys.stdout),
            wanted=event_filter(args),
            time_order=args.order == "time",
        )
        sys.stdout.flush()
        notes = [_others_text(others)] if others else []
        outcome = Outcome(written, problems, count, notes, f.header.events_lost, "the session")
    return report(name, outcome)
