"""The package installed from a wheel into a fresh venv: ``nox -s wheels`` builds and installs it
with each Python and runs these tests (and the host suite) there, with ``STRUCTLOG_ETW_WHEEL_VENV``
naming the venv and ``STRUCTLOG_ETW_WHEEL_KIND`` what was built (``compiled`` or ``pure``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.session_only import deselect_unless_built

ENV = "STRUCTLOG_ETW_WHEEL_VENV"
SESSION = "nox -s wheels"
_notes: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (loudly) where no wheel was installed."""
    note = deselect_unless_built(config, items, Path(__file__).parent, ENV, SESSION)
    if note:
        _notes.append(note)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say what was deselected and how to run it."""
    for note in _notes:
        terminalreporter.write_sep("=", "installed-wheel tests deselected", yellow=True)
        terminalreporter.write_line(note)
