"""``structlog-etw demo``: log a short structlog sequence and show the trace events (docs/cli/demo.md).

Subcommand module of `_cli`: :func:`add_arguments` and :func:`run`.
"""

from __future__ import annotations

import argparse
import sys

from ._cli_listen import add_color_arguments, use_color

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``demo`` arguments."""
    parser.description = (
        "Log a short, realistic structlog sequence through EtwRenderer and show the events it becomes: "
        "live through user_events where this machine has them (and listening is allowed: root), "
        "else decoded from an in-process capture. Needs no root."
    )
    parser.add_argument("--json", action="store_true", help="events as JSON lines (status goes to stderr)")
    parser.add_argument(
        "--capture", action="store_true", help="show the in-process capture even where user_events works"
    )
    add_color_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the demo; return the exit code."""
    from ._demo import demo  # noqa: PLC0415

    return demo(json_lines=args.json, colors=use_color(args.color, sys.stdout), capture=args.capture)
