"""perf_event_open(2) through ctypes: per-CPU tracepoint events sharing one mmap ring per CPU.

Linux only.  No perf binary: the syscall, three ioctls and mmap.  Every CPU gets a
software "dummy" event that owns the CPU's ring buffer; each tracepoint event on
that CPU is redirected into it with PERF_EVENT_IOC_SET_OUTPUT, and
PERF_SAMPLE_IDENTIFIER tells the tracepoints apart.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import platform
import struct
from typing import Final

from .abi import (
    ATTR_SIZE_VER5,
    CLOCK_MONOTONIC,
    COUNT_SW_DUMMY,
    FLAG_FD_CLOEXEC,
    IOC_ENABLE,
    IOC_ID,
    IOC_SET_OUTPUT,
    AttrFlag,
    EventType,
    ReadFormat,
)
from .ring import RingBuffer

__all__ = [
    "CpuRing",
    "PerfError",
    "PerfEventAttr",
    "enable",
    "event_id",
    "make_attr",
    "online_cpus",
    "open_event",
    "set_output",
]

#: ``perf_event_open``'s system call number per machine.
_SYSCALL_NR: Final = {"x86_64": 298, "amd64": 298, "aarch64": 241, "arm64": 241}


class PerfError(OSError):
    """perf_event_open or one of its ioctls failed (errno in ``.errno``)."""


class PerfEventAttr(ctypes.Structure):
    """``struct perf_event_attr`` up to PERF_ATTR_SIZE_VER5 (112 bytes)."""

    _fields_ = (
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
    )


assert ctypes.sizeof(PerfEventAttr) == ATTR_SIZE_VER5

_libc: ctypes.CDLL | None = None


def _syscall_nr() -> int:
    nr = _SYSCALL_NR.get(platform.machine().lower())
    if nr is None:
        raise PerfError(errno.ENOSYS, f"perf_event_open: unsupported machine {platform.machine()!r}")
    return nr


def _open(attr: PerfEventAttr, pid: int, cpu: int, group_fd: int = -1, flags: int = 0) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    fd = int(
        _libc.syscall(
            ctypes.c_long(_syscall_nr()),
            ctypes.byref(attr),
            ctypes.c_int(pid),
            ctypes.c_int(cpu),
            ctypes.c_int(group_fd),
            ctypes.c_ulong(flags),
        )
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise PerfError(err, f"perf_event_open: {os.strerror(err)}")
    return fd


def make_attr(
    type_: int,
    config: int,
    *,
    sample_type: int,
    clockid: int | None = CLOCK_MONOTONIC,
    disabled: bool = False,
    read_format: int = 0,
    sample_id_all: bool = False,
) -> PerfEventAttr:
    """The ``perf_event_attr`` of one sampling event (what :func:`open_event` opens, and what a
    perf.data writer records for it).

    Every sample is taken (period 1) with the fields of ``sample_type``
    (:class:`~structlog_etw.perf.abi.SampleFormat` bits), and every sample wakes
    a poller (wakeup_events 1).  ``clockid`` selects the timestamp clock (None: perf's
    own clock; tracepoints refuse the non-NMI-safe CLOCK_REALTIME with EINVAL).
    ``sample_id_all``: the kernel's other records (LOST) end with the sample's id fields.
    """
    attr = PerfEventAttr()
    attr.type = int(type_)
    attr.size = ctypes.sizeof(PerfEventAttr)
    attr.config = config
    attr.sample_period = 1
    attr.sample_type = sample_type
    attr.wakeup_events = 1
    attr.read_format = read_format
    flags = AttrFlag.DISABLED if disabled else AttrFlag(0)
    if sample_id_all:
        flags |= AttrFlag.SAMPLE_ID_ALL
    if clockid is not None:
        flags |= AttrFlag.USE_CLOCKID
        attr.clockid = clockid
    attr.flags = int(flags)
    return attr


def open_event(
    type_: int,
    config: int,
    cpu: int,
    *,
    sample_type: int,
    clockid: int | None = CLOCK_MONOTONIC,
    disabled: bool = False,
    read_format: int = 0,
    sample_id_all: bool = False,
) -> int:
    """Open one sampling event (:func:`make_attr`'s) on ``cpu`` for every process (pid -1); return its fd."""
    attr = make_attr(
        type_,
        config,
        sample_type=sample_type,
        clockid=clockid,
        disabled=disabled,
        read_format=read_format,
        sample_id_all=sample_id_all,
    )
    return _open(attr, -1, cpu, -1, FLAG_FD_CLOEXEC)


def event_id(fd: int) -> int:
    """The kernel's id of the event behind ``fd`` (what PERF_SAMPLE_IDENTIFIER carries)."""
    buf = bytearray(8)
    fcntl.ioctl(fd, IOC_ID, buf, True)
    return int(struct.unpack("=Q", buf)[0])


def set_output(fd: int, target_fd: int) -> None:
    """Send ``fd``'s records into ``target_fd``'s ring buffer."""
    fcntl.ioctl(fd, IOC_SET_OUTPUT, target_fd)


def enable(fd: int) -> None:
    """Start counting/sampling on ``fd``."""
    fcntl.ioctl(fd, IOC_ENABLE, 0)


def online_cpus(path: str = "/sys/devices/system/cpu/online") -> list[int]:
    """The online CPUs, from a list like ``0-3,5,7-8``."""
    with open(path) as f:
        text = f.read().strip()
    return parse_cpu_list(text)


def parse_cpu_list(text: str) -> list[int]:
    """Parse the kernel's CPU list format (``0-3,5``)."""
    cpus: list[int] = []
    for item in text.split(","):
        part = item.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


class CpuRing:
    """One CPU's ring buffer: a dummy leader event, its mmap, and the tracepoint fds feeding it.

    Every event of the ring samples ``sample_type`` (the records' layout for whoever parses them);
    ``sample_id_all``: the kernel's other records (LOST) carry the id fields too (perf.data needs them).
    """

    __slots__ = ("clockid", "cpu", "fd", "fds", "mm", "ring", "sample_id_all", "sample_type")

    def __init__(
        self, cpu: int, pages: int, clockid: int | None, sample_type: int, sample_id_all: bool = False
    ) -> None:
        if pages < 1 or pages & (pages - 1):
            raise ValueError("pages must be a power of two")
        self.cpu = cpu
        self.clockid = clockid
        self.sample_type = sample_type
        self.sample_id_all = sample_id_all
        self.fds: list[int] = []
        self.fd = open_event(
            EventType.SOFTWARE,
            COUNT_SW_DUMMY,
            cpu,
            sample_type=sample_type,
            clockid=clockid,
            sample_id_all=sample_id_all,
        )
        try:
            page = mmap.PAGESIZE
            self.mm = mmap.mmap(
                self.fd, (pages + 1) * page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
            )
        except OSError:
            os.close(self.fd)
            raise
        self.ring = RingBuffer(self.mm, mmap.PAGESIZE)

    def tracepoint_attr(self, tracepoint_id: int) -> PerfEventAttr:
        """The ``perf_event_attr`` :meth:`add_tracepoint` opens ``tracepoint_id`` with."""
        return make_attr(
            EventType.TRACEPOINT,
            tracepoint_id,
            sample_type=self.sample_type,
            clockid=self.clockid,
            disabled=True,
            read_format=ReadFormat.LOST,
            sample_id_all=self.sample_id_all,
        )

    def add_tracepoint(self, tracepoint_id: int) -> int:
        """Open tracepoint ``tracepoint_id`` on this CPU into this ring; return its sample identifier."""
        fd = _open(self.tracepoint_attr(tracepoint_id), -1, self.cpu, -1, FLAG_FD_CLOEXEC)
        try:
            set_output(fd, self.fd)
            ident = event_id(fd)
            enable(fd)
        except OSError:
            os.close(fd)
            raise
        self.fds.append(fd)
        return ident

    def lost_samples(self) -> int:
        """How many samples of this CPU's tracepoint events the kernel dropped (ring full), so far.

        The kernel's own counters (PERF_FORMAT_LOST): exact even for losses whose
        PERF_RECORD_LOST has not been written yet (that happens only once an event fits again).
        """
        total = 0
        for fd in self.fds:
            try:
                data = os.read(fd, 16)
            except OSError:
                continue
            if len(data) == 16:
                total += struct.unpack("=QQ", data)[1]
        return total

    def close(self) -> None:
        """Close every fd and unmap the ring."""
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
        self.ring.release()
        self.mm.close()
        os.close(self.fd)
