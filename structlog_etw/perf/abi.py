"""The numbers of the perf ABI: the one home of every ``PERF_*`` constant the package uses.

From the kernel's ``include/uapi/linux/perf_event.h`` (record types, sample and read formats,
event types, ``perf_event_attr`` flags and sizes, the ring buffer's header page, ioctls) and
from perf's own ``perf.data`` format (the record types from 64 on, the feature bits).
Pure data, stdlib only; importable on every OS.

The enums document the numbers and give them names (``RecordType(9).name == "SAMPLE"``).
Code that tests a sample format once per sample compares plain ints (an ``IntFlag`` operation
costs far more than an ``int`` one), so parsers convert a format with ``int()`` once.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "ATTR_SIZE_VER0",
    "ATTR_SIZE_VER5",
    "CLOCK_MONOTONIC",
    "CLOCK_REALTIME",
    "COUNT_SW_DUMMY",
    "DATA_HEAD_OFFSET",
    "DATA_TAIL_OFFSET",
    "FEATURE_NAMES",
    "FILE_HEADER_SIZE",
    "FILE_MAGIC",
    "FLAG_FD_CLOEXEC",
    "IOC_DISABLE",
    "IOC_ENABLE",
    "IOC_ID",
    "IOC_SET_OUTPUT",
    "PIPE_HEADER_SIZE",
    "RECORD_HEADER_SIZE",
    "RECORD_NAMES",
    "STRING_ALIGN",
    "TRACING_DATA_MAGIC",
    "TRACING_DATA_VERSION",
    "AttrFlag",
    "EventType",
    "Feature",
    "ReadFormat",
    "RecordType",
    "SampleFormat",
    "record_name",
]


class RecordType(enum.IntEnum):
    """``perf_event_header.type``: the kernel's records (1-63) and perf's own (64 on, perf.data only)."""

    MMAP = 1
    LOST = 2
    COMM = 3
    EXIT = 4
    THROTTLE = 5
    UNTHROTTLE = 6
    FORK = 7
    READ = 8
    SAMPLE = 9
    MMAP2 = 10
    AUX = 11
    ITRACE_START = 12
    LOST_SAMPLES = 13
    SWITCH = 14
    SWITCH_CPU_WIDE = 15
    NAMESPACES = 16
    KSYMBOL = 17
    BPF_EVENT = 18
    CGROUP = 19
    TEXT_POKE = 20
    AUX_OUTPUT_HW_ID = 21
    HEADER_ATTR = 64
    HEADER_EVENT_TYPE = 65
    HEADER_TRACING_DATA = 66
    HEADER_BUILD_ID = 67
    FINISHED_ROUND = 68
    ID_INDEX = 69
    AUXTRACE_INFO = 70
    AUXTRACE = 71
    AUXTRACE_ERROR = 72
    THREAD_MAP = 73
    CPU_MAP = 74
    STAT_CONFIG = 75
    STAT = 76
    STAT_ROUND = 77
    EVENT_UPDATE = 78
    TIME_CONV = 79
    HEADER_FEATURE = 80
    COMPRESSED = 81
    FINISHED_INIT = 82
    COMPRESSED2 = 83


#: ``perf_event_header.type`` -> name (for record counts and messages).
RECORD_NAMES: Final[dict[int, str]] = {r.value: r.name for r in RecordType}

#: Bytes of ``struct perf_event_header`` (u32 type, u16 misc, u16 size) before every record.
RECORD_HEADER_SIZE: Final = 8


def record_name(rtype: int) -> str:
    """The name of record type ``rtype`` (``TYPE_<n>`` for one this package does not know)."""
    return RECORD_NAMES.get(rtype, f"TYPE_{rtype}")


class SampleFormat(enum.IntFlag):
    """``perf_event_attr.sample_type``: what a PERF_RECORD_SAMPLE holds.

    The record holds the fields in the kernel's order, not in bit order (IDENTIFIER comes first,
    READ after PERIOD); :mod:`~structlog_etw.perf.records` has that layout.
    """

    IP = 0x1
    TID = 0x2
    TIME = 0x4
    ADDR = 0x8
    READ = 0x10
    CALLCHAIN = 0x20
    ID = 0x40
    CPU = 0x80
    PERIOD = 0x100
    STREAM_ID = 0x200
    RAW = 0x400
    IDENTIFIER = 0x10000


#: ``perf_event_attr.read_format``: what ``read()`` on an event fd (and SAMPLE_READ) returns;
#: the bits 1, 2, 4, 8, 16 in this order (LOST: the samples the kernel dropped, Linux 6.0+).
ReadFormat = enum.IntFlag(
    "ReadFormat", "TOTAL_TIME_ENABLED TOTAL_TIME_RUNNING ID GROUP LOST", module=__name__
)


class EventType(enum.IntEnum):
    """``perf_event_attr.type``."""

    HARDWARE = 0
    SOFTWARE = 1
    TRACEPOINT = 2


#: ``perf_event_attr.config`` of the software event that counts nothing (a ring buffer owner).
COUNT_SW_DUMMY: Final = 9


class AttrFlag(enum.IntFlag):
    """The bits of ``perf_event_attr``'s flags word that this package sets or reads."""

    DISABLED = 1 << 0
    SAMPLE_ID_ALL = 1 << 18
    USE_CLOCKID = 1 << 25


#: ``sizeof(struct perf_event_attr)``, first published version (the smallest perf.data may hold).
ATTR_SIZE_VER0: Final = 64
#: ``sizeof(struct perf_event_attr)`` up to ``aux_watermark``/``sample_max_stack``.
ATTR_SIZE_VER5: Final = 112

#: ``perf_event_open`` flag: the new fd is close-on-exec.
FLAG_FD_CLOEXEC: Final = 1 << 3

#: ioctls on an event fd.
IOC_ENABLE: Final = 0x2400
IOC_DISABLE: Final = 0x2401
IOC_SET_OUTPUT: Final = 0x2405
IOC_ID: Final = 0x80082407

#: ``perf_event_mmap_page``: where ``data_head`` and ``data_tail`` are in the ring's first page.
DATA_HEAD_OFFSET: Final = 1024
DATA_TAIL_OFFSET: Final = 1032

#: ``perf_event_attr.clockid`` values (``time.CLOCK_*``, which Windows lacks).
CLOCK_REALTIME: Final = 0
CLOCK_MONOTONIC: Final = 1


#: perf.data feature bits (``HEADER_*`` in perf's ``header.h``, numbered from 1): the optional
#: sections of a file.
Feature = enum.IntEnum(
    "Feature",
    "TRACING_DATA BUILD_ID HOSTNAME OSRELEASE VERSION ARCH NRCPUS CPUDESC CPUID TOTAL_MEM CMDLINE"
    " EVENT_DESC CPU_TOPOLOGY NUMA_TOPOLOGY BRANCH_STACK PMU_MAPPINGS GROUP_DESC AUXTRACE STAT CACHE"
    " SAMPLE_TIME MEM_TOPOLOGY CLOCKID DIR_FORMAT BPF_PROG_INFO BPF_BTF COMPRESSED CPU_PMU_CAPS"
    " CLOCK_DATA HYBRID_TOPOLOGY PMU_CAPS",
    module=__name__,
)


#: perf.data feature bit -> name (for messages).
FEATURE_NAMES: Final[dict[int, str]] = {f.value: f.name for f in Feature}


#: perf.data's first 8 bytes as a little-endian file holds them (``2ELIFREP``: a big-endian file).
FILE_MAGIC: Final = b"PERFILE2"
#: ``sizeof(struct perf_file_header)``: magic, size, attr_size, the attrs/data/event_types
#: sections (offset, size) and the 256 feature bits.
FILE_HEADER_SIZE: Final = 104
#: The header of perf's pipe format: the magic and a size of 16; everything else is records.
PIPE_HEADER_SIZE: Final = 16
#: A ``perf_header_string`` (OSRELEASE, HOSTNAME, ...) is padded, NUL included, to this many bytes.
STRING_ALIGN: Final = 64
#: HEADER_TRACING_DATA begins with this signature, then the version as a NUL-terminated string.
TRACING_DATA_MAGIC: Final = b"\x17\x08\x44tracing"
#: The tracing data version perf writes now (0.6: a saved_cmdlines section at the end).
TRACING_DATA_VERSION: Final = b"0.6"
