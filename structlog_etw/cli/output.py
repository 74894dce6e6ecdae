"""What ``decode`` and ``listen`` share, and any other event source can reuse: the event filters,
the output formats and their writers, colour.

A command builds an :class:`EventFilter` and a writer from its arguments
(:func:`add_filter_arguments`, :func:`add_output_arguments`, :func:`event_filter`,
:func:`make_writer`), then hands each event it reads to ``writer.write(event, meta)`` (or
``writer.undecodable(meta, error, raw)``) and calls ``writer.close()`` at the end.  The writers
render from the :class:`~structlog_etw.read.decoded.DecodedEvent` alone (the read side's writers:
:mod:`structlog_etw.read.writers.console`, :mod:`~structlog_etw.read.writers.json_lines`,
:mod:`~structlog_etw.read.writers.chrome_trace`), so an event source that produces one
(perf.data, perf rings, ETW) gets the same text, JSON and timelines.

Formats: ``text`` (console lines, the default of every command, terminal or not), ``json``
(one JSON object per line, the same object for every command), ``chrome-trace`` (the Chrome /
Perfetto trace-event JSON of the whole capture).  ``decode`` also has ``perf-json``
(Microsoft's perf-decode's objects: :mod:`structlog_etw.read.writers.perf_json`), which needs
the perf sample itself.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection
from dataclasses import dataclass
from typing import IO, Protocol

from ..formats._levels import LEVEL_BY_NAME, valid_keyword, valid_level
from ..read.decoded import DecodedEvent, EventMeta
from ..read.writers.console import event_pretty, undecodable_pretty
from ..read.writers.json_lines import event_json, undecodable_json

__all__ = [
    "EventFilter",
    "EventWriter",
    "LineWriter",
    "add_color_arguments",
    "add_filter_arguments",
    "add_output_arguments",
    "event_filter",
    "keyword_arg",
    "level_filter_arg",
    "make_writer",
    "use_color",
]


def level_filter_arg(text: str) -> int:
    """argparse type of a level filter: 1..255 or a level name (critical .. debug, verbose).

    ETW levels run to 255 (structlog-etw writes 1-5; other providers may write more verbose
    levels): a filter of 9 shows levels 1..9.
    """
    value = LEVEL_BY_NAME.get(text.lower())
    if value is None:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid level {text!r} (1-255 or one of {', '.join(LEVEL_BY_NAME)})"
            ) from None
    if not valid_level(value):
        raise argparse.ArgumentTypeError(f"level {value} out of range 1..255")
    return value


def keyword_arg(text: str) -> int:
    """argparse type of a keyword mask: 1..2**64-1, decimal or ``0x`` hex.

    A keyword (:func:`~structlog_etw.formats._levels.valid_keyword`) other than 0: a filter of mask 0
    would pass only the events without keywords.
    """
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value == 0 or not valid_keyword(value):
        raise argparse.ArgumentTypeError(f"keyword must be in 1..2**64-1 (got {text!r})")
    return value


@dataclass(frozen=True)
class EventFilter:
    """Which events to show; ``None`` (or empty) passes everything.

    ``level``: events at that level or more severe (lower numbers), and level 0 (ETW's "always",
    also what plain kernel tracepoints have).  ``keyword``: events whose keyword shares a bit
    with the mask, and keyword 0 (as in ETW, an event without keywords passes every keyword
    filter; plain tracepoints have none).  ``providers``, ``names``: exact provider (for a
    kernel tracepoint: its system) and event names.
    """

    level: int | None = None
    keyword: int | None = None
    providers: frozenset[str] | None = None
    names: frozenset[str] | None = None

    def accepts(self, event: DecodedEvent) -> bool:
        """Whether ``event`` passes every filter."""
        return self.accepts_values(event.level, event.keyword, event.provider, event.name)

    def accepts_values(self, level: int, keyword: int, provider: str, name: str) -> bool:
        """Whether an event of this level, keyword, provider and name passes every filter."""
        if self.level is not None and level > self.level:
            return False
        if self.keyword is not None and keyword and not keyword & self.keyword:
            return False
        if self.providers and provider not in self.providers:
            return False
        return not self.names or name in self.names


def add_filter_arguments(parser: argparse.ArgumentParser, *, names: bool = True) -> None:
    """``--level``, ``--keyword`` and (``names``) ``--provider``, ``--event``."""
    parser.add_argument(
        "--level",
        type=level_filter_arg,
        help="most verbose level shown: 1..255 or critical/error/warning/info/debug",
    )
    parser.add_argument(
        "--keyword", type=keyword_arg, help="keyword mask (e.g. 0x4): events whose keyword shares a bit"
    )
    if names:
        parser.add_argument(
            "--provider", action="append", metavar="P", help="only events of provider P (repeatable)"
        )
        parser.add_argument("--event", action="append", metavar="E", help="only events named E (repeatable)")


def event_filter(args: argparse.Namespace) -> EventFilter:
    """The :class:`EventFilter` of parsed :func:`add_filter_arguments` arguments."""
    providers = getattr(args, "provider", None)
    names = getattr(args, "event", None)
    return EventFilter(
        level=args.level,
        keyword=args.keyword,
        providers=frozenset(providers) if isinstance(providers, list) else None,
        names=frozenset(names) if names else None,
    )


def add_output_arguments(parser: argparse.ArgumentParser, formats: Collection[str]) -> None:
    """``--format F`` (default ``text``), its shortcut ``--json``, and ``--color``/``--no-color``."""
    parser.add_argument(
        "--format",
        choices=list(formats),
        default="text",
        help="output format (default: text, whether or not stdout is a terminal)",
    )
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="JSON lines: --format json"
    )
    add_color_arguments(parser)


def add_color_arguments(parser: argparse.ArgumentParser) -> None:
    """``--color`` / ``--no-color`` (default: colour when stdout is a terminal and NO_COLOR is unset)."""
    color = parser.add_mutually_exclusive_group()
    color.add_argument("--color", dest="color", action="store_true", default=None, help="always colour")
    color.add_argument("--no-color", dest="color", action="store_false", help="never colour")


def use_color(flag: bool | None, out: IO[str]) -> bool:
    """Colour when asked, else when ``out`` is a terminal and NO_COLOR is unset."""
    if flag is not None:
        return flag
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty()) if isatty is not None else False


class EventWriter(Protocol):
    """Where events go: one call per event, ``close`` at the end (a timeline is written then)."""

    def write(self, event: DecodedEvent, meta: EventMeta) -> None:
        """Show one decoded event."""

    def undecodable(self, meta: EventMeta, error: str, raw: bytes) -> None:
        """Show an event that could not be decoded (its bytes, and why)."""

    def close(self) -> None:
        """Finish the output."""


class LineWriter:
    """``text`` or ``json``: one line per event (``flush``: after every line, for live output)."""

    def __init__(self, out: IO[str], fmt: str, *, colors: bool = False, flush: bool = False) -> None:
        self.out = out
        self.json = fmt == "json"
        self.colors = colors and not self.json
        self.flush = flush

    def _line(self, text: str) -> None:
        self.out.write(text + "\n")
        if self.flush:
            self.out.flush()

    def write(self, event: DecodedEvent, meta: EventMeta) -> None:
        """One line for ``event``."""
        self._line(event_json(event, meta) if self.json else event_pretty(event, meta, colors=self.colors))

    def undecodable(self, meta: EventMeta, error: str, raw: bytes) -> None:
        """One line for an event that could not be decoded."""
        self._line(undecodable_json(meta, error, raw) if self.json else undecodable_pretty(meta, error))

    def close(self) -> None:
        """Flush the stream."""
        self.out.flush()


def make_writer(fmt: str, out: IO[str], *, colors: bool = False, flush: bool = False) -> EventWriter:
    """The writer of format ``fmt`` (``text``, ``json``, ``chrome-trace``) writing to ``out``."""
    if fmt == "chrome-trace":
        from ..read.writers.chrome_trace import ChromeTraceWriter  # noqa: PLC0415 - only when asked for

        return ChromeTraceWriter(out)
    if fmt not in ("text", "json"):
        raise ValueError(f"unknown output format {fmt!r}")
    return LineWriter(out, fmt, colors=colors, flush=flush)
