"""argparse types that more than one subcommand takes (``listen`` and ``record``: ``--duration``)."""

from __future__ import annotations

import argparse


def seconds_arg(text: str) -> float:
    """argparse type of a duration: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive (got {text!r})")
    return value
