"""``structlog-etw tracepoints NAME``: user_events tracepoint names of a provider, and a perf command line."""

from __future__ import annotations

import argparse
import shlex
import sys

from .._levels import LEVEL_BY_NAME as LEVELS
from ..eventheader.spec import NAME_MAX, tracepoint_name, validate_provider_name

__all__ = ["add_arguments", "level_arg", "run"]


def level_arg(text: str) -> int:
    """argparse type for a level: 1..255 or a name (critical, error, warning, info, debug, verbose)."""
    value = LEVELS.get(text.lower())
    if value is None:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid level {text!r} (1-255 or one of {', '.join(LEVELS)})"
            ) from None
    if not 1 <= value <= 255:
        raise argparse.ArgumentTypeError(f"level {value} out of range 1..255")
    return value


def _keyword(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid keyword {text!r} (e.g. 1, 0x4)") from None
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"keyword {text} out of range (64-bit)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``tracepoints``."""
    parser.add_argument("provider", metavar="NAME", help="provider name, e.g. MyCompany_MyService")
    parser.add_argument(
        "-k",
        "--keyword",
        type=_keyword,
        action="append",
        metavar="K",
        help="keyword (repeatable; default: 1, the renderer's default keyword)",
    )
    parser.add_argument("-g", "--group", help="provider group (lowercase letters and digits)")
    parser.add_argument(
        "-l",
        "--level",
        type=level_arg,
        action="append",
        metavar="L",
        help="level 1-5 or critical/error/warning/info/debug (repeatable; default: all of 1-5)",
    )
    parser.add_argument(
        "-o", "--output", default="perf.data", help="perf output file in the command line (default perf.data)"
    )


def run(args: argparse.Namespace) -> int:
    """Print the tracepoint names and a ``perf record`` command that captures them."""
    try:
        validate_provider_name(args.provider, args.group)
    except ValueError as exc:
        print(f"structlog-etw tracepoints: {exc}", file=sys.stderr)
        return 2
    levels = sorted(set(args.level or [1, 2, 3, 4, 5]))
    keywords = list(dict.fromkeys(args.keyword or [1]))
    names = [tracepoint_name(args.provider, lv, kw, args.group) for kw in keywords for lv in levels]
    too_long = [n for n in names if len(n) >= NAME_MAX]  # NAME_MAX counts the NUL
    if too_long:
        print(f"structlog-etw tracepoints: tracepoint name too long: {too_long[0]}", file=sys.stderr)
        return 2
    for n in names:
        print(n)
    cmd = ["perf", "record", "-a", "-k", "monotonic", "-o", args.output]
    for n in names:
        cmd += ["-e", f"user_events:{n}"]
    print()
    if not args.keyword:
        print(
            "# Keyword 1 only (the renderer's default keyword). Events logged with another keyword "
            "(etw_keyword=K, keywords_by_logger) are on other tracepoints: "
            "add -k K for each, e.g. -k 1 -k 0x4"
        )
    print("# Start the application first (perf refuses tracepoints that are not registered yet), then:")
    print(shlex.join(cmd))
    print(f"# and afterwards: structlog-etw decode {shlex.quote(args.output)}")
    return 0
