"""The bodies of perf records: the one parser of PERF_RECORD_SAMPLE and PERF_RECORD_LOST.

Shared by the perf.data reader (:mod:`~structlog_etw.perf.datafile`, records in the file's
byte order) and the live reader (:mod:`~structlog_etw.perf.listener`, records out of the
kernel's ring buffers in native order).  A body is what follows the 8-byte
``perf_event_header``; the ``sample_type`` (and ``read_format``) of the event that wrote it
says which fields it holds, in the kernel's fixed order::

    IDENTIFIER, IP, TID (pid, tid), TIME, ADDR, ID, STREAM_ID, CPU (cpu, res), PERIOD,
    READ, CALLCHAIN, RAW (u32 size, bytes), ...

Pure Python; importable on every OS.
"""

from __future__ import annotations

import functools
import struct
from typing import Final, NamedTuple

from .abi import RECORD_HEADER_SIZE, ReadFormat, SampleFormat

__all__ = [
    "SampleFields",
    "parse_lost",
    "parse_lost_samples",
    "parse_sample",
    "record_header",
    "sample_id_offset",
]

_IP: Final = int(SampleFormat.IP)
_TID: Final = int(SampleFormat.TID)
_TIME: Final = int(SampleFormat.TIME)
_ADDR: Final = int(SampleFormat.ADDR)
_READ: Final = int(SampleFormat.READ)
_CALLCHAIN: Final = int(SampleFormat.CALLCHAIN)
_ID: Final = int(SampleFormat.ID)
_CPU: Final = int(SampleFormat.CPU)
_PERIOD: Final = int(SampleFormat.PERIOD)
_STREAM_ID: Final = int(SampleFormat.STREAM_ID)
_RAW: Final = int(SampleFormat.RAW)
_IDENTIFIER: Final = int(SampleFormat.IDENTIFIER)
_GROUP: Final = int(ReadFormat.GROUP)
_READ_ID: Final = int(ReadFormat.ID)
_READ_LOST: Final = int(ReadFormat.LOST)
_TIME_ENABLED: Final = int(ReadFormat.TOTAL_TIME_ENABLED)
_TIME_RUNNING: Final = int(ReadFormat.TOTAL_TIME_RUNNING)


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


class _Layout:
    """Where a sample_type puts its fixed-size fields (byte offsets; None: not sampled).  A plain
    class, no dataclass: this module is imported at every start of ``structlog-etw decode``."""

    __slots__ = (
        "callchain",
        "cpu",
        "fixed",
        "id",
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
    )

    def __init__(self, sample_type: int, read_format: int, order: str) -> None:
        offsets: dict[int, int] = {}
        pos = 0
        for bit in (_IDENTIFIER, _IP, _TID, _TIME, _ADDR, _ID, _STREAM_ID, _CPU, _PERIOD):
            if sample_type & bit:
                offsets[bit] = pos
                pos += 8
        self.identifier = offsets.get(_IDENTIFIER)
        self.tid = offsets.get(_TID)
        self.time = offsets.get(_TIME)
        self.id = offsets.get(_ID)
        self.cpu = offsets.get(_CPU)
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


@functools.lru_cache(maxsize=64)
def _layout(sample_type: int, read_format: int, order: str) -> _Layout:
    return _Layout(sample_type, read_format, order)


def sample_id_offset(sample_type: int) -> int | None:
    """Where a sample of ``sample_type`` holds its event id (IDENTIFIER first, else ID); None: nowhere."""
    layout = _layout(sample_type, 0, "=")
    return layout.identifier if layout.identifier is not None else layout.id


def parse_sample(body: bytes, sample_type: int, read_format: int = 0, order: str = "=") -> SampleFields:
    """Parse a PERF_RECORD_SAMPLE body written with ``sample_type`` / ``read_format``.

    ``order`` is a :mod:`struct` byte order (``"="`` for a live ring, the file's for perf.data).
    Raises ValueError when the body is shorter than ``sample_type`` promises
    (``"record too short for its sample_type"``) or its raw data runs past it
    (``"raw data runs past the record"``).
    """
    lay = _layout(sample_type, read_format, order)
    ident = pid = tid = time = cpu = None
    raw = b""
    try:
        if lay.identifier is not None:
            (ident,) = lay.u64.unpack_from(body, lay.identifier)
        elif lay.id is not None:
            (ident,) = lay.u64.unpack_from(body, lay.id)
        if lay.tid is not None:
            pid, tid = lay.u32_pair.unpack_from(body, lay.tid)
        if lay.time is not None:
            (time,) = lay.u64.unpack_from(body, lay.time)
        if lay.cpu is not None:
            cpu, _res = lay.u32_pair.unpack_from(body, lay.cpu)
        pos = lay.fixed
        if lay.read:
            if lay.read_group:
                (nr,) = lay.u64.unpack_from(body, pos)
                pos += 8 * (1 + lay.read_times + nr * lay.read_values)
            else:
                pos += 8 * (lay.read_values + lay.read_times)
        if lay.callchain:
            (nr,) = lay.u64.unpack_from(body, pos)
            pos += 8 * (1 + nr)
        if lay.raw:
            (size,) = lay.u32.unpack_from(body, pos)
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
