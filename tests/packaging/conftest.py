"""The built sdist and wheel: ``nox -s build`` builds them into dist/ and runs these tests on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.session_only import built_path, deselect_unless_built

ENV = "STRUCTLOG_ETW_DIST"
SESSION = "nox -s build"
_notes: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (loudly) where nothing was built."""
    note = deselect_unless_built(config, items, Path(__file__).parent, ENV, SESSION)
    if note:
        _notes.append(note)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say what was deselected and how to run it."""
    for note in _notes:
        terminalreporter.write_sep("=", "packaging tests deselected", yellow=True)
        terminalreporter.write_line(note)


@pytest.fixture(scope="session")
def dist() -> Path:
    """The directory with the built sdist and wheel."""
    return built_path(ENV, SESSION)


@pytest.fixture(scope="session")
def wheel(dist: Path) -> Path:
    """The one built wheel."""
    wheels = sorted(dist.glob("structlog_etw-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {dist}: {wheels}"
    return wheels[0]


@pytest.fixture(scope="session")
def sdist(dist: Path) -> Path:
    """The one built sdist."""
    sdists = sorted(dist.glob("structlog_etw-*.tar.gz"))
    assert len(sdists) == 1, f"expected one sdist in {dist}: {sdists}"
    return sdists[0]
