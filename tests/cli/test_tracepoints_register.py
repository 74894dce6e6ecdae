"""``structlog-etw tracepoints --register / --persist / --delete`` on the host: the command line, the
``-- COMMAND`` split and the messages where user_events is missing.  The kernel side (perf started
before the app, persistent registration in the 6.12 guest) is tests/kernel/test_reach_kernel.py."""

from __future__ import annotations

import argparse
import errno
import sys
from typing import Any

import pytest

from structlog_etw.cli import main
from structlog_etw.cli.tracepoints import run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="user_events: Linux only")


def _user_events() -> Any:
    """The Linux backend module, imported here: it needs fcntl, which Windows has not."""
    from structlog_etw.backends import user_events  # noqa: PLC0415

    return user_events


def _no_tracefs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_user_events(), "find_tracefs", lambda *a, **k: None)


class TestTheCommandLine:
    """The options parse as the docs write them, and wrong combinations are usage errors."""

    def test_options_between_the_name_and_the_command_parse(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``NAME -k 0x4 --register -- COMMAND`` (the issue's form) reaches registration, which fails
        here with the reason (no user_events), exit status 1, and nothing printed on stdout."""
        _no_tracefs(monkeypatch)
        rc = main(["tracepoints", "MyCompany_MyService", "-k", "0x4", "--register", "--", "sleep", "5"])
        out, err = capsys.readouterr()
        assert rc == 1
        assert "cannot register" in err and "user_events" in err
        assert out == ""  # names and the perf command only once they are registered

    def test_a_command_without_register_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``-- COMMAND`` alone means nothing: exit status 2 and why."""
        assert main(["tracepoints", "MyCompany_MyService", "--", "sleep", "1"]) == 2
        assert "needs --register or --persist" in capsys.readouterr().err

    def test_register_persist_and_delete_exclude_each_other(self) -> None:
        """Only one of ``--register``, ``--persist``, ``--delete``: argparse's usage error."""
        with pytest.raises(SystemExit) as exc:
            main(["tracepoints", "P", "--register", "--persist"])
        assert exc.value.code == 2

    def test_other_commands_keep_double_dash_as_argparse_reads_it(self) -> None:
        """The split at ``--`` is for ``tracepoints`` only: ``guid -- NAME`` still takes NAME."""
        assert main(["guid", "--", "MyProvider"]) == 0

    def test_the_plain_listing_points_to_register(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Without ``--register`` nothing is registered, and the output says how to start perf first."""
        assert main(["tracepoints", "P", "-l", "4"]) == 0
        assert "add --register, and start perf before the application" in capsys.readouterr().out


class TestMessages:
    """Where user_events or the privilege is missing, the message says what to do."""

    def test_delete_without_user_events_says_so_once(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``--delete`` on a kernel without user_events: one line, exit status 1."""
        _no_tracefs(monkeypatch)
        assert main(["tracepoints", "P", "--delete"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no user_events" in err

    @pytest.mark.parametrize(
        ("code", "persist", "words"),
        [
            (errno.EPERM, True, "CAP_PERFMON"),
            (errno.EINVAL, True, "Linux 6.7"),
            (errno.EADDRINUSE, False, "other fields"),
        ],
    )
    def test_refused_registrations_name_the_cause(
        self,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        code: int,
        persist: bool,
        words: str,
    ) -> None:
        """A registration the kernel refuses (no privilege, no persist flag, a foreign tracepoint of the
        name) ends with exit status 1 and a message naming the cause and the way out."""

        class Refusing:
            def __init__(self, *args: object, **kwargs: object) -> None:
                self.persist = kwargs.get("persist")

            def open_slot(self, level: int, keyword: int) -> None:
                raise OSError(code, "refused")

            def close(self) -> None:
                pass

        monkeypatch.setattr(_user_events(), "UserEventsBackend", Refusing)
        args = argparse.Namespace(
            provider="P", group=None, keyword=None, level=[4], output="perf.data",
            register=not persist, persist=persist, delete=False, run_command=None,
        )  # fmt: skip
        assert run(args) == 1
        out, err = capsys.readouterr()
        assert words in err and out == ""
