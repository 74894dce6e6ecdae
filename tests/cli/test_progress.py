"""The progress line of long commands: on a terminal's stderr only (a pseudo-terminal here), erased at
the end, never with ``--quiet`` or off a terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from structlog_etw.cli._progress import INTERVAL, Progress, human_bytes, progress_for
from tests.helpers.unix import unix_module
from tests.helpers.written import write_many

pty = unix_module("pty")

REPO = Path(__file__).resolve().parents[2]


def run_on_pty(*args: str) -> tuple[int, bytes, bytes]:
    """``python -m structlog_etw ARGS`` with stderr on a pseudo-terminal, stdout a file:
    (exit status, stdout, everything the terminal received)."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    stdout = tempfile.TemporaryFile()  # noqa: SIM115 - the child writes it while the loop reads the pty
    proc = subprocess.Popen(
        [sys.executable, "-m", "structlog_etw", *args],
        stdout=stdout,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
    )
    os.close(slave)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    rc = proc.wait(timeout=120)
    os.close(master)
    stdout.seek(0)
    out = stdout.read()
    stdout.close()
    return rc, out, bytes(seen)


def test_decode_shows_progress_on_a_terminal_and_erases_it(tmp_path: Path) -> None:
    """decode of a file of 20,000 events: the terminal gets 'read ... events/s' lines and an erase at the end;
    stdout (the events) gets no progress bytes."""
    path = write_many(tmp_path / "big.data", 20_000)
    rc, out, tty = run_on_pty("decode", "--json", str(path))
    assert rc == 0, tty
    assert out.count(b"\n") == 20_000
    assert b"\r" not in out
    text = tty.decode("utf-8", "replace")
    assert "structlog-etw decode: " in text
    assert " read, " in text and " events/s" in text
    assert f"of {human_bytes(path.stat().st_size)}" in text
    assert text.endswith("\r\x1b[K") or "\r\x1b[K" in text.splitlines()[-1]


def test_decode_quiet_and_off_a_terminal_show_nothing(tmp_path: Path) -> None:
    """--quiet on a terminal, and stderr a pipe: not one progress byte."""
    path = write_many(tmp_path / "big.data", 5_000)
    rc, _out, tty = run_on_pty("decode", "--json", "--quiet", str(path))
    assert rc == 0
    assert tty == b""
    proc = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "decode", "--json", str(path)],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0
    assert proc.stderr == b""


class FakeTty(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_the_line_is_redrawn_at_most_every_interval() -> None:
    """show() draws when INTERVAL has passed (or forced), done() erases once."""
    now = [0.0]
    stream = FakeTty()
    p = Progress("prog", stream, clock=lambda: now[0])
    p.show("a")
    p.show("b")  # too soon
    now[0] += INTERVAL
    p.show("c")
    p.show("d", force=True)
    p.done()
    p.done()
    assert stream.getvalue() == "\rprog: a\x1b[K\rprog: c\x1b[K\rprog: d\x1b[K\r\x1b[K"
    now[0] = 2.0
    assert p.rate(100) == 50.0


def test_progress_for_needs_a_terminal_and_no_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """No terminal, or --quiet: None (nothing is drawn, nothing wraps the work)."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress_for("p", False) is None
    monkeypatch.setattr(sys, "stderr", FakeTty())
    assert progress_for("p", True) is None
    assert progress_for("p", False) is not None
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(12) == "12 B"
