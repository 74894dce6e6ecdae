"""``structlog-etw record``: what it refuses before opening anything (exit status 2, one line on
stderr, no file written).  Recording itself runs against the real kernel (tests/kernel/)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from structlog_etw.cli import main


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``main(["record", *argv])`` returns 2; the one stderr line, its prefix checked."""
    assert main(["record", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("structlog-etw record: ") and err.count("\n") == 1, err
    return err


def test_a_bad_provider_name_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A provider name user_events cannot carry: refused, nothing written."""
    _refused(capsys, "bad name", "-o", str(tmp_path / "x.data"))
    assert list(tmp_path.iterdir()) == []


def test_record_needs_linux(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Elsewhere record says it needs Linux user_events and names the Windows tools."""
    monkeypatch.setattr(sys, "platform", "win32")
    err = _refused(capsys, "MyCompany_MyService", "-o", str(tmp_path / "x.data"))
    assert "needs Linux user_events (this is win32)" in err and "wpr" in err


def test_a_double_dash_needs_a_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``record P --`` with nothing after it: refused."""
    err = _refused(capsys, "MyCompany_MyService", "-o", str(tmp_path / "x.data"), "--")
    assert "'--' needs a COMMAND after it" in err


def test_duration_and_a_command_are_exclusive(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--duration`` and ``-- COMMAND`` together: refused."""
    out = str(tmp_path / "x.data")
    err = _refused(capsys, "MyCompany_MyService", "-o", out, "--duration", "1", "--", "true")
    assert "give either --duration or '-- COMMAND', not both" in err
    assert list(tmp_path.iterdir()) == []


def test_the_pipe_format_is_not_written_to_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-o -`` with stdout a terminal: refused before anything is written to it."""

    class Terminal(io.BytesIO):
        def isatty(self) -> bool:
            return True

    terminal = io.TextIOWrapper(Terminal())
    monkeypatch.setattr(sys, "stdout", terminal)
    err = _refused(capsys, "MyCompany_MyService", "-o", "-")
    assert "refusing to write perf.data to a terminal" in err
    terminal.flush()
    assert terminal.buffer.getvalue() == b""
