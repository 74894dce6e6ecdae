"""The bodies of perf records: the one layout and parser of PERF_RECORD_SAMPLE, and PERF_RECORD_LOST.

Shared by the perf.data reader (:mod:`~structlog_etw.perf.datafile`, records in the file's
byte order) and the live reader (:mod:`~structlog_etw.perf.listener`, records out of the
kernel's ring buffers in native order).  A body is what follows the 8-byte
``perf_event_header``; the ``sample_type`` (and ``read_format``) of the event that wrote it
says which fields it holds, in the kernel's fixed order::

    IDENTIFIER, IP, TID (pid, tid), TIME, ADDR, ID, STREAM_ID, CPU (cpu, res), PERIOD,
    READ, CALLCHAIN, RAW (u32 size, bytes), ...

:class:`SampleLayout` is where a sample format's fields are, decided once per format (and
byte order) from one table of :class:`~structlog_etw.perf.abi.SampleFormat` names:
``parse`` reads one body; its ``unpack`` (:class:`SampleUnpack`, for the usual tracepoint
layouts: no READ, no CALLCHAIN, RAW) reads the fields of a body, or of a whole record in a
buffer, in one ``struct`` unpack, built from the same table.  The perf.data
reader's samples are read with it (``perf/_sample_reader.py``).

Pure Python; importable on every OS.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Final, NamedTuple

from .abi import RECORD_HEADER_SIZE, ReadFormat, SampleFormat

__all__ = [
    "SampleFields",
    "SampleLayout",
    "SampleUnpack",
    "parse_lost",
    "parse_lost_samples",
    "parse_sample",
    "record_header",
    "sample_id_offset",
    "sample_layout",
]

S = SampleFormat
#: The fixed-size fields of a sample (one u64 word each), in the kernel's order, and the
#: ``struct`` codes of what this package reads of them (pid and tid; cpu and its reserved word).
_FIXED_FIELDS: Final = (
    (S.IDENTIFIER, "Q"),
    (S.IP, "Q"),
    (S.TID, "II"),
    (S.TIME, "Q"),
    (S.ADDR, "Q"),
    (S.ID, "Q"),
    (S.STREAM_ID, "Q"),
    (S.CPU, "I4x"),
    (S.PERIOD, "Q"),
)
#: The fixed fields a :class:`SampleFields` holds (the others are stepped over).
_KEPT: Final = frozenset((S.IDENTIFIER, S.ID, S.TID, S.TIME, S.CPU))
_READ: Final = int(S.READ)
_CALLCHAIN: Final = int(S.CALLCHAIN)
_RAW: Final = int(S.RAW)
_GROUP: Final = int(ReadFormat.GROUP)
_READ_ID: Final = int(ReadFormat.ID)
_READ_LOST: Final = int(ReadFormat.LOST)
_TIME_ENABLED: Final = int(ReadFormat.TOTAL_TIME_ENABLED)
_TIME_RUNNING: Final = int(ReadFormat.TOTAL_TIME_RUNNING)

_Unpack = Callable[[bytes, int], tuple[int, ...]]


class SampleFields(NamedTuple):
    """The fields of one PERF_RECORD_SAMPLE that this package reads (None when not sampled).

    ``id`` is PERF_SAMPLE_IDENTIFIER's value, else PERF_SAMPLE_ID's; ``raw`` the whole
    PERF_SAMPLE_RAW data (a tracepoint's common fields first), ``b""`` when not sampled.
    """

    id: int | None
    pid: int | None
    tid: int | None
    time: int | None
    cpu: int | None
    raw: bytes


class SampleUnpack:
    """A sample layout read in one ``struct`` unpack (no READ, no CALLCHAIN, RAW sampled).

    ``body(data, pos)`` unpacks a body: the kept fixed fields (the id, pid and tid, time, cpu, in
    the kernel's order) and last the raw data's size, which starts at :attr:`raw_at`; ``id``,
    ``pid`` (``tid`` next), ``time`` and ``cpu`` are their indexes in those values (-1: not
    sampled).  When pid, time and cpu are all sampled, ``record(data, pos)`` unpacks the whole
    record in a buffer (type and size first, then the same values: the indexes ``rec_*``) and
    :attr:`need` is its smallest size; else ``record`` is None.
    """

    __slots__ = (
        "body",
        "cpu",
        "id",
        "need",
        "pid",
        "raw_at",
        "rec_cpu",
        "rec_id",
        "rec_pid",
        "rec_time",
        "record",
        "time",
    )

    def __init__(self, codes: str, index: dict[SampleFormat, int], id_bit: SampleFormat, order: str) -> None:
        whole = struct.Struct(order + codes + "I")
        self.body: _Unpack = whole.unpack_from
        self.raw_at: int = whole.size
        self.id = index.get(id_bit, -1)
        self.pid = index.get(S.TID, -1)
        self.time = index.get(S.TIME, -1)
        self.cpu = index.get(S.CPU, -1)
        fused = min(self.pid, self.time, self.cpu) >= 0
        self.record: _Unpack | None = (
            struct.Struct(order + "IxxH" + codes + "I").unpack_from if fused else None
        )
        self.need = RECORD_HEADER_SIZE + self.raw_at
        # the record's values: its type and size come first
        self.rec_id = self.id + 2 if self.id >= 0 else -1
        self.rec_pid, self.rec_time, self.rec_cpu = self.pid + 2, self.time + 2, self.cpu + 2


class SampleLayout:
    """Where the samples of a ``sample_type`` / ``read_format`` in byte order ``order`` hold their
    fields: byte offsets of the fixed fields (None: not sampled), what comes between them and the
    raw data, and :attr:`unpack` (:class:`SampleUnpack`, None: read field by field).  Built once
    per format (:func:`sample_layout`).  A plain class, no dataclass: this module is imported at
    every start of ``structlog-etw decode``."""

    __slots__ = (
        "callchain",
        "cpu",
        "fixed",
        "id",
        "id_at",
        "identifier",
        "raw",
        "read",
        "read_group",
        "read_times",
        "read_values",
        "tid",
        "time",
        "u32",
        "u32_pair",
        "u64",
        "unpack",
    )

    def __init__(self, sample_type: int, read_format: int, order: str) -> None:
        offsets: dict[SampleFormat, int] = {}
        index: dict[SampleFormat, int] = {}
        id_bit = S.IDENTIFIER if sample_type & S.IDENTIFIER else S.ID
        codes = ""
        pos = n = 0
        for bit, code in _FIXED_FIELDS:
            if not sample_type & bit:
                continue
            offsets[bit] = pos
            pos += 8
            if bit in _KEPT and (bit == id_bit or bit not in (S.IDENTIFIER, S.ID)):
                index[bit] = n
                n += code.count("I") + code.count("Q")
                codes += code
            else:
                codes += "8x"
        self.identifier = offsets.get(S.IDENTIFIER)
        self.tid = offsets.get(S.TID)
        self.time = offsets.get(S.TIME)
        self.id = offsets.get(S.ID)
        self.cpu = offsets.get(S.CPU)
        #: Where the body holds the event id (IDENTIFIER first, else ID; None: nowhere).
        self.id_at = offsets.get(id_bit)
        #: Bytes of the fixed-size fields (everything before READ).
        self.fixed = pos
        self.read = bool(sample_type & _READ)
        #: With ReadFormat.GROUP: u64 words per member, and the words between nr and the members.
        self.read_group = bool(read_format & _GROUP)
        self.read_values = 1 + bool(read_format & _READ_ID) + bool(read_format & _READ_LOST)
        self.read_times = bool(read_format & _TIME_ENABLED) + bool(read_format & _TIME_RUNNING)
        self.callchain = bool(sample_type & _CALLCHAIN)
        self.raw = bool(sample_type & _RAW)
        self.u32 = struct.Struct(order + "I")
        self.u64 = struct.Struct(order + "Q")
        self.u32_pair = struct.Struct(order + "II")
        one_unpack = self.raw and not self.read and not self.callchain
        self.unpack = SampleUnpack(codes, index, id_bit, order) if one_unpack else None

    def parse(self, body: bytes) -> SampleFields:
        """The fields of a PERF_RECORD_SAMPLE body of this layout (see :func:`parse_sample`)."""
        one = self.unpack
        if one is not None:
            try:
                values = one.body(body, 0)
            except struct.error:
                raise ValueError("record too short for its sample_type") from None
            end = one.raw_at + values[-1]
            if end > len(body):
                raise ValueError("raw data runs past the record")
            pid = one.pid
            return SampleFields(
                values[one.id] if one.id >= 0 else None,
                values[pid] if pid >= 0 else None,
                values[pid + 1] if pid >= 0 else None,
                values[one.time] if one.time >= 0 else None,
                values[one.cpu] if one.cpu >= 0 else None,
                bytes(body[one.raw_at : end]),
            )
        return self._parse_fields(body)

    def _parse_fields(self, body: bytes) -> SampleFields:
        """:meth:`parse` field by field (any layout: READ and CALLCHAIN stepped over)."""
        ident = pid = tid = time = cpu = None
        raw = b""
        try:
            if self.id_at is not None:
                (ident,) = self.u64.unpack_from(body, self.id_at)
            if self.tid is not None:
                pid, tid = self.u32_pair.unpack_from(body, self.tid)
            if self.time is not None:
                (time,) = self.u64.unpack_from(body, self.time)
            if self.cpu is not None:
                cpu, _res = self.u32_pair.unpack_from(body, self.cpu)
            pos = self.fixed
            if self.read:
                if self.read_group:
                    (nr,) = self.u64.unpack_from(body, pos)
                    pos += 8 * (1 + self.read_times + nr * self.read_values)
                else:
                    pos += 8 * (self.read_values + self.read_times)
            if self.callchain:
                (nr,) = self.u64.unpack_from(body, pos)
                pos += 8 * (1 + nr)
            if self.raw:
                (size,) = self.u32.unpack_from(body, pos)
                pos += 4
                if pos + size > len(body):
                    raise ValueError("raw data runs past the record")
                raw = bytes(body[pos : pos + size])
                pos += size
        except struct.error:
            raise ValueError("record too short for its sample_type") from None
        if pos > len(body):
            raise ValueError("record too short for its sample_type")
        return SampleFields(ident, pid, tid, time, cpu, raw)


@functools.lru_cache(maxsize=64)
def sample_layout(sample_type: int, read_format: int = 0, order: str = "=") -> SampleLayout:
    """The :class:`SampleLayout` of ``sample_type`` / ``read_format`` in byte order ``order`` (cached)."""
    return SampleLayout(sample_type, read_format, order)


def sample_id_offset(sample_type: int) -> int | None:
    """Where a sample of ``sample_type`` holds its event id (IDENTIFIER first, else ID); None: nowhere."""
    return sample_layout(sample_type, 0, "=").id_at


def parse_sample(body: bytes, sample_type: int, read_format: int = 0, order: str = "=") -> SampleFields:
    """Parse a PERF_RECORD_SAMPLE body written with ``sample_type`` / ``read_format``.

    ``order`` is a :mod:`struct` byte order (``"="`` for a live ring, the file's for perf.data).
    Raises ValueError when the body is shorter than ``sample_type`` promises
    (``"record too short for its sample_type"``) or its raw data runs past it
    (``"raw data runs past the record"``).
    """
    return sample_layout(sample_type, read_format, order).parse(body)


def parse_lost(body: bytes, order: str = "=") -> tuple[int, int]:
    """Parse a PERF_RECORD_LOST body: ``(id, lost)``.  Raises ValueError when it is too short."""
    if len(body) < 16:
        raise ValueError("lost record too short")
    ident, lost = struct.unpack_from(order + "QQ", body, 0)
    return int(ident), int(lost)


def parse_lost_samples(body: bytes, order: str = "=") -> int:
    """Parse a PERF_RECORD_LOST_SAMPLES body: how many samples were lost.  Raises ValueError if too short."""
    if len(body) < 8:
        raise ValueError("lost-samples record too short")
    return int(struct.unpack_from(order + "Q", body, 0)[0])


@functools.lru_cache(maxsize=4)
def record_header(order: str = "=") -> struct.Struct:
    """The ``perf_event_header`` (type, misc, size) in byte order ``order``."""
    header = struct.Struct(order + "IHH")
    assert header.size == RECORD_HEADER_SIZE
    return header
