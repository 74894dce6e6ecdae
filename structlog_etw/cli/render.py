"""Rendering decoded events for people and programs: one JSON object per line, or a coloured
console line in the style of structlog's ``ConsoleRenderer``.  Used by ``structlog-etw decode``,
``listen`` and ``demo``.

Everything here renders from a :class:`~structlog_etw.decoded.DecodedEvent` (and the capture
metadata in :class:`EventMeta`); no event bytes are parsed.  EventHeader field values are
written with perf-decode's conventions (:mod:`structlog_etw.eventheader.perf_decode`).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, Final

from .._levels import LEVEL_NAMES
from ..decoded import DecodedEvent, DecodedField
from ..eventheader.perf_decode import errno_text, float_text, perf_json_fields, wallclock_text
from ..eventheader.spec import (
    ENC_BINARY_LENGTH16_CHAR8,
    ENC_STRING_LENGTH16_CHAR8,
    ENC_VALUE32,
    FMT_ERRNO,
    FMT_HEX_INT,
)

__all__ = [
    "EventMeta",
    "event_json",
    "event_pretty",
    "level_name",
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


def event_json(event: DecodedEvent, meta: EventMeta | None = None) -> str:
    """One JSON object (one line): timestamp, cpu, pid/tid, provider, name, level, keyword,
    opcode, tag, id, version, activity ids, attributes and ``fields``.

    EventHeader fields are written with perf-decode's value conventions (hex
    ints as ``"0x.."``, errno names, ...); other events' fields from their
    Python values.
    """
    head = _where(meta or EventMeta())
    head["provider"] = event.provider
    head["name"] = event.name
    head["level"] = event.level
    head["keyword"] = f"0x{event.keyword:X}"
    head["opcode"] = event.opcode
    head["tag"] = f"0x{event.tag:X}"
    head["id"] = event.id
    head["version"] = event.version
    head["activity_id"] = str(event.activity_id) if event.activity_id else None
    head["related_id"] = str(event.related_id) if event.related_id else None
    head["attributes"] = event.attributes
    text = json.dumps(head, ensure_ascii=False)
    if event.format == "eventheader":
        fields = "{" + perf_json_fields(event, field_tags=False) + "}"
        # Strings perf-decode writes as invalid UTF-8 come back as surrogate escapes;
        # keep the line valid UTF-8 JSON by escaping them.
        fields = fields.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    else:
        fields = json.dumps({f.name: _plain(f.plain_value()) for f in event.field_list}, ensure_ascii=False)
    return text[:-1] + ', "fields": ' + fields + "}"


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
        return value if value and not any(c.isspace() or c in "='\"" for c in value) else repr(value)
    if isinstance(value, bytes):
        return "0x" + value.hex() if value else "b''"
    if isinstance(value, uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address):
        return str(value)
    if isinstance(value, _dt.datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return repr(value)


def _field_text(f: DecodedField, eventheader: bool) -> str:
    if f.is_struct:
        elements = f.value if f.is_array else [f.value]
        texts = [
            "{" + ", ".join(f"{c.name}={_field_text(c, eventheader)}" for c in e) + "}" for e in elements
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

    with ANSI colours when ``colors`` is true.
    """
    m = meta or EventMeta()
    has_level = event.format != "tracefs"  # a plain kernel tracepoint has no level or keyword

    def c(code: str, text: str) -> str:
        return code + text + RESET if colors else text

    parts: list[str] = []
    if m.realtime_ns is not None:
        parts.append(c(DIM, wallclock_text(m.realtime_ns)))
    elif m.time_ns is not None:
        parts.append(c(DIM, f"{m.time_ns / 1e9:.9f}"))
    if has_level:
        lvl = level_name(event.level)
        parts.append("[" + c(_LEVEL_COLORS.get(event.level, ""), f"{lvl:<9}") + "]")
    else:
        parts.append("[" + c(DIM, f"{'tracepoint':<9}") + "]")
    parts.append(c(BRIGHT, f"{event.name:<20}"))
    where = [event.provider]
    if has_level:
        where.append(f"k=0x{event.keyword:x}")
        if event.opcode:
            where.append(f"opcode={event.opcode}")
        if event.activity_id:
            where.append(f"activity={event.activity_id}")
        if event.related_id:
            where.append(f"related={event.related_id}")
    if m.pid is not None:
        where.append(f"pid={m.pid}" if m.pid == m.tid else f"pid={m.pid}/{m.tid}")
    if m.cpu is not None:
        where.append(f"cpu={m.cpu}")
    parts.append(c(DIM, "[" + " ".join(where) + "]"))
    eventheader = event.format == "eventheader"
    for f in event.field_list:
        parts.append(c(CYAN, f.name) + "=" + c(MAGENTA, _field_text(f, eventheader)))
    return " ".join(parts)


def _where(m: EventMeta) -> dict[str, Any]:
    """The capture metadata that starts every JSON line."""
    head: dict[str, Any] = {
        "timestamp": wallclock_text(m.realtime_ns) if m.realtime_ns is not None else None,
        "time_ns": m.time_ns,
        "cpu": m.cpu,
        "pid": m.pid,
        "tid": m.tid,
    }
    if m.tracepoint is not None:
        head["tracepoint"] = m.tracepoint
    return head


def undecodable_json(meta: EventMeta, error: str | None, raw: bytes) -> str:
    """The JSON line of an event that could not be decoded: where it came from, why, its bytes in hex."""
    return json.dumps({**_where(meta), "error": error, "raw": raw.hex(" ")}, ensure_ascii=False)


def undecodable_pretty(meta: EventMeta, error: str | None) -> str:
    """The console line of an event that could not be decoded."""
    stamp = wallclock_text(meta.realtime_ns) if meta.realtime_ns is not None else "-"
    return f"{stamp} [undecodable] {meta.tracepoint}: {error} [pid={meta.pid} cpu={meta.cpu}]"
