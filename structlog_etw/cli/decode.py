"""``structlog-etw decode FILE``: perf.data -> one line per event (text, JSON, perf-decode's JSON)
or a Chrome/Perfetto timeline (docs/cli/decode.md).  An .etl file (told by its content) goes to
:mod:`structlog_etw.cli.decode_etl`.

Exit codes: 0 every sample decoded; 1 the file is damaged or truncated, or some samples could
not be decoded (what could be decoded is still written, the rest is reported on stderr); 2 the
file cannot be read or is not a perf.data file.  Whatever the file holds, the outcome is one of
these with a message on stderr, never a traceback.  Samples of events that are no tracepoints
(``-e cpu-clock``, cycles, breakpoints) are counted on stderr as "not tracepoints"; they are no
damage.  ``decode -`` reads a pipe as perf writes it: what is decoded is shown before each read
that may wait for perf.
"""

from __future__ import annotations

import argparse
import codecs
import functools
import json
import os
import stat
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO, Final, TextIO

from ..perf.datafile import PerfDataError, PerfDataFile, Sample
from ..perf.samples import SampleDecodeError, decode_sample, sample_perf_json
from ..perf.tracefs_format import FMT_HEX, UNPACKED_BYTES, UNPACKED_TEXT, TracepointFormat
from ..read._text import time_text, wallclock_text
from ..read.decoded import DecodedEvent
from ..read.writers.perf_json import (
    EventPlan,
    FieldReader,
    PlanCache,
    Plans,
    activity_text,
    json_string,
)
from .output import (
    EventFilter,
    EventWriter,
    add_filter_arguments,
    add_output_arguments,
    event_filter,
    make_writer,
    use_color,
)
from .render import (
    CYAN,
    MAGENTA,
    RESET,
    EventMeta,
    TextFieldStyle,
    json_line_bytes,
    pretty_head,
    pretty_line,
    pretty_line_templates,
    pretty_value,
    printable,
)

__all__ = ["FORMATS", "add_arguments", "decode_file", "run"]

#: The output formats of ``decode`` (``--format``).
FORMATS = ("text", "json", "perf-json", "chrome-trace")
_MAX_REPORTED = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``decode``."""
    parser.add_argument(
        "file",
        metavar="FILE",
        help="perf.data file written by perf record ('-': read stdin, e.g. perf's pipe mode) or an .etl file",
    )
    add_output_arguments(parser, FORMATS)
    parser.add_argument(
        "--perf-json",
        dest="format",
        action="store_const",
        const="perf-json",
        help="one object per line exactly as Microsoft's perf-decode writes it: --format perf-json",
    )
    parser.add_argument(
        "--pretty", "--text", dest="format", action="store_const", const="text", help="--format text"
    )
    add_filter_arguments(parser)
    parser.add_argument(
        "--order",
        choices=["time", "file"],
        default="time",
        help="time: by timestamp, as perf script and perf-decode (default); file: as stored, per CPU buffer",
    )
    parser.add_argument("--file-order", dest="order", action="store_const", const="file", help="--order file")
    parser.add_argument(  # the default since 0.2; kept so that old command lines still run
        "--time-order", dest="order", action="store_const", const="time", help=argparse.SUPPRESS
    )
    parser.epilog = (
        "Colour only on a terminal without NO_COLOR (or --color). Exit status: 0 all decoded, 1 damaged"
        " file or undecodable samples (reported on stderr), 2 unreadable file."
    )


def _meta(sample: Sample) -> EventMeta:
    return EventMeta(sample.time, sample.realtime_ns, sample.cpu, sample.pid, sample.tid, sample.name or None)


class _PerfJsonWriter:
    """``--perf-json``: perf-decode's object per sample (it needs the sample, not only the event)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write_sample(self, sample: Sample, decoded: DecodedEvent) -> None:
        self.out.write(sample_perf_json(sample, decoded=decoded) + "\n")


#: Lines kept before they are written in one go (and before every read that may wait for perf).
_BATCH = 512
_NS: Final = 1_000_000_000
#: Formats, names, seconds whose renderers and texts are kept: at most this many of each.
_KEPT: Final = 4096

#: Plain tracepoint formats whose renderer is generated code (:meth:`_Lines._plain_generated`;
#: the others' is a closure): at most this many per decode, of at most this many fields.
_GENERATED_KEPT: Final = 256
_GENERATED_FIELDS: Final = 200

#: A sample -> its line (UTF-8 bytes, no newline), ``b""`` when the filters drop it, None: take
#: the ordinary path (as for any exception: a payload its plan cannot read).
_Render = Callable[[Sample], bytes | None]


def _ordinary(sample: Sample) -> None:
    """The renderer of formats without a plan: every sample takes the ordinary path."""
    return None


def _dropped(sample: Sample) -> bytes:
    """The renderer of formats the filters drop."""
    return b""


def _esc(text: bytes) -> bytes:
    return text.replace(b"%", b"%%")


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _second_text(seconds: dict[int, bytes], second: int) -> bytes:
    """The date and time of a second (:func:`wallclock_text` up to the ``.``), kept in ``seconds``."""
    text = time_text(second).encode()
    if len(seconds) >= _KEPT:
        seconds.clear()
    seconds[second] = text
    return text


def _dumps_name(names: dict[str, bytes], name: str) -> bytes:
    """A tracepoint name's JSON text (null for ``""``), kept in ``names`` (bounded)."""
    if len(names) >= _KEPT:
        names.clear()
    text = names[name] = _utf8(_dumps(name or None))
    return text


def _template_name(name: str) -> bytes:
    """A tracepoint name's JSON text for a ``%``-template (``%`` doubled); ``b""`` for a name
    --json cannot write as it is (the ordinary path writes it)."""
    try:
        return _esc(_utf8(_dumps(name or None)))
    except UnicodeEncodeError:
        return b""


#: The start of a --json line whose time, cpu, pid and tid are all known (a ``%``-template).
_JSON_STAMPED: Final = b'{"timestamp":"%s.%09dZ","time_ns":%d,"cpu":%d,"pid":%d,"tid":%d'


def _safe_json(line: bytes) -> bytes:
    """:func:`~structlog_etw.cli.render.json_line` of a JSON line held as bytes (ASCII lines
    without DEL, nearly all, as they are)."""
    if line.isascii() and 0x7F not in line:  # (an int: a bytes operand first fails as an index)
        return line
    return json_line_bytes(line).encode()


@dataclass(frozen=True, slots=True)
class _Decided:
    """What a renderer keeps per EventHeader plan: whether the filters pass its events, its
    readers, the line's templates (``line``: a sample with its wall-clock time, cpu, pid and tid
    and no activity - text: pid == tid; ``other``: text: pid != tid, --perf-json: the meta as one
    text, --json: every number as a text), the fields' template, the plan, the console head;
    ``named``: --json's ``line`` with the tracepoint's name and no activity ids in it (for the
    samples of that name without activity ids; ``b""``: none)."""

    accepts: bool
    readers: tuple[FieldReader, ...]
    line: bytes
    other: bytes
    fields: bytes
    plan: EventPlan
    head: tuple[str, str] | None = None
    named: bytes = b""


class _Lines:
    """The lines of tracepoint samples from plans decided once per tracepoint format (a plain
    tracepoint: one unpack of its fields and one template per format) and per EventHeader
    header and metadata (:class:`~structlog_etw.read.writers.perf_json.Plans`), as UTF-8
    bytes, without building a :class:`~structlog_etw.read.decoded.DecodedEvent`.  The same text as
    the ordinary path, which runs for every sample a plan does not read (and so reports its
    error).  Every cache is bounded (formats, names and seconds by count, EventHeader plans by
    the bytes of their keys)."""

    def __init__(self, mode: str, wanted: EventFilter, colors: bool = False) -> None:
        self.perf_json = mode == "perf-json"
        self.text = mode == "text"
        self.json = mode == "json"
        self.colors = colors
        style = TextFieldStyle(colors=colors) if self.text else None
        self.plans = Plans(field_tags=self.perf_json, style=style)
        self.wanted = wanted
        self.mode = mode
        #: id(format) -> its renderer; ``formats`` holds the formats, so that no id is reused
        #: while it is a key.
        self.renderers: dict[int, _Render] = {}
        self.formats: list[TracepointFormat] = []
        #: second -> its date and time text (every renderer's).
        self.seconds: dict[int, bytes] = {}
        #: Renderers generated so far (:meth:`_plain_generated`; at most :data:`_GENERATED_KEPT`).
        self.generated = 0

    def renderer(self, fmt: TracepointFormat) -> _Render:
        """The renderer of ``fmt``'s samples, decided once per format."""
        found = self.renderers.get(id(fmt))
        if found is not None:
            return found
        if len(self.renderers) >= _KEPT:  # a new start (the plans' caches with the renderers)
            self.renderers.clear()
            self.formats.clear()
            self.plans = Plans(field_tags=self.perf_json, style=self.plans.style)
        render = self._eventheader(fmt) if fmt.is_eventheader else self._plain(fmt)
        self.renderers[id(fmt)] = render
        self.formats.append(fmt)
        return render

    # --- EventHeader ------------------------------------------------------------------------

    def _decide(self, plan: EventPlan, name: bytes = b"") -> _Decided | None:
        """What the renderers keep per plan: whether the filters pass its events, its readers
        and its line templates (None: the ordinary path); ``name``: --json's text of the
        tracepoint's name (:func:`_template_name`), put in the ``named`` template (``b""``: no
        such template)."""
        accepts = self.wanted.accepts_values(plan.level, plan.keyword, plan.provider, plan.name)
        fields = plan.template
        readers = plan.readers
        if self.text:
            head = pretty_head(
                plan.level, plan.name, plan.provider, plan.keyword, plan.opcode, True, self.colors
            )
            same, other = pretty_line_templates(head, self.colors, "%s.%09dZ")
            tail = b" " + fields if plan.has_fields else b""
            return _Decided(accepts, readers, _utf8(same) + tail, _utf8(other) + tail, fields, plan, head)
        if self.perf_json:  # {"n":..,fields,"meta":{sample's meta,header's meta,activities}}
            start = b'{"n":' + _esc(plan.n) + (b"," + fields if plan.has_fields else b"")
            header_meta = b"," + _esc(plan.header_meta) if plan.header_meta else b""
            whole = start + b',"meta":{"time":"%s.%09dZ","cpu":%d,"pid":%d,"tid":%d' + header_meta + b"}}"
            return _Decided(accepts, readers, whole, start + b',"meta":{%s}}', fields, plan)
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
            middle = _utf8(_dumps(event_head)[1:-1])
            attributes = _utf8(_dumps(plan.attributes))
        except UnicodeEncodeError:  # not text the ordinary path writes this way: leave it to it
            return None
        rest = b',"tracepoint":%s,' + _esc(middle) + b',"activity_id":%s,"related_id":%s,"attributes":'
        end = _esc(attributes) + b',"fields":{' + fields + b"}}"
        named = b""
        if name:
            named = _JSON_STAMPED + b',"tracepoint":' + name + b"," + _esc(middle)
            named += b',"activity_id":null,"related_id":null,"attributes":' + end
        return _Decided(
            accepts,
            readers,
            _JSON_STAMPED + rest + end,
            b'{"timestamp":%s,"time_ns":%s,"cpu":%s,"pid":%s,"tid":%s' + rest + end,
            fields,
            plan,
            None,
            named,
        )

    def _eventheader(self, fmt: TracepointFormat) -> _Render:
        """The renderer of an EventHeader tracepoint's samples: a plan per header and metadata
        (kept by their bytes), each sample's fields by the plan's readers into its line's template."""
        decide = self._decide
        expected = fmt.full_name  # the name of its samples (perf's, unless the file names it otherwise)
        if self.json:
            decide = functools.partial(self._decide, name=_template_name(expected))
        find = PlanCache(self.plans, fmt.name, decide).find
        seconds = self.seconds
        colors = self.colors

        def perf_json_line(s: Sample) -> bytes | None:
            found = find(s.data)
            if found is None:
                return None
            entry, pos, activity, related = found
            if not entry.accepts:
                return b""
            data = s.data
            out: list[object] = []
            for read in entry.readers:
                pos = read(data, pos, out)
            real, cpu, pid, tid = s.realtime_ns, s.cpu, s.pid, s.tid
            if (
                real is not None
                and cpu is not None
                and pid is not None
                and tid is not None
                and activity is None
            ):
                second, ns = divmod(real, _NS)
                out += (seconds.get(second) or _second_text(seconds, second), ns, cpu, pid, tid)
                return entry.line % tuple(out)
            out.append(_perf_meta(s, entry.plan.header_meta, activity, related))
            return entry.other % tuple(out)

        def text_line(s: Sample) -> bytes | None:
            found = find(s.data)
            if found is None:
                return None
            entry, pos, activity, related = found
            if not entry.accepts:
                return b""
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
                second, ns = divmod(real, _NS)
                stamp = seconds.get(second) or _second_text(seconds, second)
                same = pid == tid
                out = [stamp, ns, pid, cpu] if same else [stamp, ns, pid, tid, cpu]
                for read in entry.readers:
                    pos = read(data, pos, out)
                return (entry.line if same else entry.other) % tuple(out)
            out = []
            for read in entry.readers:
                pos = read(data, pos, out)
            act = uuid.UUID(bytes=activity) if activity is not None else None
            rel = uuid.UUID(bytes=related) if related is not None else None
            assert entry.head is not None
            start = _utf8(pretty_line(entry.head, real, s.time, act, rel, pid, tid, cpu, colors))
            return start + b" " + entry.fields % tuple(out) if entry.plan.has_fields else start

        names: dict[str, bytes] = {}  # tracepoint name -> its JSON string

        def json_lines(s: Sample) -> bytes | None:
            found = find(s.data)
            if found is None:
                return None
            entry, pos, activity, related = found
            if not entry.accepts:
                return b""
            real, t, cpu, pid, tid = s.realtime_ns, s.time, s.cpu, s.pid, s.tid
            data = s.data
            out: list[object]
            if (
                entry.named
                and real is not None
                and t is not None
                and cpu is not None
                and pid is not None
                and tid is not None
                and activity is None
                and related is None
                and (s.name is expected or s.name == expected)
            ):  # the common case: the name and null activity ids are in the template
                second, ns = divmod(real, _NS)
                out = [seconds.get(second) or _second_text(seconds, second), ns, t, cpu, pid, tid]
                for read in entry.readers:
                    pos = read(data, pos, out)
                line = entry.named % tuple(out)
                return line if line.isascii() and 0x7F not in line else _safe_json(line)
            name = names.get(s.name) or _dumps_name(names, s.name)
            act_text = activity_text(activity) if activity is not None else b"null"
            rel_text = activity_text(related) if related is not None else b"null"
            if real is not None and t is not None and cpu is not None and pid is not None and tid is not None:
                second, ns = divmod(real, _NS)
                stamp = seconds.get(second) or _second_text(seconds, second)
                out = [stamp, ns, t, cpu, pid, tid, name, act_text, rel_text]
                template = entry.line
            else:
                stamp = b'"' + wallclock_text(real).encode() + b'"' if real is not None else b"null"
                out = [stamp, _num(t), _num(cpu), _num(pid), _num(tid), name, act_text, rel_text]
                template = entry.other
            for read in entry.readers:
                pos = read(data, pos, out)
            return _safe_json(template % tuple(out))

        return perf_json_line if self.perf_json else text_line if self.text else json_lines

    # --- plain tracepoints --------------------------------------------------------------------

    def _plain(self, fmt: TracepointFormat) -> _Render:
        """The renderer of a plain tracepoint's samples: one unpack of the fields, their texts
        (strings, bytes; kept by their bytes) and one template for the whole line."""
        if not self.wanted.accepts_values(0, 0, fmt.system, fmt.name):
            return _dropped
        layout = _plain_layout(fmt, self.mode, self.colors)
        if layout is None:
            return _ordinary
        read, start, need, texts, fields = layout
        count = len(fmt.own_fields)  # one value per field
        seconds = self.seconds
        colors = self.colors
        has_fields = bool(fmt.own_fields)

        def values_of(raw: bytes) -> tuple[Any, ...] | list[Any] | None:
            if len(raw) < need:
                return None
            values: tuple[Any, ...] | list[Any] = read(raw, start)
            if texts:
                values = list(values)
                for i, kept, text_of in texts:
                    value = values[i]
                    found = kept.get(value)
                    if found is None:
                        found = text_of(kept, value)
                    values[i] = found
            return values

        if self.perf_json:
            head = b'{"n":' + _utf8(json_string(f"{fmt.system}:{fmt.name}"))
            body = _esc(head) + (b"," + fields if has_fields else b"")
            whole = body + b',"meta":{"time":"%s.%09dZ","cpu":%d,"pid":%d,"tid":%d}}'
            body_meta = body + b',"meta":{%s}}'

            def perf_json_line(s: Sample) -> bytes | None:
                values = values_of(s.raw)
                if values is None:
                    return None
                real, cpu, pid, tid = s.realtime_ns, s.cpu, s.pid, s.tid
                if real is not None and cpu is not None and pid is not None and tid is not None:
                    second, ns = divmod(real, _NS)
                    return whole % (
                        *values,
                        seconds.get(second) or _second_text(seconds, second),
                        ns,
                        cpu,
                        pid,
                        tid,
                    )
                if pid is not None and tid is None:
                    return None
                return body_meta % (*values, _perf_meta(s, b"", None, None))

            return self._plain_generated(perf_json_line, layout, count, whole, b"") or perf_json_line
        if self.text:
            pretty = pretty_head(0, fmt.name, fmt.system, 0, 0, False, colors)
            same, other = pretty_line_templates(pretty, colors, "%s.%09dZ")
            tail = b" " + fields if has_fields else b""
            same_t, other_t = _utf8(same) + tail, _utf8(other) + tail

            def text_line(s: Sample) -> bytes | None:
                values = values_of(s.raw)
                if values is None:
                    return None
                real, cpu, pid, tid = s.realtime_ns, s.cpu, s.pid, s.tid
                if real is not None and cpu is not None and pid is not None and tid is not None:
                    second, ns = divmod(real, _NS)
                    stamp = seconds.get(second) or _second_text(seconds, second)
                    if pid == tid:
                        return same_t % (stamp, ns, pid, cpu, *values)
                    return other_t % (stamp, ns, pid, tid, cpu, *values)
                line = _utf8(pretty_line(pretty, real, s.time, None, None, pid, tid, cpu, colors))
                return line + b" " + fields % tuple(values) if has_fields else line

            return self._plain_generated(text_line, layout, count, same_t, other_t) or text_line
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
        tail = b"," + _esc(_utf8(_dumps(middle)[1:-1])) + b',"fields":{' + fields + b"}}"
        rest = b',"tracepoint":%s' + tail
        whole = _JSON_STAMPED + rest
        partial = b'{"timestamp":%s,"time_ns":%s,"cpu":%s,"pid":%s,"tid":%s' + rest
        names: dict[str, bytes] = {}
        expected = fmt.full_name  # the name of its samples (perf's, unless the file names it otherwise)
        name_text = _template_name(expected)  # the line of a sample of that name, the name in it
        named = _JSON_STAMPED + b',"tracepoint":' + name_text + tail if name_text else b""

        def json_lines(s: Sample) -> bytes | None:
            values = values_of(s.raw)
            if values is None:
                return None
            name = names.get(s.name) or _dumps_name(names, s.name)
            real, t, cpu, pid, tid = s.realtime_ns, s.time, s.cpu, s.pid, s.tid
            if real is not None and t is not None and cpu is not None and pid is not None and tid is not None:
                second, ns = divmod(real, _NS)
                stamp = seconds.get(second) or _second_text(seconds, second)
                return _safe_json(whole % (stamp, ns, t, cpu, pid, tid, name, *values))
            stamp = b'"' + wallclock_text(real).encode() + b'"' if real is not None else b"null"
            return _safe_json(partial % (stamp, _num(t), _num(cpu), _num(pid), _num(tid), name, *values))

        generated = self._plain_generated(json_lines, layout, count, whole, named, names, expected)
        return generated or json_lines

    def _plain_generated(
        self,
        general: _Render,
        layout: _Layout,
        count: int,
        line: bytes,
        other: bytes,
        names: dict[str, bytes] | None = None,
        expected: str = "",
    ) -> _Render | None:
        """The renderer of a plain tracepoint's samples as one generated function (one per format
        and output, for at most :data:`_GENERATED_KEPT` formats): the unpacked fields as locals, their
        texts looked up in place, the whole line from ``line`` (text: ``other`` when pid != tid;
        --json: ``other``, the line with the name in it, for samples named ``expected``, unless it
        is ``b""``) in one ``%``.  Samples without wall-clock time, cpu, pid or tid (or, in
        --json, time) go to ``general``, the renderer it stands for, which writes every sample
        the same way.  None: no generated renderer (too many formats, or fields too many to be
        locals)."""
        read, start, need, texts, _fields = layout
        if self.generated >= _GENERATED_KEPT or count > _GENERATED_FIELDS:
            return None
        self.generated += 1
        scope: dict[str, object] = {
            "read": read,
            "general": general,
            "seconds": self.seconds,
            "get_second": self.seconds.get,
            "second_text": _second_text,
            "line": line,
            "other": other,
            "names": names,
            "expected": expected,
            "dumps_name": _dumps_name,
            "safe_json": _safe_json,
            "NS": _NS,
        }
        values = [f"v{i}" for i in range(count)]
        for i, kept, text_of in texts:
            scope[f"g{i}"], scope[f"k{i}"], scope[f"m{i}"] = kept.get, kept, text_of
            values[i] = f"(g{i}(v{i}) or m{i}(k{i}, v{i}))"
        fields = "".join(f", {v}" for v in values)
        json = names is not None
        body = [
            "raw = s.raw",
            "real, cpu, pid, tid = s.realtime_ns, s.cpu, s.pid, s.tid" + ("; t = s.time" if json else ""),
            f"if len(raw) < {need} or real is None or cpu is None or pid is None or tid is None"
            + (" or t is None" if json else "")
            + ": return general(s)",
        ]
        if count:
            body.append("".join(f"v{i}, " for i in range(count)) + f"= read(raw, {start})")
        body.append("second, ns = divmod(real, NS)")
        body.append("stamp = get_second(second) or second_text(seconds, second)")
        if self.perf_json:
            body.append(f"return line % ({fields[2:]}{',' if count else ''} stamp, ns, cpu, pid, tid)")
        elif self.text:
            body.append(f"if pid == tid: return line % (stamp, ns, pid, cpu{fields})")
            body.append(f"return other % (stamp, ns, pid, tid, cpu{fields})")
        else:
            body.append("name = s.name")
            named = f"other % (stamp, ns, t, cpu, pid, tid{fields})"
            unnamed = (
                f"line % (stamp, ns, t, cpu, pid, tid, names.get(name) or dumps_name(names, name){fields})"
            )
            if other:
                body.append(f"text = {named} if name is expected or name == expected else {unnamed}")
            else:
                body.append(f"text = {unnamed}")
            # _safe_json in place: ASCII lines without DEL (nearly all) as they are
            body.append("return text if text.isascii() and 0x7F not in text else safe_json(text)")
        src = "def render(s):\n" + "".join(f"    {stmt}\n" for stmt in body)
        exec(compile(src, f"<structlog_etw decode: {self.mode} line>", "exec"), scope)
        render: _Render = scope["render"]  # type: ignore[assignment]
        return render


def _perf_meta(sample: Sample, header_meta: bytes, activity: bytes | None, related: bytes | None) -> bytes:
    """perf-decode's ``meta`` members of a sample (the general case: some of time, cpu, pid
    missing, or activity ids)."""
    meta = []
    t = sample.time
    if t is not None:
        if sample.realtime_ns is not None:
            meta.append(b'"time":"' + wallclock_text(sample.realtime_ns).encode() + b'"')
        else:
            sec, nsec = divmod(t, _NS)
            meta.append(b'"time":%d.%09d' % (sec, nsec))
    if sample.cpu is not None:
        meta.append(b'"cpu":%d' % sample.cpu)
    if sample.pid is not None:
        meta.append(b'"pid":%d,"tid":%d' % (sample.pid, sample.tid or 0))
    if header_meta:
        meta.append(header_meta)
    if activity is not None:
        meta.append(b'"activity":' + activity_text(activity))
    if related is not None:
        meta.append(b'"relatedActivity":' + activity_text(related))
    return b",".join(meta)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _num(value: int | None) -> bytes:
    return b"null" if value is None else b"%d" % value


# --- plain tracepoints ----------------------------------------------------------------------------
#
# A plain tracepoint's fields (sched:sched_switch: two char[16], ints) are the same bytes at the
# same offsets in every sample: one struct unpack reads them all, and one %-template per format
# and output writes the line.  Formats with fields of other layouts (arrays of numbers,
# __data_loc, sizes the struct cannot say) have no plan: the ordinary path writes them.

#: Values whose text a plan keeps (comm names repeat): at most this many per field.
_TEXTS_KEPT: Final = 4096

#: A field whose value the template takes as text: (index, kept texts by value bytes, (kept, value
#: bytes) -> its text, kept).
_Text = tuple[int, dict[bytes, bytes], Callable[[dict[bytes, bytes], bytes], bytes]]


def _text_of(text: Callable[[bytes], bytes]) -> Callable[[dict[bytes, bytes], bytes], bytes]:
    """``(kept, value bytes) -> text``, keeping the text (bounded)."""

    def make(kept: dict[bytes, bytes], value: bytes) -> bytes:
        found = text(value)
        if len(kept) >= _TEXTS_KEPT:
            kept.clear()
        kept[value] = found
        return found

    return make


def _latin1(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1")


#: How a plain tracepoint's fields are read and written (:func:`_plain_layout`).
_Layout = tuple[Callable[[bytes, int], tuple[Any, ...]], int, int, list[_Text], bytes]


def _plain_layout(fmt: TracepointFormat, mode: str, colors: bool) -> _Layout | None:
    """How ``fmt``'s fields are read and written in ``mode``: ``(unpack_from, where the fields
    start, bytes a sample needs, the fields written as texts, the fields' template)``; None:
    fields of other layouts (the ordinary path)."""
    fields = fmt.own_fields
    perf_json = mode == "perf-json"
    names = [f.name for f in fields]
    if mode == "json" and len(set(names)) != len(names):
        return None
    # perf-decode prints 1- and 2-byte signed fields unsigned (tracefs_perf_json_head)
    layout = fmt.fields_unpack(small_unsigned=perf_json)
    if layout is None:
        return None
    texts: list[_Text] = []
    pieces: list[bytes] = []
    for i, (f, kind) in enumerate(zip(fields, layout.kinds, strict=True)):
        piece = b"%s"
        if kind == UNPACKED_TEXT:
            if mode == "text":
                texts.append((i, {}, _text_of(lambda raw: _utf8(pretty_value(_latin1(raw))))))
            else:
                texts.append((i, {}, _text_of(lambda raw: _utf8(_dumps(_latin1(raw))))))
        elif kind == UNPACKED_BYTES:
            if mode == "text":
                texts.append((i, {}, _text_of(lambda raw: _utf8(pretty_value(raw)))))
            else:
                texts.append((i, {}, _text_of(lambda raw: b'"' + raw.hex(" ").encode() + b'"')))
        else:
            piece = b'"0x%X"' if perf_json and f.format == FMT_HEX else b"%d"
        if mode == "text":
            name = _utf8(_colored(colors, CYAN, printable(f.name)))
            value = _utf8(MAGENTA) + piece + _utf8(RESET) if colors else piece
            pieces.append(_esc(name) + b"=" + value)
        else:
            quote = json_string if perf_json else _dumps
            pieces.append(_esc(_utf8(quote(f.name))) + b":" + piece)
    template = (b" " if mode == "text" else b",").join(pieces)
    return layout.unpack_from, layout.start, layout.need, texts, template


def _colored(colors: bool, code: str, text: str) -> str:
    return code + text + RESET if colors else text


class _Sink:
    """Where the lines go: batches of bytes lines to ``binary`` (the text stream's own buffer)
    or, without one, decoded to ``out``; ``dirty`` when the ordinary path wrote to ``out`` since
    (which is flushed first, so that lines stay in order)."""

    def __init__(self, out: TextIO, binary: BinaryIO | None) -> None:
        self.out = out
        self.binary = binary
        self.dirty = False
        self.line_buffering = bool(getattr(out, "line_buffering", False))

    def write(self, lines: list[bytes]) -> None:
        lines.append(b"")
        data = b"\n".join(lines)
        lines.clear()
        if self.binary is None:
            self.out.write(data.decode("utf-8", "surrogateescape"))
            return
        if self.dirty:
            self.out.flush()
            self.dirty = False
        self.binary.write(data)
        if self.line_buffering:
            self.binary.flush()


def decode_file(
    f: PerfDataFile,
    out: TextIO,
    *,
    mode: str = "text",
    colors: bool = False,
    providers: Iterable[str] | None = None,
    events: Iterable[str] | None = None,
    time_order: bool = True,
    level: int | None = None,
    keyword: int | None = None,
    notes: list[str] | None = None,
    wanted: EventFilter | None = None,
    binary_out: BinaryIO | None = None,
) -> tuple[int, list[str]]:
    """Write the file's events to ``out`` in format ``mode``; return ``(events written, problems)``.

    Never raises for what the file holds: a sample that cannot be decoded (or whose decoding
    fails in any way) is a problem in the returned list, and the other samples are still written.
    Samples of events that are no tracepoints (hardware, software, breakpoints) are not
    problems: one line per event name is appended to ``notes`` (when given).  ``wanted`` is the
    event filter when the caller has built one (``decode`` does, from its arguments); else it is
    built from ``providers``, ``events``, ``level`` and ``keyword``.  ``binary_out``: the byte
    stream under ``out`` (UTF-8, ``"\\n"`` line ends) when the caller has one: lines are then
    written to it as bytes, in batches (``out`` is flushed first whenever it was written to).
    """
    if wanted is None:
        wanted = EventFilter(
            level=level,
            keyword=keyword,
            providers=frozenset(providers) if providers else None,
            names=frozenset(events) if events else None,
        )
    perf_json = _PerfJsonWriter(out) if mode == "perf-json" else None
    writer: EventWriter | None = None if perf_json else make_writer(mode, out, colors=colors)
    problems: list[str] = []
    unknown: dict[str, int] = {}  # samples without a tracepoint format, by name
    others: dict[str, int] = {}  # samples of events that are no tracepoints, by name
    written = 0
    lines = _Lines(mode, wanted, colors) if mode in ("perf-json", "json", "text") else None
    renderers = lines.renderers if lines is not None else {}
    sink = _Sink(out, binary_out)
    batch: list[bytes] = []
    add = batch.append

    def flush_batch() -> None:
        if batch:
            sink.write(batch)

    waiting = f.on_wait

    def on_wait() -> None:
        flush_batch()
        if waiting is not None:
            waiting()

    f.on_wait = on_wait
    samples = f.samples_by_time() if time_order else f.samples()
    for sample in samples:
        if not sample.is_tracepoint:
            others[sample.name] = others.get(sample.name, 0) + 1
            continue
        fmt = sample.format
        if lines is not None and fmt is not None:
            render = renderers.get(id(fmt)) or lines.renderer(fmt)
            try:
                line = render(sample)
            except OSError:
                raise
            except Exception:  # a crafted sample: the ordinary path reports what is wrong with it
                line = None
            if line is not None:
                if line:
                    add(line)
                    written += 1
                    if len(batch) >= _BATCH:
                        sink.write(batch)
                continue
        flush_batch()  # the ordinary path writes to out itself
        sink.dirty = True
        try:
            event = decode_sample(sample)
            if not wanted.accepts(event):
                continue
            if perf_json is not None:
                perf_json.write_sample(sample, event)
            else:
                assert writer is not None
                writer.write(event, _meta(sample))
        except SampleDecodeError as exc:
            if sample.format is None:
                key = sample.name or "unnamed events"
                unknown[key] = unknown.get(key, 0) + 1
            else:
                problems.append(str(exc))
            continue
        except OSError:
            raise  # writing failed (a closed pipe): not the sample's fault
        except Exception as exc:  # whatever a crafted sample does is reported, not raised
            # A decoder bug or a limit hit on a crafted file: report the sample, go on.
            problems.append(f"sample at offset {sample.offset} ({sample.name}): cannot decode: {exc!r}")
            continue
        written += 1
    flush_batch()
    f.on_wait = waiting
    if writer is not None:
        writer.close()
    for name, count in unknown.items():
        problems.append(
            f"{count} samples of {name} not decoded: tracepoint format unknown"
            " (the file lacks its tracing data: truncated?)"
        )
    if notes is not None:
        notes.extend(
            f"{count} samples of {name}: not tracepoints (not decoded)" for name, count in others.items()
        )
    return written, [*f.problems, *problems]


def _open(path: str) -> PerfDataFile:
    if path == "-":  # perf record -o - | structlog-etw decode -: read as perf writes it
        return PerfDataFile.from_fd(sys.stdin.buffer.fileno(), "stdin")
    return PerfDataFile.open(path)


def _is_etl(path: str) -> bool:
    """Whether ``path`` is a regular file holding an .etl file, by its content (a pipe is not read)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            head = f.read(128)
    except OSError:
        return False
    if head[:8] in (b"PERFILE2", b"2ELIFREP"):  # a perf.data file: no need to load the .etl reader
        return False
    from ..etw.etl import is_etl  # noqa: PLC0415 - only for what may be an .etl file

    return is_etl(head)


def _binary_stdout(mode: str) -> BinaryIO | None:
    """stdout's byte stream when lines may be written to it as bytes: UTF-8 text, ``"\\n"``
    line ends (the text stream does not translate them), and for ``--perf-json`` invalid UTF-8
    written as it is (``surrogateescape``, as :func:`run` sets it)."""
    buffer = getattr(sys.stdout, "buffer", None)
    encoding = getattr(sys.stdout, "encoding", None)
    if buffer is None or not isinstance(encoding, str) or os.linesep != "\n":
        return None
    try:
        utf8 = codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return None
    if not utf8 or (mode == "perf-json" and getattr(sys.stdout, "errors", None) != "surrogateescape"):
        return None
    return buffer  # type: ignore[no-any-return]


def run(args: argparse.Namespace) -> int:
    """Decode ``args.file`` to stdout; report problems on stderr."""
    if args.file != "-" and _is_etl(args.file):  # .etl: told by the content, not the name
        from .decode_etl import run as run_etl  # noqa: PLC0415

        return run_etl(args)
    prog = "structlog-etw decode"
    name = printable(args.file)
    try:
        f = _open(args.file)
    except OSError as exc:
        print(f"{prog}: {name}: {printable(str(exc.strerror or exc))}", file=sys.stderr)
        return 2
    except PerfDataError as exc:
        print(f"{prog}: {printable(str(exc))}", file=sys.stderr)
        return 2
    except Exception as exc:  # a crafted header: a message, never a traceback
        print(f"{prog}: {name}: not a readable perf.data file: {printable(repr(exc))}", file=sys.stderr)
        return 2
    mode = args.format
    if mode == "perf-json":
        # perf-decode's bytes, invalid UTF-8 included (kept as surrogate escapes until written).
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
    wanted = event_filter(args)
    notes: list[str] = []
    f.on_wait = sys.stdout.flush  # a pipe: show what is decoded before waiting for perf
    with f:
        written, problems = decode_file(
            f,
            sys.stdout,
            mode=mode,
            colors=use_color(args.color, sys.stdout),
            time_order=args.order == "time",
            notes=notes,
            wanted=wanted,
            binary_out=_binary_stdout(mode),
        )
        sys.stdout.flush()
        lost, late = f.lost, f.late
    for p in problems[:_MAX_REPORTED]:
        print(f"{prog}: {name}: {printable(p)}", file=sys.stderr)
    if len(problems) > _MAX_REPORTED:
        print(f"{prog}: {name}: ... and {len(problems) - _MAX_REPORTED} more problems", file=sys.stderr)
    if lost:
        print(f"{prog}: {name}: perf lost {lost} events while recording", file=sys.stderr)
    for note in notes:
        print(f"{prog}: {name}: {printable(note)}", file=sys.stderr)
    if late:
        print(f"{prog}: {name}: {late} events could not be put in time order (written late)", file=sys.stderr)
    if problems:
        print(
            f"{prog}: {name}: {written} events decoded; {len(problems)} problems"
            " (file damaged or truncated?)",
            file=sys.stderr,
        )
        return 1
    return 0
