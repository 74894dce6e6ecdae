"""perf.data reader: the samples of a ``perf record`` file, with their tracepoint names and raw data.

Pure Python.  Reads the file header (``PERFILE2``, either byte order), the
attrs and their sample ids, the feature sections (HEADER_TRACING_DATA: the
tracefs ``format`` of every recorded tracepoint; HEADER_EVENT_DESC: the event
names; HEADER_CLOCK_DATA: the wall-clock offset), then the data section's
records.  Pipe-mode files (``perf record -o -``) carry the same information in
records and are read too.

Damaged or truncated files never raise from iteration: what can be read is
returned, and every problem is appended to :attr:`PerfDataFile.problems`.
"""

from __future__ import annotations

import heapq
import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

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

__all__ = ["PerfDataError", "PerfDataFile", "Sample", "read_samples"]

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


class PerfDataError(ValueError):
    """The file is not a perf.data file at all (bad magic, header too short)."""


@dataclass
class _Attr:
    type: int
    config: int
    sample_type: int
    read_format: int
    sample_id_all: bool
    ids: list[int]
    name: str = ""
    format: TracepointFormat | None = None
    #: Where its samples hold their event id (None: they do not).
    id_at: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.id_at = sample_id_offset(self.sample_type)


@dataclass(slots=True)
class Sample:
    """One PERF_RECORD_SAMPLE.

    ``name`` is ``system:event`` (e.g. ``user_events:MyProvider_L4K1``, ``""``
    when the file does not say); ``raw`` is the whole PERF_SAMPLE_RAW data
    (common fields first), ``data`` the bytes after the common fields (for an
    EventHeader tracepoint: the EventHeader event).  ``time`` is perf's
    timestamp in ns (``-k monotonic``: CLOCK_MONOTONIC), ``realtime_ns`` the
    wall-clock time when the file records the clock offset.
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

    @property
    def is_eventheader(self) -> bool:
        """True when the tracepoint's format says this is an EventHeader event."""
        return self.format is not None and self.format.is_eventheader


@dataclass
class _Feature:
    offset: int
    size: int


@dataclass
class PerfDataFile:
    """A parsed perf.data file (see the module docstring).

    Build with :meth:`open` (the file is memory-mapped, not read into memory) or
    :meth:`from_bytes`; iterate :meth:`samples`; :meth:`close` (or ``with``) releases the map.
    """

    buf: bytes | mmap.mmap
    path: str = ""
    order: str = "<"
    pipe: bool = False
    attrs: list[_Attr] = field(default_factory=list)
    formats: dict[int, TracepointFormat] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    record_counts: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    #: Samples :meth:`samples_by_time` could not put in time order (older than one already out).
    late: int = 0
    clock_offset_ns: int | None = None
    clockid: int | None = None
    data_offset: int = 0
    data_end: int = 0
    _by_id: dict[int, _Attr] = field(default_factory=dict)
    _long64: bool = True

    # --- construction ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path) -> PerfDataFile:
        """Map and parse the file at ``path``. Raises OSError, or :class:`PerfDataError` if it is not one."""
        data: bytes | mmap.mmap
        with Path(path).open("rb") as fh:
            try:
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # empty file, or a pipe/FIFO: read it
                data = fh.read()
        self = cls(data, str(path))
        try:
            self._parse_header()
        except PerfDataError:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Release the file mapping (samples already returned stay valid)."""
        if isinstance(self.buf, mmap.mmap):
            self.buf.close()
        self.buf = b""

    def __enter__(self) -> PerfDataFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "") -> PerfDataFile:
        """Parse a perf.data image held in memory. Raises :class:`PerfDataError` if it is not one."""
        self = cls(bytes(data), path)
        self._parse_header()
        return self

    def _u32(self, pos: int) -> int:
        return int(struct.unpack_from(self.order + "I", self.buf, pos)[0])

    def _u64(self, pos: int) -> int:
        return int(struct.unpack_from(self.order + "Q", self.buf, pos)[0])

    def _parse_header(self) -> None:
        buf = self.buf
        if len(buf) < 16:
            raise PerfDataError(
                f"{self.path or 'input'}: too short for a perf.data header ({len(buf)} bytes)"
            )
        magic = buf[:8]
        if magic == b"PERFILE2":
            self.order = "<"
        elif magic == b"2ELIFREP":
            self.order = ">"
        else:
            raise PerfDataError(f"{self.path or 'input'}: not a perf.data file (magic {magic!r})")
        header_size = self._u64(8)
        if header_size == 16:  # pipe mode: everything is in records
            self.pipe = True
            self.data_offset = 16
            self.data_end = len(buf)
            return
        if len(buf) < 104 or header_size < 104:
            raise PerfDataError(f"{self.path or 'input'}: perf.data header truncated")
        attr_size = self._u64(16)
        attrs_off, attrs_size = self._u64(24), self._u64(32)
        data_off, data_size = self._u64(40), self._u64(48)
        features = int.from_bytes(buf[72:104], "little" if self.order == "<" else "big")
        if self.order == ">":  # the bitmap is an array of u64 in file byte order
            words = struct.unpack_from(">4Q", buf, 72)
            features = sum(w << (64 * i) for i, w in enumerate(words))
        self.data_offset = data_off
        self.data_end = data_off + data_size
        if self.data_end > len(buf):
            missing = self.data_end - len(buf)
            self.problems.append(
                f"file truncated: data section ends at {self.data_end}, file has {len(buf)} bytes"
                f" ({missing} bytes missing)"
            )
            self.data_end = len(buf)
        feats = self._feature_sections(features, data_off + data_size)
        # Tracing data first: attrs refer to formats by id.
        tracing = feats.get(Feature.TRACING_DATA)
        if tracing is not None:
            self._parse_tracing_data(buf[tracing.offset : tracing.offset + tracing.size])
        elif features >> Feature.TRACING_DATA & 1:
            self.problems.append("tracing data (tracepoint formats) missing: file truncated or damaged")
        self._parse_attrs(attrs_off, attrs_size, attr_size)
        desc = feats.get(Feature.EVENT_DESC)
        if desc is not None:
            self._parse_event_desc(buf[desc.offset : desc.offset + desc.size])
        clock = feats.get(Feature.CLOCK_DATA)
        if clock is not None:
            self._parse_clock_data(buf[clock.offset : clock.offset + clock.size])

    def _feature_sections(self, features: int, table: int) -> dict[int, _Feature]:
        out: dict[int, _Feature] = {}
        pos = table
        for bit in range(256):
            if not features >> bit & 1:
                continue
            if pos + 16 > len(self.buf):
                self.problems.append("feature section table truncated: file cut after the data section")
                break
            off, size = self._u64(pos), self._u64(pos + 8)
            pos += 16
            if off + size > len(self.buf):
                feature = FEATURE_NAMES.get(bit, str(bit))
                self.problems.append(
                    f"feature section {feature} truncated (needs {off + size} bytes,"
                    f" file has {len(self.buf)})"
                )
                continue
            out[bit] = _Feature(off, size)
        return out

    def _parse_attrs(self, off: int, size: int, entry: int) -> None:
        # Each entry is a perf_event_attr followed by a (offset, size) section of its ids;
        # the header's attr_size is the size of the whole entry.
        attr_size = entry - 16
        if attr_size < ATTR_SIZE_VER0:
            self.problems.append(f"bad attr entry size {entry}")
            return
        end = min(off + size, len(self.buf))
        if off + size > len(self.buf):
            self.problems.append("attrs section truncated")
        pos = off
        # perf writes one id section per attr, side by side: together they fit in the file.  A
        # crafted file can point every attr at the same (large) section; each id is read once
        # against a budget of the file's size, so the work stays linear in the file's size.
        budget = len(self.buf) // 8
        seen: set[tuple[int, int]] = set()
        shared = overlapping = 0
        while pos + entry <= end:
            ids_off, ids_size = self._u64(pos + attr_size), self._u64(pos + attr_size + 8)
            ids: list[int] = []
            if ids_off + ids_size > len(self.buf):
                self.problems.append("attr id section truncated")
            elif ids_size and (ids_off, ids_size) in seen:
                shared += 1  # its samples cannot be told from the first one's: no ids
            elif ids_size // 8 > budget:
                overlapping += 1
            else:
                n = ids_size // 8
                budget -= n
                ids = list(struct.unpack_from(f"{self.order}{n}Q", self.buf, ids_off))
                seen.add((ids_off, ids_size))
            self._add_attr(self.buf[pos : pos + attr_size], ids)
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
            attr.format = self.formats.get(config & 0xFFFFFFFF)
            if attr.format is not None:
                attr.name = attr.format.full_name
        self.attrs.append(attr)
        for i in ids:
            self._by_id[i] = attr

    def _parse_tracing_data(self, data: bytes) -> None:
        try:
            self._parse_tracing_data_unchecked(data)
        except (struct.error, IndexError, ValueError) as exc:
            self.problems.append(f"tracing data damaged: {exc}")

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
                    self.formats.setdefault(fmt.id, fmt)
        for attr in self.attrs:
            if attr.type == _TRACEPOINT and attr.format is None:
                attr.format = self.formats.get(attr.config & 0xFFFFFFFF)
                if attr.format is not None and not attr.name:
                    attr.name = attr.format.full_name

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
        try:
            f = parse_sample(body, attr.sample_type, attr.read_format, self.order)
        except ValueError as exc:
            return f"sample at offset {offset}: {exc}"
        fmt = attr.format
        raw, time = f.raw, f.time
        data = raw[fmt.payload_offset :] if fmt is not None else raw
        real = time + self.clock_offset_ns if time is not None and self.clock_offset_ns is not None else None
        return Sample(attr.name, time, f.cpu, f.pid, f.tid, raw, data, fmt, offset, real, sid, round_no)

    def _count(self, typ: int) -> None:
        key = RECORD_NAMES.get(typ) or record_name(typ)  # the lookup inline: once per record
        self.record_counts[key] = self.record_counts.get(key, 0) + 1

    def records(self) -> Iterator[tuple[int, int, bytes]]:
        """Yield ``(type, file offset, body)`` for every record of the data section, in file order.

        Stops at the first record that cannot be framed (size < 8 or past the
        end) and records the reason in :attr:`problems`.
        """
        buf = self.buf
        pos = self.data_offset
        end = self.data_end
        o = self.order
        header = record_header(o)
        while pos < end:
            if end - pos < RECORD_HEADER_SIZE:
                self.problems.append(f"truncated record header at offset {pos} ({end - pos} bytes left)")
                return
            typ, _misc, size = header.unpack_from(buf, pos)
            if size < RECORD_HEADER_SIZE:
                self.problems.append(f"damaged record at offset {pos} (size {size}); the rest is unreadable")
                return
            if pos + size > end:
                self.problems.append(
                    f"truncated record at offset {pos} (type {RECORD_NAMES.get(typ, typ)}, size {size},"
                    f" {end - pos} bytes left)"
                )
                return
            body = buf[pos + RECORD_HEADER_SIZE : pos + size]
            next_pos = pos + size
            if typ == _R_HEADER_TRACING_DATA and len(body) >= 4:
                (tsize,) = struct.unpack_from(o + "I", body, 0)
                padded = (tsize + 7) & ~7
                body = body[:4] + buf[next_pos : next_pos + tsize]  # u32 size, then the data
                next_pos += padded
            elif typ == _R_AUXTRACE and len(body) >= 8:
                (asize,) = struct.unpack_from(o + "Q", body, 0)
                next_pos += asize
            yield typ, pos, body
            pos = next_pos

    def samples(self) -> Iterator[Sample]:
        """Yield every sample in file order (see :meth:`samples_in_time_order` for perf's order).

        Non-sample records are counted in :attr:`record_counts`; lost events
        (PERF_RECORD_LOST / LOST_SAMPLES) are added up in :attr:`lost`.
        Samples that cannot be parsed are reported in :attr:`problems`.
        """
        self.record_counts.clear()
        self.lost = 0
        round_no = 0
        o = self.order
        for typ, pos, body in self.records():
            self._count(typ)
            if typ == _R_SAMPLE:
                s = self._sample(body, pos, round_no)
                if isinstance(s, str):
                    self.problems.append(s)
                else:
                    yield s
            elif typ == _R_FINISHED_ROUND:
                round_no += 1
            elif typ == _R_LOST and len(body) >= 16:
                self.lost += parse_lost(body, o)[1]
            elif typ == _R_LOST_SAMPLES and len(body) >= 8:
                self.lost += parse_lost_samples(body, o)
            elif typ == _R_HEADER_ATTR and len(body) >= ATTR_SIZE_VER0:
                (asize,) = struct.unpack_from(o + "I", body, 4)
                asize = max(asize, ATTR_SIZE_VER0)
                ids = [struct.unpack_from(o + "Q", body, p)[0] for p in range(asize, len(body) - 7, 8)]
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

    def samples_by_time(self) -> Iterator[Sample]:
        """Every sample in time order, as ``perf script`` orders them, streaming round by round.

        perf writes each CPU's buffer in turn and a FINISHED_ROUND record after every pass over
        the buffers.  An event read after round *k* ended cannot be older than the newest event
        read before round *k-1* ended, so at each FINISHED_ROUND the samples up to that time are
        released in timestamp order (equal times in file order) and the rest wait for the next
        round; everything left is released at the end.  Memory holds at most two rounds.  A
        sample older than one already released (a file not written by perf's rules) comes out
        late, right away, and is counted in :attr:`late`.  Samples without a time count as 0.
        """
        self.late = 0
        heap: list[tuple[int, int, Sample]] = []
        seq = 0
        current_round = 0
        horizon: int | None = None  # newest time seen when the previous round ended
        newest: int | None = None
        released: int | None = None  # newest time released so far
        for s in self.samples():
            while current_round < s.round:
                current_round += 1
                if horizon is not None:
                    while heap and heap[0][0] <= horizon:
                        t, _, out = heapq.heappop(heap)
                        released = t
                        yield out
                horizon = newest
            t = s.time or 0
            if released is not None and t < released:
                self.late += 1
                yield s
                continue
            heapq.heappush(heap, (t, seq, s))
            seq += 1
            newest = t if newest is None else max(newest, t)
        while heap:
            yield heapq.heappop(heap)[2]

    def samples_in_time_order(self) -> list[Sample]:
        """All samples in time order (:meth:`samples_by_time`), as a list."""
        return list(self.samples_by_time())


def read_samples(path: str | Path) -> Iterator[Sample]:
    """Every sample of the perf.data file at ``path``, in file order.

    A convenience over :class:`PerfDataFile` for callers that do not need its reports
    (problems, record counts, lost events).  Raises OSError / :class:`PerfDataError` when
    the file cannot be opened or is not a perf.data file.
    """
    with PerfDataFile.open(path) as f:
        yield from f.samples()
