"""The perf ring buffer: records out of a ``perf_event_open`` mmap, and PERF_RECORD_SAMPLE parsing.

Pure Python over any writable buffer laid out like the kernel's mapping: page 0 is
``struct perf_event_mmap_page`` (``data_head`` at byte 1024, ``data_tail`` at 1032),
followed by ``2**n`` data pages.  The live reader (`_listen`) hands the mmap; the
tests hand a ``bytearray`` with the same layout, so both go through the same code.

Memory ordering follows the kernel's contract (include/uapi/linux/perf_event.h):
read ``data_head`` with acquire semantics, then read the records, then store
``data_tail`` with release semantics.  Where libatomic is available its
``__atomic_load_8``/``__atomic_store_8`` do exactly that; otherwise (x86_64 is
TSO, where plain aligned loads and stores already have those semantics) plain
8-byte accesses are used.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "DATA_HEAD_OFFSET",
    "DATA_TAIL_OFFSET",
    "PERF_RECORD_LOST",
    "PERF_RECORD_SAMPLE",
    "RingBuffer",
    "Sample",
    "parse_lost",
    "parse_sample",
    "read_records",
]

PERF_RECORD_LOST: Final = 2
PERF_RECORD_SAMPLE: Final = 9

PERF_SAMPLE_IP: Final = 1 << 0
PERF_SAMPLE_TID: Final = 1 << 1
PERF_SAMPLE_TIME: Final = 1 << 2
PERF_SAMPLE_ADDR: Final = 1 << 3
PERF_SAMPLE_READ: Final = 1 << 4
PERF_SAMPLE_CALLCHAIN: Final = 1 << 5
PERF_SAMPLE_ID: Final = 1 << 6
PERF_SAMPLE_CPU: Final = 1 << 7
PERF_SAMPLE_PERIOD: Final = 1 << 8
PERF_SAMPLE_STREAM_ID: Final = 1 << 9
PERF_SAMPLE_RAW: Final = 1 << 10
PERF_SAMPLE_IDENTIFIER: Final = 1 << 16

#: What the listener asks for; the order of a sample's fields is fixed by the kernel.
SAMPLE_TYPE: Final = (
    PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW
)

DATA_HEAD_OFFSET: Final = 1024
DATA_TAIL_OFFSET: Final = 1032
_HEADER = struct.Struct("<IHH")
_U64 = struct.Struct("=Q")
_U32_PAIR = struct.Struct("=II")


@dataclass(frozen=True)
class Sample:
    """One PERF_RECORD_SAMPLE: the fields the listener asked for (None when not sampled)."""

    id: int | None
    pid: int | None
    tid: int | None
    time: int | None
    cpu: int | None
    raw: bytes


def parse_sample(body: bytes, sample_type: int = SAMPLE_TYPE) -> Sample:
    """Parse a PERF_RECORD_SAMPLE body (after the 8-byte record header).

    Supports the sample bits laid out before RAW without variable length:
    IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD.  Raises ValueError
    on a body too short for what ``sample_type`` promises, or on a bit it cannot skip.
    """
    if sample_type & (PERF_SAMPLE_READ | PERF_SAMPLE_CALLCHAIN):
        raise ValueError("READ/CALLCHAIN samples are not supported")
    pos = 0
    ident = pid = tid = time = cpu = None

    def u64() -> int:
        nonlocal pos
        if pos + 8 > len(body):
            raise ValueError("sample record too short")
        (v,) = _U64.unpack_from(body, pos)
        pos += 8
        return int(v)

    def u32_pair() -> tuple[int, int]:
        nonlocal pos
        if pos + 8 > len(body):
            raise ValueError("sample record too short")
        first, second = _U32_PAIR.unpack_from(body, pos)
        pos += 8
        return int(first), int(second)

    if sample_type & PERF_SAMPLE_IDENTIFIER:
        ident = u64()
    if sample_type & PERF_SAMPLE_IP:
        u64()
    if sample_type & PERF_SAMPLE_TID:
        pid, tid = u32_pair()
    if sample_type & PERF_SAMPLE_TIME:
        time = u64()
    if sample_type & PERF_SAMPLE_ADDR:
        u64()
    if sample_type & PERF_SAMPLE_ID:
        v = u64()
        ident = v if ident is None else ident
    if sample_type & PERF_SAMPLE_STREAM_ID:
        u64()
    if sample_type & PERF_SAMPLE_CPU:
        cpu, _res = u32_pair()
    if sample_type & PERF_SAMPLE_PERIOD:
        u64()
    raw = b""
    if sample_type & PERF_SAMPLE_RAW:
        if pos + 4 > len(body):
            raise ValueError("sample record too short for its raw size")
        (size,) = struct.unpack_from("=I", body, pos)
        pos += 4
        if pos + size > len(body):
            raise ValueError("raw data runs past the sample record")
        raw = bytes(body[pos : pos + size])
    return Sample(ident, pid, tid, time, cpu, raw)


def parse_lost(body: bytes) -> tuple[int, int]:
    """Parse a PERF_RECORD_LOST body: ``(id, lost)``."""
    if len(body) < 16:
        raise ValueError("lost record too short")
    ident, lost = struct.unpack_from("=QQ", body, 0)
    return int(ident), int(lost)


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


def _atomics() -> tuple[Callable[[int], int], Callable[[int, int], None]] | None:
    name = ctypes.util.find_library("atomic") or "libatomic.so.1"
    try:
        lib = ctypes.CDLL(name)
        load = lib.__atomic_load_8
        store = lib.__atomic_store_8
    except (OSError, AttributeError):
        return None
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


_ATOMICS = _atomics()


class RingBuffer:
    """A perf ring buffer mapping: ``read()`` returns the new records and frees their space.

    ``buf`` is the whole mapping (header page + data pages), ``page_size`` the size of
    the header page.  Call :meth:`release` before closing/unmapping ``buf``.
    """

    __slots__ = ("_base", "_data", "_head_ptr", "_tail_ptr", "_view")

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

    def _load(self, addr: int) -> int:
        if _ATOMICS is not None:
            return _ATOMICS[0](addr)
        return int(ctypes.c_uint64.from_address(addr).value)

    def _store(self, addr: int, value: int) -> None:
        if _ATOMICS is not None:
            _ATOMICS[1](addr, value)
        else:
            ctypes.c_uint64.from_address(addr).value = value

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
