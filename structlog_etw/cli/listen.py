"""``structlog-etw listen PROVIDER``: a provider's events, live (see docs/cli/listen.md).

Subcommand module of :mod:`structlog_etw.cli`: :func:`add_arguments` and :func:`run`.  Exit codes: 0 done
(``--count``/``--duration`` reached, Ctrl-C or SIGTERM), 2 cannot listen (not Linux, no
user_events, no permission) or bad arguments.  Events go to stdout, one line each
(``--json``: the object ``decode --json`` prints); status, lost-event reports and the
final summary go to stderr.

Output and filters come from :mod:`structlog_etw.cli.output` (shared with ``decode``, reusable by another
event source): ``--format text`` (default, terminal or not) or ``json`` (``--json``), ``--level``,
``--keyword``, ``--color``/``--no-color``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from typing import IO

from ..formats.eventheader import validate_provider_name
from ..perf.listener import DEFAULT_PAGES, ListenedEvent, Listener, ListenError, LostEvents
from ..perf.listener import run as run_listener
from ..read.decoded import EventMeta
from ..read.writers.console import event_pretty, undecodable_pretty
from ..read.writers.json_lines import event_json, undecodable_json
from ._arguments import seconds_arg
from .output import EventWriter, add_filter_arguments, add_output_arguments, make_writer, use_color

__all__ = [
    "FORMATS",
    "add_arguments",
    "emit_to",
    "format_event",
    "make_printer",
    "run",
    "stop_on_signals",
    "use_color",
]

#: The output formats of ``listen`` (``--format``).
FORMATS = ("text", "json")
#: The perf system of every user_events tracepoint (``decode`` names them ``user_events:<name>``).
_SYSTEM = "user_events"


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _positive(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {text!r})")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``listen`` arguments."""
    parser.description = (
        "Show a provider's user_events live, decoded, while the application runs (Linux, root; "
        "no perf binary needed). Registers the provider's tracepoints if the application has not yet."
    )
    parser.add_argument("provider", help="provider name, e.g. MyCompany_MyService")
    add_filter_arguments(parser, names=False)
    parser.add_argument("--group", help="provider group (the G<group> tracepoint option)")
    add_output_arguments(parser, FORMATS)
    parser.add_argument("--count", type=_positive, help="stop after this many events")
    parser.add_argument("--duration", type=seconds_arg, help="stop after this many seconds")
    parser.add_argument(
        "--pages",
        type=_positive,
        default=DEFAULT_PAGES,
        help=f"ring buffer data pages per CPU, a power of two (default {DEFAULT_PAGES})",
    )
    parser.add_argument("--no-register", action="store_true", help="never register tracepoints, only listen")


def _meta(ev: ListenedEvent, system: str | None = _SYSTEM) -> EventMeta:
    tracepoint = f"{system}:{ev.tracepoint}" if system is not None else None
    return EventMeta(ev.time_ns, ev.realtime_ns, ev.cpu, ev.pid, ev.tid, tracepoint)


def emit_to(writer: EventWriter, system: str | None = _SYSTEM) -> Callable[[ListenedEvent], None]:
    """A function handing each listened event to ``writer`` (undecodable ones with their bytes).

    ``system``: the perf system of the events' tracepoints (``user_events``); ``None`` for an
    event source without tracepoints (ETW), whose events then have no ``tracepoint``.
    """

    def emit(ev: ListenedEvent) -> None:
        meta = _meta(ev, system)
        if ev.decoded is not None:
            writer.write(ev.decoded, meta)
        else:
            writer.undecodable(meta, ev.error or "undecodable", ev.raw)

    return emit


def format_event(ev: ListenedEvent, json_lines: bool, colors: bool = False) -> str:
    """One output line for ``ev``: ``decode``'s text or JSON object (undecodable events say why)."""
    meta = _meta(ev)
    if ev.decoded is not None:
        if json_lines:
            return event_json(ev.decoded, meta)
        return event_pretty(ev.decoded, meta, colors=colors)
    if json_lines:
        return undecodable_json(meta, ev.error, ev.raw)
    return undecodable_pretty(meta, ev.error)


def make_printer(json_lines: bool, colors: bool, out: IO[str]) -> Callable[[ListenedEvent], None]:
    """A function printing one event as a line to ``out``, flushed (the reader may be a pipe)."""
    return emit_to(make_writer("json" if json_lines else "text", out, colors=colors, flush=True))


#: The platform hook: on Windows ``listen`` reads a real-time ETW session (structlog_etw.etw).
#: The tests point these at the C stand-in of advapi32 to run that path on Linux.
_PLATFORM = sys.platform
_ETW_LIBRARY: str | None = None


@contextlib.contextmanager
def stop_on_signals(close: Callable[[], None]) -> Iterator[list[int]]:
    """Ctrl-C and SIGTERM only append to the yielded list (the loop sees it within a poll round and
    stops cleanly, showing everything already read); on leaving, the handlers are restored and
    ``close`` runs (the one home of both commands' signal handling)."""
    stopping: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        stopping.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stopping
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        close()


def _run_etw(args: argparse.Namespace) -> int:
    """``listen`` on Windows: a named ETW session for the provider; same output and filters."""
    from ..etw import EtwListener, EtwListenError  # noqa: PLC0415 (Windows only)
    from ..etw import run as run_etw  # noqa: PLC0415

    out, err = sys.stdout, sys.stderr
    if args.group is not None:
        print("structlog-etw listen: --group is for Linux tracepoint names", file=err, flush=True)
        return 2
    try:
        listener = EtwListener(args.provider, level=args.level, keyword=args.keyword, library=_ETW_LIBRARY)
    except EtwListenError as e:
        print(f"structlog-etw listen: {e}", file=err, flush=True)
        return 2
    with stop_on_signals(listener.close) as stopping:
        stale = " (stopped a stale session of that name)" if listener.stale_stopped else ""
        print(
            f"listening to {args.provider}: ETW provider {{{listener.provider_id}}}, "
            f"session {listener.name}{stale}; Ctrl-C to stop",
            file=err,
            flush=True,
        )
        writer = make_writer(args.format, out, colors=use_color(args.color, out), flush=True)
        emit = emit_to(writer, system=None)  # ETW events have no tracepoint
        shown = run_etw(listener, emit, count=args.count, duration=args.duration, stop=lambda: bool(stopping))
    print(f"structlog-etw listen: {shown} events, {listener.lost} lost", file=err, flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``structlog-etw listen``; return the exit code."""
    if _PLATFORM == "win32":
        return _run_etw(args)
    out, err = sys.stdout, sys.stderr
    try:  # before tracefs is touched: a name that cannot be a tracepoint's is the user's error
        validate_provider_name(args.provider, args.group)
    except ValueError as e:
        print(f"structlog-etw listen: {e}", file=err, flush=True)
        return 2
    try:
        listener = Listener(
            args.provider,
            level=args.level,
            keyword=args.keyword,
            group=args.group,
            pages=args.pages,
            register=not args.no_register,
        )
    except ListenError as e:
        print(f"structlog-etw listen: {e}", file=err, flush=True)
        return 2
    with stop_on_signals(listener.close) as stopping:  # nothing is cut off mid-batch
        names = ", ".join(listener.tracepoints) or "(none yet)"
        mine = f" (registered by listen: {', '.join(listener.registered)})" if listener.registered else ""
        print(f"listening to {args.provider}: {names}{mine}; Ctrl-C to stop", file=err, flush=True)

        def lost(item: LostEvents) -> None:
            print(f"structlog-etw listen: lost {item.count} events on CPU {item.cpu}", file=err, flush=True)

        writer = make_writer(args.format, out, colors=use_color(args.color, out), flush=True)
        emit = emit_to(writer)
        shown = run_listener(
            listener, emit, lost, count=args.count, duration=args.duration, stop=lambda: bool(stopping)
        )
    print(f"structlog-etw listen: {shown} events, {listener.lost} lost", file=err, flush=True)
    return 0
