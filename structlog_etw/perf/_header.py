"""The header index of a perf.data file: what its header and feature sections say about its events.

The file header (``PERFILE2``, either byte order; pipe mode: 16 bytes and everything else in
records), the attrs (:class:`EventAttr`: a ``perf_event_attr``, its sample ids, name and
tracepoint format), the feature sections (HEADER_TRACING_DATA: the tracefs ``format`` of every
recorded tracepoint; HEADER_EVENT_DESC: the event names; HEADER_CLOCK_DATA: the wall-clock
offset).  A pipe-mode file carries the same in records (HEADER_ATTR, HEADER_TRACING_DATA,
HEADER_FEATURE), which :meth:`HeaderIndex.add_record` takes as they come.  Like
``tracepoint_perf``'s header index beside its file reader: the samples are read elsewhere
(``perf/_sample_reader.py``) with what this index knows.

Damage is reported in :attr:`HeaderIndex.problems` (the reader's list), never raised, except a
file that is no perf.data file at all (:class:`PerfDataError`).  Pure Python; every OS.
"""

from __future__ import annotations

import struct
from typing import Final

from ._source import MAGICS, PIPE_HEADER_SIZE, Source
from .abi import ATTR_SIZE_VER0, FEATURE_NAMES, AttrFlag, EventType, Feature, RecordType
from .records import sample_id_offset
from .tracefs_format import TracepointFormat, parse_format

#: The attr flag saying that non-sample records carry the sample id fields too.
_SAMPLE_ID_ALL: Final = int(AttrFlag.SAMPLE_ID_ALL)
_TRACEPOINT: Final = int(EventType.TRACEPOINT)
#: Bytes of a file-mode header up to the feature bitmap's end (``struct perf_file_header``).
_FILE_HEADER_SIZE: Final = 104
#: The tracing data's signature.
_TRACING_SIGNATURE: Final = b"\x17\x08\x44tracing"
#: ``perf_clock_data``'s clockid when the recording's clock is unknown.
_NO_CLOCK: Final = 0xFFFFFFFF
#: Names of the non-tracepoint event types (``perf_event_attr.type``).
_TYPE_NAMES: Final = {0: "hardware", 1: "software", 3: "hw-cache", 4: "raw", 5: "breakpoint"}


class PerfDataError(ValueError):
    """The file is not a perf.data file at all (bad magic, header too short)."""


class EventAttr:
    """One ``perf_event_attr`` of the file, its ids, name and format (plain classes here, no
    dataclasses: the reader is imported at every start of ``structlog-etw decode``)."""

    __slots__ = (
        "config",
        "format",
        "id_at",
        "ids",
        "name",
        "read_format",
        "sample_id_all",
        "sample_type",
        "type",
    )

    def __init__(
        self, type: int, config: int, sample_type: int, read_format: int, sample_id_all: bool, ids: list[int]
    ) -> None:
        self.type, self.config = type, config
        #: What its samples hold (``perf_event_attr.sample_type``, ``read_format``).
        self.sample_type, self.read_format = sample_type, read_format
        #: Whether its non-sample records carry the sample id fields too.
        self.sample_id_all = sample_id_all
        self.ids = ids
        self.name = ""
        self.format: TracepointFormat | None = None
        #: Where its samples hold their event id (None: they do not).
        self.id_at: int | None = sample_id_offset(sample_type)

    @property
    def is_tracepoint(self) -> bool:
        """Whether the event is a tracepoint (its samples have a tracefs format)."""
        return self.type == _TRACEPOINT

    @property
    def label(self) -> str:
        """The event's name for a report (perf's event name, else its type and config)."""
        if self.name:
            return self.name
        kind = _TYPE_NAMES.get(self.type, f"type {self.type}")
        return f"{kind} event (config 0x{self.config:x})"


class _Feature:
    """Where a feature section is in the file."""

    __slots__ = ("offset", "size")

    def __init__(self, offset: int, size: int) -> None:
        self.offset = offset
        self.size = size


class HeaderIndex:
    """What a perf.data file's header, attrs and features say (see the module docstring).

    :meth:`read` parses a source's header; in pipe mode :meth:`add_record` takes the header
    records of the data section.  ``problems`` is the reader's list of what is wrong.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        #: The file's :mod:`struct` byte order.
        self.order = "<"
        #: Pipe mode (``perf record -o -``): the header is 16 bytes, everything else in records.
        self.pipe = False
        self.attrs: list[EventAttr] = []
        #: Tracepoint formats by tracepoint id.
        self.formats: dict[int, TracepointFormat] = {}
        self.by_id: dict[int, EventAttr] = {}
        #: Tracepoint attrs still waiting for their format, by tracepoint id: each resolved once.
        self._pending: dict[int, list[EventAttr]] = {}
        self._long64 = True
        self.clock_offset_ns: int | None = None
        self.clockid: int | None = None
        self.data_offset = 0
        #: Where the data section ends (None: at the end of the input, pipe mode).
        self.data_end: int | None = 0
        #: The file ends before its data section does (reported once, at the header).
        self.cut = False

    def attr_for(self, key: int | None) -> EventAttr | None:
        """The attr of sample id ``key`` (the only attr when the file has one); None: unknown."""
        attr = self.by_id.get(key) if key is not None else None
        if attr is None and len(self.attrs) == 1:
            attr = self.attrs[0]
        return attr

    # --- the file header ------------------------------------------------------------------------

    def read(self, source: Source, name: str) -> None:
        """Parse the header of ``source`` (``name`` for messages). Raises :class:`PerfDataError`."""
        head = source.read(0, PIPE_HEADER_SIZE, PIPE_HEADER_SIZE)  # a pipe gives no more before its records
        if len(head) < PIPE_HEADER_SIZE:
            raise PerfDataError(f"{name}: too short for a perf.data header ({len(head)} bytes)")
        order = MAGICS.get(head[:8])
        if order is None:
            raise PerfDataError(f"{name}: not a perf.data file (magic {head[:8]!r})")
        self.order = order
        (header_size,) = struct.unpack_from(order + "Q", head, 8)
        if header_size == PIPE_HEADER_SIZE:  # pipe mode: everything is in records
            self.pipe = True
            self.data_offset = PIPE_HEADER_SIZE
            self.data_end = None
            return
        head = source.read(0, _FILE_HEADER_SIZE, _FILE_HEADER_SIZE)
        if len(head) < _FILE_HEADER_SIZE or header_size < _FILE_HEADER_SIZE:
            raise PerfDataError(f"{name}: perf.data header truncated")
        size = source.size or 0
        attr_size, attrs_off, attrs_size, data_off, data_size = struct.unpack_from(order + "5Q", head, 16)
        words = struct.unpack_from(order + "4Q", head, 72)  # the feature bitmap: u64 words in file order
        features = sum(w << (64 * i) for i, w in enumerate(words))
        self.data_offset = data_off
        self.data_end = data_off + data_size
        if self.data_end > size:
            self.problems.append(
                f"file truncated: data section ends at {self.data_end}, file has {size} bytes"
                f" ({self.data_end - size} bytes missing)"
            )
            self.data_end = max(size, data_off)
            self.cut = True
        feats = self._feature_sections(source, features, data_off + data_size, size)
        # Tracing data first: attrs refer to formats by id.
        tracing = feats.get(Feature.TRACING_DATA)
        if tracing is not None:
            self.add_tracing_data(source.read(tracing.offset, tracing.size, tracing.size))
        elif features >> Feature.TRACING_DATA & 1:
            self.problems.append("tracing data (tracepoint formats) missing: file truncated or damaged")
        self._read_attrs(source, attrs_off, attrs_size, attr_size, size)
        desc = feats.get(Feature.EVENT_DESC)
        if desc is not None:
            self.add_event_desc(source.read(desc.offset, desc.size, desc.size))
        clock = feats.get(Feature.CLOCK_DATA)
        if clock is not None:
            self.add_clock_data(source.read(clock.offset, clock.size, clock.size))

    def _feature_sections(self, source: Source, features: int, table: int, size: int) -> dict[int, _Feature]:
        out: dict[int, _Feature] = {}
        n = bin(features).count("1")
        entries = source.read(table, 16 * n, 16 * n) if table < size else b""
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

    def _read_attrs(self, source: Source, off: int, size: int, entry: int, file_size: int) -> None:
        # Each entry is a perf_event_attr followed by a (offset, size) section of its ids;
        # the header's attr_size is the size of the whole entry.
        attr_size = entry - 16
        if attr_size < ATTR_SIZE_VER0:
            self.problems.append(f"bad attr entry size {entry}")
            return
        if off + size > file_size:
            self.problems.append("attrs section truncated")
        length = max(0, min(off + size, file_size) - off)
        table = source.read(off, length, length) if off < file_size else b""
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
                raw_ids = source.read(ids_off, 8 * n, 8 * n)
                n = len(raw_ids) // 8
                ids = list(struct.unpack_from(f"{o}{n}Q", raw_ids, 0))
                seen.add((ids_off, ids_size))
            self.add_attr(table[pos : pos + attr_size], ids)
            pos += entry
        if shared:
            self.problems.append(f"{shared} attrs share an id section with another attr (ids ignored)")
        if overlapping:
            self.problems.append(f"{overlapping} attrs have id sections overlapping others (ids ignored)")

    # --- attrs, formats, names, clock -----------------------------------------------------------

    def add_attr(self, raw: bytes, ids: list[int]) -> None:
        """Add the attr whose ``perf_event_attr`` is ``raw`` (at least ATTR_SIZE_VER0 bytes), with ``ids``."""
        typ, _size, config, _period, sample_type, read_format, flags = struct.unpack_from(
            self.order + "IIQQQQQ", raw, 0
        )
        attr = EventAttr(typ, config, sample_type, read_format, bool(flags & _SAMPLE_ID_ALL), ids)
        if typ == _TRACEPOINT:
            tp_id = config & 0xFFFFFFFF
            attr.format = self.formats.get(tp_id)
            if attr.format is not None:
                attr.name = attr.format.full_name
            else:  # its format may come later (pipe mode): resolved when it does, once
                self._pending.setdefault(tp_id, []).append(attr)
        self.attrs.append(attr)
        for i in ids:
            self.by_id[i] = attr

    def _add_format(self, fmt: TracepointFormat) -> None:
        if fmt.id in self.formats:
            return
        self.formats[fmt.id] = fmt
        for attr in self._pending.pop(fmt.id, ()):
            attr.format = fmt
            if not attr.name:
                attr.name = fmt.full_name

    def add_tracing_data(self, data: bytes) -> None:
        """Add the tracepoint formats of a HEADER_TRACING_DATA section (damage: a problem)."""
        try:
            self._tracing_data(data)
        except (struct.error, IndexError, ValueError) as exc:
            self.problems.append(f"tracing data damaged: {exc}")

    def _tracing_data(self, data: bytes) -> None:
        if not data.startswith(_TRACING_SIGNATURE):
            self.problems.append("tracing data has no tracing signature")
            return
        pos = len(_TRACING_SIGNATURE)
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

        def count() -> int:
            nonlocal pos
            (n,) = struct.unpack_from(order + "I", data, pos)
            pos += 4
            return int(n)

        section64(b"header_page\0")
        section64(b"header_event\0")
        for _ in range(count()):  # ftrace's own formats
            section64()
        for _ in range(count()):
            nul = data.index(b"\0", pos)
            system = data[pos:nul].decode("utf-8", "replace")
            pos = nul + 1
            for _ in range(count()):
                text = section64().decode("utf-8", "replace")
                fmt = parse_format(system, text, self._long64)
                if fmt is not None:
                    self._add_format(fmt)

    def add_event_desc(self, data: bytes) -> None:
        """Name the attrs from a HEADER_EVENT_DESC section (damage: a problem)."""
        o = self.order
        try:
            n, attr_size = struct.unpack_from(o + "II", data, 0)
            pos = 8
            for _ in range(n):
                pos += attr_size
                (nr_ids,) = struct.unpack_from(o + "I", data, pos)
                pos += 4
                (slen,) = struct.unpack_from(o + "I", data, pos)
                pos += 4
                name = data[pos : pos + slen].split(b"\0", 1)[0].decode("utf-8", "replace")
                pos += slen
                ids = struct.unpack_from(f"{o}{nr_ids}Q", data, pos)
                pos += 8 * nr_ids
                for i in ids:
                    attr = self.by_id.get(i)
                    if attr is not None and name:
                        attr.name = name
        except struct.error as exc:
            self.problems.append(f"event descriptions damaged: {exc}")

    def add_clock_data(self, data: bytes) -> None:
        """Take the wall-clock offset of a HEADER_CLOCK_DATA section (ignored when too short)."""
        if len(data) < 24:
            return
        version, clockid, wall_ns, clock_ns = struct.unpack_from(self.order + "IIQQ", data, 0)
        if version >= 1 and clockid != _NO_CLOCK:
            self.clockid = clockid
            self.clock_offset_ns = wall_ns - clock_ns

    # --- pipe mode: the header in records -------------------------------------------------------

    def add_record(self, typ: int, body: bytes) -> bool:
        """Take a header record of the data section (HEADER_ATTR, HEADER_TRACING_DATA,
        HEADER_FEATURE); False: ``typ`` is none of them."""
        o = self.order
        if typ == RecordType.HEADER_ATTR:
            if len(body) >= ATTR_SIZE_VER0:
                (asize,) = struct.unpack_from(o + "I", body, 4)
                asize = max(asize, ATTR_SIZE_VER0)
                n = max(0, (len(body) - asize) // 8)
                ids = list(struct.unpack_from(f"{o}{n}Q", body, asize)) if n else []
                self.add_attr(body[:asize], ids)
        elif typ == RecordType.HEADER_TRACING_DATA:
            if len(body) >= 4:
                self.add_tracing_data(body[4:])
        elif typ == RecordType.HEADER_FEATURE:
            if len(body) >= 8:
                (bit,) = struct.unpack_from(o + "Q", body, 0)
                if bit == Feature.EVENT_DESC:
                    self.add_event_desc(body[8:])
                elif bit == Feature.CLOCK_DATA:
                    self.add_clock_data(body[8:])
                elif bit == Feature.TRACING_DATA:
                    self.add_tracing_data(body[8:])
        else:
            return False
        return True
