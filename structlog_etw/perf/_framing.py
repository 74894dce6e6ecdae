"""The records of a perf.data file's data section, framed one at a time from its source.

A :class:`RecordFramer` is a cursor over the data section: :attr:`~RecordFramer.buf` holds the
input from offset :attr:`~RecordFramer.base` on (a window of :data:`~._source.CHUNK` bytes, read
on as needed) and the next record starts at ``buf[i]``.  :meth:`~RecordFramer.frame` returns the
record there (:class:`Record`), :meth:`~RecordFramer.advance` steps over it (and over the data
that HEADER_TRACING_DATA and AUXTRACE records announce after themselves).  A record that cannot
be framed (size < 8, or past the data section or the input) ends the section, with the reason
in the reader's problems.  The sample reader reads runs of samples in :attr:`~RecordFramer.buf`
itself and moves :attr:`~RecordFramer.i` past them.  Pure Python; every OS.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from ._header import HeaderIndex
from ._source import CHUNK, Source
from .abi import RECORD_HEADER_SIZE, RECORD_NAMES, RecordType, record_name
from .records import record_header

_R_HEADER_TRACING_DATA: Final = int(RecordType.HEADER_TRACING_DATA)
_R_AUXTRACE: Final = int(RecordType.AUXTRACE)


class Record(NamedTuple):
    """One record of the data section: its type, its offset in the file and its body (what
    follows the ``perf_event_header``; a HEADER_TRACING_DATA record's with the data it announces)."""

    type: int
    offset: int
    body: bytes


class RecordFramer:
    """The records of a data section, in file order (see the module docstring)."""

    __slots__ = ("base", "buf", "cut", "end", "header", "i", "order", "problems", "skip", "source", "typ")

    def __init__(self, source: Source, index: HeaderIndex) -> None:
        self.source = source
        self.order = index.order
        #: Where the data section ends (None: at the end of the input).
        self.end = index.data_end
        self.cut = index.cut
        self.problems = index.problems
        self.header = record_header(index.order).unpack_from
        self.buf = b""
        self.base = index.data_offset
        self.i = 0
        #: Bytes of the record :meth:`frame` returned (with what it announces), for :meth:`advance`.
        self.skip = 0
        self.typ = 0

    def _refill(self, need: int) -> None:
        """``buf`` from the next record on with at least ``need`` bytes, unless the input ends first."""
        buf, i, end = self.buf, self.i, self.end
        pos = self.base + i
        keep = buf[i:]
        at = pos + len(keep)
        most = max(CHUNK, need) - len(keep)
        if end is not None:
            most = min(most, end - at)
        self.buf = keep if most <= 0 else keep + self.source.read(at, need - len(keep), most)
        self.i, self.base = 0, pos

    def frame(self) -> Record | None:
        """The record at the cursor, reading on as needed; None at the end of the data section, or
        at a record that cannot be framed (reported in the problems).  What it spans is left in
        :attr:`skip`, for :meth:`advance`."""
        end = self.end  # None: the end of the input
        pos = self.base + self.i
        if end is not None and pos >= end:
            return None
        if len(self.buf) - self.i < RECORD_HEADER_SIZE and not self._header_read(pos):
            return None
        typ, _misc, size = self.header(self.buf, self.i)
        if size < RECORD_HEADER_SIZE:
            self.problems.append(f"damaged record at offset {pos} (size {size}); the rest is unreadable")
            return None
        extra = 0  # bytes after the record that belong to it
        if typ in (_R_HEADER_TRACING_DATA, _R_AUXTRACE):
            extra = self._announced(typ, size)
            if end is not None and pos + size + extra > end:
                self._overrun(pos, typ, size + extra, end - pos)
                return None
        total = size if typ == _R_AUXTRACE else size + extra
        if len(self.buf) - self.i < total:
            self._refill(total)
            if len(self.buf) < total:
                self._overrun(pos, typ, size + extra, len(self.buf))
                return None
        buf, i = self.buf, self.i
        if extra and typ == _R_HEADER_TRACING_DATA:  # u32 size, then the data
            body = buf[i + RECORD_HEADER_SIZE : i + RECORD_HEADER_SIZE + 4] + buf[i + size : i + total]
            self.skip = total + (-extra % 8)
        elif typ == _R_AUXTRACE:
            body = buf[i + RECORD_HEADER_SIZE : i + size]
            self.skip = size + extra
        else:
            body = buf[i + RECORD_HEADER_SIZE : i + size]
            self.skip = size
        self.typ = typ
        return Record(typ, pos, body)

    def _header_read(self, pos: int) -> bool:
        """Read on to the record header at ``pos``; False: the input ends first (reported)."""
        self._refill(RECORD_HEADER_SIZE)
        buf = self.buf
        if not buf and self.end is None:
            shrunk = self.source.shrunk(pos)
            if shrunk is not None:
                self.problems.append(
                    f"truncated at offset {pos}: the file shrank to {shrunk} bytes while being read"
                )
            return False  # the end of a pipe-mode input, between records
        if len(buf) < RECORD_HEADER_SIZE:
            left = len(buf)
            shrunk = self.source.shrunk(pos + left)
            why = f": the file shrank to {shrunk} bytes while being read" if shrunk is not None else ""
            self.problems.append(f"truncated record header at offset {pos} ({left} bytes left){why}")
            return False
        return True

    def _announced(self, typ: int, size: int) -> int:
        """What a HEADER_TRACING_DATA (u32) or AUXTRACE (u64) record of ``size`` announces after itself."""
        if len(self.buf) - self.i < size:
            self._refill(size)
        buf, i = self.buf, self.i
        tracing = typ == _R_HEADER_TRACING_DATA
        if len(buf) - i >= size >= RECORD_HEADER_SIZE + (4 if tracing else 8):
            code = "I" if tracing else "Q"
            return int(struct.unpack_from(self.order + code, buf, i + RECORD_HEADER_SIZE)[0])
        return 0

    def advance(self) -> bool:
        """Step over the record :meth:`frame` returned; False: the input ends inside it (an
        AUXTRACE record's data, reported in the problems)."""
        skip, self.skip = self.skip, 0
        buf, i = self.buf, self.i
        if len(buf) - i >= skip:
            self.i = i + skip
            return True
        pos = self.base + i
        jump = pos + skip  # past the window (AUXTRACE data, padding): drop it, read on from there
        source = self.source
        if self.typ == _R_AUXTRACE and self.end is None and not source.read(jump - 1, 1, 1):
            left = source.size - pos if source.size is not None else len(buf) - i
            self._overrun(pos, self.typ, skip, max(left, 0))
            return False
        self.buf, self.i, self.base = b"", 0, jump
        return True

    def _overrun(self, pos: int, typ: int, size: int, left: int) -> None:
        """Report a record at ``pos`` of ``size`` bytes (with the data it announces) that does not fit."""
        name = RECORD_NAMES.get(typ) or record_name(typ)
        end = self.end
        shrunk = self.source.shrunk(pos + left)
        if shrunk is not None:
            self.problems.append(
                f"truncated at offset {pos + left}: the file shrank to {shrunk} bytes while being read"
                f" (record {name} at offset {pos} needs {size} bytes)"
            )
        elif end is None or self.cut:
            self.problems.append(
                f"truncated at offset {pos + left}: record {name} at offset {pos} needs {size} bytes,"
                f" the input ends after {left}"
            )
        else:
            self.problems.append(
                f"record {name} at offset {pos} runs past the end of the data section"
                f" ({size} bytes, {left} left before offset {end})"
            )
