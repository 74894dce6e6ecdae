"""The built documentation site: ``nox -s docs`` builds it and runs these tests on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.session_only import built_path, deselect_unless_built

ENV = "STRUCTLOG_ETW_SITE"
SESSION = "nox -s docs"
_notes: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (loudly) where no site was built."""
    note = deselect_unless_built(config, items, Path(__file__).parent, ENV, SESSION)
    if note:
        _notes.append(note)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say what was deselected and how to run it."""
    for note in _notes:
        terminalreporter.write_sep("=", "docs-site tests deselected", yellow=True)
        terminalreporter.write_line(note)


@pytest.fixture(scope="session")
def site() -> Path:
    """The built HTML site (``docs/_build/html``)."""
    path = built_path(ENV, SESSION)
    assert (path / "index.html").is_file(), f"{path} has no index.html"
    return path
