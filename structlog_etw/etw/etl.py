""".etl files (what logman, wpr, tracelog and PerfView record) read on any OS, TraceLogging decoded.

An .etl file is a sequence of ETW buffers (``WMI_BUFFER_HEADER``, 72 bytes, then 8-byte aligned
records up to the buffer's filled size); the first buffer starts with the session's header event
(a system record whose payload is the ``TRACE_LOGFILE_HEADER``: the session, its clock, its
start time).  A TraceLogging event is an ``EVENT_HEADER`` record whose extended items carry the
event's schema (``EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL``) and the provider traits
(``EVENT_HEADER_EXT_TYPE_PROV_TRAITS``); :func:`structlog_etw.read.decode.tracelogging.decode` decodes it.
Every other record (the session header, kernel events, manifest-based and classic events, WPP
messages) is yielded too, undecoded, with its ``kind`` saying what it is.

Times: each record carries a raw clock value; :attr:`EtlHeader.clock_type` says which clock
(1 QPC at :attr:`EtlHeader.perf_freq` ticks per second, 2 system time in 100 ns, 3 the CPU's
cycle counter at :attr:`EtlHeader.cpu_speed_mhz`), and the header event's own raw value is
:attr:`EtlHeader.start_time` (a FILETIME, UTC).  :attr:`EtlEvent.realtime_ns` is that, in
nanoseconds since the Unix epoch.

The reader does work and holds memory bounded by the file: one buffer at a time (at most
16 MiB, ETW's largest), in time order one buffer per CPU.  A file that lies (a buffer or record
size past its end, an item past its record) gets a problem in :attr:`EtlFile.problems` and the
rest of that buffer skipped; :class:`EtlError` only when the file is no .etl file at all::

    from structlog_etw.etw.etl import EtlFile

    with EtlFile.open("trace.etl") as f:
        for event in f.events_by_time():
            if event.decoded is not None:  # a TraceLogging event
                print(event.time, event.decoded.provider, event.decoded.name, event.decoded.fields)
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import heapq
import os
import struct
import uuid
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Final

from .._util.bounded import BoundedCache
from ..formats.tracelogging import EVENT_DESCRIPTOR, FILETIME_UNIX_EPOCH
from ..read.decode.tracelogging import decode, decode_traits
from ..read.decoded import DecodedEvent
from ._lzxpress import LzxpressError, decompress

__all__ = [
    "CLOCK_CPU_CYCLES",
    "CLOCK_QPC",
    "CLOCK_SYSTEM_TIME",
    "MAX_BUFFER_SIZE",
    "EtlError",
    "EtlEvent",
    "EtlFile",
    "EtlHeader",
    "is_etl",
]

#: :attr:`EtlHeader.clock_type`: the performance counter (QueryPerformanceCounter), ``perf_freq`` Hz.
CLOCK_QPC: Final = 1
#: :attr:`EtlHeader.clock_type`: system time, 100 ns units (the raw values are FILETIMEs).
CLOCK_SYSTEM_TIME: Final = 2
#: :attr:`EtlHeader.clock_type`: the CPU cycle counter, ``cpu_speed_mhz`` MHz.
CLOCK_CPU_CYCLES: Final = 3
#: The largest buffer ETW allocates (16384 KB); a buffer that says more is damage.
MAX_BUFFER_SIZE: Final = 16 << 20

_BUFFER_HEADER: Final = 72
_UNIX_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MAX_PROBLEMS: Final = 100  # problem texts kept (all are counted)
_MAX_MERGED_CPUS: Final = 4096  # buffers of CPUs past these are read in file order after the others

# Record header types (the byte after the marker's low word; ntwmi.h TRACE_HEADER_TYPE_*).
_SYSTEM: Final = frozenset({0x01, 0x02})
_COMPACT: Final = frozenset({0x03, 0x04})
_PERFINFO: Final = frozenset({0x10, 0x11})
_FULL_HEADER: Final = frozenset({0x0A, 0x14})  # EVENT_TRACE_HEADER (TraceEvent: classic)
_INSTANCE: Final = frozenset({0x0B, 0x15})  # EVENT_INSTANCE_GUID_HEADER (classic)
_EVENT_HEADER: Final = frozenset({0x12, 0x13})  # EVENT_HEADER (EventWrite*: manifest, TraceLogging)
_MESSAGE: Final = 0x0F  # TraceMessage (WPP)
_OTHER: Final = frozenset({0x0C, 0x0D, 0x0E})  # timed, error, WNODE: not written by current Windows
_KERNEL_TYPES: Final = _SYSTEM | _COMPACT | _PERFINFO  # size at +4 (after Version, type, flags)
# The record types of each pointer width (the *32/*64 pairs): an event of a 32-bit process in a
# 64-bit session is a *32 record; messages and the old types say nothing (the session's width).
_POINTER_4: Final = frozenset({0x01, 0x03, 0x0A, 0x0B, 0x10, 0x12})
_POINTER_8: Final = frozenset({0x02, 0x04, 0x11, 0x13, 0x14, 0x15})
_MIN_SIZE: Final = {
    **dict.fromkeys(_SYSTEM, 32),
    **dict.fromkeys(_COMPACT, 24),
    **dict.fromkeys(_PERFINFO, 16),
    **dict.fromkeys(_FULL_HEADER, 48),
    **dict.fromkeys(_INSTANCE, 72),
    **dict.fromkeys(_EVENT_HEADER, 80),
    _MESSAGE: 8,
    **dict.fromkeys(_OTHER, 8),
}

_EXT_RELATED_ACTIVITYID: Final = 1
_EXT_EVENT_SCHEMA_TL: Final = 11
_EXT_PROV_TRAITS: Final = 12
_EVENT_HEADER_FLAG_EXTENDED_INFO: Final = 0x0001
_EVENT_HEADER_FLAG_STRING_ONLY: Final = 0x0004
_EVENT_HEADER_FLAG_TRACE_MESSAGE: Final = 0x0008
_EVENT_HEADER_FLAG_32_BIT_HEADER: Final = 0x0020
_EVENT_HEADER_FLAG_64_BIT_HEADER: Final = 0x0040
_BUFFER_FLAG_PROC_INDEX: Final = 0x0020
_BUFFER_FLAG_COMPRESSED: Final = 0x0040
_CHANNEL_TRACELOGGING: Final = 11
_EVENT_TRACE_GUID: Final = uuid.UUID("68fdd900-4a3e-11d1-84f4-0000f80464e3")  # EventTraceGuid
_NO_ID: Final = bytes(16)

_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_BUFFER: Final = struct.Struct("<III")  # BufferSize, SavedOffset, CurrentOffset
_EH: Final = struct.Struct("<HBBHHIIQ16s16sQ16s")  # EVENT_HEADER as a file holds it (80 bytes)
_EXT_ITEM: Final = struct.Struct("<HHHH")  # size (with these 8 bytes), type, linkage, data size
_SYS: Final = struct.Struct("<HBBHHIIQ")  # Version, type, flags, Size, HookId, tid, pid, time
_KERNEL_HEAD: Final = struct.Struct("<HHH")  # Version, marker's high word, Size
_U64: Final = struct.Struct("<Q")
_IDS_TIME: Final = struct.Struct("<IIQ")  # a system record's tid, pid, time
_FULL: Final = struct.Struct("<HBBBBHIIQ16s")  # Size, type, flags, Class.Type/Level/Version, ...
_LOGFILE_FIXED: Final = struct.Struct("<IIIIqIIIIIIII")  # TRACE_LOGFILE_HEADER up to CpuSpeedInMHz
_LOGFILE_TAIL: Final = struct.Struct("<qqqII")  # BootTime, PerfFreq, StartTime, ReservedFlags, BuffersLost
_TIME_ZONE_SIZE: Final = 172  # TIME_ZONE_INFORMATION


class EtlError(ValueError):
    """The file is no .etl file, or its first buffer and the session header cannot be read."""


def is_etl(head: bytes) -> bool:
    """Whether ``head`` (a file's first 80 bytes or more) starts like an .etl file.

    The test is the content: a buffer header whose first record is the session's header event
    (a system record of the EventTrace group, hook 0).
    """
    if len(head) < _BUFFER_HEADER + 8:
        return False
    size = _U32.unpack_from(head, 0)[0]
    rec = _BUFFER_HEADER
    return (
        _BUFFER_HEADER + 32 <= size <= MAX_BUFFER_SIZE  # (perf.data's magic reads as 1.2 GB)
        and head[rec + 2] in _SYSTEM
        and head[rec + 3] == 0xC0
        and _U16.unpack_from(head, rec + 6)[0] == 0
    )


@dataclass(frozen=True)
class EtlHeader:
    """The session as its header event describes it (``TRACE_LOGFILE_HEADER``) and its clock.

    Times named ``*_time`` are FILETIMEs (100 ns since 1601, UTC); ``start_timestamp`` is the
    header event's raw clock value, the moment ``start_time`` names.
    """

    buffer_size: int
    version: int
    provider_version: int
    number_of_processors: int
    end_time: int
    timer_resolution: int
    maximum_file_size: int
    log_file_mode: int
    buffers_written: int
    pointer_size: int
    events_lost: int
    cpu_speed_mhz: int
    time_zone_bias_minutes: int
    boot_time: int
    perf_freq: int
    start_time: int
    clock_type: int
    buffers_lost: int
    session_name: str
    log_file_name: str
    start_timestamp: int

    @property
    def ticks_per_second(self) -> int:
        """The raw clock's frequency (0 when the header does not say)."""
        if self.clock_type == CLOCK_SYSTEM_TIME:
            return 10_000_000
        if self.clock_type == CLOCK_CPU_CYCLES:
            return self.cpu_speed_mhz * 1_000_000
        return self.perf_freq  # QPC, also the clock of a header with another ReservedFlags

    @property
    def start(self) -> _dt.datetime | None:
        """``start_time`` as an aware UTC datetime (None out of datetime's range)."""
        return _datetime((self.start_time - FILETIME_UNIX_EPOCH) * 100)

    def realtime_ns(self, timestamp: int) -> int | None:
        """A raw clock value as nanoseconds since the Unix epoch (UTC); None without a clock."""
        return _Clock(self).times(timestamp)[0]

    def since_start_ns(self, timestamp: int) -> int | None:
        """Nanoseconds from the session's start (its header event) to a raw clock value."""
        return _Clock(self).times(timestamp)[1]


class _Clock:
    """The session's clock, worked out once: raw clock values to times (the one rule for them)."""

    __slots__ = ("freq", "start", "start_ns", "system")

    def __init__(self, header: EtlHeader) -> None:
        self.freq = header.ticks_per_second
        self.start = header.start_timestamp
        self.start_ns = (header.start_time - FILETIME_UNIX_EPOCH) * 100
        self.system = header.clock_type == CLOCK_SYSTEM_TIME

    def times(self, stamp: int) -> tuple[int | None, int | None]:
        """``(realtime_ns, since_start_ns)`` of a raw clock value (None: the clock has no frequency)."""
        since = (stamp - self.start) * 1_000_000_000 // self.freq if self.freq > 0 else None
        if self.system:
            return (stamp - FILETIME_UNIX_EPOCH) * 100, since
        return (None if since is None else self.start_ns + since), since


def _datetime(ns: int | None) -> _dt.datetime | None:
    if ns is None:
        return None
    try:
        return _UNIX_EPOCH + _dt.timedelta(microseconds=ns // 1000)
    except OverflowError:
        return None


@dataclass(frozen=True)
class EtlEvent:
    """One record of an .etl file: a decoded TraceLogging event, or what the record says of itself.

    ``kind``: ``"tracelogging"`` (``decoded`` holds the event, or ``error`` says why it could
    not be decoded, ``raw`` then holding its metadata and data), ``"manifest"`` (an
    ``EVENT_HEADER`` event without TraceLogging schema: manifest-based, EventSource, ...),
    ``"string"`` (EventWriteString), ``"classic"`` (MOF / ``TraceEvent`` events), ``"system"``
    (kernel and session records: the header event is one), ``"wpp"`` (TraceMessage) or
    ``"other"``.  ``provider_id`` is the record's provider GUID (the EventTrace GUID for the
    session's own records; None for other kernel records and GUID-less messages).
    ``level``, ``keyword``, ``opcode``, ``event_id`` come from the record's descriptor (kernel
    records: ``opcode`` is the hook's type, ``event_id`` its group).  ``pointer_size`` is the
    width of the pointers in the record's payload (4 for the events of a 32-bit process, also in
    a 64-bit session; TraceLogging POINTER fields are decoded at it).  ``timestamp`` is the raw
    clock value, ``realtime_ns`` the same moment in nanoseconds since the Unix epoch (UTC),
    ``time_ns`` nanoseconds since the session started; ``offset`` is the record's place in the
    file.
    """

    offset: int
    kind: str
    provider_id: uuid.UUID | None
    timestamp: int | None
    realtime_ns: int | None
    time_ns: int | None
    cpu: int
    pid: int | None
    tid: int | None
    decoded: DecodedEvent | None = None
    error: str | None = None
    raw: bytes = b""
    level: int = 0
    keyword: int = 0
    opcode: int = 0
    event_id: int = 0
    pointer_size: int = 8

    @property
    def time(self) -> _dt.datetime | None:
        """The event's time as an aware UTC datetime (microseconds; None when unknown)."""
        return _datetime(self.realtime_ns)

    @property
    def source(self) -> str:
        """Who wrote the record, in words: the provider GUID, or the kernel group and type."""
        if self.kind in {"system", "other"}:
            if self.provider_id == _EVENT_TRACE_GUID:
                return "EventTrace/Header" if self.opcode == 0 else f"EventTrace/{self.opcode}"
            return f"kernel group 0x{self.event_id:02x} type {self.opcode}"
        if self.kind == "tracelogging" and self.decoded is not None:
            return self.decoded.provider
        return str(self.provider_id) if self.provider_id is not None else "no provider id"


_MAX_GUIDS: Final = 4096  # provider ids kept parsed (16-byte keys: bounded)
_new = object.__new__
_set = object.__setattr__


def _event(
    reading: _Reading,
    where: int,
    kind: str,
    provider: uuid.UUID | None,
    stamp: int | None,
    cpu: int,
    pid: int | None,
    tid: int | None,
    level: int,
    keyword: int,
    opcode: int,
    event_id: int,
    pointer_size: int,
    decoded: DecodedEvent | None = None,
    error: str | None = None,
    raw: bytes = b"",
) -> EtlEvent:
    """The :class:`EtlEvent` of a record (the reader's one constructor), its times from ``stamp``.

    The frozen dataclass's ``__init__`` sets its 17 fields one ``object.__setattr__`` at a time,
    the largest cost of framing a record; this sets them as one dict, the same instance
    (tests/etw/test_etl_compressed.py holds the two equal).
    """
    realtime, since = reading.clock.times(stamp) if stamp is not None else (None, None)
    event = _new(EtlEvent)
    _set(
        event,
        "__dict__",
        {
            "offset": where,
            "kind": kind,
            "provider_id": provider,
            "timestamp": stamp,
            "realtime_ns": realtime,
            "time_ns": since,
            "cpu": cpu,
            "pid": pid,
            "tid": tid,
            "decoded": decoded,
            "error": error,
            "raw": raw,
            "level": level,
            "keyword": keyword,
            "opcode": opcode,
            "event_id": event_id,
            "pointer_size": pointer_size,
        },
    )
    return event


class _Reading:
    """What framing records needs besides their bytes: the session, its clock, where problems
    go, and the provider ids already parsed (a bounded map of their 16 bytes)."""

    __slots__ = ("_guids", "clock", "guids", "header", "problem")

    def __init__(self, header: EtlHeader, problem: Callable[[str], None]) -> None:
        self.header = header
        self.clock = _Clock(header)
        self.problem = problem
        # (16-byte keys and their UUIDs: the count bounds the bytes)
        self._guids: BoundedCache[bytes, uuid.UUID] = BoundedCache.of_one_reader(_MAX_GUIDS, _MAX_GUIDS)
        self.guids = self._guids.entries

    def guid(self, raw: bytes) -> uuid.UUID:
        """The GUID of 16 bytes as a file holds them (``bytes_le``)."""
        known = self.guids.get(raw)
        if known is None:
            known = uuid.UUID(bytes_le=raw)
            self._guids.store(raw, known)
        return known


@dataclass(frozen=True)
class _Buffer:
    offset: int
    size: int  # bytes in the file (compressed: the header and the compressed data)
    filled: int  # bytes of records with the header (compressed: once decompressed); 0: nothing to read
    cpu: int
    compressed: bool = False


class EtlFile:
    """An .etl file opened for reading (:meth:`open`, or any seekable binary file object).

    :attr:`header` is read on opening (:class:`EtlError` if it cannot be); :meth:`events`
    yields every record as stored, :meth:`events_by_time` in time order (the buffers of each
    CPU merged, as ETW's own consumers do).  Whatever the rest of the file holds, iteration
    never raises for it: damage becomes a text in :attr:`problems` (:attr:`problem_count`
    counts them all; the texts of the first 100 are kept) and the damaged buffer's remaining
    records are skipped.  Only I/O errors propagate.
    """

    #: The session header (read on opening).
    header: EtlHeader
    #: The file's name as given (for messages).
    name: str
    #: The file's size in bytes when it was opened.
    size: int
    #: What was found damaged, in words with file offsets (the first 100).
    problems: list[str]
    #: How many problems were found (all of them).
    problem_count: int

    def __init__(self, file: BinaryIO, name: str = "", *, owns: bool = False) -> None:
        self._f = file
        self.name = name
        self._owns = owns
        self.problems: list[str] = []
        self.problem_count = 0
        self.size = file.seek(0, os.SEEK_END)
        try:
            self.header = self._read_header()
        except BaseException:
            if owns:
                file.close()
            raise
        self._reading = _Reading(self.header, self._problem)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> EtlFile:
        """Open the file at ``path`` (raises ``OSError``, :class:`EtlError`)."""
        f = open(path, "rb")  # noqa: SIM115 - owned by the EtlFile, closed by close()
        return cls(f, os.fspath(path), owns=True)

    def close(self) -> None:
        """Close the file if :meth:`open` opened it."""
        if self._owns:
            self._f.close()

    def __enter__(self) -> EtlFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading -----------------------------------------------------------------------------

    def _read(self, offset: int, size: int) -> bytes:
        self._f.seek(offset)
        return self._f.read(size)

    def _problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(text)

    def _read_header(self) -> EtlHeader:
        head = self._read(0, _BUFFER_HEADER + 8)
        if not is_etl(head):
            raise EtlError(f"{self.name or 'file'}: not an .etl file (no ETW buffer with a session header)")
        first = self._buffer_at(0)
        if first is None:
            raise EtlError(f"{self.name}: the first buffer cannot be read: {self.problems[-1]}")
        data = self._read(0, first.filled)
        rec = _BUFFER_HEADER
        if len(data) < rec + 32:
            raise EtlError(f"{self.name}: the first buffer holds no session header event ({self.problems})")
        version, _t, _fl, size, _hook, _tid, _pid, stamp = _SYS.unpack_from(data, rec)
        extra = _kernel_extra(version)
        start = rec + 32 + extra
        if rec + size > len(data) or size < 32 + extra:
            raise EtlError(f"{self.name}: the session header event runs past its buffer (size {size})")
        return _logfile_header(data[start : rec + size], stamp, self.name)

    def _buffer_at(self, offset: int) -> _Buffer | None:
        """The buffer header at ``offset``; None (and a problem) when no buffer can be read there."""
        head = self._read(offset, _BUFFER_HEADER)
        if len(head) < _BUFFER_HEADER:
            self._problem(f"truncated at offset {offset}: {len(head)} bytes of a buffer header")
            return None
        size, saved, _current = _BUFFER.unpack_from(head, 0)
        left = self.size - offset
        if not _BUFFER_HEADER < size <= MAX_BUFFER_SIZE:
            self._problem(
                f"buffer at offset {offset}: size {size} outside {_BUFFER_HEADER + 1}..{MAX_BUFFER_SIZE}"
                f" (damaged?); the last {left} bytes not read"
            )
            return None
        if size > left:
            self._problem(f"truncated at offset {offset}: buffer of {size} bytes, {left} left in the file")
            return None
        flags = _U16.unpack_from(head, 0x34)[0]
        cpu = _U16.unpack_from(head, 0x28)[0] if flags & _BUFFER_FLAG_PROC_INDEX else head[0x28]
        if flags & _BUFFER_FLAG_COMPRESSED:
            # BufferSize is what the file holds (this header, then LZXpress data); the filled
            # size is the buffer's once decompressed, at most a buffer.
            if not _BUFFER_HEADER <= saved <= MAX_BUFFER_SIZE:
                self._problem(
                    f"compressed buffer at offset {offset}: filled size {saved} outside"
                    f" {_BUFFER_HEADER}..{MAX_BUFFER_SIZE}"
                )
                return _Buffer(offset, size, 0, cpu, True)
            return _Buffer(offset, size, saved, cpu, True)
        if not _BUFFER_HEADER <= saved <= size:
            self._problem(f"buffer at offset {offset}: filled size {saved} outside {_BUFFER_HEADER}..{size}")
            return _Buffer(offset, size, 0, cpu)
        return _Buffer(offset, size, saved, cpu)

    def _buffers(self) -> Iterator[_Buffer]:
        """Every buffer header in file order.

        Zeros where a buffer header would be, after the ``BuffersWritten`` buffers the header
        counts, are space the session reserved and never used (a preallocated or circular
        file): the end of the events, not damage.
        """
        offset = 0
        count = 0
        while offset < self.size:
            if count >= self.header.buffers_written and not any(self._read(offset, _BUFFER_HEADER)):
                return
            buf = self._buffer_at(offset)
            if buf is None:
                return
            yield buf
            count += 1
            offset += buf.size

    def _records(self, buf: _Buffer) -> Iterator[EtlEvent]:
        if not buf.filled:
            return
        if buf.compressed:
            data = self._decompressed(buf)
            if data is None:
                return
        else:
            data = self._read(buf.offset, buf.filled)
        yield from _records(data, buf, self._reading)

    def _decompressed(self, buf: _Buffer) -> bytes | None:
        """A compressed buffer as ETW filled it: its header, then its records decompressed."""
        stored = self._read(buf.offset, buf.size)
        want = buf.filled - _BUFFER_HEADER
        try:
            body = decompress(stored[_BUFFER_HEADER:], want)
        except LzxpressError as exc:
            self._problem(f"compressed buffer at offset {buf.offset}: {exc}; its events not read")
            return None
        if len(body) != want:
            self._problem(
                f"compressed buffer at offset {buf.offset}: decompressed to {len(body)} bytes,"
                f" its header says {want}; its events not read"
            )
            return None
        return stored[:_BUFFER_HEADER] + body

    def events(self) -> Iterator[EtlEvent]:
        """Every record, as stored: buffer after buffer, each buffer's records in order."""
        for buf in self._buffers():
            yield from self._records(buf)

    def events_by_time(self) -> Iterator[EtlEvent]:
        """Every record in time order: each CPU's buffers in file order, the CPUs merged by time.

        Holds one buffer per CPU; records without a time (some WPP messages) come where their
        buffer puts them.
        """
        per_cpu: dict[int, array[int]] = {}
        for buf in self._buffers():
            if not buf.filled:  # nothing to read (reported once, here)
                continue
            offsets = per_cpu.get(buf.cpu)
            if offsets is None and len(per_cpu) >= _MAX_MERGED_CPUS:
                offsets = per_cpu.setdefault(-1, array("q"))
            elif offsets is None:
                offsets = per_cpu[buf.cpu] = array("q")
            offsets.append(buf.offset)
        streams = [self._stream(offsets) for offsets in per_cpu.values()]
        yield from heapq.merge(*streams, key=_order_key)

    def _stream(self, offsets: array[int]) -> Iterator[EtlEvent]:
        for offset in offsets:
            buf = self._buffer_at(offset)
            if buf is not None:
                yield from self._records(buf)


def _order_key(event: EtlEvent) -> int:
    return event.timestamp if event.timestamp is not None else -1


def _kernel_extra(version: int) -> int:
    """Bytes a kernel record header has past its fixed part: PEBS index and PMC counters."""
    return (8 if version & 0x8000 else 0) + 8 * ((version >> 8) & 0x7)


def _utf16z(data: bytes, pos: int) -> tuple[str, int]:
    end = pos
    while end + 1 < len(data) and data[end : end + 2] != b"\0\0":
        end += 2
    return data[pos:end].decode("utf-16-le", "replace"), min(end + 2, len(data))


def _logfile_header(payload: bytes, stamp: int, name: str) -> EtlHeader:
    """The ``TRACE_LOGFILE_HEADER`` (payload of the session's header event)."""
    fixed = _LOGFILE_FIXED.size
    if len(payload) < fixed:
        raise EtlError(f"{name}: session header of {len(payload)} bytes (too short)")
    (
        buffer_size,
        version,
        provider_version,
        processors,
        end_time,
        timer_resolution,
        max_file,
        mode,
        written,
        _start_buffers,
        pointer_size,
        lost,
        cpu_mhz,
    ) = _LOGFILE_FIXED.unpack_from(payload, 0)
    if pointer_size not in (4, 8):
        raise EtlError(f"{name}: session header says pointers are {pointer_size} bytes (not 4 or 8)")
    tz = fixed + 2 * pointer_size
    tail = (tz + _TIME_ZONE_SIZE + 7) & ~7
    if len(payload) < tail + _LOGFILE_TAIL.size:
        raise EtlError(f"{name}: session header of {len(payload)} bytes (too short)")
    bias = struct.unpack_from("<i", payload, tz)[0]
    boot, freq, start, clock, buffers_lost = _LOGFILE_TAIL.unpack_from(payload, tail)
    session, pos = _utf16z(payload, tail + _LOGFILE_TAIL.size)
    log_file, _ = _utf16z(payload, pos)
    return EtlHeader(
        buffer_size=buffer_size,
        version=version,
        provider_version=provider_version,
        number_of_processors=processors,
        end_time=end_time,
        timer_resolution=timer_resolution,
        maximum_file_size=max_file,
        log_file_mode=mode,
        buffers_written=written,
        pointer_size=pointer_size,
        events_lost=lost,
        cpu_speed_mhz=cpu_mhz,
        time_zone_bias_minutes=bias,
        boot_time=boot,
        perf_freq=freq,
        start_time=start,
        clock_type=clock,
        buffers_lost=buffers_lost,
        session_name=session,
        log_file_name=log_file,
        start_timestamp=stamp,
    )


def _records(data: bytes, buf: _Buffer, reading: _Reading) -> Iterator[EtlEvent]:
    """The records of one buffer's bytes (``data``: from the buffer header to its filled size)."""
    pos = _BUFFER_HEADER
    end = len(data)
    base = buf.offset
    cpu = buf.cpu
    problem = reading.problem
    while pos + 4 <= end:
        htype = data[pos + 2]
        flags = data[pos + 3]
        if flags == 0xFF and data[pos : pos + 4] == b"\xff\xff\xff\xff":  # the rest is padding
            return
        if flags & 0xC0 == 0xC0:
            kind_type = htype
        elif flags & 0xF0 == 0x90:
            kind_type = _MESSAGE
        else:
            problem(
                f"record at offset {base + pos}: unknown marker 0x{flags:02x}{htype:02x} (damaged?);"
                " rest of buffer skipped"
            )
            return
        minimum = _MIN_SIZE.get(kind_type)
        if minimum is None:
            problem(
                f"record at offset {base + pos}: unknown header type {kind_type} (damaged?);"
                " rest of buffer skipped"
            )
            return
        if pos + 8 > end:
            break
        if kind_type in _KERNEL_TYPES:
            version, _type, size = _KERNEL_HEAD.unpack_from(data, pos)
            if version & 0x8700:
                minimum += _kernel_extra(version)
        else:
            size = data[pos] | data[pos + 1] << 8
        if size < minimum or pos + size > end:
            problem(
                f"record at offset {base + pos}: size {size} outside {minimum}..{end - pos}"
                " (damaged?); rest of buffer skipped"
            )
            return
        if kind_type in _EVENT_HEADER:
            yield _event_record(data, pos, size, kind_type, base + pos, cpu, reading)
        else:
            yield _record(data, pos, size, kind_type, base + pos, cpu, reading)
        pos += (size + 7) & ~7
    if pos < end:
        problem(f"record at offset {base + pos}: {end - pos} bytes, too few for a record header")


def _pointer_size(htype: int, header: EtlHeader) -> int:
    """The pointer width of a record of type ``htype`` (its *32/*64 type, else the session's)."""
    if htype in _POINTER_4:
        return 4
    if htype in _POINTER_8:
        return 8
    return header.pointer_size


def _record(
    data: bytes, pos: int, size: int, htype: int, where: int, cpu: int, reading: _Reading
) -> EtlEvent:
    """Any record but an ``EVENT_HEADER`` one: what its header says of it."""
    pid: int | None
    tid: int | None
    stamp: int | None
    provider: uuid.UUID | None = None
    level = opcode = event_id = 0
    if htype in _KERNEL_TYPES:
        hook = data[pos + 6] | data[pos + 7] << 8
        opcode, event_id = hook & 0xFF, hook >> 8
        if htype in _PERFINFO:
            pid = tid = None
            stamp = _U64.unpack_from(data, pos + 8)[0]
        else:
            tid, pid, stamp = _IDS_TIME.unpack_from(data, pos + 8)
        kind = "system"
        if event_id == 0:
            provider = _EVENT_TRACE_GUID
    elif htype in _FULL_HEADER or htype in _INSTANCE:
        _size, _t, _f, opcode, level, _version, tid, pid, stamp, guid = _FULL.unpack_from(data, pos)
        provider = reading.guid(guid)
        kind = "classic"
    elif htype == _MESSAGE:
        kind = "wpp"
        provider, tid, pid, stamp = _message(data, pos, size)
        event_id = data[pos + 4] | data[pos + 5] << 8
    else:
        kind = "other"
        pid = tid = stamp = None
    pointer_size = _pointer_size(htype, reading.header)
    return _event(
        reading, where, kind, provider, stamp, cpu, pid, tid, level, 0, opcode, event_id, pointer_size
    )


def _message(data: bytes, pos: int, size: int) -> tuple[uuid.UUID | None, int | None, int | None, int | None]:
    """A TraceMessage header's optional parts, in their order: sequence, GUID or component, time, ids."""
    options = _U16.unpack_from(data, pos + 6)[0]
    at, end = pos + 8, pos + size
    provider = tid = pid = stamp = None
    if options & 0x01:  # TRACE_MESSAGE_SEQUENCE
        at += 4
    if options & 0x02 and at + 16 <= end:  # TRACE_MESSAGE_GUID
        provider = uuid.UUID(bytes_le=data[at : at + 16])
        at += 16
    elif options & 0x04:  # TRACE_MESSAGE_COMPONENTID
        at += 4
    if options & 0x18 and at + 8 <= end:  # TRACE_MESSAGE_TIMESTAMP / PERFORMANCE_TIMESTAMP
        stamp = struct.unpack_from("<Q", data, at)[0]
        at += 8
    if options & 0x20 and at + 8 <= end:  # TRACE_MESSAGE_SYSTEMINFO
        tid, pid = struct.unpack_from("<II", data, at)
    return provider, tid, pid, stamp


def _event_record(
    data: bytes, pos: int, size: int, htype: int, where: int, cpu: int, reading: _Reading
) -> EtlEvent:
    """An ``EVENT_HEADER`` record: TraceLogging when it carries the schema item, else not decoded."""
    (_size, _t, _f, flags, _prop, tid, pid, stamp, guid, desc, _cpu_time, activity) = _EH.unpack_from(
        data, pos
    )
    if flags & _EVENT_HEADER_FLAG_32_BIT_HEADER:
        pointer_size = 4
    elif flags & _EVENT_HEADER_FLAG_64_BIT_HEADER:
        pointer_size = 8
    else:
        pointer_size = _pointer_size(htype, reading.header)
    provider = reading.guid(guid)
    event_id, _version, channel, level, opcode, _task, keyword = EVENT_DESCRIPTOR.unpack_from(desc)
    end = pos + size
    at = pos + _EH.size
    metadata = traits = related = None
    error = None
    if flags & _EVENT_HEADER_FLAG_EXTENDED_INFO:
        while True:
            if at + 8 > end:
                error = f"extended item at offset {where + at - pos} runs past the record"
                break
            item_size, item_type, linkage, data_size = _EXT_ITEM.unpack_from(data, at)
            if item_size < 8 + data_size or at + item_size > end:
                error = (
                    f"extended item at offset {where + at - pos}: size {item_size} (data {data_size})"
                    f" outside the record's {end - at} bytes"
                )
                break
            blob = data[at + 8 : at + 8 + data_size]
            if item_type == _EXT_EVENT_SCHEMA_TL:
                metadata = blob
            elif item_type == _EXT_PROV_TRAITS:
                traits = blob
            elif item_type == _EXT_RELATED_ACTIVITYID:
                related = blob
            at += item_size
            if not linkage & 1:
                break
    decoded = None
    raw = b""
    if flags & _EVENT_HEADER_FLAG_TRACE_MESSAGE:
        kind = "wpp"
    elif flags & _EVENT_HEADER_FLAG_STRING_ONLY:
        kind = "string"
    elif metadata is None:
        # An item past its record leaves the event unknown: reported as an undecodable one.
        kind = "manifest" if error is None else "tracelogging"
    else:
        kind = "tracelogging"
        user_data = data[at:end]
        if error is None:
            try:
                decoded = _decode_tracelogging(
                    metadata, user_data, traits, related, desc, channel, activity, provider, pointer_size
                )
            except ValueError as exc:
                error = str(exc)
            except Exception as exc:  # a decoder bug on a crafted event: reported, never raised
                error = f"cannot decode: {exc!r}"
        if decoded is None:
            raw = metadata + user_data
    if kind != "tracelogging":
        error = None
    return _event(
        reading,
        where,
        kind,
        provider,
        stamp,
        cpu,
        pid,
        tid,
        level,
        keyword,
        opcode,
        event_id,
        pointer_size,
        decoded,
        error,
        raw,
    )


def _decode_tracelogging(
    metadata: bytes,
    user_data: bytes,
    traits: bytes | None,
    related: bytes | None,
    desc: bytes,
    channel: int,
    activity: bytes,
    provider_id: uuid.UUID,
    pointer_size: int,
) -> DecodedEvent:
    if len(metadata) >= 2 and _U16.unpack_from(metadata, 0)[0] < len(metadata):
        metadata = metadata[: _U16.unpack_from(metadata, 0)[0]]  # the item may be padded
    name = decode_traits(traits)[0] if traits else str(provider_id)
    if related is not None and len(related) != 16:
        raise ValueError(f"related activity id of {len(related)} bytes (not 16)")
    activity_id = uuid.UUID(bytes_le=activity) if activity != _NO_ID else None
    related_id = uuid.UUID(bytes_le=related) if related is not None else None
    if channel == _CHANNEL_TRACELOGGING:
        return decode(
            metadata,
            user_data,
            provider=name,
            descriptor=desc,
            activity_id=activity_id,
            related_id=related_id,
            pointer_size=pointer_size,
        )
    # TraceLogging events may name another channel: the schema item, not the channel, makes them.
    event_id, version, _channel, level, opcode, _task, keyword = EVENT_DESCRIPTOR.unpack(desc)
    event = decode(
        metadata,
        user_data,
        provider=name,
        level=level,
        keyword=keyword,
        opcode=opcode,
        activity_id=activity_id,
        related_id=related_id,
        pointer_size=pointer_size,
    )
    return dataclasses.replace(event, id=event_id, version=version)
