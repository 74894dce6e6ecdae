"""Writing perf.data: the file ``structlog-etw record`` produces, as perf itself writes it.

Two shapes, the same content (``tools/perf/Documentation/perf.data-file-format.txt``):

* **file**: a 104-byte ``perf_file_header``, the data section (the kernel's records, copied as
  they came out of the ring buffers, with a FINISHED_ROUND after every pass over the CPUs), then
  the feature sections (tracing data, event descriptions, clock, OS release, CPU count ...),
  then the attrs and their sample ids.  Everything but the data is known only at the end, so
  the header is written last, into a temporary file beside the target that is renamed over it
  only when complete: a reader never sees a half-written header, whatever stops the writer.
* **pipe** (``-o -``): the 16-byte pipe header, then the same information as records before
  the first sample (HEADER_ATTR per event, HEADER_TRACING_DATA, a HEADER_FEATURE per feature,
  FINISHED_INIT), then the data.  What a reader needs first is written first, so the events
  are fixed when the stream starts (:meth:`PerfDataWriter.start`).

The features' bytes come from one function (:func:`feature_payloads`) for both shapes.  Pure
Python, stdlib only, importable on every OS; the records themselves come from the caller (the
recorder, :mod:`~structlog_etw.perf.recorder`).  Numbers from :mod:`~structlog_etw.perf.abi`.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO, Final

from .abi import (
    ATTR_SIZE_VER5,
    FILE_HEADER_SIZE,
    FILE_MAGIC,
    PIPE_HEADER_SIZE,
    RECORD_HEADER_SIZE,
    STRING_ALIGN,
    TRACING_DATA_MAGIC,
    TRACING_DATA_VERSION,
    Feature,
    RecordType,
)

__all__ = [
    "EventDescription",
    "MachineInfo",
    "PerfDataWriter",
    "TracingHeaders",
    "feature_payloads",
    "header_string",
    "tracing_data",
]

#: ``struct perf_event_header``: u32 type, u16 misc, u16 size (native order: we write this machine's).
_HEADER: Final = struct.Struct("=IHH")
_U32: Final = struct.Struct("=I")
_U64: Final = struct.Struct("=Q")
#: A record's size is a u16: bodies longer than this minus the header cannot be one record.
_RECORD_MAX: Final = 0xFFFF
_BIG_ENDIAN: Final = struct.pack("=H", 1) == b"\0\1"


@dataclass
class EventDescription:
    """One event of the file: its name (``user_events:Provider_L4K1``), its ``perf_event_attr``
    bytes as opened, the sample ids its fds got (one per CPU), and its tracefs ``format`` text."""

    name: str
    attr: bytes
    ids: list[int] = field(default_factory=list)
    format: str = ""
    system: str = "user_events"


@dataclass
class TracingHeaders:
    """What HEADER_TRACING_DATA says about the machine before the formats: tracefs's
    ``events/header_page`` and ``events/header_event`` texts, the page size and ``sizeof(long)``."""

    header_page: bytes = b""
    header_event: bytes = b""
    page_size: int = 4096
    long_size: int = 8


@dataclass
class MachineInfo:
    """The machine and the clock (HOSTNAME, OSRELEASE, VERSION, ARCH, NRCPUS, CMDLINE, CLOCKID,
    CLOCK_DATA): ``wall_ns``/``clock_ns`` are the same instant on the wall clock and on ``clockid``."""

    hostname: str = ""
    osrelease: str = ""
    version: str = ""
    arch: str = ""
    cpus_online: int = 1
    cpus_available: int = 1
    cmdline: list[str] = field(default_factory=list)
    clockid: int = 1
    wall_ns: int = 0
    clock_ns: int = 0


def header_string(text: str) -> bytes:
    """A ``perf_header_string``: u32 length, then the text, NUL-terminated and zero-padded to
    :data:`~structlog_etw.perf.abi.STRING_ALIGN` bytes (the length counts the padding)."""
    raw = text.encode("utf-8", "replace") + b"\0"
    padded = -(-len(raw) // STRING_ALIGN) * STRING_ALIGN
    return _U32.pack(padded) + raw.ljust(padded, b"\0")


def _section64(data: bytes, name: bytes = b"") -> bytes:
    return (name + b"\0" if name else b"") + _U64.pack(len(data)) + data


def tracing_data(headers: TracingHeaders, events: Iterable[EventDescription]) -> bytes:
    """HEADER_TRACING_DATA: the signature, header_page, header_event, no ftrace formats, each
    system's event formats, and empty kallsyms, printk and saved_cmdlines (version 0.6)."""
    systems: dict[str, list[bytes]] = {}
    for ev in events:
        systems.setdefault(ev.system, []).append(ev.format.encode("utf-8", "replace"))
    out = [
        TRACING_DATA_MAGIC + TRACING_DATA_VERSION + b"\0",
        bytes([1 if _BIG_ENDIAN else 0, headers.long_size]),
        _U32.pack(headers.page_size),
        _section64(headers.header_page, b"header_page"),
        _section64(headers.header_event, b"header_event"),
        _U32.pack(0),  # ftrace formats
        _U32.pack(len(systems)),
    ]
    for system, formats in sorted(systems.items()):
        out.append(system.encode("utf-8", "replace") + b"\0" + _U32.pack(len(formats)))
        out.extend(_section64(text) for text in formats)
    out += [_U32.pack(0), _U32.pack(0), _U64.pack(0)]  # kallsyms, printk, saved_cmdlines
    return b"".join(out)


def _event_desc(events: list[EventDescription]) -> bytes:
    attr_size = max((len(ev.attr) for ev in events), default=ATTR_SIZE_VER5)
    out = [_U32.pack(len(events)), _U32.pack(attr_size)]
    for ev in events:
        name = ev.name.encode("utf-8", "replace")
        padded = len(name) + 8 - (len(name) & 7)  # NUL and zeros to a multiple of 8
        out += [
            ev.attr.ljust(attr_size, b"\0"),
            _U32.pack(len(ev.ids)),
            _U32.pack(padded),
            name.ljust(padded, b"\0"),
            b"".join(_U64.pack(i) for i in ev.ids),
        ]
    return b"".join(out)


def feature_payloads(
    machine: MachineInfo,
    headers: TracingHeaders,
    events: list[EventDescription],
    sample_time: tuple[int, int] | None = None,
) -> dict[int, bytes]:
    """Feature bit -> its section's bytes, for the file's sections and the pipe's HEADER_FEATURE
    records alike (the one place a feature becomes bytes)."""
    out = {
        Feature.TRACING_DATA: tracing_data(headers, events),
        Feature.HOSTNAME: header_string(machine.hostname),
        Feature.OSRELEASE: header_string(machine.osrelease),
        Feature.VERSION: header_string(machine.version),
        Feature.ARCH: header_string(machine.arch),
        Feature.NRCPUS: struct.pack("=II", machine.cpus_available, machine.cpus_online),
        Feature.CMDLINE: _U32.pack(len(machine.cmdline)) + b"".join(map(header_string, machine.cmdline)),
        Feature.EVENT_DESC: _event_desc(events),
        Feature.CLOCKID: _U64.pack(machine.clockid),
        Feature.CLOCK_DATA: struct.pack("=IIQQ", 1, machine.clockid, machine.wall_ns, machine.clock_ns),
    }
    if sample_time is not None:
        out[Feature.SAMPLE_TIME] = struct.pack("=QQ", *sample_time)
    return {int(k): v for k, v in sorted(out.items())}


def record(rtype: int, body: bytes, misc: int = 0) -> bytes:
    """One record: the 8-byte header and ``body`` (whose length is a multiple of 8)."""
    return _HEADER.pack(rtype, misc, RECORD_HEADER_SIZE + len(body)) + body


class PerfDataWriter:
    """A perf.data being written: :meth:`create` (a file) or :meth:`to_stream` (pipe format).

    Add the events (:meth:`add_event`), set ``machine`` and ``tracing``, call
    :meth:`start`, then :meth:`write_record`/:meth:`write_records` and :meth:`finished_round`;
    :meth:`close` finalizes (a file: header last, then renamed into place).  :meth:`abort` drops
    a file that should not exist.  In a file, events may be added until :meth:`close`.
    """

    def __init__(self, out: BinaryIO, *, pipe: bool, path: str = "", temp: str = "") -> None:
        self._out = out
        self.pipe = pipe
        self.path = path
        self._temp = temp
        self.events: list[EventDescription] = []
        self.machine = MachineInfo()
        self.tracing = TracingHeaders()
        self.records = 0
        self.data_bytes = 0
        self.first_time: int | None = None
        self.last_time: int | None = None
        self._started = False
        self._closed = False

    @classmethod
    def create(cls, path: str) -> PerfDataWriter:
        """Write a perf.data file at ``path``: into a temporary file beside it until :meth:`close`."""
        directory, name = os.path.split(os.path.abspath(path))
        temp = os.path.join(directory, f".{name}.partial-{os.getpid()}")
        out = open(temp, "wb")  # noqa: SIM115 - closed by close()/abort()
        try:
            out.write(b"\0" * FILE_HEADER_SIZE)  # the header's place; written last
        except BaseException:
            out.close()
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        return cls(out, pipe=False, path=path, temp=temp)

    @classmethod
    def to_stream(cls, out: BinaryIO) -> PerfDataWriter:
        """Write perf's pipe format to ``out`` (a binary stream, e.g. ``sys.stdout.buffer``)."""
        return cls(out, pipe=True)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` ran."""
        return self._closed

    def add_event(self, event: EventDescription) -> None:
        """Describe one more event (in a pipe: only before :meth:`start`)."""
        if self.pipe and self._started:
            raise RuntimeError("a pipe's events are written when it starts")
        self.events.append(event)

    def start(self) -> None:
        """A pipe: write the header and the records describing the events; a file: nothing yet."""
        if self._started:
            return
        self._started = True
        if not self.pipe:
            return
        parts = [FILE_MAGIC, _U64.pack(PIPE_HEADER_SIZE)]
        for ev in self.events:
            parts.append(record(RecordType.HEADER_ATTR, ev.attr + b"".join(_U64.pack(i) for i in ev.ids)))
        for bit, payload in feature_payloads(self.machine, self.tracing, self.events).items():
            if bit == Feature.TRACING_DATA:
                # HEADER_TRACING_DATA: u32 size, u32 pad, then the data (padded to 8) after the record.
                padded = payload.ljust(-(-len(payload) // 8) * 8, b"\0")
                head = _HEADER.pack(RecordType.HEADER_TRACING_DATA, 0, RECORD_HEADER_SIZE + 8)
                parts.append(head + struct.pack("=II", len(padded), 0) + padded)
            else:
                body = _U64.pack(bit) + payload
                parts.append(record(RecordType.HEADER_FEATURE, body.ljust(-(-len(body) // 8) * 8, b"\0")))
        parts.append(record(RecordType.FINISHED_INIT, b""))
        self._write(b"".join(parts), count=False)

    def _write(self, data: bytes, count: bool = True) -> None:
        self._out.write(data)
        if count:
            self.data_bytes += len(data)

    def write_record(self, rtype: int, misc: int, body: bytes) -> None:
        """One record as the kernel wrote it (``body``: what follows its 8-byte header)."""
        self._write(_HEADER.pack(rtype, misc, RECORD_HEADER_SIZE + len(body)) + body)
        self.records += 1

    def write_records(self, data: bytes, count: int) -> None:
        """``count`` whole records, already framed."""
        self._write(data)
        self.records += count

    def note_time(self, t: int) -> None:
        """A sample's time: the file's SAMPLE_TIME feature spans the first to the last."""
        if self.first_time is None or t < self.first_time:
            self.first_time = t
        if self.last_time is None or t > self.last_time:
            self.last_time = t

    def finished_round(self) -> None:
        """Every CPU's buffer was drained: readers may sort and emit what came before (a pipe's
        reader gets the round now)."""
        self.write_record(RecordType.FINISHED_ROUND, 0, b"")
        if self.pipe:
            self._out.flush()

    def flush(self) -> None:
        """Hand what is buffered to the file or pipe."""
        self._out.flush()

    def close(self) -> None:
        """Finalize: a file gets its feature sections, attrs, header and name; a pipe is flushed."""
        if self._closed:
            return
        self._closed = True
        if self.pipe:
            with contextlib.suppress(BrokenPipeError):
                self._out.flush()
            return
        try:
            self._finish_file()
        except BaseException:
            self.abort()
            raise

    def _finish_file(self) -> None:
        out = self._out
        data_size = self.data_bytes
        times = None
        if self.first_time is not None and self.last_time is not None:
            times = (self.first_time, self.last_time)
        features = feature_payloads(self.machine, self.tracing, self.events, times)
        table = FILE_HEADER_SIZE + data_size
        offset = table + 16 * len(features)
        sections = []
        for payload in features.values():
            sections.append(struct.pack("=QQ", offset, len(payload)))
            offset += len(payload)
        out.write(b"".join(sections) + b"".join(features.values()))
        attr_size = max((len(ev.attr) for ev in self.events), default=ATTR_SIZE_VER5)
        attrs_offset = offset
        entry = attr_size + 16
        ids_offset = attrs_offset + entry * len(self.events)
        entries, ids = [], []
        for ev in self.events:
            raw_ids = b"".join(_U64.pack(i) for i in ev.ids)
            entries.append(ev.attr.ljust(attr_size, b"\0") + struct.pack("=QQ", ids_offset, len(raw_ids)))
            ids.append(raw_ids)
            ids_offset += len(raw_ids)
        out.write(b"".join(entries) + b"".join(ids))
        bits = 0
        for bit in features:
            bits |= 1 << bit
        header = FILE_MAGIC + struct.pack(
            "=8Q4Q",
            FILE_HEADER_SIZE,
            entry,
            attrs_offset,
            entry * len(self.events),
            FILE_HEADER_SIZE,
            data_size,
            0,  # event_types: superseded by the tracing data
            0,
            *((bits >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for i in range(4)),
        )
        out.flush()
        out.seek(0)
        out.write(header)
        out.flush()
        os.fsync(out.fileno())
        out.close()
        os.replace(self._temp, self.path)

    def abort(self) -> None:
        """Stop without a file: the temporary file is removed (a pipe is left as it is)."""
        self._closed = True
        if self.pipe:
            return
        with contextlib.suppress(OSError):
            self._out.close()
        with contextlib.suppress(OSError):
            os.unlink(self._temp)
