"""JSON lines: a decoded event as one JSON object per line (``decode --json``, ``listen --json``),
and its fast plan.

:func:`event_json` renders from a :class:`~structlog_etw.read.decoded.DecodedEvent` and its
:class:`~structlog_etw.read.decoded.EventMeta`; EventHeader fields with perf-decode's value
conventions (:mod:`.perf_json`, without field tags), other events' from their Python values.
Beside it, :class:`JsonLines` writes the same lines for perf.data samples from compiled plans
(``read.writers._lines``); the tests hold the two equal.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any, Final

from ..._util.lazy import LazyModule
from .._text import KeptTexts, wallclock_text
from .._text import template_literal as esc
from ..decode._eventheader_plans import EventPlan
from ..decoded import DecodedEvent, EventMeta
from ._lines import NS, Accepts, Lines, PlainLayout, PlanLine, Render, plain_layout, sample_meta, utf8
from .perf_json import PerfJsonStyle, activity_text, perf_json_fields

if TYPE_CHECKING:
    import datetime as _dt

    from ..sample import PerfField, PerfFormat, PerfSample
else:  # imported on first use (a decoded time value): a reader's start loads no datetime
    _dt = LazyModule("datetime", globals(), "_dt")

__all__ = ["JsonLines", "event_json", "json_fields", "json_line", "json_line_bytes", "undecodable_json"]


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


# --- the fast plan ----------------------------------------------------------------------------


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=_COMPACT)


def _num(value: int | None) -> bytes:
    return b"null" if value is None else b"%d" % value


def _name_text(name: str) -> bytes:
    """A tracepoint name's JSON text (null for ``""``)."""
    return utf8(_dumps(name or None))


def _template_name(name: str) -> bytes:
    """A tracepoint name's JSON text for a ``%``-template (``%`` doubled); ``b""`` for a name
    --json cannot write as it is (the ordinary path writes it)."""
    try:
        return esc(_name_text(name))
    except UnicodeEncodeError:
        return b""


#: Tracepoint names whose JSON text is kept: at most this many.
_NAMES_KEPT: Final = 4096

#: The start of a line whose time, cpu, pid and tid are all known (a ``%``-template).
_STAMPED: Final = b'{"timestamp":"%s.%09dZ","time_ns":%d,"cpu":%d,"pid":%d,"tid":%d'
#: The start of a line with the time text, time, cpu, pid, tid as texts (null for unknown ones).
_UNSTAMPED: Final = b'{"timestamp":%s,"time_ns":%s,"cpu":%s,"pid":%s,"tid":%s'


def _safe_json(line: bytes) -> bytes:
    """:func:`json_line` of a JSON line held as bytes (ASCII lines without DEL, nearly all, as they are)."""
    if line.isascii() and 0x7F not in line:  # (an int: a bytes operand first fails as an index)
        return line
    return json_line_bytes(line).encode()


def _unstamped(s: PerfSample) -> list[object]:
    """The texts of :data:`_UNSTAMPED` of a sample without some of its time, cpu, pid, tid."""
    real = s.realtime_ns
    stamp = b'"' + wallclock_text(real).encode() + b'"' if real is not None else b"null"
    return [stamp, _num(s.time), _num(s.cpu), _num(s.pid), _num(s.tid)]


class JsonLines(Lines):
    """``decode --json``'s lines of perf.data samples, from plans (``read.writers._lines``): the lines
    of :func:`event_json`."""

    def __init__(self, accepts: Accepts, colors: bool = False) -> None:
        super().__init__(PerfJsonStyle(field_tags=False), accepts)
        #: tracepoint name -> its JSON text
        self.names = KeptTexts(_name_text, _NAMES_KEPT)

    def event_line(self, sample: PerfSample, event: DecodedEvent) -> str:
        """:func:`event_json`."""
        return event_json(event, sample_meta(sample))

    def _templates(self, plan: EventPlan, name: bytes) -> tuple[bytes, bytes, bytes] | None:
        """The templates of a plan's lines: ``line`` (a sample with its time, cpu, pid and tid),
        ``other`` (the same as texts), ``named``: ``line`` with the tracepoint's name ``name``
        (:func:`_template_name`) and no activity ids in it (``b""``: none); None: texts this
        line does not write the way :func:`event_json` does (the ordinary path)."""
        event_head = {  # event_json's keys from provider to version, and attributes
            "provider": plan.provider,
            "name": plan.name,
            "level": plan.level,
            "keyword": plan.keyword,
            "tag": plan.tag,
            "opcode": plan.opcode,
            "id": plan.id,
            "version": plan.version,
        }
        try:
            middle = esc(utf8(_dumps(event_head)[1:-1]))
            attributes = utf8(_dumps(plan.attributes))
        except UnicodeEncodeError:
            return None
        rest = b',"tracepoint":%s,' + middle + b',"activity_id":%s,"related_id":%s,"attributes":'
        end = esc(attributes) + b',"fields":{' + plan.template + b"}}"
        named = b""
        if name:
            named = _STAMPED + b',"tracepoint":' + name + b"," + middle
            named += b',"activity_id":null,"related_id":null,"attributes":' + end
        return _STAMPED + rest + end, _UNSTAMPED + rest + end, named

    def _plan_line(self, fmt: PerfFormat, plan: EventPlan) -> PlanLine | None:
        """The fields by the plan's readers into the line's template, the tracepoint's name in it
        for the samples of that name without activity ids (nearly all)."""
        expected = fmt.full_name  # the name of its samples (perf's, unless the file names it otherwise)
        templates = self._templates(plan, _template_name(expected))
        if templates is None:
            return None
        whole, other, named = templates
        readers = plan.readers
        seconds = self.seconds
        names = self.names

        def json_line(s: PerfSample, pos: int, activity: bytes | None, related: bytes | None) -> bytes:
            real, t, cpu, pid, tid = s.realtime_ns, s.time, s.cpu, s.pid, s.tid
            data = s.data
            out: list[object]
            if real is None or t is None or cpu is None or pid is None or tid is None:
                out = _unstamped(s)
                template = other
            else:
                second, ns = divmod(real, NS)
                out = [seconds[second], ns, t, cpu, pid, tid]
                name = s.name
                if named and activity is None and (name is expected or name == expected):  # no related id
                    for read in readers:
                        pos = read(data, pos, out)
                    line = named % tuple(out)
                    return line if line.isascii() and 0x7F not in line else _safe_json(line)
                template = whole
            out += (
                names[s.name],
                activity_text(activity) if activity is not None else b"null",
                activity_text(related) if related is not None else b"null",
            )
            for read in readers:
                pos = read(data, pos, out)
            return _safe_json(template % tuple(out))

        return json_line

    def _plain_layout(self, fmt: PerfFormat) -> PlainLayout | None:
        names = [f.name for f in fmt.own_fields]
        if len(set(names)) != len(names):  # event_json keeps the last of a name: the ordinary path
            return None

        def member(f: PerfField, piece: bytes) -> bytes:
            return esc(utf8(_dumps(f.name))) + b":" + piece

        return plain_layout(
            fmt,
            small_unsigned=False,
            text=lambda text: utf8(_dumps(text)),
            binary=lambda raw: b'"' + raw.hex(" ").encode() + b'"',
            member=member,
            sep=b",",
        )

    def _plain_lines(self, fmt: PerfFormat, layout: PlainLayout) -> Render:
        middle = {
            "provider": fmt.system,
            "name": fmt.name,
            "level": 0,
            "keyword": 0,
            "tag": 0,
            "opcode": 0,
            "id": 0,
            "version": 0,
            "activity_id": None,
            "related_id": None,
            "attributes": {},
        }
        tail = b"," + esc(utf8(_dumps(middle)[1:-1])) + b',"fields":{' + layout.template + b"}}"
        whole = _STAMPED + b',"tracepoint":%s' + tail
        partial = _UNSTAMPED + b',"tracepoint":%s' + tail
        expected = fmt.full_name  # the name of its samples (perf's, unless the file names it otherwise)
        name_text = _template_name(expected)  # the line of a sample of that name, the name in it
        named = _STAMPED + b',"tracepoint":' + name_text + tail if name_text else b""
        seconds = self.seconds
        names = self.names
        values_of = layout.values_of

        def json_line(s: PerfSample) -> bytes | None:
            values = values_of(s.raw)
            real, t, cpu, pid, tid = s.realtime_ns, s.time, s.cpu, s.pid, s.tid
            if real is None or t is None or cpu is None or pid is None or tid is None:
                return _safe_json(partial % (*_unstamped(s), names[s.name], *values))
            second, ns = divmod(real, NS)
            name = s.name
            if named and (name is expected or name == expected):
                line = named % (seconds[second], ns, t, cpu, pid, tid, *values)
            else:
                line = whole % (seconds[second], ns, t, cpu, pid, tid, names[name], *values)
            return line if line.isascii() and 0x7F not in line else _safe_json(line)

        return json_line
