"""The ``structlog-etw`` command (also ``python -m structlog_etw``).

Each subcommand lives in its own module, imported only when that subcommand
runs.  A subcommand module provides::

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int: ...      # the exit code

and is registered with ONE line in :data:`COMMANDS`.  Modules must import on
every OS (import OS-specific things inside ``run``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

from .. import __version__

__all__ = ["COMMANDS", "main"]

#: ``(name, module, one-line help)``: add a subcommand by adding a line here.
COMMANDS: Final[list[tuple[str, str, str]]] = [
    ("guid", "structlog_etw.cli.guid", "ETW provider id (GUID) for a provider name"),
    ("tracepoints", "structlog_etw.cli.tracepoints", "user_events tracepoint names and a perf command line"),
    ("decode", "structlog_etw.cli.decode", "decode a perf.data or .etl file to JSON or text"),
    ("listen", "structlog_etw.cli.listen", "show a provider's events live (Linux, root; no perf needed)"),
    (
        "record",
        "structlog_etw.cli.record",
        "record a provider's events into perf.data (Linux; no perf needed)",
    ),
    (
        "doctor",
        "structlog_etw.cli.doctor",
        "check that this machine can write and record events, and say how to fix it",
    ),
    ("demo", "structlog_etw.cli.demo", "log a short structlog sequence and show the events it becomes"),
    ("wprp", "structlog_etw.cli.wprp", "a WPR recording profile (.wprp) for providers, for wpr -start"),
]


def _version() -> str:
    return __version__


def _terminal_columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` finds it: ``$COLUMNS``, else the
    width of the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter, the terminal's width read without :mod:`shutil`.

    argparse builds a formatter for every ``add_argument`` (to check its metavar), and its own
    asks ``shutil.get_terminal_size`` for the width: importing shutil (and zlib, bz2 and lzma
    with it) would cost every start of the command a few milliseconds for nothing.
    """

    def __init__(self, prog: str, *args: Any, **kwargs: Any) -> None:
        if len(args) < 3 and kwargs.get("width") is None:  # width: the third after prog
            kwargs["width"] = _terminal_columns() - 2  # as argparse's own: 2 columns of margin
        super().__init__(prog, *args, **kwargs)


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The argument parser; only the subcommand named in ``argv`` gets its module imported."""
    parser = argparse.ArgumentParser(
        prog="structlog-etw",
        description="Tools for structlog-etw events: provider GUIDs, user_events tracepoints,"
        " perf.data decoding.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, module, help_text in COMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=_HelpFormatter)
        if name == chosen:
            mod = importlib.import_module(module)
            mod.add_arguments(p)
            p.set_defaults(_run=mod.run)
    return parser


def _split_command(args: list[str]) -> tuple[list[str], list[str] | None]:
    """``(args before "--", the command after it)`` for a subcommand whose module sets
    ``TAKES_COMMAND`` (``tracepoints NAME --register -- COMMAND``); argparse alone cannot take
    options between a positional and ``--``.  Other subcommands keep ``--`` as argparse reads it."""
    if "--" not in args:
        return args, None
    chosen = next((a for a in args if not a.startswith("-")), None)
    module = next((m for name, m, _ in COMMANDS if name == chosen), None)
    if module is None or not getattr(importlib.import_module(module), "TAKES_COMMAND", False):
        return args, None
    cut = args.index("--")
    return args[:cut], args[cut + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (0 ok, 1 problems found, 2 usage error)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args_list, after = _split_command(args_list)
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    if after is not None:
        args.run_command = after
    run: Callable[[argparse.Namespace], int] | None = getattr(args, "_run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into e.g. `head`: stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
