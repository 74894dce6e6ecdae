"""Console text: a decoded event as one line in the style of structlog's ``ConsoleRenderer``
(``decode``, ``listen`` and ``demo``'s default output), and its fast plan.

:func:`event_pretty` renders from a :class:`~structlog_etw.read.decoded.DecodedEvent` and its
:class:`~structlog_etw.read.decoded.EventMeta`; no event bytes are parsed.  EventHeader values are
written from their Python values with the wire's hints (hex ints, errno names, single floats).
Beside it, :class:`ConsoleLines` writes the same lines for perf.data samples from compiled plans
(``read.writers._lines``) in :class:`TextFieldStyle`; the tests hold the two equal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ..._util.lazy import LazyModule
from ...formats._levels import LEVEL_NAMES
from ...formats.eventheader import (
    ENC_BINARY_LENGTH16_CHAR8,
    ENC_STRING_LENGTH16_CHAR8,
    ENC_VALUE32,
    FIXED_SIZE,
    FMT_ERRNO,
    FMT_HEX_INT,
)
from .._text import errno_text, float_text, wallclock_text
from .._text import template_literal as esc
from ..decode._eventheader_plans import (
    BOM_FORMATS,
    EventPlan,
    FieldStyle,
    integer_code,
)
from ..decode._eventheader_values import BOMS, Kind, bytes_decide_kind, python_reader, value_kind
from ..decode.eventheader import FieldMetadata
from ..decoded import DecodedEvent, DecodedField, EventMeta
from ._lines import NS, Accepts, Lines, PlainLayout, PlanLine, Render, plain_layout, sample_meta, utf8

if TYPE_CHECKING:
    import datetime as _dt
    import ipaddress
    import uuid

    from ..sample import PerfField, PerfFormat, PerfSample
else:  # imported on first use (decoded values of these kinds): a reader's start loads none of them
    _dt = LazyModule("datetime", globals(), "_dt")
    ipaddress = LazyModule("ipaddress", globals())
    uuid = LazyModule("uuid", globals())

__all__ = [
    "BLUE",
    "BRIGHT",
    "CYAN",
    "DIM",
    "GREEN",
    "MAGENTA",
    "RED",
    "RESET",
    "YELLOW",
    "ConsoleLines",
    "TextFieldStyle",
    "event_pretty",
    "level_name",
    "pretty_head",
    "pretty_line",
    "pretty_line_templates",
    "pretty_value",
    "printable",
    "undecodable_pretty",
]


RESET: Final = "\x1b[0m"
BRIGHT: Final = "\x1b[1m"
DIM: Final = "\x1b[2m"
RED: Final = "\x1b[31m"
GREEN: Final = "\x1b[32m"
YELLOW: Final = "\x1b[33m"
BLUE: Final = "\x1b[34m"
MAGENTA: Final = "\x1b[35m"
CYAN: Final = "\x1b[36m"

_LEVEL_COLORS: Final = {1: RED + BRIGHT, 2: RED, 3: YELLOW, 4: GREEN, 5: BLUE}


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape): show the byte
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on or hide escaped (``\\x1b``, ``\\u202e``).

    Control characters (C0, DEL, C1: escape sequences, BEL, line breaks), format characters
    (bidirectional overrides, zero-width characters), unassigned and private-use code points and
    bytes that were not UTF-8 are written as Python-style escapes, so that a logged value cannot
    drive the operator's terminal or disguise a line.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape_char(ch) for ch in text)


def level_name(level: int) -> str:
    """``critical``/``error``/``warning``/``info``/``debug`` for 1..5, else ``level<N>``."""
    return LEVEL_NAMES.get(level, f"level{level}")


#: Characters that make a string value be written quoted (as ``repr``): whitespace (as
#: ``str.isspace``), ``=``, quotes, backslashes.
_QUOTED: Final = re.compile("[\\s='\"\\\\]")


def _value_text(value: Any, encoding: int = 0, fmt: int = 0) -> str:
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        if fmt == FMT_HEX_INT:
            return f"0x{value:X}"
        if fmt == FMT_ERRNO and encoding in (
            ENC_VALUE32,
            ENC_STRING_LENGTH16_CHAR8,
            ENC_BINARY_LENGTH16_CHAR8,
        ):
            return errno_text(value)
        return repr(value)
    if isinstance(value, float):
        return float_text(value, single=encoding == ENC_VALUE32)
    if isinstance(value, str):
        # repr() quotes and escapes (control and format characters too); plain words stay bare.
        simple = value and value.isprintable() and _QUOTED.search(value) is None
        return value if simple else repr(value)
    if isinstance(value, bytes):
        return "0x" + value.hex() if value else "b''"
    if isinstance(value, uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address):
        return str(value)
    if isinstance(value, _dt.datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{printable(str(k))}={_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return repr(value)


def pretty_value(value: Any) -> str:
    """:func:`event_pretty`'s text of a field's Python value (of an event not in EventHeader)."""
    return _value_text(value)


def _field_text(f: DecodedField, eventheader: bool) -> str:
    if f.is_struct:
        elements = f.value if f.is_array else [f.value]
        texts = [
            "{" + ", ".join(f"{printable(c.name)}={_field_text(c, eventheader)}" for c in e) + "}"
            for e in elements
        ]
        return "[" + ", ".join(texts) + "]" if f.is_array else texts[0]
    # EventHeader's wire numbers say "hex int", "errno", "single float"; other formats' do not.
    enc, fmt = (f.encoding, f.format) if eventheader else (0, 0)
    if f.is_array:
        return "[" + ", ".join(_value_text(v, enc, fmt) for v in f.value) + "]"
    return _value_text(f.value, enc, fmt)


def event_pretty(event: DecodedEvent, meta: EventMeta | None = None, *, colors: bool = False) -> str:
    """One console line like structlog's ConsoleRenderer::

        2024-03-28T00:45:14.788982451Z [info     ] user_login   [MyCompany_MyService k=0x4 pid=42] user=ann

    with ANSI colours when ``colors`` is true.  Names and values from the event never carry control
    or format characters to the terminal: they are escaped (:func:`printable`; string values that
    need it are written as ``repr``).
    """
    m = meta or EventMeta()
    has_level = event.format != "tracefs"  # a plain kernel tracepoint has no level or keyword
    head = pretty_head(
        event.level, event.name, event.provider, event.keyword, event.opcode, has_level, colors
    )
    activity = (event.activity_id, event.related_id) if has_level else (None, None)
    parts = [pretty_line(head, m.realtime_ns, m.time_ns, *activity, m.pid, m.tid, m.cpu, colors)]
    eventheader = event.format == "eventheader"
    for f in event.field_list:
        parts.append(
            _c(colors, CYAN, printable(f.name)) + "=" + _c(colors, MAGENTA, _field_text(f, eventheader))
        )
    return " ".join(parts)


def _c(colors: bool, code: str, text: str) -> str:
    return code + text + RESET if colors else text


def pretty_head(
    level: int, name: str, provider: str, keyword: int, opcode: int, has_level: bool, colors: bool
) -> tuple[str, str]:
    """What :func:`event_pretty` writes of an event's kind: ``("[info     ] name  ", "[Provider k=0x1")``
    (the level and name; the start of the bracket, without its end)."""
    if has_level:
        lvl = level_name(level)
        level_part = "[" + _c(colors, _LEVEL_COLORS.get(level, ""), f"{lvl:<9}") + "]"
    else:
        level_part = "[" + _c(colors, DIM, f"{'tracepoint':<9}") + "]"
    where = "[" + printable(provider)
    if has_level:
        where += f" k=0x{keyword:x}"
        if opcode:
            where += f" opcode={opcode}"
    return level_part + " " + _c(colors, BRIGHT, f"{printable(name):<20}"), where


def pretty_line(
    head: tuple[str, str],
    realtime_ns: int | None,
    time_ns: int | None,
    activity: object,
    related: object,
    pid: int | None,
    tid: int | None,
    cpu: int | None,
    colors: bool,
) -> str:
    """:func:`event_pretty`'s line up to the fields, from :func:`pretty_head` and the capture's data."""
    parts = []
    if realtime_ns is not None:
        parts.append(_c(colors, DIM, wallclock_text(realtime_ns)))
    elif time_ns is not None:
        parts.append(_c(colors, DIM, f"{time_ns / 1e9:.9f}"))
    parts.append(head[0])
    where = head[1]
    if activity:
        where += f" activity={activity}"
    if related:
        where += f" related={related}"
    if pid is not None:
        where += f" pid={pid}" if pid == tid else f" pid={pid}/{tid}"
    if cpu is not None:
        where += f" cpu={cpu}"
    parts.append(_c(colors, DIM, where + "]"))
    return " ".join(parts)


def pretty_line_templates(head: tuple[str, str], colors: bool, stamp: str = "%s") -> tuple[str, str]:
    """:func:`pretty_line` of an event with a wall-clock time, cpu, pid and tid and no activity,
    as two ``%`` templates: ``(time text, pid, cpu)`` when pid == tid, else ``(time text, pid,
    tid, cpu)`` - the same text, decided once per kind of event.  ``stamp`` is the template of
    the time text (``"%s.%09dZ"``: the second's text and the nanoseconds)."""
    level_part = head[0].replace("%", "%%")
    where = head[1].replace("%", "%%")
    stamp = _c(colors, DIM, stamp)
    same = " ".join([stamp, level_part, _c(colors, DIM, where + " pid=%d cpu=%d]")])
    other = " ".join([stamp, level_part, _c(colors, DIM, where + " pid=%d/%d cpu=%d]")])
    return same, other


#: The kinds whose Python value is a str.
_TEXT_KINDS: Final = frozenset({Kind.CHAR, Kind.LATIN1, Kind.UTF8, Kind.UTF16, Kind.UCS4})


def _always_text(encoding: int, fmt: int, order: str) -> bool:
    """Whether every value of this encoding and format is a str: its kind is a text kind
    whatever its bytes (none of a fixed size; a byte-order mark, if any, only says which text)."""
    if not bytes_decide_kind(encoding, fmt):
        return value_kind(encoding, fmt, b"", order)[0] in _TEXT_KINDS
    if fmt not in BOM_FORMATS or encoding in FIXED_SIZE:
        return False
    starts = (b"", b"x", *(mark for mark, _kind, _order in BOMS))
    return all(value_kind(encoding, fmt, raw, order)[0] in _TEXT_KINDS for raw in starts)


class TextFieldStyle(FieldStyle):
    """:func:`event_pretty`'s text of EventHeader fields, for compiled plans
    (:class:`~structlog_etw.read.decode._eventheader_plans.Plans`): ``name=value`` with the same value
    text, colours and escapes."""

    top_sep = b" "
    struct_sep = b", "
    array_sep = b", "

    def __init__(self, *, colors: bool) -> None:
        super().__init__()
        self.colors = colors

    def fixed(self, encoding: int, fmt: int, order: str) -> Callable[[bytes], bytes]:
        """The text of a fixed-size value's bytes."""
        read = python_reader(encoding, fmt, order)
        if _always_text(encoding, fmt, order):

            def text(raw: bytes) -> bytes:  # _value_text of a str, in one call
                value: str = read(raw)
                if value and value.isprintable() and _QUOTED.search(value) is None:
                    return value.encode("utf-8", "surrogateescape")
                return repr(value).encode("utf-8", "surrogateescape")

            return text
        return lambda raw: _value_text(read(raw), encoding, fmt).encode("utf-8", "surrogateescape")

    varying = fixed

    def number(self, encoding: int, fmt: int, order: str) -> tuple[str, bytes] | None:
        """A fixed-size integer's struct code and template, when its text is ``%d`` or ``0x%X``."""
        found = integer_code(encoding, fmt, order)
        if found is None or fmt == FMT_ERRNO:
            return None
        code, kind = found
        if kind is Kind.HEX:
            return (code, b"0x%X") if fmt == FMT_HEX_INT else None
        return None if fmt == FMT_HEX_INT else (code, b"%d")

    def member(self, meta: FieldMetadata, top: bool) -> tuple[bytes, bytes]:
        """``name=`` (at the top level coloured as :func:`event_pretty` colours it)."""
        name = printable(meta.name.decode("utf-8", "surrogateescape"))
        if top and self.colors:
            return (CYAN + name + RESET + "=" + MAGENTA).encode(), RESET.encode()
        return (name + "=").encode("utf-8", "surrogateescape"), b""


def undecodable_pretty(meta: EventMeta, error: str | None) -> str:
    """The console line of an event that could not be decoded (names and message escaped)."""
    stamp = wallclock_text(meta.realtime_ns) if meta.realtime_ns is not None else "-"
    return printable(f"{stamp} [undecodable] {meta.tracepoint}: {error} [pid={meta.pid} cpu={meta.cpu}]")


class ConsoleLines(Lines):
    """``decode``'s console text of perf.data samples, from plans (``read.writers._lines``): the lines
    of :func:`event_pretty`."""

    def __init__(self, accepts: Accepts, colors: bool = False) -> None:
        super().__init__(TextFieldStyle(colors=colors), accepts, colors)

    def event_line(self, sample: PerfSample, event: DecodedEvent) -> str:
        """:func:`event_pretty`."""
        return event_pretty(event, sample_meta(sample), colors=self.colors)

    def _plan_line(self, fmt: PerfFormat, plan: EventPlan) -> PlanLine:
        """The fields by the plan's readers into the line's template (``same``: pid == tid,
        ``other``: pid != tid); without wall-clock time, cpu, pid or tid, or with activity ids,
        :func:`pretty_line`'s start and the fields' template."""
        colors = self.colors
        head = pretty_head(plan.level, plan.name, plan.provider, plan.keyword, plan.opcode, True, colors)
        same, other = pretty_line_templates(head, colors, "%s.%09dZ")
        has_fields, fields, readers = plan.has_fields, plan.template, plan.readers
        tail = b" " + fields if has_fields else b""
        same_t, other_t = utf8(same) + tail, utf8(other) + tail
        seconds = self.seconds

        def text_line(s: PerfSample, pos: int, activity: bytes | None, related: bytes | None) -> bytes:
            data = s.data
            real, cpu, pid, tid = s.realtime_ns, s.cpu, s.pid, s.tid
            out: list[object]
            if (
                real is not None
                and cpu is not None
                and pid is not None
                and tid is not None
                and activity is None
            ):
                second, ns = divmod(real, NS)
                if pid == tid:
                    out = [seconds[second], ns, pid, cpu]
                    template = same_t
                else:
                    out = [seconds[second], ns, pid, tid, cpu]
                    template = other_t
                for read in readers:
                    pos = read(data, pos, out)
                return template % tuple(out)
            out = []
            for read in readers:
                pos = read(data, pos, out)
            act = uuid.UUID(bytes=activity) if activity is not None else None
            rel = uuid.UUID(bytes=related) if related is not None else None
            start = utf8(pretty_line(head, real, s.time, act, rel, pid, tid, cpu, colors))
            return start + b" " + fields % tuple(out) if has_fields else start

        return text_line

    def _plain_layout(self, fmt: PerfFormat) -> PlainLayout | None:
        colors = self.colors

        def member(f: PerfField, piece: bytes) -> bytes:
            name = utf8(_c(colors, CYAN, printable(f.name)))
            return esc(name) + b"=" + (utf8(MAGENTA) + piece + utf8(RESET) if colors else piece)

        return plain_layout(
            fmt,
            small_unsigned=False,
            text=lambda text: utf8(pretty_value(text)),
            binary=lambda raw: utf8(pretty_value(raw)),
            member=member,
            sep=b" ",
        )

    def _plain_lines(self, fmt: PerfFormat, layout: PlainLayout) -> Render:
        colors = self.colors
        head = pretty_head(0, fmt.name, fmt.system, 0, 0, False, colors)
        same, other = pretty_line_templates(head, colors, "%s.%09dZ")
        fields = layout.template
        has_fields = bool(fmt.own_fields)
        tail = b" " + fields if has_fields else b""
        same_t, other_t = utf8(same) + tail, utf8(other) + tail
        seconds = self.seconds
        values_of = layout.values_of

        def text_line(s: PerfSample) -> bytes | None:
            values = values_of(s.raw)
            real, cpu, pid, tid = s.realtime_ns, s.cpu, s.pid, s.tid
            if real is not None and cpu is not None and pid is not None and tid is not None:
                second, ns = divmod(real, NS)
                if pid == tid:
                    return same_t % (seconds[second], ns, pid, cpu, *values)
                return other_t % (seconds[second], ns, pid, tid, cpu, *values)
            line = utf8(pretty_line(head, real, s.time, None, None, pid, tid, cpu, colors))
            return line + b" " + fields % tuple(values) if has_fields else line

        return text_line
