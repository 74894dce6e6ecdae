"""``structlog-etw guid NAME...``: the ETW provider id of a provider name."""

from __future__ import annotations

import argparse
import sys

from ..formats.tracelogging import provider_id

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``guid``."""
    parser.add_argument("names", nargs="+", metavar="NAME", help="provider name, e.g. MyCompany_MyService")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the GUID, one per line")
    parser.epilog = (
        "The GUID is the EventSource hash of the name (what tracelog, WPR and PerfView compute for *NAME)."
    )


def run(args: argparse.Namespace) -> int:
    """Print the GUID of each name and the ``*NAME`` form that ETW tools accept."""
    status = 0
    for name in args.names:
        if not name:
            print("structlog-etw guid: empty provider name", file=sys.stderr)
            status = 2
            continue
        guid = provider_id(name)
        if not name.isascii():
            print(
                f"structlog-etw guid: warning: {name!r} is not ASCII; other tools upper-case it differently,"
                " so their GUID may not match",
                file=sys.stderr,
            )
        if args.quiet:
            print(guid)
        else:
            print(f"{name}")
            print(f"  guid:    {guid}")
            print(f"  braced:  {{{guid}}}")
            print(f"  tools:   *{name}    (tracelog -guid *{name}, WPR/PerfView provider *{name})")
    return status
