"""Rendering decoded events for people and programs: one JSON object per line, or a coloured
console line in the style of structlog's ``ConsoleRenderer``.  Used by ``structlog-etw decode``,
``listen`` and ``demo``.

Everything here renders from a :class:`~structlog_etw.read.decoded.DecodedEvent` (and the capture
metadata in :class:`EventMeta`); no event bytes are parsed.  EventHeader field values are
written with perf-decode's conventions (:mod:`structlog_etw.read.writers.perf_json`; the value
texts both share - errno, float, time - are in ``structlog_etw.read._text``).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import json
import math
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ..formats._levels import LEVEL_NAMES
from ..formats.eventheader import (
    ENC_BINARY_LENGTH16_CHAR8,
    ENC_STRING_LENGTH16_CHAR8,
    ENC_VALUE32,
    FIXED_SIZE,
    FMT_ERRNO,
    FMT_HEX_INT,
    FMT_STRING_JSON,
    FMT_STRING_UTF_BOM,
    FMT_STRING_XML,
)
from ..read._text import errno_text, float_text, wallclock_text
from ..read.decode._eventheader_values import BOMS, Kind, bytes_decide_kind, python_reader, value_kind
from ..read.decode.eventheader import FieldMetadata
from ..read.decoded import DecodedEvent, DecodedField
from ..read.writers.perf_json import FieldStyle, perf_json_fields

__all__ = [
    "EventMeta",
    "TextFieldStyle",
    "event_json",
    "event_pretty",
    "json_fields",
    "json_line",
    "json_line_bytes",
    "level_name",
    "plain_json_value",
    "pretty_fields",
    "pretty_head",
    "pretty_line",
    "pretty_line_templates",
    "pretty_value",
    "printable",
    "undecodable_json",
    "undecodable_pretty",
    "wallclock_text",
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


@dataclass(frozen=True)
class EventMeta:
    """Where and when an event was captured (all optional)."""

    time_ns: int | None = None
    realtime_ns: int | None = None
    cpu: int | None = None
    pid: int | None = None
    tid: int | None = None
    tracepoint: str | None = None


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


#: Characters valid in a JSON string that a terminal would act on (DEL, C1 controls) or that
#: hide or reorder text (bidirectional controls), and JavaScript's line separators.
_JSON_UNSAFE: Final = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def json_line(text: str) -> str:
    """A JSON text made safe for a terminal and for any JSON reader, keeping its meaning.

    Bytes that were not UTF-8 (``surrogateescape`` characters) become U+FFFD, so the line is
    valid UTF-8; DEL, C1 controls, bidirectional controls and U+2028/U+2029 (which occur only
    inside strings) become ``\\uXXXX`` escapes.  C0 controls are escaped by every JSON writer.
    """
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def json_line_bytes(text: bytes) -> str:
    """:func:`json_line` of a JSON text held as UTF-8(-ish) bytes (invalid sequences: U+FFFD)."""
    line = text.decode("utf-8", "replace")
    if line.isascii() and "\x7f" not in line:
        return line
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


def level_name(level: int) -> str:
    """``critical``/``error``/``warning``/``info``/``debug`` for 1..5, else ``level<N>``."""
    return LEVEL_NAMES.get(level, f"level{level}")


def _plain(value: Any) -> Any:
    """A decoded Python value as JSON-able data (bytes: hex; UUID, IPs, datetimes: text)."""
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, bytes):
        return value.hex(" ")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    return str(value)


def plain_json_value(value: Any) -> Any:
    """A decoded Python value as JSON-able data, as :func:`event_json` writes field values of
    events that are not EventHeader events (bytes: hex; UUID, IPs, datetimes: text)."""
    return _plain(value)


_COMPACT: Final = (",", ":")


def event_json(event: DecodedEvent, meta: EventMeta | None = None) -> str:
    """One JSON object (one line), the same for ``decode --json`` and ``listen --json``.

    Keys in order: ``timestamp``, ``time_ns``, ``cpu``, ``pid``, ``tid``, ``tracepoint``
    (``system:name``, as perf names it), ``provider``, ``name``, ``level``, ``keyword`` and
    ``tag`` (numbers, so ``jq`` can mask them), ``opcode``, ``id``, ``version``,
    ``activity_id``, ``related_id``, ``attributes``, ``fields``.  Compact separators.
    EventHeader fields are written with perf-decode's value conventions (hex ints as
    ``"0x.."``, errno names, ...); other events' fields from their Python values.  The line is
    valid UTF-8 JSON and safe on a terminal (:func:`json_line`).
    """
    head = _where(meta or EventMeta())
    head["provider"] = event.provider
    head["name"] = event.name
    head["level"] = event.level
    head["keyword"] = event.keyword
    head["tag"] = event.tag
    head["opcode"] = event.opcode
    head["id"] = event.id
    head["version"] = event.version
    head["activity_id"] = str(event.activity_id) if event.activity_id else None
    head["related_id"] = str(event.related_id) if event.related_id else None
    head["attributes"] = event.attributes
    text = json.dumps(head, ensure_ascii=False, separators=_COMPACT)
    if event.format == "eventheader":
        fields = "{" + perf_json_fields(event, field_tags=False) + "}"
    else:
        fields = json.dumps(
            {f.name: _plain(f.plain_value()) for f in event.field_list},
            ensure_ascii=False,
            separators=_COMPACT,
        )
    return json_line(text[:-1] + ',"fields":' + fields + "}")


def json_fields(event: DecodedEvent) -> dict[str, Any]:
    """The event's fields as JSON-able data, with :func:`event_json`'s value conventions.

    (A name that occurs twice keeps its last value, as in ``DecodedEvent.fields``.)
    """
    if event.format == "eventheader":
        loaded: dict[str, Any] = json.loads(json_line("{" + perf_json_fields(event, field_tags=False) + "}"))
        return loaded
    return {f.name: _plain(f.plain_value()) for f in event.field_list}


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


def pretty_fields(names: list[str], values: list[Any], colors: bool) -> str:
    """:func:`event_pretty`'s text of fields that are Python values (events not in EventHeader)."""
    return " ".join(
        _c(colors, CYAN, printable(n)) + "=" + _c(colors, MAGENTA, _value_text(v))
        for n, v in zip(names, values, strict=True)
    )


#: The kinds whose Python value is a str.
_TEXT_KINDS: Final = frozenset({Kind.CHAR, Kind.LATIN1, Kind.UTF8, Kind.UTF16, Kind.UCS4})
#: The formats of text whose byte-order mark, if any, decides its kind.
_BOM_FORMATS: Final = frozenset({FMT_STRING_UTF_BOM, FMT_STRING_XML, FMT_STRING_JSON})


def _always_text(encoding: int, fmt: int, order: str) -> bool:
    """Whether every value of this encoding and format is a str: its kind is a text kind
    whatever its bytes (none of a fixed size; a byte-order mark, if any, only says which text)."""
    if not bytes_decide_kind(encoding, fmt):
        return value_kind(encoding, fmt, b"", order)[0] in _TEXT_KINDS
    if fmt not in _BOM_FORMATS or encoding in FIXED_SIZE:
        return False
    starts = (b"", b"x", *(mark for mark, _kind, _order in BOMS))
    return all(value_kind(encoding, fmt, raw, order)[0] in _TEXT_KINDS for raw in starts)


class TextFieldStyle(FieldStyle):
    """:func:`event_pretty`'s text of EventHeader fields, for compiled plans
    (:class:`~structlog_etw.read.writers.perf_json.Plans`): ``name=value`` with the same value
    text, colours and escapes."""

    top_sep = b" "
    struct_sep = b", "
    array_sep = b", "

    def __init__(self, *, colors: bool) -> None:
        super().__init__(field_tags=False)
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
        found = super().number(encoding, fmt, order)
        if found is None or fmt == FMT_ERRNO:
            return None
        code, piece = found
        if piece == b"%d":
            return None if fmt == FMT_HEX_INT else found
        return (code, b"0x%X") if fmt == FMT_HEX_INT else None

    def member(self, meta: FieldMetadata, top: bool) -> tuple[bytes, bytes]:
        """``name=`` (at the top level coloured as :func:`event_pretty` colours it)."""
        name = printable(meta.name.decode("utf-8", "surrogateescape"))
        if top and self.colors:
            return (CYAN + name + RESET + "=" + MAGENTA).encode(), RESET.encode()
        return (name + "=").encode("utf-8", "surrogateescape"), b""


def _where(m: EventMeta) -> dict[str, Any]:
    """The capture metadata that starts every JSON line."""
    head: dict[str, Any] = {
        "timestamp": wallclock_text(m.realtime_ns) if m.realtime_ns is not None else None,
        "time_ns": m.time_ns,
        "cpu": m.cpu,
        "pid": m.pid,
        "tid": m.tid,
        "tracepoint": m.tracepoint,
    }
    return head


def undecodable_json(meta: EventMeta, error: str | None, raw: bytes) -> str:
    """The JSON line of an event that could not be decoded: where it came from, why, its bytes in hex."""
    head = {**_where(meta), "error": error, "raw": raw.hex(" ")}
    return json_line(json.dumps(head, ensure_ascii=False, separators=_COMPACT))


def undecodable_pretty(meta: EventMeta, error: str | None) -> str:
    """The console line of an event that could not be decoded (names and message escaped)."""
    stamp = wallclock_text(meta.realtime_ns) if meta.realtime_ns is not None else "-"
    return printable(f"{stamp} [undecodable] {meta.tracepoint}: {error} [pid={meta.pid} cpu={meta.cpu}]")
