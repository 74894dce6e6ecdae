"""The one sample reader of perf.data files: PERF_RECORD_SAMPLE records -> :class:`Sample`.

A sample is read with the :class:`~structlog_etw.perf.records.SampleLayout` of its attr (the one
layout of a ``sample_type``, from :mod:`~structlog_etw.perf.abi`'s names) and what the header
index knows of the attr (name, tracepoint format, clock): a :class:`_SamplePlan`, decided once
per sample id and forgotten at any other record (which may change attrs, formats, names or the
clock).  Two ways, both here:

* :meth:`SampleReader.read`: one record's body, any layout (:meth:`SampleLayout.parse
  <structlog_etw.perf.records.SampleLayout.parse>`); the first sample of every sample id.
* :meth:`SampleReader.read_run`, the batch method: the samples that follow in the framer's
  buffer, when their layout holds pid, time and cpu (every ``perf record`` of tracepoints):
  one ``struct`` unpack of each whole record (:attr:`SampleUnpack.record
  <structlog_etw.perf.records.SampleUnpack.record>`) gives its type, size, sample id and
  fields, without slicing a body, and every sample id whose plan has the same layout is read
  the same way.

The samples read are collected in :attr:`SampleReader.batch` (with ``keyed``: as
``(time or 0, file offset, sample, raw size)``, time order's sort key first) until
:meth:`SampleReader.take` hands them on.  Pure Python; every OS.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from ._framing import RecordFramer
from ._header import EventAttr, HeaderIndex
from .abi import RecordType
from .records import SampleLayout, SampleUnpack, sample_layout
from .tracefs_format import TracepointFormat

_R_SAMPLE: Final = int(RecordType.SAMPLE)
#: Bytes of records one :meth:`SampleReader.read_run` reads before it hands on what it read.
_BATCH_BYTES: Final = 64 << 10


@dataclass(slots=True)
class Sample:
    """One PERF_RECORD_SAMPLE.

    ``name`` is ``system:event`` (e.g. ``user_events:MyProvider_L4K1``, ``""``
    when the file does not say; for other events perf's name, e.g. ``cpu-clock``);
    ``raw`` is the whole PERF_SAMPLE_RAW data (common fields first), ``data`` the bytes
    after the common fields (for an EventHeader tracepoint: the EventHeader event).
    ``time`` is perf's timestamp in ns (``-k monotonic``: CLOCK_MONOTONIC),
    ``realtime_ns`` the wall-clock time when the file records the clock offset.
    ``is_tracepoint`` is false for samples of hardware, software, breakpoint, ... events
    (``perf record -e cpu-clock``): they have no tracepoint format and no event to decode.
    """

    name: str
    time: int | None
    cpu: int | None
    pid: int | None
    tid: int | None
    raw: bytes
    data: bytes
    format: TracepointFormat | None
    offset: int
    realtime_ns: int | None = None
    id: int | None = None
    round: int = 0
    is_tracepoint: bool = True

    @property
    def is_eventheader(self) -> bool:
        """True when the tracepoint's format says this is an EventHeader event."""
        return self.format is not None and self.format.is_eventheader


class SampleCommon(NamedTuple):
    """What every sample of one sample id shares (a tuple: :meth:`SampleReader.read_run` takes
    it apart in one step when the sample id changes)."""

    #: The sample's :attr:`Sample.name`.
    name: str
    format: TracepointFormat | None
    #: Where the payload (:attr:`Sample.data`) starts in the raw data.
    payload_at: int
    #: Wall-clock time minus perf's clock (None: the file does not say).
    offset_ns: int | None
    tracepoint: bool


class _SamplePlan:
    """How the samples of one sample id are read: the attr's layout, and what each of its
    samples shares (name, format, where the payload starts in the raw data, the clock offset)."""

    __slots__ = ("common", "layout", "unpack")

    def __init__(self, attr: EventAttr, order: str, offset_ns: int | None) -> None:
        self.layout: SampleLayout = sample_layout(attr.sample_type, attr.read_format, order)
        self.unpack: SampleUnpack | None = self.layout.unpack
        tracepoint = attr.is_tracepoint
        fmt = attr.format
        self.common = SampleCommon(
            attr.name if tracepoint else attr.label,
            fmt,
            fmt.payload_offset if fmt is not None else 0,
            offset_ns,
            tracepoint,
        )


class SampleReader:
    """The samples of one pass over a file's records (see the module docstring)."""

    __slots__ = (
        "add",
        "batch",
        "counted",
        "fused",
        "id_at",
        "index",
        "keyed",
        "plans",
        "raw_bytes",
        "round",
        "u64",
    )

    def __init__(self, index: HeaderIndex, keyed: bool) -> None:
        self.index = index
        self.keyed = keyed
        #: Plans by sample id (None: the samples hold none), until :meth:`forget`.
        self.plans: dict[int | None, _SamplePlan] = {}
        #: The plan :meth:`read_run` reads with (None: every sample the long way).
        self.fused: _SamplePlan | None = None
        #: Where the first attr's samples hold their sample id (the key of :attr:`plans`).
        self.id_at: int | None = None
        self.u64 = struct.Struct(index.order + "Q").unpack_from
        #: The samples read and not handed on, and the bytes of raw data they hold.
        self.batch: list[Any] = []
        self.add = self.batch.append
        self.raw_bytes = 0
        #: Samples framed and handed on (or reported as damaged).
        self.counted = 0
        #: FINISHED_ROUND records read so far (each sample's :attr:`Sample.round`).
        self.round = 0

    def take(self) -> tuple[list[Any], int]:
        """The samples read since the last call, and the bytes of raw data they hold."""
        out, out_bytes = self.batch, self.raw_bytes
        self.batch, self.raw_bytes = [], 0
        self.add = self.batch.append
        self.counted += len(out)
        return out, out_bytes

    def forget(self) -> None:
        """Forget every plan (a record other than a sample may change what they hold)."""
        self.plans.clear()
        self.fused = None

    def _plan(self, key: int | None, id_found: bool) -> _SamplePlan | None:
        index = self.index
        attr = index.attr_for(key) if id_found else None
        if attr is None:
            return None
        plan = self.plans[key] = _SamplePlan(attr, index.order, index.clock_offset_ns)
        return plan

    def read(self, body: bytes, pos: int) -> None:
        """Read the sample of ``body`` (at file offset ``pos``) the long way; what is wrong with it
        goes to the problems.  Its plan is kept, and :meth:`read_run` reads with it from now on
        when it can."""
        plans = self.plans
        if not plans:
            attrs = self.index.attrs
            self.id_at = attrs[0].id_at if attrs else None
        id_at = self.id_at
        key = None
        id_found = id_at is None or len(body) >= id_at + 8
        if id_at is not None and id_found:
            (key,) = self.u64(body, id_at)
        plan = plans.get(key) or self._plan(key, id_found)
        if plan is None:
            self._problem(f"sample at offset {pos}: no attr for sample id {key}")
            return
        try:
            fields = plan.layout.parse(body)
        except ValueError as exc:
            self._problem(f"sample at offset {pos}: {exc}")
            return
        common = plan.common
        raw, time, offset_ns = fields.raw, fields.time, common.offset_ns
        real = time + offset_ns if time is not None and offset_ns is not None else None
        sample = Sample(
            common.name,
            time,
            fields.cpu,
            fields.pid,
            fields.tid,
            raw,
            raw[common.payload_at :],
            common.format,
            pos,
            real,
            fields.id,
            self.round,
            common.tracepoint,
        )
        self.add((time or 0, pos, sample, len(raw)) if self.keyed else sample)
        self.raw_bytes += len(raw)
        shape = plan.unpack
        if shape is not None and shape.record is not None and plan.layout.id_at == id_at:
            self.fused = plan

    def _problem(self, text: str) -> None:
        self.index.problems.append(text)
        self.counted += 1

    def read_run(self, framer: RecordFramer) -> bool:
        """Read the samples at the framer's cursor in its buffer with the :attr:`fused` plan (and
        those of the same layout), up to :data:`_BATCH_BYTES` of them, moving the cursor past them.
        Stops at a record it cannot read so (another type, another layout, the buffer's end, a
        damaged sample: :meth:`read` reads or reports it).  True: stopped by the budget."""
        plan = self.fused
        assert plan is not None
        shape = plan.unpack
        assert shape is not None and shape.record is not None
        unpack_record, need = shape.record, shape.need
        at_id, at_pid, at_time, at_cpu = shape.rec_id, shape.rec_pid, shape.rec_time, shape.rec_cpu
        name, fmt, payload_at, offset_ns, tp = plan.common
        get = self.plans.get
        add, keyed, round_no = self.add, self.keyed, self.round
        new = Sample.__new__
        buf, i, base = framer.buf, framer.i, framer.base
        n = len(buf)
        stop = min(n - need, i + _BATCH_BYTES)
        raw_bytes = 0
        key = None
        while i <= stop:
            values = unpack_record(buf, i)  # type, size, the fixed fields, the raw data's size
            size = values[1]
            j = i + size
            if values[0] != _R_SAMPLE or j > n or size < need:
                break
            if at_id >= 0:
                key = values[at_id]
                found = get(key)
                if found is not plan:
                    if found is None or found.unpack is not shape:
                        break
                    plan = found
                    name, fmt, payload_at, offset_ns, tp = plan.common
            start = i + need
            end = start + values[-1]
            if end > j:
                break
            raw = buf[start:end]
            t = values[at_time]
            pos = base + i
            # The fields of :meth:`read`'s Sample(...), set one by one: its __init__ is a Python
            # call with 13 arguments, a third of what reading a sample costs (test_datafile
            # checks that every field is set, and equal to what __init__ sets).
            sample = new(Sample)
            sample.name = name
            sample.time = t
            sample.cpu = values[at_cpu]
            sample.pid = values[at_pid]
            sample.tid = values[at_pid + 1]
            sample.raw = raw
            sample.data = raw[payload_at:]
            sample.format = fmt
            sample.offset = pos
            sample.realtime_ns = None if offset_ns is None else t + offset_ns
            sample.id = key
            sample.round = round_no
            sample.is_tracepoint = tp
            add((t, pos, sample, end - start) if keyed else sample)
            raw_bytes += end - start
            i = j
        framer.i = i
        self.fused = plan
        self.raw_bytes += raw_bytes
        return stop < i <= n - need
