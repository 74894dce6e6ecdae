"""The one reporter of ``decode``'s outcome, for perf.data and .etl files alike: what could not
be opened, the problems, notes and losses on stderr, and the exit status.

Exit codes: 0 every event decoded; 1 the file is damaged or truncated, or some events could not
be decoded (what could be decoded is still written); 2 the file cannot be read or is not a file
of its kind.  Every text from the file is escaped (:func:`~structlog_etw.read.writers.console.printable`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ..read.writers.console import printable

PROG = "structlog-etw decode"
#: Problems printed one by one (the rest are counted).
MAX_REPORTED = 20


def _say(text: str) -> None:
    print(f"{PROG}: {text}", file=sys.stderr)


def cannot_open(name: str, exc: Exception, errors: type[Exception], kind: str) -> int:
    """Report that the file ``name`` (escaped) cannot be opened as a ``kind`` file because of
    ``exc``; return the exit status (2).  ``errors``: the reader's own error, whose message
    names the file itself."""
    if isinstance(exc, OSError):
        _say(f"{name}: {printable(str(exc.strerror or exc))}")
    elif isinstance(exc, errors):
        _say(printable(str(exc)))
    else:  # a crafted header: a message, never a traceback
        _say(f"{name}: not a readable {kind} file: {printable(repr(exc))}")
    return 2


@dataclass
class Outcome:
    """What a decode did: ``written`` events; ``problems`` (the texts of the first ones) of
    ``count`` in all (None: as many as texts); ``notes`` (what was not decoded and is no
    problem); ``lost`` events the recorder lost (``lost_by``: who); ``late`` events written
    out of time order."""

    written: int
    problems: list[str]
    count: int | None = None
    notes: list[str] = field(default_factory=list)
    lost: int = 0
    lost_by: str = "perf"
    late: int = 0


def report(name: str, outcome: Outcome) -> int:
    """Write ``outcome`` about the file ``name`` (escaped) to stderr; return the exit status."""
    count = len(outcome.problems) if outcome.count is None else outcome.count
    for p in outcome.problems[:MAX_REPORTED]:
        _say(f"{name}: {printable(p)}")
    if count > MAX_REPORTED:
        _say(f"{name}: ... and {count - MAX_REPORTED} more problems")
    if outcome.lost:
        _say(f"{name}: {outcome.lost_by} lost {outcome.lost} events while recording")
    for note in outcome.notes:
        _say(f"{name}: {printable(note)}")
    if outcome.late:
        _say(f"{name}: {outcome.late} events could not be put in time order (written late)")
    if count:
        _say(f"{name}: {outcome.written} events decoded; {count} problems (file damaged or truncated?)")
        return 1
    return 0
