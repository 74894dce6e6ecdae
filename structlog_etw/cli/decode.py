"""``structlog-etw decode FILE``: perf.data -> one JSON object per event, or coloured text.

Exit codes: 0 every sample decoded; 1 the file is damaged or truncated, or some
samples could not be decoded (what could be decoded is still written, the rest
is reported on stderr); 2 the file cannot be read or is not a perf.data file.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from typing import TextIO

from ..perf.datafile import PerfDataError, PerfDataFile, Sample
from ..perf.samples import SampleDecodeError, decode_sample, sample_perf_json
from .render import EventMeta, event_json, event_pretty

__all__ = ["add_arguments", "decode_file", "run"]

_MAX_REPORTED = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``decode``."""
    parser.add_argument(
        "file",
        metavar="FILE",
        help="perf.data file written by perf record ('-': read stdin, e.g. perf's pipe mode)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--json", action="store_true", help="one JSON object per line (default when not a terminal)"
    )
    mode.add_argument("--pretty", action="store_true", help="console text (default on a terminal)")
    mode.add_argument(
        "--perf-json",
        action="store_true",
        help="one object per line exactly as Microsoft's perf-decode writes it",
    )
    parser.add_argument(
        "--provider", action="append", metavar="P", help="only events of provider P (repeatable)"
    )
    parser.add_argument("--event", action="append", metavar="E", help="only events named E (repeatable)")
    parser.add_argument(
        "--time-order", action="store_true", help="sort by timestamp within each perf round (perf's order)"
    )
    parser.epilog = (
        "Colour is used only on a terminal and when NO_COLOR is unset. Exit status: 0 all decoded, 1 damaged"
        " file or undecodable samples (reported on stderr), 2 unreadable file."
    )


def _meta(sample: Sample) -> EventMeta:
    return EventMeta(sample.time, sample.realtime_ns, sample.cpu, sample.pid, sample.tid, sample.name or None)


def decode_file(
    f: PerfDataFile,
    out: TextIO,
    *,
    mode: str,
    colors: bool = False,
    providers: Iterable[str] | None = None,
    events: Iterable[str] | None = None,
    time_order: bool = False,
) -> tuple[int, list[str]]:
    """Write the file's events to ``out``; return ``(events written, problems)``."""
    want_providers = set(providers) if providers else None
    want_events = set(events) if events else None
    problems: list[str] = []
    unknown: dict[str, int] = {}  # samples without a tracepoint format, by name
    written = 0
    samples: Iterable[Sample] = f.samples_in_time_order() if time_order else f.samples()
    for sample in samples:
        try:
            event = decode_sample(sample)
            if want_providers is not None and event.provider not in want_providers:
                continue
            if want_events is not None and event.name not in want_events:
                continue
            if mode == "perf-json":
                line = sample_perf_json(sample, decoded=event)
            elif mode == "json":
                line = event_json(event, _meta(sample))
            else:
                line = event_pretty(event, _meta(sample), colors=colors)
        except SampleDecodeError as exc:
            if sample.format is None:
                key = sample.name or "unnamed events"
                unknown[key] = unknown.get(key, 0) + 1
            else:
                problems.append(str(exc))
            continue
        out.write(line + "\n")
        written += 1
    for name, count in unknown.items():
        problems.append(
            f"{count} samples of {name} not decoded: tracepoint format unknown"
            " (the file lacks its tracing data: truncated?)"
        )
    return written, [*f.problems, *problems]


def run(args: argparse.Namespace) -> int:
    """Decode ``args.file`` to stdout; report problems on stderr."""
    prog = "structlog-etw decode"
    try:
        if args.file == "-":  # perf record -o - | structlog-etw decode -
            f = PerfDataFile.from_bytes(sys.stdin.buffer.read(), "stdin")
        else:
            f = PerfDataFile.open(args.file)
    except OSError as exc:
        print(f"{prog}: {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except PerfDataError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    tty = sys.stdout.isatty()
    if args.perf_json:
        mode = "perf-json"
    elif args.json:
        mode = "json"
    elif args.pretty:
        mode = "pretty"
    else:
        mode = "pretty" if tty else "json"
    colors = mode == "pretty" and tty and not os.environ.get("NO_COLOR")
    if mode == "perf-json":
        # perf-decode's bytes, invalid UTF-8 included (kept as surrogate escapes until written).
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
    written, problems = decode_file(
        f,
        sys.stdout,
        mode=mode,
        colors=colors,
        providers=args.provider,
        events=args.event,
        time_order=args.time_order,
    )
    sys.stdout.flush()
    for p in problems[:_MAX_REPORTED]:
        print(f"{prog}: {args.file}: {p}", file=sys.stderr)
    if len(problems) > _MAX_REPORTED:
        print(f"{prog}: {args.file}: ... and {len(problems) - _MAX_REPORTED} more problems", file=sys.stderr)
    if f.lost:
        print(f"{prog}: {args.file}: perf lost {f.lost} events while recording", file=sys.stderr)
    if problems:
        print(
            f"{prog}: {args.file}: {written} events decoded; {len(problems)} problems"
            " (file damaged or truncated?)",
            file=sys.stderr,
        )
        return 1
    return 0
