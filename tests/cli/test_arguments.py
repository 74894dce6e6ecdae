"""``structlog_etw.cli._arguments``: the argparse types ``listen`` and ``record`` share."""

from __future__ import annotations

import argparse

import pytest

from structlog_etw.cli import main
from structlog_etw.cli._arguments import seconds_arg


def test_seconds_are_a_positive_number() -> None:
    """``--duration``: any positive number of seconds; zero, negatives, NaN and words are refused."""
    assert seconds_arg("1.5") == 1.5
    assert seconds_arg("2") == 2.0
    for bad in ("0", "-1", "nan", "soon", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            seconds_arg(bad)


@pytest.mark.parametrize("command", ["listen", "record"])
def test_listen_and_record_refuse_zero_seconds(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Both subcommands read ``--duration`` with it: a usage error (exit 2) naming the option."""
    with pytest.raises(SystemExit) as exit_:
        main([command, "MyCompany_MyService", "--duration", "0"])
    assert exit_.value.code == 2
    assert "--duration: must be positive (got '0')" in capsys.readouterr().err
