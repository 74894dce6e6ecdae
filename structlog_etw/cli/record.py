"""``structlog-etw record PROVIDER``: a provider's events into a perf.data file, no perf binary
(see docs/cli/record.md).

Subcommand module of :mod:`structlog_etw.cli`: :func:`add_arguments` and :func:`run`.  The
recording itself is :class:`~structlog_etw.perf.recorder.Recorder` writing through
:class:`~structlog_etw.perf.datawriter.PerfDataWriter`; this module handles the command line,
the signals, ``-- COMMAND`` and the messages.  Exit status: 0 recorded (the file is complete),
1 recording failed (the file was not written), 2 cannot record (not Linux, no user_events, no
permission, bad arguments); with ``-- COMMAND``, the command's exit status when it failed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._arguments import seconds_arg
from ._progress import Progress, human_bytes, progress_for
from .tracepoints import keyword_arg, level_arg

if TYPE_CHECKING:
    from ..perf.datawriter import PerfDataWriter
    from ..perf.recorder import Recorder

__all__ = ["DEFAULT_PAGES", "TAKES_COMMAND", "add_arguments", "run"]

#: ``structlog-etw record ... -- COMMAND``: the command line splits at ``--`` (see cli.main).
TAKES_COMMAND = True
#: Ring buffer data pages per CPU (a power of two): 512 KiB with 4 KiB pages, perf record's default.
DEFAULT_PAGES = 128
_PROG = "structlog-etw record"


def _pages(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1 or value & (value - 1):
        raise argparse.ArgumentTypeError(f"must be a power of two (got {text!r})")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``record`` arguments."""
    parser.description = (
        "Record a provider's user_events into a perf.data file that perf script, perf-decode and "
        "structlog-etw decode read (Linux; root or the permissions 'structlog-etw doctor' names; no perf "
        "binary needed). Registers the provider's tracepoints if the application has not yet, so "
        "recording can start first."
    )
    parser.add_argument("provider", metavar="PROVIDER", help="provider name, e.g. MyCompany_MyService")
    parser.add_argument(
        "-k",
        "--keyword",
        type=keyword_arg,
        action="append",
        metavar="KW",
        help="record this keyword's tracepoints (repeatable; default: every keyword the provider has "
        "registered when recording starts, and keyword 1)",
    )
    parser.add_argument(
        "-l",
        "--level",
        type=level_arg,
        metavar="L",
        help="record levels 1..L (1-5 or critical/error/warning/info/debug; default 5: all)",
    )
    parser.add_argument("-g", "--group", help="provider group (the G<group> tracepoint option)")
    parser.add_argument(
        "-o",
        "--output",
        default="perf.data",
        metavar="FILE",
        help="output file (default perf.data; '-': perf's pipe format to stdout)",
    )
    parser.add_argument("--duration", type=seconds_arg, metavar="S", help="stop after S seconds")
    parser.add_argument(
        "--pages",
        type=_pages,
        default=DEFAULT_PAGES,
        help=f"ring buffer data pages per CPU, a power of two (default {DEFAULT_PAGES})",
    )
    parser.add_argument(
        "--no-register", action="store_true", help="never register tracepoints, record those that exist"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line on a terminal's stderr")
    parser.epilog = (
        "'-- COMMAND [ARGS...]' at the end runs COMMAND once recording has started and stops when it "
        "exits. Otherwise recording stops on Ctrl-C, SIGTERM or --duration."
    )


def _fail(message: str, status: int = 2) -> int:
    print(f"{_PROG}: {message}", file=sys.stderr, flush=True)
    return status


def _progress_line(progress: Progress) -> Callable[[Recorder], None]:
    def show(recorder: Recorder) -> None:
        if not progress.due():
            return
        events = recorder.events
        progress.show(
            f"{events:,} events ({progress.rate(events):,.0f}/s), "
            f"{human_bytes(recorder.writer.data_bytes)} written, {recorder.lost:,} lost"
        )

    return show


def run(args: argparse.Namespace) -> int:
    """Run ``structlog-etw record``; return the exit code."""
    problem = _argument_problem(args)
    if problem is not None:
        return _fail(problem)
    from ..perf.recorder import Recorder, RecordError  # noqa: PLC0415

    opened = _open_writer(args.output)
    if isinstance(opened, int):
        return opened
    writer, where = opened
    try:
        recorder = Recorder(
            args.provider,
            writer,
            keywords=args.keyword,
            level=args.level,
            group=args.group,
            pages=args.pages,
            register=not args.no_register,
            cmdline=["structlog-etw", "record", *sys.argv[2:]] if sys.argv[1:2] == ["record"] else [],
        )
    except RecordError as e:
        writer.abort()
        return _fail(str(e))
    except OSError as e:
        writer.abort()
        return _fail(f"cannot record: {e.strerror or e}", 1)
    return _record(args, recorder, where)


def _argument_problem(args: argparse.Namespace) -> str | None:
    """What makes recording impossible before anything is opened (exit status 2), or None."""
    from ..formats.eventheader import validate_provider_name  # noqa: PLC0415

    try:
        validate_provider_name(args.provider, args.group)
    except ValueError as e:
        return str(e)
    if not sys.platform.startswith("linux"):
        return (
            f"record needs Linux user_events (this is {sys.platform}); on Windows record ETW with "
            "wpr, logman or tracelog (see docs/windows.md)"
        )
    command = getattr(args, "run_command", None)
    if command is not None and not command:
        return "'--' needs a COMMAND after it"
    if command and args.duration is not None:
        return "give either --duration or '-- COMMAND', not both"
    if args.output == "-" and sys.stdout.isatty():
        return "refusing to write perf.data to a terminal: redirect stdout, or give -o FILE"
    return None


def _open_writer(output: str) -> tuple[PerfDataWriter, str] | int:
    """The writer of ``output`` (``-``: stdout in the pipe format) and its place in words, or the exit
    status when it cannot be created."""
    from ..perf.datawriter import PerfDataWriter  # noqa: PLC0415

    if output == "-":
        return PerfDataWriter.to_stream(sys.stdout.buffer), "stdout (pipe format)"
    try:
        return PerfDataWriter.create(output), output
    except OSError as e:
        return _fail(f"cannot write {output}: {e.strerror or e}")


def _record(args: argparse.Namespace, recorder: Recorder, where: str) -> int:
    """Record until a signal, ``--duration`` or the command's end; the exit status."""
    from .listen import stop_on_signals  # noqa: PLC0415 - the one home of signal handling

    command = list(getattr(args, "run_command", None) or [])
    pipe = args.output == "-"
    progress = progress_for(_PROG, args.quiet)
    child: subprocess.Popen[bytes] | None = None
    status = 0
    with stop_on_signals(lambda: None) as stopping:
        names = ", ".join(recorder.tracepoints) or "(none)"
        mine = f" (registered by record: {', '.join(recorder.registered)})" if recorder.registered else ""
        print(
            f"recording {args.provider}: {names}{mine} into {where}; Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        if command:
            try:
                child = subprocess.Popen(command, stdout=sys.stderr if pipe else None)
            except OSError as e:
                recorder.stop()
                return _fail(f"cannot run {command[0]!r}: {e.strerror or e}", 127)

        def stop() -> bool:
            return bool(stopping) or (child is not None and child.poll() is not None)

        try:
            recorder.run(
                stop=stop,
                duration=args.duration,
                progress=None if progress is None else _progress_line(progress),
            )
        except OSError as e:
            if progress is not None:
                progress.done()
            if pipe and isinstance(e, BrokenPipeError):
                devnull = os.open(os.devnull, os.O_WRONLY)  # nothing more to flush at exit
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
                return _fail("the reader closed the pipe; recording stopped", 1)
            return _fail(f"recording failed, {args.output} not written: {e.strerror or e}", 1)
        finally:
            if progress is not None:
                progress.done()
            if child is not None:
                status = _finish_child(child, bool(stopping))
    _summary(recorder, args.output, args.pages, where)
    return status


def _summary(recorder: Recorder, output: str, pages: int, where: str) -> None:
    """The closing lines on stderr: events written and lost, and what to do about losses."""
    size = "" if output == "-" else f" ({human_bytes(_size(output))})"
    print(
        f"{_PROG}: {recorder.events} events written, {recorder.lost} lost, to {where}{size}",
        file=sys.stderr,
        flush=True,
    )
    if recorder.lost:
        print(
            f"{_PROG}: the kernel dropped {recorder.lost} events (ring buffers full; the file's LOST "
            f"records say where): give more --pages (now {pages}) or record fewer levels/keywords",
            file=sys.stderr,
            flush=True,
        )


def _finish_child(child: subprocess.Popen[bytes], signalled: bool) -> int:
    """The command's exit status; told to stop by a signal, it gets SIGTERM if still running."""
    if child.poll() is None and signalled:
        with contextlib.suppress(OSError):
            child.send_signal(signal.SIGTERM)
    while True:
        try:
            rc = child.wait()
            break
        except KeyboardInterrupt:  # pragma: no cover - the handlers are restored by now
            continue
    return rc if rc >= 0 else 128 - rc


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
