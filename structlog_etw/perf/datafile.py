"""perf.data reader: the samples of a ``perf record`` file, with their tracepoint names and raw data.

Pure Python.  Reads the file header (``PERFILE2``, either byte order), the
attrs and their sample ids, the feature sections (HEADER_TRACING_DATA: the
tracefs ``format`` of every recorded tracepoint; HEADER_EVENT_DESC: the event
names; HEADER_CLOCK_DATA: the wall-clock offset), then the data section's
records.  Pipe-mode files (``perf record -o -``) carry the same information in
records and are read too, from a file or live from a pipe.

The input is read with ``pread`` (a file) or ``read`` (a pipe), a window at a time: never
mapped, so a file that shrinks while it is read is a reported truncation, not a SIGBUS, and a
pipe is decoded as perf writes it.  Damaged or truncated files never raise from iteration: what
can be read is returned, and every problem is appended to :attr:`PerfDataFile.problems`.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import os
import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from typing import Any, Final

from .abi import (
    ATTR_SIZE_VER0,
    FEATURE_NAMES,
    RECORD_HEADER_SIZE,
    RECORD_NAMES,
    AttrFlag,
    EventType,
    Feature,
    RecordType,
    record_name,
)
from .records import parse_lost, parse_lost_samples, parse_sample, record_header, sample_id_offset
from .tracefs_format import TracepointFormat, parse_format

__all__ = ["REORDER_WINDOW_BYTES", "PerfDataError", "PerfDataFile", "Sample", "read_samples"]

#: The attr flag saying that non-sample records carry the sample id fields too.
_SAMPLE_ID_ALL: Final = int(AttrFlag.SAMPLE_ID_ALL)
_TRACEPOINT: Final = int(EventType.TRACEPOINT)
#: The record types the reader acts on, as plain ints: compared once per record (see abi.py).
_R_SAMPLE: Final = int(RecordType.SAMPLE)
_R_FINISHED_ROUND: Final = int(RecordType.FINISHED_ROUND)
_R_LOST: Final = int(RecordType.LOST)
_R_LOST_SAMPLES: Final = int(RecordType.LOST_SAMPLES)
_R_HEADER_ATTR: Final = int(RecordType.HEADER_ATTR)
_R_HEADER_TRACING_DATA: Final = int(RecordType.HEADER_TRACING_DATA)
_R_HEADER_FEATURE: Final = int(RecordType.HEADER_FEATURE)
_R_AUXTRACE: Final = int(RecordType.AUXTRACE)
_R_COMPRESSED: Final = int(RecordType.COMPRESSED)
_R_COMPRESSED2: Final = int(RecordType.COMPRESSED2)

#: Bytes read at a time (a ``pread`` of a file, at most this much per ``read`` of a pipe).
_CHUNK: Final = 1 << 20
#: Bytes asked of one read of a pipe (its buffer: a larger request only makes a larger buffer to shrink).
_PIPE_CHUNK: Final = 1 << 16
#: How much :meth:`PerfDataFile.samples_by_time` holds back to put samples in time order: about
#: this many bytes of samples (each counted as its data twice plus the objects around it).  perf
#: flushes its buffers in rounds and the reorder needs two of them; a file without
#: FINISHED_ROUND records, or with rounds larger than this, is ordered within this window and
#: what comes out older than an event already written is written at once and counted as late.
REORDER_WINDOW_BYTES: Final = 32 << 20
#: Samples handed on together when they are read the long way (a batch read in the buffer ends
#: after :data:`_BATCH_BYTES` of records); from a pipe, what was read is handed on before every
#: read that may wait.
_BATCH: Final = 512
#: What one held sample costs besides its bytes (the Sample, its ints, the heap entry).
_HELD_OVERHEAD: Final = 400

#: Names of the non-tracepoint event types (``perf_event_attr.type``).
_TYPE_NAMES: Final = {0: "hardware", 1: "software", 3: "hw-cache", 4: "raw", 5: "breakpoint"}


#: How the samples of a sample_type are read in one unpack (:func:`_sample_plan`, one per
#: sample_type and byte order, shared by the attrs that have it): the unpack of the fixed fields
#: and the raw data's size, their size (where the raw data starts in the body), the indexes of id,
#: pid (tid next), time and cpu in the unpacked values (-1: not sampled), where the body holds the
#: id (None: nowhere), and when pid, time and cpu are all sampled the unpack of the whole record
#: (type, size, then the same values: :meth:`PerfDataFile._batches` reads such samples in the
#: file's buffer, without a body, see ``fused`` there; else None).  ``()``: a layout read by
#: :func:`parse_sample`.
_Unpack = Callable[[bytes, int], tuple[int, ...]]
_SamplePlan = tuple[_Unpack, int, int, int, int, int, "int | None", "_Unpack | None"] | tuple[()]

#: PERF_SAMPLE_* bits of the fixed u64 words before READ, in the kernel's order.
_FIXED_BITS: Final = (0x10000, 0x1, 0x2, 0x4, 0x8, 0x40, 0x200, 0x80, 0x100)
_READ_OR_CALLCHAIN: Final = 0x10 | 0x20
_RAW: Final = 0x400


@functools.lru_cache(maxsize=64)
def _sample_plan(sample_type: int, order: str) -> _SamplePlan:
    """How to read a sample of ``sample_type`` in one unpack: the common tracepoint layouts (no
    READ, no CALLCHAIN, RAW); ``()`` for the others (:func:`parse_sample` reads them).  Only the
    values a :class:`Sample` holds are unpacked (the id, pid and tid, time, cpu, the raw data's
    size); the other fields are skipped."""
    if sample_type & _READ_OR_CALLCHAIN or not sample_type & _RAW:
        return ()
    id_bit = 0x10000 if sample_type & 0x10000 else 0x40  # IDENTIFIER, else ID
    codes = ""
    index: dict[int, int] = {}
    n = 0
    for bit in _FIXED_BITS:
        if not sample_type & bit:
            continue
        if bit == 0x2:  # TID: pid, tid
            codes += "II"
            index[bit] = n
            n += 2
        elif bit == 0x80:  # CPU: cpu, reserved
            codes += "I4x"
            index[bit] = n
            n += 1
        elif bit in (id_bit, 0x4):  # the sample id, TIME
            codes += "Q"
            index[bit] = n
            n += 1
        else:
            codes += "8x"
    fixed = struct.Struct(order + codes + "I")
    ident = index.get(id_bit, -1)
    pid, time, cpu = index.get(0x2, -1), index.get(0x4, -1), index.get(0x80, -1)
    whole = struct.Struct(order + "IxxH" + codes + "I").unpack_from if min(pid, time, cpu) >= 0 else None
    return fixed.unpack_from, fixed.size, ident, pid, time, cpu, sample_id_offset(sample_type), whole


#: How the samples of one sample id are read (:meth:`PerfDataFile._fast_plan`): the attr's
#: :data:`_SamplePlan`, then its name, format, where the payload starts in the raw data, the
#: clock offset and whether it is a tracepoint.
_Fast = tuple[_SamplePlan, str, "TracepointFormat | None", int, "int | None", bool]
#: Greater than any file offset: ``(t, _AFTER_ALL)`` sorts after every held sample of time t.
_AFTER_ALL: Final = float("inf")
#: The time, the sample and the raw size of a held ``(time, file offset, sample, raw size)``.
_TIME: Final = itemgetter(0)
_SAMPLE: Final = itemgetter(2)
_SIZE: Final = itemgetter(3)
#: Bytes of records the reader frames before it hands on the samples among them.
_BATCH_BYTES: Final = 64 << 10


class PerfDataError(ValueError):
    """The file is not a perf.data file at all (bad magic, header too short)."""


class _Attr:
    """One ``perf_event_attr`` of the file, its ids, name and format (plain classes here, no
    dataclasses: the reader is imported at every start of ``structlog-etw decode``)."""

    __slots__ = (
        "config",
        "format",
        "id_at",
        "ids",
        "name",
        "plan",
        "read_format",
        "sample_id_all",
        "sample_type",
        "type",
    )

    def __init__(
        self, type: int, config: int, sample_type: int, read_format: int, sample_id_all: bool, ids: list[int]
    ) -> None:
        self.type = type
        self.config = config
        self.sample_type = sample_type
        self.read_format = read_format
        self.sample_id_all = sample_id_all
        self.ids = ids
        self.name = ""
        self.format: TracepointFormat | None = None
        #: Where its samples hold their event id (None: they do not).
        self.id_at: int | None = sample_id_offset(sample_type)
        #: How its samples are read (:func:`_sample_plan`; None: not decided yet).
        self.plan: _SamplePlan | None = None

    @property
    def label(self) -> str:
        """The event's name for a report (perf's event name, else its type and config)."""
        if self.name:
            return self.name
        kind = _TYPE_NAMES.get(self.type, f"type {self.type}")
        return f"{kind} event (config 0x{self.config:x})"


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


class _Feature:
    """Where a feature section is in the file."""

    __slots__ = ("offset", "size")

    def __init__(self, offset: int, size: int) -> None:
        self.offset = offset
        self.size = size


class _Source:
    """The input's bytes by offset.  ``read`` returns up to ``most`` bytes at ``pos``, at least
    ``least`` unless the input ends first (a short result: the end)."""

    #: The input's size when it was opened (None: a pipe).
    size: int | None = None

    def read(self, pos: int, least: int, most: int) -> bytes:
        raise NotImplementedError

    def shrunk(self, pos: int) -> int | None:
        """The input's current size when it ended at ``pos`` before :attr:`size` (it shrank), else None."""
        return None

    def close(self) -> None:
        """Release the file (idempotent)."""


class _BytesSource(_Source):
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def read(self, pos: int, least: int, most: int) -> bytes:
        return self.data[pos : pos + most]

    def close(self) -> None:
        self.data = b""


class _FileSource(_Source):
    """A regular file, read with ``pread``: what it holds now, whatever it held when opened."""

    def __init__(self, fd: int, size: int, owned: bool) -> None:
        self.fd = fd
        self.size = size
        self.owned = owned

    def read(self, pos: int, least: int, most: int) -> bytes:
        if self.fd < 0:
            return b""
        if most > _CHUNK:  # never a buffer larger than what the file holds
            most = max(0, min(most, os.fstat(self.fd).st_size - pos))
        data = os.pread(self.fd, most, pos)
        while len(data) < least:
            more = os.pread(self.fd, min(most - len(data), _CHUNK), pos + len(data))
            if not more:
                break
            data += more
        return data

    def shrunk(self, pos: int) -> int | None:
        if self.fd < 0 or self.size is None or pos >= self.size:
            return None
        try:
            now = os.fstat(self.fd).st_size
        except OSError:
            return None
        return now if now < self.size else None

    def close(self) -> None:
        if self.fd >= 0 and self.owned:
            os.close(self.fd)
        self.fd = -1


class _StreamSource(_Source):
    """A pipe, read forward as its writer writes it; ``wait`` runs before every read that may block."""

    def __init__(self, fd: int, owned: bool, head: bytes = b"") -> None:
        self.fd = fd
        self.owned = owned
        self.head = head  # bytes already read (the file header)
        self.pos = 0  # offset of the next byte os.read returns (after head)
        self.wait: Callable[[], None] | None = None

    def _os_read(self, n: int) -> bytes:
        if self.fd < 0:
            return b""
        if self.wait is not None:
            self.wait()
        data = os.read(self.fd, min(n, _PIPE_CHUNK))
        self.pos += len(data)
        return data

    def read(self, pos: int, least: int, most: int) -> bytes:
        parts: list[bytes] = []
        head = self.head
        if head:
            if pos + least <= len(head):
                return head[pos : pos + most]
            if pos < len(head):
                parts.append(head[pos:])
                pos = len(head)
            self.pos, self.head = len(head), b""
        while self.pos < pos:  # skip forward (AUXTRACE data, padding)
            if not self._os_read(min(pos - self.pos, _CHUNK)):
                return b""
        got = sum(map(len, parts))
        while True:
            data = self._os_read(max(most - got, 1))
            if not data:
                break
            parts.append(data)
            got += len(data)
            if got >= least:
                break
        return b"".join(parts)

    def close(self) -> None:
        if self.fd >= 0 and self.owned:
            os.close(self.fd)
        self.fd = -1


class _Cursor:
    """Where the records of the data section are read: ``buf`` holds the input from offset ``base``
    on, the next record starts at ``buf[i]``; ``skip`` bytes (of a record of type ``typ``) are
    still to be stepped over (see :meth:`PerfDataFile._advance`)."""

    __slots__ = ("base", "buf", "i", "skip", "typ")

    def __init__(self, base: int) -> None:
        self.buf = b""
        self.base = base
        self.i = 0
        self.skip = 0
        self.typ = 0


class PerfDataFile:
    """A parsed perf.data file (see the module docstring).

    Build with :meth:`open` (a path: read with ``pread``, a FIFO or ``-`` as a stream),
    :meth:`from_fd` (an open file or pipe, e.g. stdin) or :meth:`from_bytes`; iterate
    :meth:`samples` or :meth:`samples_by_time`; :meth:`close` (or ``with``) releases the file.
    While a pipe is read, :attr:`on_wait` (when set) runs before every read that may block:
    a consumer flushes its output there, so that what was decoded is shown while perf
    records on.
    """

    def __init__(self, path: str = "") -> None:
        self.path = path
        self.order = "<"
        self.pipe = False
        self.attrs: list[_Attr] = []
        self.formats: dict[int, TracepointFormat] = {}
        #: What is wrong with the input (a record past its section, a truncation, ...), in order.
        self.problems: list[str] = []
        #: How many records of each kind were read, by record type name.
        self.record_counts: dict[str, int] = {}
        #: Samples the kernel reported lost (PERF_RECORD_LOST and LOST_SAMPLES), summed.
        self.lost = 0
        #: Samples :meth:`samples_by_time` could not put in time order (older than one already out).
        self.late = 0
        self.clock_offset_ns: int | None = None
        self.clockid: int | None = None
        self.data_offset = 0
        #: Where the data section ends (None: at the end of the input, pipe mode).
        self.data_end: int | None = 0
        #: Runs before every read of a pipe that may block (see the class docstring).
        self.on_wait: Callable[[], None] | None = None
        self._source: _Source = _BytesSource(b"")
        self._by_id: dict[int, _Attr] = {}
        #: Tracepoint attrs still waiting for their format, by tracepoint id: each resolved once.
        self._pending: dict[int, list[_Attr]] = {}
        self._long64 = True
        #: The file ends before its data section does (reported once, at the header).
        self._cut = False

    def __repr__(self) -> str:
        shown = (
            f"path={self.path!r}, pipe={self.pipe}, attrs={len(self.attrs)}, problems={len(self.problems)}"
        )
        return f"PerfDataFile({shown})"

    # --- construction ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> PerfDataFile:
        """Open and parse the file at ``path``. Raises OSError, or :class:`PerfDataError` if it is not one."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            return cls.from_fd(fd, str(path), owned=True)
        except PerfDataError:
            raise  # from_fd closed it
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def from_fd(cls, fd: int, path: str = "", *, owned: bool = False) -> PerfDataFile:
        """Parse the perf.data file or pipe open as ``fd`` (``owned``: :meth:`close` closes it).

        A regular file is read with ``pread``; anything else (a pipe, ``perf record -o - |``) as a
        stream: pipe-mode data is decoded as it arrives, a file-mode image is read whole first
        (its tracepoint formats come after its data).  Raises OSError, or :class:`PerfDataError`.
        """
        st = os.fstat(fd)
        source: _Source
        if stat.S_ISREG(st.st_mode):
            source = _FileSource(fd, st.st_size, owned)
        else:
            head = b""
            while len(head) < 16:
                more = os.read(fd, 16 - len(head))
                if not more:
                    break
                head += more
            if len(head) == 16 and head[:8] in (b"PERFILE2", b"2ELIFREP"):
                order = "<" if head[:8] == b"PERFILE2" else ">"
                if struct.unpack_from(order + "Q", head, 8)[0] != 16:  # a file-mode image: all of it
                    chunks = [head]
                    while chunk := os.read(fd, _CHUNK):
                        chunks.append(chunk)
                    if owned:
                        os.close(fd)
                    source = _BytesSource(b"".join(chunks))
                else:
                    source = _StreamSource(fd, owned, head)
            else:
                source = _BytesSource(head)
        self = cls(path)
        self._source = source
        try:
            self._parse_header()
        except PerfDataError:
            self.close()
            raise
        return self

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "") -> PerfDataFile:
        """Parse a perf.data image held in memory. Raises :class:`PerfDataError` if it is not one."""
        self = cls(path)
        self._source = _BytesSource(bytes(data))
        self._parse_header()
        return self

    def close(self) -> None:
        """Release the file (samples already returned stay valid)."""
        self._source.close()

    def __enter__(self) -> PerfDataFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, pos: int, n: int) -> bytes:
        """``n`` bytes at ``pos`` (fewer when the input ends first)."""
        return self._source.read(pos, n, n)

    def _parse_header(self) -> None:
        head = self._read(0, 16)  # a pipe gives no more than that before its records
        name = self.path or "input"
        if len(head) < 16:
            raise PerfDataError(f"{name}: too short for a perf.data header ({len(head)} bytes)")
        magic = head[:8]
        if magic == b"PERFILE2":
            self.order = "<"
        elif magic == b"2ELIFREP":
            self.order = ">"
        else:
            raise PerfDataError(f"{name}: not a perf.data file (magic {magic!r})")
        o = self.order
        (header_size,) = struct.unpack_from(o + "Q", head, 8)
        if header_size == 16:  # pipe mode: everything is in records
            self.pipe = True
            self.data_offset = 16
            self.data_end = None
            return
        head = self._read(0, 104)
        if len(head) < 104 or header_size < 104:
            raise PerfDataError(f"{name}: perf.data header truncated")
        size = self._source.size or 0
        attr_size, attrs_off, attrs_size, data_off, data_size = struct.unpack_from(o + "5Q", head, 16)
        words = struct.unpack_from(o + "4Q", head, 72)  # the feature bitmap: u64 words in file order
        features = sum(w << (64 * i) for i, w in enumerate(words))
        self.data_offset = data_off
        self.data_end = data_off + data_size
        if self.data_end > size:
            self.problems.append(
                f"file truncated: data section ends at {self.data_end}, file has {size} bytes"
                f" ({self.data_end - size} bytes missing)"
            )
            self.data_end = max(size, data_off)
            self._cut = True
        feats = self._feature_sections(features, data_off + data_size, size)
        # Tracing data first: attrs refer to formats by id.
        tracing = feats.get(Feature.TRACING_DATA)
        if tracing is not None:
            self._parse_tracing_data(self._read(tracing.offset, tracing.size))
        elif features >> Feature.TRACING_DATA & 1:
            self.problems.append("tracing data (tracepoint formats) missing: file truncated or damaged")
        self._parse_attrs(attrs_off, attrs_size, attr_size, size)
        desc = feats.get(Feature.EVENT_DESC)
        if desc is not None:
            self._parse_event_desc(self._read(desc.offset, desc.size))
        clock = feats.get(Feature.CLOCK_DATA)
        if clock is not None:
            self._parse_clock_data(self._read(clock.offset, clock.size))

    def _feature_sections(self, features: int, table: int, size: int) -> dict[int, _Feature]:
        out: dict[int, _Feature] = {}
        n = bin(features).count("1")
        entries = self._read(table, 16 * n) if table < size else b""
        pos = 0
        for bit in range(256):
            if not features >> bit & 1:
                continue
            if pos + 16 > len(entries):
                self.problems.append("feature section table truncated: file cut after the data section")
                break
            off, fsize = struct.unpack_from(self.order + "QQ", entries, pos)
            pos += 16
            if off + fsize > size:
                feature = FEATURE_NAMES.get(bit, str(bit))
                self.problems.append(
                    f"feature section {feature} truncated (needs {off + fsize} bytes, file has {size})"
                )
                continue
            out[bit] = _Feature(off, fsize)
        return out

    def _parse_attrs(self, off: int, size: int, entry: int, file_size: int) -> None:
        # Each entry is a perf_event_attr followed by a (offset, size) section of its ids;
        # the header's attr_size is the size of the whole entry.
        attr_size = entry - 16
        if attr_size < ATTR_SIZE_VER0:
            self.problems.append(f"bad attr entry size {entry}")
            return
        if off + size > file_size:
            self.problems.append("attrs section truncated")
        table = self._read(off, max(0, min(off + size, file_size) - off)) if off < file_size else b""
        o = self.order
        # perf writes one id section per attr, side by side: together they fit in the file.  A
        # crafted file can point every attr at the same (large) section; each id is read once
        # against a budget of the file's size, so the work stays linear in the file's size.
        budget = file_size // 8
        seen: set[tuple[int, int]] = set()
        shared = overlapping = 0
        pos = 0
        while pos + entry <= len(table):
            ids_off, ids_size = struct.unpack_from(o + "QQ", table, pos + attr_size)
            ids: list[int] = []
            if ids_off + ids_size > file_size:
                self.problems.append("attr id section truncated")
            elif ids_size and (ids_off, ids_size) in seen:
                shared += 1  # its samples cannot be told from the first one's: no ids
            elif ids_size // 8 > budget:
                overlapping += 1
            else:
                n = ids_size // 8
                budget -= n
                raw_ids = self._read(ids_off, 8 * n)
                n = len(raw_ids) // 8
                ids = list(struct.unpack_from(f"{o}{n}Q", raw_ids, 0))
                seen.add((ids_off, ids_size))
            self._add_attr(table[pos : pos + attr_size], ids)
            pos += entry
        if shared:
            self.problems.append(f"{shared} attrs share an id section with another attr (ids ignored)")
        if overlapping:
            self.problems.append(f"{overlapping} attrs have id sections overlapping others (ids ignored)")

    def _add_attr(self, raw: bytes, ids: list[int]) -> None:
        typ, _size, config, _period, sample_type, read_format, flags = struct.unpack_from(
            self.order + "IIQQQQQ", raw, 0
        )
        attr = _Attr(typ, config, sample_type, read_format, bool(flags & _SAMPLE_ID_ALL), ids)
        if typ == _TRACEPOINT:
            tp_id = config & 0xFFFFFFFF
            attr.format = self.formats.get(tp_id)
            if attr.format is not None:
                attr.name = attr.format.full_name
            else:  # its format may come later (pipe mode): resolved when it does, once
                self._pending.setdefault(tp_id, []).append(attr)
        self.attrs.append(attr)
        for i in ids:
            self._by_id[i] = attr

    def _parse_tracing_data(self, data: bytes) -> None:
        try:
            self._parse_tracing_data_unchecked(data)
        except (struct.error, IndexError, ValueError) as exc:
            self.problems.append(f"tracing data damaged: {exc}")

    def _add_format(self, fmt: TracepointFormat) -> None:
        if fmt.id in self.formats:
            return
        self.formats[fmt.id] = fmt
        for attr in self._pending.pop(fmt.id, ()):
            attr.format = fmt
            if not attr.name:
                attr.name = fmt.full_name

    def _parse_tracing_data_unchecked(self, data: bytes) -> None:
        sig = b"\x17\x08\x44tracing"
        if not data.startswith(sig):
            self.problems.append("tracing data has no tracing signature")
            return
        pos = len(sig)
        nul = data.index(b"\0", pos)
        pos = nul + 1
        order = ">" if data[pos] else "<"
        long_size = data[pos + 1]
        self._long64 = long_size != 4
        pos += 2 + 4  # endian, long size, page size

        def section64(expect: bytes | None = None) -> bytes:
            nonlocal pos
            if expect is not None:
                if data[pos : pos + len(expect)] != expect:
                    raise ValueError(f"expected {expect!r} at {pos}")
                pos += len(expect)
            (n,) = struct.unpack_from(order + "Q", data, pos)
            pos += 8
            if pos + n > len(data):
                raise ValueError("section runs past the end of the tracing data")
            out = data[pos : pos + n]
            pos += n
            return out

        section64(b"header_page\0")
        section64(b"header_event\0")
        (n_ftrace,) = struct.unpack_from(order + "I", data, pos)
        pos += 4
        for _ in range(n_ftrace):
            section64()
        (n_systems,) = struct.unpack_from(order + "I", data, pos)
        pos += 4
        for _ in range(n_systems):
            nul = data.index(b"\0", pos)
            system = data[pos:nul].decode("utf-8", "replace")
            pos = nul + 1
            (n_events,) = struct.unpack_from(order + "I", data, pos)
            pos += 4
            for _ in range(n_events):
                text = section64().decode("utf-8", "replace")
                fmt = parse_format(system, text, self._long64)
                if fmt is not None:
                    self._add_format(fmt)

    def _parse_event_desc(self, data: bytes) -> None:
        try:
            n, attr_size = struct.unpack_from(self.order + "II", data, 0)
            pos = 8
            for _ in range(n):
                pos += attr_size
                (nr_ids,) = struct.unpack_from(self.order + "I", data, pos)
                pos += 4
                (slen,) = struct.unpack_from(self.order + "I", data, pos)
                pos += 4
                name = data[pos : pos + slen].split(b"\0", 1)[0].decode("utf-8", "replace")
                pos += slen
                ids = struct.unpack_from(f"{self.order}{nr_ids}Q", data, pos)
                pos += 8 * nr_ids
                for i in ids:
                    attr = self._by_id.get(i)
                    if attr is not None and name:
                        attr.name = name
        except struct.error as exc:
            self.problems.append(f"event descriptions damaged: {exc}")

    def _parse_clock_data(self, data: bytes) -> None:
        if len(data) < 24:
            return
        version, clockid, wall_ns, clock_ns = struct.unpack_from(self.order + "IIQQ", data, 0)
        if version >= 1 and clockid != 0xFFFFFFFF:
            self.clockid = clockid
            self.clock_offset_ns = wall_ns - clock_ns

    # --- records --------------------------------------------------------------------------------

    def _attr_for(self, body: bytes) -> tuple[_Attr | None, int | None]:
        if not self.attrs:
            return None, None
        first = self.attrs[0]
        at = first.id_at
        if at is None:
            return (first if len(self.attrs) == 1 else None), None
        if len(body) < at + 8:
            return None, None
        (sid,) = struct.unpack_from(self.order + "Q", body, at)
        attr = self._by_id.get(sid)
        if attr is None and len(self.attrs) == 1:
            attr = first
        return attr, sid

    def _sample(self, body: bytes, offset: int, round_no: int) -> Sample | str:
        attr, sid = self._attr_for(body)
        if attr is None:
            return f"sample at offset {offset}: no attr for sample id {sid}"
        plan = attr.plan
        if plan is None:
            plan = attr.plan = _sample_plan(attr.sample_type, self.order)
        fmt = attr.format
        if plan:  # the fixed fields and the raw data's size in one unpack
            unpack, raw_at, i_id, i_pid, i_time, i_cpu, _id_at, _full = plan
            try:
                values = unpack(body, 0)
            except struct.error:
                return f"sample at offset {offset}: record too short for its sample_type"
            end = raw_at + values[-1]
            if end > len(body):
                return f"sample at offset {offset}: raw data runs past the record"
            raw = body[raw_at:end]
            time = values[i_time] if i_time >= 0 else None
            pid = values[i_pid] if i_pid >= 0 else None
            tid = values[i_pid + 1] if i_pid >= 0 else None
            cpu = values[i_cpu] if i_cpu >= 0 else None
            sid = values[i_id] if i_id >= 0 else None
        else:
            try:
                f = parse_sample(body, attr.sample_type, attr.read_format, self.order)
            except ValueError as exc:
                return f"sample at offset {offset}: {exc}"
            raw, time, pid, tid, cpu, sid = f.raw, f.time, f.pid, f.tid, f.cpu, f.id
        data = raw[fmt.payload_offset :] if fmt is not None else raw
        real = time + self.clock_offset_ns if time is not None and self.clock_offset_ns is not None else None
        tracepoint = attr.type == _TRACEPOINT
        name = attr.name if tracepoint else attr.label
        return Sample(name, time, cpu, pid, tid, raw, data, fmt, offset, real, sid, round_no, tracepoint)

    def _count(self, typ: int) -> None:
        key = RECORD_NAMES.get(typ) or record_name(typ)  # the lookup inline: once per record
        self.record_counts[key] = self.record_counts.get(key, 0) + 1

    def _overrun(self, pos: int, typ: int, size: int, left: int) -> None:
        """Report a record at ``pos`` of ``size`` bytes (with the data it announces) that does not fit."""
        name = RECORD_NAMES.get(typ) or record_name(typ)
        end = self.data_end
        shrunk = self._source.shrunk(pos + left)
        if shrunk is not None:
            self.problems.append(
                f"truncated at offset {pos + left}: the file shrank to {shrunk} bytes while being read"
                f" (record {name} at offset {pos} needs {size} bytes)"
            )
        elif end is None or self._cut:
            self.problems.append(
                f"truncated at offset {pos + left}: record {name} at offset {pos} needs {size} bytes,"
                f" the input ends after {left}"
            )
        else:
            self.problems.append(
                f"record {name} at offset {pos} runs past the end of the data section"
                f" ({size} bytes, {left} left before offset {end})"
            )

    def records(self) -> Iterator[tuple[int, int, bytes]]:
        """Yield ``(type, file offset, body)`` for every record of the data section, in file order.

        Stops at the first record that cannot be framed (size < 8, or it or the data it
        announces - HEADER_TRACING_DATA, AUXTRACE - runs past the data section or the input)
        and records the reason, with its offset, in :attr:`problems`.
        """
        cur = _Cursor(self.data_offset)
        while (record := self._frame(cur)) is not None:
            yield record
            if not self._advance(cur):
                return

    def _frame(self, cur: _Cursor) -> tuple[int, int, bytes] | None:
        """The record at ``cur`` as ``(type, file offset, body)``, reading on as needed; None at the
        end of the data section, or at a record that cannot be framed (reported in :attr:`problems`).
        What it spans is left in ``cur.skip``, for :meth:`_advance`."""
        source = self._source
        end = self.data_end  # None: the end of the input
        buf, i = cur.buf, cur.i
        pos = cur.base + i
        if end is not None and pos >= end:
            return None

        def refill(need: int) -> bytes:
            """``buf`` from ``pos`` on with at least ``need`` bytes, unless the input ends first."""
            keep = buf[i:]
            at = pos + len(keep)
            most = max(_CHUNK, need) - len(keep)
            if end is not None:
                most = min(most, end - at)
            if most <= 0:
                return keep
            return keep + source.read(at, need - len(keep), most)

        if len(buf) - i < RECORD_HEADER_SIZE:
            buf = refill(RECORD_HEADER_SIZE)
            i = 0
            cur.buf, cur.i, cur.base = buf, 0, pos
            if not buf and end is None:
                shrunk = source.shrunk(pos)
                if shrunk is not None:
                    self.problems.append(
                        f"truncated at offset {pos}: the file shrank to {shrunk} bytes while being read"
                    )
                return None  # the end of a pipe-mode input, between records
            if len(buf) < RECORD_HEADER_SIZE:
                left = len(buf)
                shrunk = source.shrunk(pos + left)
                why = f": the file shrank to {shrunk} bytes while being read" if shrunk is not None else ""
                self.problems.append(f"truncated record header at offset {pos} ({left} bytes left){why}")
                return None
        typ, _misc, size = record_header(self.order).unpack_from(buf, i)
        if size < RECORD_HEADER_SIZE:
            self.problems.append(f"damaged record at offset {pos} (size {size}); the rest is unreadable")
            return None
        extra = 0  # bytes after the record that belong to it
        if typ in (_R_HEADER_TRACING_DATA, _R_AUXTRACE):
            if len(buf) - i < size:
                buf = refill(size)
                i = 0
                cur.buf, cur.i, cur.base = buf, 0, pos
            if len(buf) - i >= size >= RECORD_HEADER_SIZE + (4 if typ == _R_HEADER_TRACING_DATA else 8):
                o = self.order
                if typ == _R_HEADER_TRACING_DATA:
                    extra = struct.unpack_from(o + "I", buf, i + RECORD_HEADER_SIZE)[0]
                else:
                    extra = struct.unpack_from(o + "Q", buf, i + RECORD_HEADER_SIZE)[0]
            if end is not None and pos + size + extra > end:
                self._overrun(pos, typ, size + extra, end - pos)
                return None
        total = size if typ == _R_AUXTRACE else size + extra
        if len(buf) - i < total:
            buf = refill(total)
            i = 0
            cur.buf, cur.i, cur.base = buf, 0, pos
            if len(buf) < total:
                self._overrun(pos, typ, size + extra, len(buf))
                return None
        if extra and typ == _R_HEADER_TRACING_DATA:  # u32 size, then the data
            body = buf[i + RECORD_HEADER_SIZE : i + RECORD_HEADER_SIZE + 4] + buf[i + size : i + total]
            cur.skip = total + (-extra % 8)
        elif typ == _R_AUXTRACE:
            body = buf[i + RECORD_HEADER_SIZE : i + size]
            cur.skip = size + extra
        else:
            body = buf[i + RECORD_HEADER_SIZE : i + size]
            cur.skip = size
        cur.typ = typ
        return typ, pos, body

    def _advance(self, cur: _Cursor) -> bool:
        """Step ``cur`` over the record :meth:`_frame` returned; False: the input ends inside it
        (an AUXTRACE record's data, reported in :attr:`problems`)."""
        skip, cur.skip = cur.skip, 0
        buf, i = cur.buf, cur.i
        if len(buf) - i >= skip:
            cur.i = i + skip
            return True
        pos = cur.base + i
        jump = pos + skip  # past the window (AUXTRACE data, padding): drop it, read on from there
        source = self._source
        if cur.typ == _R_AUXTRACE and self.data_end is None and not source.read(jump - 1, 1, 1):
            left = source.size - pos if source.size is not None else len(buf) - i
            self._overrun(pos, cur.typ, skip, max(left, 0))
            return False
        cur.buf, cur.i, cur.base = b"", 0, jump
        return True

    def samples(self) -> Iterator[Sample]:
        """Yield every sample in file order (see :meth:`samples_by_time` for perf's order).

        Non-sample records are counted in :attr:`record_counts`; lost events
        (PERF_RECORD_LOST / LOST_SAMPLES) are added up in :attr:`lost`.
        Samples that cannot be parsed are reported in :attr:`problems`.
        """
        for batch in self._batches():
            if batch is not None:
                yield from batch[0]

    def _batches(self, keyed: bool = False) -> Iterator[tuple[list[Any], int] | None]:
        """:meth:`samples` in lists, each with the bytes of raw data it holds, and a None at every
        FINISHED_ROUND; ``keyed``: each sample as ``(time or 0, file offset, sample, raw size)``
        (time order's sort key first).  From a pipe, a list is handed on before every read that may wait."""
        self.record_counts.clear()
        self.lost = 0
        source = self._source
        stream = isinstance(source, _StreamSource)
        if isinstance(source, _StreamSource):
            source.wait = self.on_wait
        # The samples of an attr are read with its plan, decided once per sample id (``fast``):
        # the shape of its samples (:data:`_SamplePlan`), its name, format, payload offset and the
        # clock.  Any other record may change attrs, formats, names or the clock: it empties ``fast``.
        fast: dict[int | None, _Fast] = {}
        get = fast.get
        id_at: int | None = None
        u64 = struct.Struct(self.order + "Q").unpack_from
        sample_offset = self._sample
        cur = _Cursor(self.data_offset)
        round_no = 0
        rounds = 0
        counted = 0  # samples framed, but for those in ``batch``
        batch: list[Any] = []
        add = batch.append
        raw_bytes = 0
        # ``fused``: the plan the loop over the buffer reads with (None: every sample the long
        # way).  Its shape holds pid, time and cpu, and its id where the first attr's is: one
        # unpack of the record gives its type, size, sample id and fields, and every sample id
        # whose plan has the same shape is read the same way, without a body.
        fused: _Fast | None = None
        shape: _SamplePlan = ()
        whole: _Unpack = u64
        need = i_id = i_pid = i_time = i_cpu = payload_at = 0
        name, fmt, offset_ns, tp = "", None, None, True
        make = Sample
        new = Sample.__new__
        sample_type = _R_SAMPLE
        try:
            while True:
                if fused is not None:  # the loop over the buffer
                    buf, i, base = cur.buf, cur.i, cur.base
                    n = len(buf)
                    stop = min(n - need, i + _BATCH_BYTES)
                    while i <= stop:
                        values = whole(buf, i)  # type, size, the fixed fields, the raw data's size
                        size = values[1]
                        j = i + size
                        if values[0] != sample_type or j > n or size < need:
                            break
                        if i_id >= 0:
                            key = values[i_id]
                            found = get(key)
                            if found is not fused:
                                if found is None or found[0] is not shape:
                                    break
                                fused = found
                                _, name, fmt, payload_at, offset_ns, tp = found
                        else:  # no sample ids: one attr, one plan
                            key = None
                        start = i + need
                        end = start + values[-1]
                        if end > j:
                            break
                        raw = buf[start:end]
                        t = values[i_time]
                        pos = base + i
                        # Sample(...) field by field: its __init__ is a Python call with 13
                        # arguments, a third of what reading a sample costs (test_datafile
                        # checks that every field is set, and equal to what __init__ sets).
                        sample = new(make)
                        sample.name = name
                        sample.time = t
                        sample.cpu = values[i_cpu]
                        sample.pid = values[i_pid]
                        sample.tid = values[i_pid + 1]
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
                    cur.i = i
                    full = stop < i <= n - need  # stopped by the batch's budget, not by a record
                else:
                    full = False
                if batch and (full or stream or len(batch) >= _BATCH):
                    out, out_bytes, batch, raw_bytes = batch, raw_bytes, [], 0
                    add = batch.append
                    counted += len(out)
                    yield out, out_bytes
                if full:
                    continue
                record = self._frame(cur)
                if record is None:
                    break
                typ, pos, body = record
                if typ == _R_SAMPLE:  # the long way: the first of its sample id, or not fused
                    if not fast:
                        id_at = self.attrs[0].id_at if self.attrs else None
                    k = u64(body, id_at)[0] if id_at is not None and len(body) >= id_at + 8 else None
                    plan = get(k)
                    s = (
                        self._plan_sample(plan, body, pos, round_no)
                        if plan
                        else sample_offset(body, pos, round_no)
                    )
                    if isinstance(s, str):
                        self.problems.append(s)
                        counted += 1
                    else:
                        if plan is None:
                            plan = self._fast_plan(k)
                            if plan is not None:
                                fast[k] = plan
                        got = plan[0] if plan is not None else ()
                        if plan is not None and len(got) == 8 and got[7] is not None and got[6] == id_at:
                            fused, shape, whole = plan, got, got[7]
                            _, name, fmt, payload_at, offset_ns, tp = plan
                            need = RECORD_HEADER_SIZE + got[1]
                            # indexes in the record's values: its type and size come first
                            i_id = got[2] + 2 if got[2] >= 0 else -1
                            i_pid, i_time, i_cpu = got[3] + 2, got[4] + 2, got[5] + 2
                        add((s.time or 0, pos, s, len(s.raw)) if keyed else s)
                        raw_bytes += len(s.raw)
                elif typ == _R_FINISHED_ROUND:
                    rounds += 1
                    round_no += 1
                    if batch:
                        out, out_bytes, batch, raw_bytes = batch, raw_bytes, [], 0
                        add = batch.append
                        counted += len(out)
                        yield out, out_bytes
                    yield None
                else:
                    fast.clear()
                    fused = None
                    self._count(typ)
                    self._other(typ, pos, body)
                if not self._advance(cur):
                    break
            if batch:
                out, batch = batch, []
                counted += len(out)
                yield out, raw_bytes
        finally:
            counted += len(batch)  # framed, not handed on (the consumer stopped)
            for typ, count in ((_R_SAMPLE, counted), (_R_FINISHED_ROUND, rounds)):
                if count:
                    key_name = RECORD_NAMES.get(typ) or record_name(typ)
                    self.record_counts[key_name] = self.record_counts.get(key_name, 0) + count

    def _plan_sample(self, plan: _Fast, body: bytes, pos: int, round_no: int) -> Sample | str:
        """The sample of ``body`` (at file offset ``pos``) read with ``plan``; a str: what is wrong."""
        shape, name, fmt, payload_at, offset_ns, tp = plan
        assert shape
        unpack, raw_at, i_id, i_pid, i_time, i_cpu, _id_at, _full = shape
        try:
            values = unpack(body, 0)
        except struct.error:
            return f"sample at offset {pos}: record too short for its sample_type"
        end = raw_at + values[-1]
        if end > len(body):
            return f"sample at offset {pos}: raw data runs past the record"
        raw = body[raw_at:end]
        time = values[i_time] if i_time >= 0 else None
        return Sample(
            name,
            time,
            values[i_cpu] if i_cpu >= 0 else None,
            values[i_pid] if i_pid >= 0 else None,
            values[i_pid + 1] if i_pid >= 0 else None,
            raw,
            raw[payload_at:],
            fmt,
            pos,
            time + offset_ns if time is not None and offset_ns is not None else None,
            values[i_id] if i_id >= 0 else None,
            round_no,
            tp,
        )

    def _fast_plan(self, key: int | None) -> _Fast | None:
        """How the samples of sample id ``key`` are read from now on (None: the long way)."""
        attr = self._by_id.get(key) if key is not None else None
        if attr is None and len(self.attrs) == 1:
            attr = self.attrs[0]
        if attr is None or not attr.plan:
            return None
        fmt = attr.format
        tracepoint = attr.type == _TRACEPOINT
        return (
            attr.plan,
            attr.name if tracepoint else attr.label,
            fmt,
            fmt.payload_offset if fmt is not None else 0,
            self.clock_offset_ns,
            tracepoint,
        )

    def _other(self, typ: int, pos: int, body: bytes) -> None:
        """A record other than SAMPLE and FINISHED_ROUND: lost counts, attrs, formats, features."""
        o = self.order
        if typ == _R_LOST and len(body) >= 16:
            self.lost += parse_lost(body, o)[1]
        elif typ == _R_LOST_SAMPLES and len(body) >= 8:
            self.lost += parse_lost_samples(body, o)
        elif typ == _R_HEADER_ATTR and len(body) >= ATTR_SIZE_VER0:
            (asize,) = struct.unpack_from(o + "I", body, 4)
            asize = max(asize, ATTR_SIZE_VER0)
            n = max(0, (len(body) - asize) // 8)
            ids = list(struct.unpack_from(f"{o}{n}Q", body, asize)) if n else []
            self._add_attr(body[:asize], ids)
        elif typ == _R_HEADER_TRACING_DATA and len(body) >= 4:
            self._parse_tracing_data(body[4:])
        elif typ == _R_HEADER_FEATURE and len(body) >= 8:
            (bit,) = struct.unpack_from(o + "Q", body, 0)
            if bit == Feature.EVENT_DESC:
                self._parse_event_desc(body[8:])
            elif bit == Feature.CLOCK_DATA:
                self._parse_clock_data(body[8:])
            elif bit == Feature.TRACING_DATA:
                self._parse_tracing_data(body[8:])
        elif typ in (_R_COMPRESSED, _R_COMPRESSED2):
            self.problems.append(f"compressed records (perf record -z) are not supported (offset {pos})")

    def samples_by_time(self, window: int = REORDER_WINDOW_BYTES) -> Iterator[Sample]:
        """Every sample in time order, as ``perf script`` orders them, streaming round by round.

        perf writes each CPU's buffer in turn and a FINISHED_ROUND record after every pass over
        the buffers.  An event read after round *k* ended cannot be older than the newest event
        read before round *k-1* ended, so at each FINISHED_ROUND the samples up to that time are
        released in timestamp order (equal times in file order) and the rest wait for the next
        round; everything left is released at the end.  What is held is bounded by ``window``
        bytes (:data:`REORDER_WINDOW_BYTES`): past it (a file without rounds, or with larger
        rounds) the oldest held samples are released.  A sample older than one already released
        (a file not written by perf's rules, or disorder wider than the window) comes out late,
        right away, and is counted in :attr:`late`.  Samples without a time count as 0.
        """
        # Held samples are (time, file offset, sample, raw size): a list sorted once per round (a
        # sorted list is a heap); only past the window (no rounds) is it kept a heap sample by sample.
        # Unless it is a heap, the list is what was left sorted by the last round, then samples in
        # file order (offsets past all those held): a stable sort by time alone puts it in
        # (time, offset) order, comparing ints instead of tuples.
        self.late = 0
        held_list: list[tuple[int, int, Sample, int]] = []
        is_heap = False
        push, pop = heapq.heappush, heapq.heappop
        held = 0
        horizon: int | None = None  # newest time seen when the previous round ended
        newest = -1  # newest time seen (of the samples held whole in batches: when a round ends)
        released: int | None = None  # newest time released so far
        for batch in self._batches(keyed=True):
            if batch is None:  # a round ended: what is older than the previous round's end goes out
                if held_list:
                    if is_heap:
                        held_list.sort()
                        is_heap = False  # sorted: a heap until the next append
                    else:  # sorted leftovers, then file order: sorted by time alone (see below)
                        held_list.sort(key=_TIME)
                    newest = max(newest, held_list[-1][0])  # once a round
                    k = bisect.bisect_right(held_list, (horizon, _AFTER_ALL)) if horizon is not None else 0
                    if k:
                        released = held_list[k - 1][0]
                        held -= sum(map(_SIZE, islice(held_list, k))) * 2 + _HELD_OVERHEAD * k
                        yield from map(_SAMPLE, islice(held_list, k))
                        del held_list[:k]
                if newest >= 0:
                    horizon = newest
                continue
            items, raw_bytes = batch
            cost = raw_bytes * 2 + _HELD_OVERHEAD * len(items)
            if not is_heap and held + cost <= window and (released is None or min(items)[0] >= released):
                # the whole batch is held (none late, the window not reached): as sample by sample
                held_list += items
                held += cost
                continue
            for item in items:
                t, _, s, size = item
                if released is not None and t < released:
                    self.late += 1
                    yield s
                    continue
                if is_heap:
                    push(held_list, item)
                else:
                    held_list.append(item)
                held += size * 2 + _HELD_OVERHEAD
                if t > newest:  # noqa: PLR1730 - a comparison, not a call, per sample
                    newest = t
                if held > window:
                    if not is_heap:
                        heapq.heapify(held_list)
                        is_heap = True
                    while held > window and held_list:
                        t_out, _, out_s, out_size = pop(held_list)
                        held -= out_size * 2 + _HELD_OVERHEAD
                        released = t_out
                        if t_out > newest:  # noqa: PLR1730 - it may have come in a batch
                            newest = t_out
                        yield out_s
        held_list.sort(key=None if is_heap else _TIME)
        yield from map(_SAMPLE, held_list)

    def samples_in_time_order(self) -> list[Sample]:
        """All samples in time order (:meth:`samples_by_time`), as a list."""
        return list(self.samples_by_time())


def read_samples(path: str | os.PathLike[str]) -> Iterator[Sample]:
    """Every sample of the perf.data file at ``path``, in file order.

    A convenience over :class:`PerfDataFile` for callers that do not need its reports
    (problems, record counts, lost events).  Raises OSError / :class:`PerfDataError` when
    the file cannot be opened or is not a perf.data file.
    """
    with PerfDataFile.open(path) as f:
        yield from f.samples()
