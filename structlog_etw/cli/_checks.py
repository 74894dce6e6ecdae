"""What a ``structlog-etw doctor`` check is: its name, state, what was found and the fix (shared by
the command, :mod:`structlog_etw.cli.doctor`, and its Linux and Windows checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["FAIL", "MARKS", "NOTE", "OK", "Check"]

#: The states of a check: OK passes, FAIL stops writing or recording (exit 1), NOTE informs.
OK: Final = "ok"
FAIL: Final = "fail"
NOTE: Final = "note"
#: How the report marks each state.
MARKS: Final = {OK: "[ ok ]", FAIL: "[FAIL]", NOTE: "[note]"}


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, its state, what was found and, failing, the fix."""

    name: str
    state: str
    detail: str
    fix: str = ""
