"""Where a perf.data reader's bytes come from: a file read with ``pread`` or a pipe read as it is written.

The input is never mapped: a file that shrinks while it is read is a reported truncation (see
:meth:`Source.shrunk`), not a SIGBUS, and a pipe is decoded as perf writes it.  :func:`open_fd`
tells the kinds apart (a regular file; a pipe in perf's pipe mode; a file-mode image through a
pipe, read whole, since its tracepoint formats come after its data).  Like ``tracepoint_perf``'s
input file: the reader above it sees offsets, never descriptors.

Pure Python, stdlib only; importable on every OS.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable
from typing import Final

#: Bytes read at a time (a ``pread`` of a file, at most this much per ``read`` of a pipe).
CHUNK: Final = 1 << 20
#: Bytes asked of one read of a pipe (its buffer: a larger request only makes a larger buffer to shrink).
_PIPE_CHUNK: Final = 1 << 16
#: The magic of a perf.data file, in its two byte orders.
MAGICS: Final = {b"PERFILE2": "<", b"2ELIFREP": ">"}
#: Bytes of the header a pipe-mode file starts with (magic, header size).
PIPE_HEADER_SIZE: Final = 16


class Source:
    """The input's bytes by offset.  ``read`` returns up to ``most`` bytes at ``pos``, at least
    ``least`` unless the input ends first (a short result: the end)."""

    #: The input's size when it was opened (None: a pipe).
    size: int | None = None

    def read(self, pos: int, least: int, most: int) -> bytes:
        """Up to ``most`` bytes at ``pos``; fewer than ``least`` only at the end of the input."""
        raise NotImplementedError

    def shrunk(self, pos: int) -> int | None:
        """The input's current size when it ended at ``pos`` before :attr:`size` (it shrank), else None."""
        return None

    def close(self) -> None:
        """Release the file (idempotent)."""


class BytesSource(Source):
    """An image held in memory (:meth:`~structlog_etw.perf.datafile.PerfDataFile.from_bytes`, or a
    file-mode image that came through a pipe)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def read(self, pos: int, least: int, most: int) -> bytes:
        return self.data[pos : pos + most]

    def close(self) -> None:
        self.data = b""


class FileSource(Source):
    """A regular file, read with ``pread``: what it holds now, whatever it held when opened."""

    def __init__(self, fd: int, size: int, owned: bool) -> None:
        self.fd = fd
        self.size = size
        self.owned = owned

    def read(self, pos: int, least: int, most: int) -> bytes:
        if self.fd < 0:
            return b""
        if most > CHUNK:  # never a buffer larger than what the file holds
            most = max(0, min(most, os.fstat(self.fd).st_size - pos))
        data = os.pread(self.fd, most, pos)
        while len(data) < least:
            more = os.pread(self.fd, min(most - len(data), CHUNK), pos + len(data))
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


class StreamSource(Source):
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
            if not self._os_read(min(pos - self.pos, CHUNK)):
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


def open_fd(fd: int, owned: bool) -> Source:
    """The source of the perf.data file or pipe open as ``fd`` (``owned``: closing it closes ``fd``).

    A regular file is read with ``pread``; anything else as a stream: pipe-mode data as it
    arrives, a file-mode image whole first (its tracepoint formats come after its data).
    What is not a perf.data file is returned as the bytes read, for the header to reject."""
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode):
        return FileSource(fd, st.st_size, owned)
    head = b""
    while len(head) < PIPE_HEADER_SIZE:
        more = os.read(fd, PIPE_HEADER_SIZE - len(head))
        if not more:
            break
        head += more
    order = MAGICS.get(head[:8]) if len(head) == PIPE_HEADER_SIZE else None
    if order is None:
        return BytesSource(head)
    if struct.unpack_from(order + "Q", head, 8)[0] == PIPE_HEADER_SIZE:
        return StreamSource(fd, owned, head)
    chunks = [head]  # a file-mode image: all of it
    while chunk := os.read(fd, CHUNK):
        chunks.append(chunk)
    if owned:
        os.close(fd)
    return BytesSource(b"".join(chunks))
