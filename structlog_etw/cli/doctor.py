"""``structlog-etw doctor [PROVIDER]``: can this machine write and record trace events, and if not,
what fixes it (see docs/cli/doctor.md).

Subcommand module of :mod:`structlog_etw.cli`.  The checks run in order and each prints one line,
its state and, when it fails, the exact command or setting that fixes it; ``--json`` prints them
as one object for scripts.  Exit status: 0 when this user can write the provider's events and
record them, 1 when a check failed, 2 for bad arguments.

The Linux checks are :mod:`structlog_etw.cli._doctor_linux`'s, the Windows checks
:mod:`structlog_etw.cli._doctor_windows`'s; both read the machine through roots that the
options ``--tracefs``, ``--proc`` and ``--boot`` (and the logman runner, on Windows) replace, so
the tests run them against prepared trees as well as the real machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TextIO

from ._checks import FAIL, MARKS, NOTE, OK, Check
from .tracepoints import keyword_arg

__all__ = ["FAIL", "NOTE", "OK", "Check", "add_arguments", "exit_status", "render", "run"]

#: ``sys.platform`` as the checks see it (the tests run the Windows checks on Linux).
_PLATFORM = sys.platform


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``doctor`` arguments."""
    parser.description = (
        "Check, in order, what writing and recording trace events needs on this machine (kernel, "
        "user_events, tracefs, permissions, perf; on Windows administrator rights and sessions), and "
        "print the fix of each failing check. Exit status 0: this user can write and record the "
        "provider's events."
    )
    parser.add_argument(
        "provider", nargs="?", metavar="PROVIDER", help="also check this provider's tracepoints"
    )
    parser.add_argument(
        "-k",
        "--keyword",
        type=keyword_arg,
        action="append",
        metavar="KW",
        help="only these keywords' tracepoints",
    )
    parser.add_argument("--group", help="provider group (the G<group> tracepoint option)")
    parser.add_argument("--json", action="store_true", help="one JSON object: {ok, checks: [...]}")
    roots = parser.add_argument_group("roots (tests, containers, chroots)")
    roots.add_argument("--tracefs", metavar="DIR", help="tracefs directory (default: found in the mounts)")
    roots.add_argument("--proc", metavar="DIR", default="/proc", help="procfs directory (default /proc)")
    roots.add_argument(
        "--boot", metavar="DIR", default="/boot", help="kernel configs directory (default /boot)"
    )


def exit_status(checks: list[Check]) -> int:
    """0 when no check failed, else 1."""
    return 1 if any(c.state == FAIL for c in checks) else 0


def render(checks: list[Check], out: TextIO) -> None:
    """The report: a line per check, its fix indented below it."""
    width = max((len(c.name) for c in checks), default=0)
    for c in checks:
        out.write(f"{MARKS.get(c.state, c.state)} {c.name.ljust(width)}  {c.detail}\n")
        pad = " " * (len(MARKS[OK]) + 1 + width + 2)
        for i, line in enumerate(c.fix.splitlines()):
            out.write(f"{pad}{'fix: ' if i == 0 else '     '}{line}\n")
    failed = [c.name for c in checks if c.state == FAIL]
    if failed:
        out.write(f"\n{len(failed)} check(s) failed: {', '.join(failed)}\n")
    else:
        out.write("\nThis user can write and record these events.\n")


def run(args: argparse.Namespace) -> int:
    """Run the checks, print them; return the exit status."""
    if args.provider is not None:
        from ..formats.eventheader import validate_provider_name  # noqa: PLC0415

        try:
            validate_provider_name(args.provider, args.group)
        except ValueError as e:
            print(f"structlog-etw doctor: {e}", file=sys.stderr)
            return 2
    if _PLATFORM == "win32":
        from ._doctor_windows import windows_checks  # noqa: PLC0415

        checks = windows_checks(args.provider, args.keyword)
    elif _PLATFORM.startswith("linux"):
        from ._doctor_linux import Roots, linux_checks  # noqa: PLC0415

        roots = Roots(tracefs=args.tracefs, proc=args.proc, boot=args.boot)
        checks = linux_checks(roots, args.provider, args.keyword, args.group)
    else:
        checks = [
            Check(
                "os",
                FAIL,
                f"{_PLATFORM}: structlog-etw writes trace events on Linux (user_events) and Windows (ETW)",
                "run the application on Linux 6.4+ or Windows; elsewhere providers run disabled",
            )
        ]
    if args.json:
        doc = {"ok": exit_status(checks) == 0, "checks": [asdict(c) for c in checks]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render(checks, sys.stdout)
    return exit_status(checks)
