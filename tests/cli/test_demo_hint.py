"""The demo's ``sudo ... listen`` hint runs as printed, also where ``sudo`` drops the venv from PATH."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from structlog_etw.cli.demo import PROVIDER, demo, listen_command


class TestListenHint:
    """After ``python3 -m venv .venv && .venv/bin/pip install .`` the console script is not on
    root's PATH: the hint names it by its absolute path, so the line works as printed."""

    def test_command_is_absolute_and_runs_without_path(self) -> None:
        """The listen command printed is an absolute path that runs with sudo's secure_path PATH."""
        argv = shlex.split(listen_command())
        assert os.path.isabs(argv[0])
        assert argv[-1] == "listen"
        # sudo's secure_path: nothing of the venv; the printed command must not need it
        env = {k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        proc = subprocess.run(
            [*argv, "--help"], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 0, proc.stderr
        assert "listen" in proc.stdout

    def test_script_beside_this_interpreter_is_preferred(self) -> None:
        """The structlog-etw script beside this interpreter is preferred, else the -m form."""
        script = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "structlog-etw")
        if not os.path.isfile(script):  # an install without console scripts: the -m form
            assert listen_command().endswith(" -m structlog_etw listen")
        else:
            assert listen_command() == f"{shlex.quote(script)} listen"

    def test_demo_prints_it(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``demo`` without user_events prints the sudo listen command with the absolute path."""
        from structlog_etw.cli import demo as demo_module  # noqa: PLC0415

        monkeypatch.setattr(demo_module, "_user_events_reason", lambda: "not here (test)")
        assert demo(json_lines=True) == 0
        err = capsys.readouterr().err
        assert f"  sudo {listen_command()} {PROVIDER}\n" in err
        assert "sudo structlog-etw listen" not in err


class TestTracepointsAdvice:
    """``structlog-etw tracepoints NAME`` without ``-k`` lists keyword 1 only, and says how to add others."""

    def test_advice_without_keyword(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``tracepoints`` without -k advises that only keyword 1 is listed and how to add -k 0x4."""
        from structlog_etw.cli import main  # noqa: PLC0415

        assert main(["tracepoints", "MyCompany_MyService"]) == 0
        out = capsys.readouterr().out
        assert "# Keyword 1 only" in out and "-k 0x4" in out

    def test_no_advice_with_keywords(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``tracepoints`` with -k gives no keyword advice and lists the keyword's tracepoints."""
        from structlog_etw.cli import main  # noqa: PLC0415

        assert main(["tracepoints", "MyCompany_MyService", "-k", "0x4"]) == 0
        out = capsys.readouterr().out
        assert "Keyword 1 only" not in out
        assert "user_events:MyCompany_MyService_L3K4" in out
