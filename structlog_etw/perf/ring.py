"""The perf ring buffer: records out of a ``perf_event_open`` mmap.

Pure Python over any writable buffer laid out like the kernel's mapping: page 0 is
``struct perf_event_mmap_page`` (``data_head`` at byte 1024, ``data_tail`` at 1032),
followed by ``2**n`` data pages.  The live reader (:mod:`~structlog_etw.perf.listener`)
hands the mmap; the tests hand a ``bytearray`` with the same layout, so both go through the
same code.  The records' bodies are parsed by :mod:`~structlog_etw.perf.records`.

Memory ordering follows the kernel's contract (include/uapi/linux/perf_event.h):
read ``data_head`` with acquire semantics, then read the records, then store
``data_tail`` with release semantics.  Where libatomic is available its
``__atomic_load_8``/``__atomic_store_8`` do exactly that; otherwise (x86_64 is
TSO, where plain aligned loads and stores already have those semantics) plain
8-byte accesses are used.  libatomic is looked up when the first ring is made, not on import.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable
from typing import Any

from .abi import DATA_HEAD_OFFSET, DATA_TAIL_OFFSET
from .records import record_header

__all__ = ["RingBuffer", "read_records"]

_HEADER = record_header("=")


def read_records(data: Any, tail: int, head: int) -> list[tuple[int, int, bytes]]:
    """Copy the records between ``tail`` and ``head`` out of the ring's data area.

    ``data`` is the data area (a buffer of power-of-two size); ``tail``/``head`` are
    the free-running byte counters of ``perf_event_mmap_page``.  A record may wrap
    around the end of the area; it is reassembled.  Returns ``(type, misc, body)``
    per record (body without the 8-byte header).  A record header that claims a
    size smaller than a header or past ``head`` ends the walk (the rest of the
    window is dropped: the caller moves the tail to ``head`` regardless).
    """
    size = len(data)
    out: list[tuple[int, int, bytes]] = []
    pos = tail
    while head - pos >= _HEADER.size:
        hdr = _copy(data, size, pos, _HEADER.size)
        rtype, misc, rsize = _HEADER.unpack(hdr)
        if rsize < _HEADER.size or pos + rsize > head:
            break
        out.append((rtype, misc, _copy(data, size, pos + _HEADER.size, rsize - _HEADER.size)))
        pos += rsize
    return out


def _copy(data: Any, size: int, pos: int, n: int) -> bytes:
    start = pos & (size - 1)
    end = start + n
    if end <= size:
        return bytes(data[start:end])
    return bytes(data[start:size]) + bytes(data[0 : end - size])


_Load = Callable[[int], int]
_Store = Callable[[int, int], None]


def _plain_load(addr: int) -> int:
    return int(ctypes.c_uint64.from_address(addr).value)


def _plain_store(addr: int, value: int) -> None:
    ctypes.c_uint64.from_address(addr).value = value


@functools.cache
def _atomics() -> tuple[_Load, _Store]:
    """Acquire load and release store of 8 bytes: libatomic's, or plain accesses without it."""
    name = ctypes.util.find_library("atomic") or "libatomic.so.1"
    try:
        lib = ctypes.CDLL(name)
        load = lib.__atomic_load_8
        store = lib.__atomic_store_8
    except (OSError, AttributeError):
        return _plain_load, _plain_store
    load.argtypes = [ctypes.c_void_p, ctypes.c_int]
    load.restype = ctypes.c_uint64
    store.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int]
    store.restype = None
    acquire, release = 2, 3  # __ATOMIC_ACQUIRE, __ATOMIC_RELEASE

    def load_acquire(addr: int) -> int:
        return int(load(addr, acquire))

    def store_release(addr: int, value: int) -> None:
        store(addr, value, release)

    return load_acquire, store_release


class RingBuffer:
    """A perf ring buffer mapping: ``read()`` returns the new records and frees their space.

    ``buf`` is the whole mapping (header page + data pages), ``page_size`` the size of
    the header page.  Call :meth:`release` before closing/unmapping ``buf``.
    """

    __slots__ = ("_base", "_data", "_head_ptr", "_load", "_store", "_tail_ptr", "_view")

    def __init__(self, buf: Any, page_size: int) -> None:
        view = memoryview(buf).cast("B")
        data_size = len(view) - page_size
        if data_size <= 0 or data_size & (data_size - 1):
            raise ValueError("the data area must be a power of two in size")
        self._view: memoryview | None = view
        self._data: memoryview | None = view[page_size:]
        self._base: Any = ctypes.c_char.from_buffer(view)
        base = ctypes.addressof(self._base)
        self._head_ptr = base + DATA_HEAD_OFFSET
        self._tail_ptr = base + DATA_TAIL_OFFSET
        self._load, self._store = _atomics()

    def read(self) -> list[tuple[int, int, bytes]]:
        """Records written since the last call, oldest first; their space is handed back to the kernel."""
        if self._data is None:
            return []
        head = self._load(self._head_ptr)  # acquire: the records up to head are visible after this
        tail = self._load(self._tail_ptr)
        if head == tail:
            return []
        records = read_records(self._data, tail, head)
        self._store(self._tail_ptr, head)  # release: our reads are done before the kernel reuses the space
        return records

    def release(self) -> None:
        """Drop every reference into the buffer (so an mmap can be closed)."""
        self._base = None
        if self._data is not None:
            self._data.release()
            self._data = None
        if self._view is not None:
            self._view.release()
            self._view = None
