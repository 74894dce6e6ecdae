"""The pytest plugin: cheap to load in any project's pytest run; its fixtures pass under ``-W error``."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return out.stdout


class TestLoadsNothing:
    """pytest imports the ``pytest11`` plugin in every run; it must not import structlog (nor the package).

    structlog's own test suite fails when structlog is already imported (and configured) by a
    plugin before its tests run: the plugin module imports nothing of structlog's.
    """

    def test_plugin_import_imports_no_structlog(self) -> None:
        """Importing the pytest plugin loads no structlog module, only the package (with its stdlib-only
        lazy-export helper) and the plugin."""
        loaded = json.loads(
            _run(
                "import json, sys; import structlog_etw.pytest_plugin; "
                "print(json.dumps(sorted(m for m in sys.modules if m.startswith('structlog'))))"
            )
        )
        assert loaded == [
            "structlog_etw",
            "structlog_etw._util",
            "structlog_etw._util.lazy",
            "structlog_etw.pytest_plugin",
        ]

    def test_package_names_load_on_first_use(self) -> None:
        """Importing structlog_etw loads no structlog until a public name is first used."""
        loaded = json.loads(
            _run(
                "import json, sys; import structlog_etw; before = 'structlog' in sys.modules; "
                "from structlog_etw import EtwRenderer, __version__; "
                "print(json.dumps([before, 'structlog' in sys.modules, EtwRenderer.__name__, __version__]))"
            )
        )
        assert loaded == [False, True, "EtwRenderer", importlib.metadata.version("structlog-etw")]

    def test_unknown_name_is_an_attribute_error(self) -> None:
        """An unknown package attribute raises AttributeError; every name of __all__ is in dir()."""
        import structlog_etw  # noqa: PLC0415

        with pytest.raises(AttributeError):
            structlog_etw.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
        assert set(structlog_etw.__all__) <= set(dir(structlog_etw))

    def test_entry_point_names_the_plugin_module(self) -> None:
        """The pytest11 entry point structlog_etw names structlog_etw.pytest_plugin."""
        from importlib.metadata import entry_points  # noqa: PLC0415

        (ep,) = [e for e in entry_points(group="pytest11") if e.name == "structlog_etw"]
        assert ep.value == "structlog_etw.pytest_plugin"


USER_TEST = """
import structlog
from structlog_etw import EtwRenderer


def test_events_are_captured(etw_capture):
    log = structlog.wrap_logger(None, processors=[EtwRenderer("WError_Provider")])
    log.info("hello", n=1)
    (event,) = etw_capture.events
    assert event.name == "hello" and event.fields == {"n": 1}


def test_tracelogging_capture(etw_capture_tracelogging):
    log = structlog.wrap_logger(None, processors=[EtwRenderer("WError_Provider")])
    log.warning("again")
    assert [e.name for e in etw_capture_tracelogging.events] == ["again"]
"""


class TestWarningsAsErrors:
    """A user's suite run with ``pytest -W error`` on a host without user_events (this one): the
    fixtures neither warn nor error, at setup or at teardown (the capture never starts an OS backend,
    and handing its providers back to the OS says nothing)."""

    def test_fixtures_pass_under_w_error(self, tmp_path: Path) -> None:
        """A user's tests with both capture fixtures pass under pytest -W error on this host."""
        (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TEST))
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-W",
                "error",
                "-p",
                "no:cacheprovider",
                "-q",
                "--rootdir",
                str(tmp_path),
                str(tmp_path / "test_user.py"),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "2 passed" in result.stdout
