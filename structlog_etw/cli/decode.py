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
import json
import os
import stat
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TextIO

from .._text import wallclock_text
from ..decoded import DecodedEvent
from ..eventheader.perf_decode import EventPlan, Plans, activity_text, json_string
from ..perf.datafile import PerfDataError, PerfDataFile, Sample
from ..perf.samples import SampleDecodeError, decode_sample, sample_perf_json
from ..perf.tracefs_format import (
    FMT_HEX,
    FMT_NONE,
    FMT_SIGNED,
    FMT_STRING,
    TracepointFormat,
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
    json_line,
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


#: Whether the filters pass a plan's events, and its lines' constant parts (None: the ordinary path):
#: --perf-json (start, header meta), --json (templates with and without every number), text
#: (pretty_head's pair).
_Decided = tuple[bool, tuple[Any, ...] | None]

#: Lines kept before they are written in one go (and before every read that may wait for perf).
_BATCH = 512


class _FastLines:
    """``--perf-json`` and ``--json`` lines of EventHeader samples from compiled plans (per tracepoint
    and metadata: :class:`~structlog_etw.eventheader.perf_decode.Plans`), without building a
    :class:`~structlog_etw.decoded.DecodedEvent`.  The same text as the ordinary path, which
    runs for every sample a plan does not read (and so reports its error)."""

    def __init__(self, mode: str, wanted: EventFilter, colors: bool = False) -> None:
        self.perf_json = mode == "perf-json"
        self.text = mode == "text"
        self.json = mode == "json"
        self.colors = colors
        style = TextFieldStyle(colors=colors) if self.text else None
        self.plans = Plans(field_tags=self.perf_json, style=style)
        self.wanted = wanted
        #: plan -> whether the filters pass it, and the constant parts of its lines (:meth:`_decide`).
        self.decided: dict[EventPlan, _Decided] = {}
        self.names: dict[str, bytes] = {}  # tracepoint name -> its JSON string (--json)
        self.names_text: dict[str, str] = {}
        self.mode = mode
        #: id(format) -> (format, its plan): plain tracepoints.
        self.plain: dict[int, tuple[TracepointFormat, _PlainPlan]] = {}

    def _decide(self, plan: EventPlan) -> _Decided:
        """Whether the filters pass ``plan``'s events and the constant parts of their lines."""
        accepts = self.wanted.accepts_values(plan.level, plan.keyword, plan.provider, plan.name)
        parts: tuple[object, ...] | None = None
        if self.text:
            pretty = pretty_head(
                plan.level, plan.name, plan.provider, plan.keyword, plan.opcode, True, self.colors
            )
            parts = (pretty, pretty_line_templates(pretty, self.colors))
        elif self.perf_json:  # {"n":..,fields,"meta":{sample's meta,header's meta,activities}}
            parts = (b'{"n":' + plan.n + (b"," if plan.has_fields else b""), plan.header_meta)
        else:  # event_json's keys from provider to version, and attributes
            head = {
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
                middle = _dumps(head)[1:-1].encode("utf-8", "surrogateescape").replace(b"%", b"%%")
                attributes = _dumps(plan.attributes).encode("utf-8", "surrogateescape").replace(b"%", b"%%")
            except UnicodeEncodeError:  # not text the ordinary path writes this way: leave it to it
                parts = None
            else:
                rest = b',"tracepoint":%s,' + middle + b',"activity_id":%s,"related_id":%s,"attributes":'
                rest += attributes + b',"fields":{%s}}'
                parts = (
                    b'{"timestamp":%s,"time_ns":%d,"cpu":%d,"pid":%d,"tid":%d' + rest,
                    b'{"timestamp":%s,"time_ns":%s,"cpu":%s,"pid":%s,"tid":%s' + rest,
                )
        if len(self.decided) > 4096:
            self.decided.clear()
        decided = self.decided[plan] = (accepts, parts)
        return decided

    def line(self, sample: Sample) -> str | None:
        """The sample's line, ``""`` when the filters drop it, None: take the ordinary path (as
        for any exception: a payload its plan cannot read)."""
        fmt = sample.format
        assert fmt is not None
        data = sample.data
        found = self.plans.plan(fmt.name, data)
        if found is None:
            return None
        plan, pos, activity, related = found
        decided = self.decided.get(plan)
        if decided is None:
            decided = self._decide(plan)
        accepts, parts = decided
        if not accepts:
            return ""
        if parts is None:
            return None
        # A payload that is not what the metadata says raises: the caller takes the ordinary path.
        fields = plan.read_fields(data, pos)[0]
        t, real, cpu, pid, tid = sample.time, sample.realtime_ns, sample.cpu, sample.pid, sample.tid
        if self.perf_json:
            start, header_meta = parts
            if real is not None and cpu is not None and pid is not None and tid is not None:
                meta = b'"time":"%s","cpu":%d,"pid":%d,"tid":%d' % (
                    wallclock_text(real).encode(),
                    cpu,
                    pid,
                    tid,
                )
                if header_meta:
                    meta += b"," + header_meta
                if activity is not None:
                    meta += b',"activity":' + activity_text(activity)
                if related is not None:
                    meta += b',"relatedActivity":' + activity_text(related)
            else:
                meta = self._perf_meta(sample, header_meta, activity, related)
            line: bytes = start + fields + b',"meta":{' + meta + b"}}"
            return line.decode("utf-8", "surrogateescape")
        if self.text:
            head, (same, other) = parts
            if (
                real is not None
                and cpu is not None
                and pid is not None
                and tid is not None
                and activity is None
            ):
                clock = wallclock_text(real)
                text: str = same % (clock, pid, cpu) if pid == tid else other % (clock, pid, tid, cpu)
            else:
                act = uuid.UUID(bytes=activity) if activity is not None else None
                rel = uuid.UUID(bytes=related) if related is not None else None
                text = pretty_line(head, real, t, act, rel, pid, tid, cpu, self.colors)
            return text + " " + fields.decode("utf-8", "surrogateescape") if plan.has_fields else text
        name = self.names.get(sample.name)
        if name is None:
            if len(self.names) > 4096:
                self.names.clear()
            try:
                name = _dumps(sample.name or None).encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                return None
            self.names[sample.name] = name
        stamp = b'"' + wallclock_text(real).encode() + b'"' if real is not None else b"null"
        act_text = activity_text(activity) if activity is not None else b"null"
        rel_text = activity_text(related) if related is not None else b"null"
        if t is not None and cpu is not None and pid is not None and tid is not None:
            line = parts[0] % (stamp, t, cpu, pid, tid, name, act_text, rel_text, fields)
        else:
            values = (stamp, _num(t), _num(cpu), _num(pid), _num(tid), name, act_text, rel_text, fields)
            line = parts[1] % values
        return json_line_bytes(line)

    @staticmethod
    def _perf_meta(
        sample: Sample, header_meta: bytes, activity: bytes | None, related: bytes | None
    ) -> bytes:
        """perf-decode's ``meta`` members of a sample without some of time, cpu, pid."""
        meta = []
        t = sample.time
        if t is not None:
            if sample.realtime_ns is not None:
                meta.append(b'"time":"' + wallclock_text(sample.realtime_ns).encode() + b'"')
            else:
                sec, nsec = divmod(t, 1_000_000_000)
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

    def plain_plan(self, fmt: TracepointFormat) -> _PlainPlan:
        """The plan of a plain tracepoint format, compiled once (a bounded cache by format)."""
        found = self.plain.get(id(fmt))
        if found is None or found[0] is not fmt:
            if len(self.plain) > 4096:
                self.plain.clear()
            found = self.plain[id(fmt)] = (fmt, _plain_plan(fmt, self.mode, self.wanted, self.colors))
        return found[1]

    def plain_line(self, sample: Sample) -> str | None:
        """The line of a plain tracepoint sample (``""``: filtered out; None: the ordinary path)."""
        fmt = sample.format
        assert fmt is not None
        plan = self.plain_plan(fmt)
        if not plan.accepts:
            return ""
        if not plan.usable:
            return None
        values = plan.values(sample.raw)
        if values is None:
            return None
        real, t, pid, tid = sample.realtime_ns, sample.time, sample.pid, sample.tid
        cpu = sample.cpu
        known = real is not None and t is not None and cpu is not None and pid is not None and tid is not None
        if known and not self.text:  # the whole line from one template
            if self.perf_json:
                return plan.whole % (*values, wallclock_text(real), cpu, pid, tid)  # type: ignore[arg-type]
            tracepoint = self.names_text.get(sample.name)
            if tracepoint is not None:
                text: str = plan.whole % (wallclock_text(real), t, cpu, pid, tid, tracepoint, *values)  # type: ignore[arg-type]
                return text if text.isascii() and "\x7f" not in text else json_line(text)
        if self.text:
            assert isinstance(plan.head, tuple)
            if known:
                same, other = plan.line_templates
                stamp = wallclock_text(real)  # type: ignore[arg-type]
                line = same % (stamp, pid, cpu) if pid == tid else other % (stamp, pid, tid, cpu)
            else:
                line = pretty_line(plan.head, real, t, None, None, pid, tid, sample.cpu, self.colors)
            return line + " " + plan.template % values if fmt.own_fields else line
        fields = plan.template % values
        if self.perf_json:
            if pid is not None and tid is None:
                return None
            meta = []
            if t is not None:
                if real is not None:
                    meta.append('"time":"' + wallclock_text(real) + '"')
                else:
                    sec, nsec = divmod(t, 1_000_000_000)
                    meta.append(f'"time":{sec}.{nsec:09d}')
            if sample.cpu is not None:
                meta.append(f'"cpu":{sample.cpu}')
            if pid is not None:
                meta.append(f'"pid":{pid},"tid":{tid}')
            assert isinstance(plan.head, str)
            body = plan.head + "," + fields if fmt.own_fields else plan.head
            return body + ',"meta":{' + ",".join(meta) + "}}"
        stamp = '"' + wallclock_text(real) + '"' if real is not None else "null"
        tracepoint = self.names_text.get(sample.name)
        if tracepoint is None:
            if len(self.names_text) > 4096:
                self.names_text.clear()
            tracepoint = self.names_text[sample.name] = _dumps(sample.name or None)
        assert isinstance(plan.head, str)
        text = (
            f'{{"timestamp":{stamp},"time_ns":{_text(t)},"cpu":{_text(sample.cpu)},"pid":{_text(pid)},'
            f'"tid":{_text(tid)},"tracepoint":{tracepoint}{plan.head},"fields":{{{fields}}}}}'
        )
        return text if text.isascii() and "\x7f" not in text else json_line(text)


def _text(value: int | None) -> str:
    return "null" if value is None else str(value)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _num(value: int | None) -> bytes:
    return b"null" if value is None else b"%d" % value


# --- plain tracepoints ----------------------------------------------------------------------------
#
# A plain tracepoint's fields (sched:sched_switch: two char[16], ints) are the same bytes at the
# same offsets in every sample: one struct unpack reads them all, and one %-template per format
# and output writes them.  Formats with fields of other layouts (arrays of numbers, __data_loc,
# sizes the struct cannot say) have no plan: the ordinary path writes them.

#: Values whose text a plan keeps (comm names repeat): at most this many, of at most _SHORT characters.
_TEXTS_KEPT: Final = 4096
_SHORT: Final = 64


@dataclass(frozen=True, slots=True)
class _PlainPlan:
    """How one plain tracepoint format is written in one output (``usable`` false: the ordinary path)."""

    accepts: bool
    usable: bool
    #: raw -> the fields' values as the template takes them (None: the sample is too short).
    values: Callable[[bytes], tuple[object, ...] | None]
    template: str
    #: The line's constant parts (per output: the perf-json ``"n"``, the JSON head, the text head).
    head: object = None
    #: JSON outputs: the whole line's template for a sample with its wall-clock time, cpu, pid and
    #: tid (--json: time text, numbers, the tracepoint's name, the values; --perf-json: the values,
    #: time text, numbers).
    whole: str = ""
    #: text: :func:`~structlog_etw.cli.render.pretty_line_templates` of the head.
    line_templates: tuple[str, str] = ("", "")


def _converted(
    read: Callable[[bytes], tuple[object, ...] | None], convert: list[tuple[int, Callable[[Any], object]]]
) -> Callable[[bytes], tuple[object, ...] | None]:
    """``read`` with the values at the given indexes turned into their text."""
    if not convert:
        return read

    def converted(raw: bytes) -> tuple[object, ...] | None:
        values = read(raw)
        if values is None:
            return None
        out = list(values)
        for i, conv in convert:
            out[i] = conv(out[i])
        return tuple(out)

    return converted


def _kept(text_of: Callable[[str], str]) -> Callable[[str], str]:
    """``text_of`` with the texts of short values kept (comm names repeat), bounded."""
    kept: dict[str, str] = {}

    def text(value: str) -> str:
        found = kept.get(value)
        if found is None:
            found = text_of(value)
            if len(value) <= _SHORT:
                if len(kept) >= _TEXTS_KEPT:
                    kept.clear()
                kept[value] = found
        return found

    return text


def _colored(colors: bool, code: str, text: str) -> str:
    return code + text + RESET if colors else text


def _plain_plan(fmt: TracepointFormat, mode: str, wanted: EventFilter, colors: bool) -> _PlainPlan:
    """The plan of ``fmt`` in output ``mode`` (``perf-json``, ``json``, ``text``)."""
    accepts = wanted.accepts_values(0, 0, fmt.system, fmt.name)
    fields = fmt.own_fields
    perf_json = mode == "perf-json"
    read = fmt.values_reader
    names = [f.name for f in fields]
    if read is None or (mode == "json" and len(set(names)) != len(names)):
        return _PlainPlan(accepts, False, lambda raw: None, "")
    strings = [i for i, f in enumerate(fields) if f.format == FMT_STRING]
    binary = [i for i, f in enumerate(fields) if f.format == FMT_NONE]
    hexed = {i for i, f in enumerate(fields) if f.format == FMT_HEX}
    convert: list[tuple[int, Callable[[Any], object]]] = []
    if perf_json:  # perf-decode prints 1- and 2-byte signed fields unsigned (tracefs_perf_json_head)
        convert += [
            (i, _unsigned(8 * f.size)) for i, f in enumerate(fields) if f.format == FMT_SIGNED and f.size < 4
        ]
    head: object
    if mode == "text":
        convert += [(i, _kept(pretty_value)) for i in strings]
        convert += [(i, pretty_value) for i in binary]
        value_text = _colored(colors, MAGENTA, "%s")
        pieces = [
            _colored(colors, CYAN, printable(f.name)).replace("%", "%%") + "=" + value_text for f in fields
        ]
        template = " ".join(pieces)
        head = pretty_head(0, fmt.name, fmt.system, 0, 0, False, colors)
    else:
        quote = json_string if perf_json else _dumps
        convert += [(i, _kept(_dumps)) for i in strings]
        convert += [(i, _hex_text) for i in binary]
        pieces = []
        for i, f in enumerate(fields):
            value = '"0x%X"' if perf_json and i in hexed else "%s"
            pieces.append(quote(f.name).replace("%", "%%") + ":" + value)
        template = ",".join(pieces)
        if perf_json:
            head = '{"n":' + json_string(f"{fmt.system}:{fmt.name}")
        else:
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
            head = "," + _dumps(middle)[1:-1]
    whole = ""
    if perf_json:
        assert isinstance(head, str)
        body = head.replace("%", "%%") + ("," + template if fields else "")
        whole = body + ',"meta":{"time":"%s","cpu":%d,"pid":%d,"tid":%d}}'
    elif mode == "json":
        assert isinstance(head, str)
        whole = '{"timestamp":"%s","time_ns":%d,"cpu":%d,"pid":%d,"tid":%d,"tracepoint":%s'
        whole += head.replace("%", "%%") + ',"fields":{' + template + "}}"
    templates = pretty_line_templates(head, colors) if isinstance(head, tuple) else ("", "")
    return _PlainPlan(accepts, True, _converted(read, convert), template, head, whole, templates)


def _unsigned(bits: int) -> Callable[[int], int]:
    mask = (1 << bits) - 1
    return lambda value: value & mask


def _hex_text(value: bytes) -> str:
    return '"' + value.hex(" ") + '"'


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
) -> tuple[int, list[str]]:
    """Write the file's events to ``out`` in format ``mode``; return ``(events written, problems)``.

    Never raises for what the file holds: a sample that cannot be decoded (or whose decoding
    fails in any way) is a problem in the returned list, and the other samples are still written.
    Samples of events that are no tracepoints (hardware, software, breakpoints) are not
    problems: one line per event name is appended to ``notes`` (when given).  ``wanted`` is the
    event filter when the caller has built one (``decode`` does, from its arguments); else it is
    built from ``providers``, ``events``, ``level`` and ``keyword``.
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
    fast = _FastLines(mode, wanted, colors) if mode in ("perf-json", "json", "text") else None
    batch: list[str] = []

    def flush_batch() -> None:
        if batch:
            batch.append("")
            out.write("\n".join(batch))
            batch.clear()

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
        if fast is not None and sample.format is not None:
            try:
                line = fast.line(sample) if sample.format.is_eventheader else fast.plain_line(sample)
            except OSError:
                raise
            except Exception:  # a crafted sample: the ordinary path reports what is wrong with it
                line = None
            if line is not None:
                if line:
                    batch.append(line)
                    written += 1
                    if len(batch) >= _BATCH:
                        flush_batch()
                continue
        flush_batch()  # the ordinary path writes to out itself
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
