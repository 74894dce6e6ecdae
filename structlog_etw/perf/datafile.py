"""perf.data reader: the samples of a ``perf record`` file, with their tracepoint names and raw data.

Pure Python.  :class:`PerfDataFile` puts together, as Microsoft's ``tracepoint_perf`` does:

* an input source (``perf/_source.py``): a file read with ``pread``, or a pipe read as perf
  writes it, a window at a time; never mapped, so a file that shrinks while it is read is a
  reported truncation, not a SIGBUS;
* the header index (``perf/_header.py``): the file header (``PERFILE2``, either byte order), the
  attrs and their sample ids, the feature sections (HEADER_TRACING_DATA: the tracefs ``format``
  of every recorded tracepoint; HEADER_EVENT_DESC: the event names; HEADER_CLOCK_DATA: the
  wall-clock offset).  Pipe-mode files (``perf record -o -``) carry the same in records, read
  as they come;
* the records of the data section, framed one at a time (``perf/_framing.py``);
* the one sample reader (``perf/_sample_reader.py``): each sample read with its attr's layout
  (:class:`~structlog_etw.perf.records.SampleLayout`), in batches;
* time order (``perf/_time_order.py``): :meth:`PerfDataFile.samples_by_time`, round by round
  in a bounded window.

Damaged or truncated files never raise from iteration: what can be read is returned, and every
problem is appended to :attr:`PerfDataFile.problems`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, Final

from ._framing import Record, RecordFramer
from ._header import EventAttr, HeaderIndex, PerfDataError
from ._sample_reader import Sample, SampleReader
from ._source import BytesSource, Source, StreamSource, open_fd
from ._time_order import REORDER_WINDOW_BYTES, TimeOrder
from .abi import RECORD_NAMES, RecordType, record_name
from .records import parse_lost, parse_lost_samples
from .tracefs_format import TracepointFormat

__all__ = ["REORDER_WINDOW_BYTES", "PerfDataError", "PerfDataFile", "Sample", "read_samples"]

# This module is the public home of the types its private pieces define: the API reference,
# pickles and ``help()`` name them here.
Sample.__module__ = PerfDataError.__module__ = __name__

#: The record types the reader acts on, as plain ints: compared once per record (see abi.py).
_R_SAMPLE: Final = int(RecordType.SAMPLE)
_R_FINISHED_ROUND: Final = int(RecordType.FINISHED_ROUND)
#: Samples handed on together when they are read the long way (a run read in the buffer ends
#: after its own budget of bytes); from a pipe, what was read is handed on before every read
#: that may wait.
_BATCH: Final = 512


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
        #: What is wrong with the input (a record past its section, a truncation, ...), in order.
        self.problems: list[str] = []
        #: How many records of each kind were read, by record type name.
        self.record_counts: dict[str, int] = {}
        #: Samples the kernel reported lost (PERF_RECORD_LOST and LOST_SAMPLES), summed.
        self.lost = 0
        #: Runs before every read of a pipe that may block (see the class docstring).
        self.on_wait: Callable[[], None] | None = None
        self._source: Source = BytesSource(b"")
        self._index = HeaderIndex(self.problems)
        self._order: TimeOrder | None = None

    def __repr__(self) -> str:
        shown = (
            f"path={self.path!r}, pipe={self.pipe}, attrs={len(self.attrs)}, problems={len(self.problems)}"
        )
        return f"PerfDataFile({shown})"

    # --- what the header index holds (a pipe's header records may change it while it is read) ---

    @property
    def order(self) -> str:
        """The file's :mod:`struct` byte order (``"<"`` or ``">"``)."""
        return self._index.order

    @property
    def pipe(self) -> bool:
        """Whether the file is in pipe mode (``perf record -o -``: everything in records)."""
        return self._index.pipe

    @property
    def attrs(self) -> list[EventAttr]:
        """The file's event attrs (``perf_event_attr``, its ids, name and format), in file order."""
        return self._index.attrs

    @property
    def formats(self) -> dict[int, TracepointFormat]:
        """The tracepoint formats of the file's tracing data, by tracepoint id."""
        return self._index.formats

    @property
    def clock_offset_ns(self) -> int | None:
        """Wall-clock time minus perf's clock (HEADER_CLOCK_DATA); None when the file does not say."""
        return self._index.clock_offset_ns

    @property
    def clockid(self) -> int | None:
        """The clock of perf's timestamps (HEADER_CLOCK_DATA); None when the file does not say."""
        return self._index.clockid

    @property
    def data_offset(self) -> int:
        """Where the data section starts."""
        return self._index.data_offset

    @property
    def data_end(self) -> int | None:
        """Where the data section ends (None: at the end of the input, pipe mode)."""
        return self._index.data_end

    @property
    def late(self) -> int:
        """Samples :meth:`samples_by_time` could not put in time order (older than one already out)."""
        return self._order.late if self._order is not None else 0

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
        return cls._parsed(open_fd(fd, owned), path)

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "") -> PerfDataFile:
        """Parse a perf.data image held in memory. Raises :class:`PerfDataError` if it is not one."""
        return cls._parsed(BytesSource(bytes(data)), path)

    @classmethod
    def _parsed(cls, source: Source, path: str) -> PerfDataFile:
        self = cls(path)
        self._source = source
        try:
            self._index.read(source, path or "input")
        except PerfDataError:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Release the file (samples already returned stay valid)."""
        self._source.close()

    def __enter__(self) -> PerfDataFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- records --------------------------------------------------------------------------------

    def records(self) -> Iterator[tuple[int, int, bytes]]:
        """Yield ``(type, file offset, body)`` for every record of the data section, in file order.

        Stops at the first record that cannot be framed (size < 8, or it or the data it
        announces - HEADER_TRACING_DATA, AUXTRACE - runs past the data section or the input)
        and records the reason, with its offset, in :attr:`problems`.
        """
        framer = RecordFramer(self._source, self._index)
        while (record := framer.frame()) is not None:
            yield record
            if not framer.advance():
                return

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
        stream = isinstance(source, StreamSource)
        if isinstance(source, StreamSource):
            source.wait = self.on_wait
        framer = RecordFramer(source, self._index)
        reader = SampleReader(self._index, keyed)
        try:
            while True:
                full = reader.fused is not None and reader.read_run(framer)
                if reader.batch and (full or stream or len(reader.batch) >= _BATCH):
                    yield reader.take()
                if full:
                    continue
                record = framer.frame()
                if record is None:
                    break
                if record.type == _R_SAMPLE:  # the long way: the first of its sample id, or not fused
                    reader.read(record.body, record.offset)
                elif record.type == _R_FINISHED_ROUND:
                    reader.round += 1
                    if reader.batch:
                        yield reader.take()
                    yield None
                else:
                    reader.forget()
                    self._other(record)
                if not framer.advance():
                    break
            if reader.batch:
                yield reader.take()
        finally:
            # framed, not handed on when the consumer stopped: counted all the same
            self._count(_R_SAMPLE, reader.counted + len(reader.batch))
            self._count(_R_FINISHED_ROUND, reader.round)

    def _count(self, typ: int, n: int = 1) -> None:
        if n:
            key = RECORD_NAMES.get(typ) or record_name(typ)  # the lookup inline: once per record
            self.record_counts[key] = self.record_counts.get(key, 0) + n

    def _other(self, record: Record) -> None:
        """A record other than SAMPLE and FINISHED_ROUND: lost counts, attrs, formats, features."""
        typ, body = record.type, record.body
        self._count(typ)
        if typ == RecordType.LOST and len(body) >= 16:
            self.lost += parse_lost(body, self.order)[1]
        elif typ == RecordType.LOST_SAMPLES and len(body) >= 8:
            self.lost += parse_lost_samples(body, self.order)
        elif typ in (RecordType.COMPRESSED, RecordType.COMPRESSED2):
            self.problems.append(
                f"compressed records (perf record -z) are not supported (offset {record.offset})"
            )
        else:
            self._index.add_record(typ, body)

    # --- time order -----------------------------------------------------------------------------

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
        self._order = TimeOrder(window)
        return self._order.release(self._batches(keyed=True))

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
