"""What every output's line plans share: a tracepoint's samples -> their lines, decided once.

Each output module (:mod:`.perf_json`, :mod:`.json_lines`, :mod:`.console`) holds its
DecodedEvent writer and, beside it, its :class:`Lines` subclass: the same text, written for the
samples of one tracepoint format from what is decided once per format (a plain tracepoint: one
unpack of its fields and one ``%``-template per format) and per EventHeader header and metadata
(:class:`~structlog_etw.read.decode._eventheader_plans.Plans`, in the output's
:class:`~structlog_etw.read.decode._eventheader_plans.FieldStyle`), as UTF-8 bytes, without
building a :class:`~structlog_etw.read.decoded.DecodedEvent`.  A renderer returns None for a sample
its plan does not read (and raises on one that is not what its plan says); the caller then
writes it the ordinary way - decode it, then :meth:`Lines.event_line` - which reports its error.
Every cache is bounded (formats, names and seconds by count, EventHeader plans by the bytes of
their keys).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ..._util.bounded import BoundedCache
from ...formats._tracefs import UNPACKED_BYTES, UNPACKED_TEXT
from .._text import KeptTexts, time_text
from ..decode._eventheader_plans import EventPlan, FieldStyle, PlanCache, Plans
from ..decoded import DecodedEvent, EventMeta

if TYPE_CHECKING:
    from ..sample import PerfField, PerfFormat, PerfSample


#: A sample -> its line (UTF-8 bytes, no newline), ``b""`` when the filters drop it, None: take
#: the ordinary path (as for any exception: a payload its plan cannot read).
Render = Callable[["PerfSample"], "bytes | None"]
#: Whether an event of (level, keyword, provider, name) is wanted (the filters of ``decode``).
Accepts = Callable[[int, int, str, str], bool]

NS: Final = 1_000_000_000
#: Formats and seconds whose renderers and texts are kept: at most this many of each.
_KEPT: Final = 4096
#: Values of a plain tracepoint's field whose text a plan keeps (comm names repeat).
_TEXTS_KEPT: Final = 4096


#: The line of a sample of one EventHeader plan: (sample, payload position, activity id,
#: related id) -> its line (the plan's readers and templates are the function's own).
PlanLine = Callable[["PerfSample", int, "bytes | None", "bytes | None"], bytes]


def _dropped_line(sample: PerfSample, pos: int, activity: bytes | None, related: bytes | None) -> bytes:
    """The line of a plan whose events the filters drop."""
    return b""


def ordinary(sample: PerfSample) -> None:
    """The renderer of formats without a plan: every sample takes the ordinary path."""
    return None


def dropped(sample: PerfSample) -> bytes:
    """The renderer of formats the filters drop."""
    return b""


def utf8(text: str) -> bytes:
    """``text``'s UTF-8 bytes (bytes that were not UTF-8, kept as surrogate escapes, as they were)."""
    return text.encode("utf-8", "surrogateescape")


def _second_text(second: int) -> bytes:
    return time_text(second).encode()


class Seconds(KeptTexts[int]):
    """A second -> its date and time text (:func:`~structlog_etw.read._text.wallclock_text` up to
    the ``.``): ``seconds[second]``, the last :data:`_KEPT` kept."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(_second_text, _KEPT)


def sample_meta(sample: PerfSample) -> EventMeta:
    """What a perf.data sample says of where and when its event was captured."""
    return EventMeta(sample.time, sample.realtime_ns, sample.cpu, sample.pid, sample.tid, sample.name or None)


def _latin1(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1")


class PlainLayout(NamedTuple):
    """How a plain tracepoint's fields are read and written: ``values_of(raw)`` gives the
    value or text of each field of a sample's raw data (raises :class:`struct.error` when it is
    too short); ``template`` takes them all (``%`` once)."""

    values_of: Callable[[bytes], tuple[Any, ...] | list[Any]]
    template: bytes


class Lines:
    """The renderers of an output for tracepoint samples, one per format (bounded).

    A subclass (one per output, beside that output's DecodedEvent writer) says how an
    EventHeader tracepoint's samples (:meth:`_eventheader`) and a plain tracepoint's
    (:meth:`_plain_lines`, from :meth:`_plain_layout`) are written, and writes a decoded event
    the ordinary way (:meth:`event_line`).
    """

    def __init__(self, style: FieldStyle, accepts: Accepts, colors: bool = False) -> None:
        self.style = style
        self.accepts = accepts
        self.colors = colors
        self.plans = Plans(style)
        #: id(format) -> its renderer; ``formats`` holds the formats, so that no id is reused
        #: while it is a key.  At most :data:`_KEPT` (then a new start, the plans' caches with
        #: them); a format is the file's own object, held anyway: the count bounds what is added.
        self._kept: BoundedCache[int, Render] = BoundedCache.of_one_reader(_KEPT, _KEPT, self._start_over)
        self.renderers: dict[int, Render] = self._kept.entries
        self.formats: list[PerfFormat] = []
        #: second -> its date and time text (every renderer's).
        self.seconds = Seconds()

    def renderer(self, fmt: PerfFormat) -> Render:
        """The renderer of ``fmt``'s samples, decided once per format."""
        found = self.renderers.get(id(fmt))
        if found is not None:
            return found
        render = self._eventheader(fmt) if fmt.is_eventheader else self._plain(fmt)
        if self._kept.store(id(fmt), render):
            self.formats.append(fmt)
        return render

    def _start_over(self) -> None:
        """The renderers were forgotten: the formats they held and the plans' caches too."""
        self.formats.clear()
        self.plans = Plans(self.style)

    def line_of(self, sample: PerfSample, event: DecodedEvent) -> str | None:
        """The ordinary path: the line of ``sample`` decoded as ``event`` (None: the filters drop it)."""
        if not self.accepts(event.level, event.keyword, event.provider, event.name):
            return None
        return self.event_line(sample, event)

    def event_line(self, sample: PerfSample, event: DecodedEvent) -> str:
        """The output's DecodedEvent writer: the line of ``sample`` decoded as ``event``."""
        raise NotImplementedError

    def _eventheader(self, fmt: PerfFormat) -> Render:
        """The renderer of an EventHeader tracepoint's samples: the line function of each
        sample's plan (:meth:`_plan_line`, compiled once per header and metadata), found by the
        decoder's reading of the sample's extensions."""

        def decide(plan: EventPlan) -> PlanLine | None:
            if not self.accepts(plan.level, plan.keyword, plan.provider, plan.name):
                return _dropped_line
            return self._plan_line(fmt, plan)

        return PlanCache(self.plans, fmt.name, decide).dispatch

    def _plan_line(self, fmt: PerfFormat, plan: EventPlan) -> PlanLine | None:
        """The line function of the samples of ``fmt`` that ``plan`` reads (None: the ordinary path)."""
        raise NotImplementedError

    def _plain(self, fmt: PerfFormat) -> Render:
        """The renderer of a plain tracepoint's samples: one unpack of the fields, their texts
        (strings, bytes; kept by their bytes) and one template for the whole line."""
        if not self.accepts(0, 0, fmt.system, fmt.name):
            return dropped
        layout = self._plain_layout(fmt)
        if layout is None:
            return ordinary
        return self._plain_lines(fmt, layout)

    def _plain_layout(self, fmt: PerfFormat) -> PlainLayout | None:
        """:func:`plain_layout` of ``fmt`` in this output's text (None: the ordinary path)."""
        raise NotImplementedError

    def _plain_lines(self, fmt: PerfFormat, layout: PlainLayout) -> Render:
        """The renderer of a plain tracepoint whose fields ``layout`` reads."""
        raise NotImplementedError


def plain_layout(
    fmt: PerfFormat,
    *,
    small_unsigned: bool,
    text: Callable[[str], bytes],
    binary: Callable[[bytes], bytes],
    member: Callable[[PerfField, bytes], bytes],
    sep: bytes,
) -> PlainLayout | None:
    """The :class:`PlainLayout` of ``fmt``'s own fields: their one unpack
    (:meth:`~structlog_etw.perf.tracefs_format.TracepointFormat.fields_unpack`; ``small_unsigned``:
    1- and 2-byte signed fields read unsigned), the text of a ``char[]`` field's text
    (``text``) and of a byte array (``binary``), and each field's part of the template
    (``member(field, b"%s" or b"%d")``, ``%`` escaped by the caller) joined by ``sep``.  None:
    fields of other layouts (the ordinary path writes them)."""
    layout = fmt.fields_unpack(small_unsigned=small_unsigned)
    if layout is None:
        return None
    texts: list[tuple[int, KeptTexts[bytes]]] = []
    pieces: list[bytes] = []
    for i, (f, kind) in enumerate(zip(fmt.own_fields, layout.kinds, strict=True)):
        if kind == UNPACKED_TEXT:
            texts.append((i, KeptTexts(lambda raw: text(_latin1(raw)), _TEXTS_KEPT)))
        elif kind == UNPACKED_BYTES:
            texts.append((i, KeptTexts(binary, _TEXTS_KEPT)))
        pieces.append(member(f, b"%d" if kind not in (UNPACKED_TEXT, UNPACKED_BYTES) else b"%s"))
    return PlainLayout(_values_of(layout.unpack_from, layout.start, tuple(texts)), sep.join(pieces))


def _values_of(
    unpack_from: Callable[..., tuple[Any, ...]], start: int, texts: tuple[tuple[int, KeptTexts[bytes]], ...]
) -> Callable[[bytes], tuple[Any, ...] | list[Any]]:
    """``raw -> values``: one unpack (without texts: the unpack itself, no Python frame), the
    values at the indexes of ``texts`` replaced by their text (``kept[value]``)."""
    if not texts:
        return functools.partial(unpack_from, offset=start)

    def values_of(raw: bytes) -> list[Any]:
        values = list(unpack_from(raw, start))
        for i, kept in texts:
            values[i] = kept[values[i]]
        return values

    return values_of
