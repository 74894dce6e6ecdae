"""The ETW controller/consumer ABI: numbers and ctypes structures in the Windows x64 layout.

Sizes and offsets follow the Windows SDK headers ``evntrace.h``, ``evntcons.h`` and
``evntprov.h`` (the same declarations as mingw-w64's ``mingw-w64-headers/include/evntrace.h``
and ``evntcons.h``), for x64; ``tests/etw/test_abi.py`` asserts every ``sizeof``/``offsetof``
below, and the C stand-in of advapi32 (``tests/csrc/fake_eventing.c``) declares the same
structures with ``_Static_assert``\\ s, so a layout mistake on either side fails on Linux.

x64 sizes (offsets of the fields the code uses are in docs/windows.md and the test):
``WNODE_HEADER`` 48, ``EVENT_TRACE_PROPERTIES`` 120, ``EVENT_TRACE_HEADER`` 48, ``EVENT_TRACE`` 88,
``TIME_ZONE_INFORMATION`` 172, ``TRACE_LOGFILE_HEADER`` 280, ``EVENT_TRACE_LOGFILEW`` 448
(``EventRecordCallback`` at 424, ``Context`` at 440), ``ENABLE_TRACE_PARAMETERS`` 48,
``EVENT_DESCRIPTOR`` 16, ``EVENT_HEADER`` 80, ``EVENT_RECORD`` 112 (``ExtendedData`` at 88,
``UserData`` at 96), ``EVENT_HEADER_EXTENDED_DATA_ITEM`` 16.

Strings in these structures (``LPWSTR``) are ``c_void_p`` here and filled with UTF-16-LE buffers
made by :func:`wide`: ``ctypes.c_wchar`` is 4 bytes on Linux, and the same code must run against
the stand-in there.
"""

from __future__ import annotations

import ctypes
import uuid
from typing import Final

from ..formats.tracelogging import FILETIME_UNIX_EPOCH  # EVENT_HEADER.TimeStamp is a FILETIME

__all__ = [
    "ENABLE_TRACE_PARAMETERS",
    "ENABLE_TRACE_PARAMETERS_VERSION_2",
    "ERROR_ACCESS_DENIED",
    "ERROR_ALREADY_EXISTS",
    "ERROR_CTX_CLOSE_PENDING",
    "ERROR_WMI_INSTANCE_NOT_FOUND",
    "EVENT_CONTROL_CODE_DISABLE_PROVIDER",
    "EVENT_CONTROL_CODE_ENABLE_PROVIDER",
    "EVENT_DESCRIPTOR",
    "EVENT_HEADER",
    "EVENT_HEADER_EXTENDED_DATA_ITEM",
    "EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL",
    "EVENT_HEADER_EXT_TYPE_PROV_TRAITS",
    "EVENT_HEADER_EXT_TYPE_RELATED_ACTIVITYID",
    "EVENT_HEADER_FLAG_32_BIT_HEADER",
    "EVENT_HEADER_FLAG_PROCESSOR_INDEX",
    "EVENT_RECORD",
    "EVENT_TRACE",
    "EVENT_TRACE_CONTROL_FLUSH",
    "EVENT_TRACE_CONTROL_QUERY",
    "EVENT_TRACE_CONTROL_STOP",
    "EVENT_TRACE_HEADER",
    "EVENT_TRACE_LOGFILEW",
    "EVENT_TRACE_PROPERTIES",
    "EVENT_TRACE_REAL_TIME_MODE",
    "FILETIME_UNIX_EPOCH",
    "GUID",
    "INVALID_PROCESSTRACE_HANDLE",
    "PROCESS_TRACE_MODE_EVENT_RECORD",
    "PROCESS_TRACE_MODE_REAL_TIME",
    "TIME_ZONE_INFORMATION",
    "TRACE_LOGFILE_HEADER",
    "WNODE_CLIENT_CONTEXT_QPC",
    "WNODE_FLAG_TRACED_GUID",
    "WNODE_HEADER",
    "wide",
]

# -- numbers (evntrace.h, evntcons.h, winerror.h) ----------------------------------------------

#: EVENT_TRACE_PROPERTIES.LogFileMode: deliver events to real-time consumers.
EVENT_TRACE_REAL_TIME_MODE: Final = 0x00000100
#: WNODE_HEADER.Flags: the properties describe an event tracing session.
WNODE_FLAG_TRACED_GUID: Final = 0x00020000
#: WNODE_HEADER.ClientContext: timestamps from QueryPerformanceCounter.
WNODE_CLIENT_CONTEXT_QPC: Final = 1
#: ControlTraceW codes.
EVENT_TRACE_CONTROL_QUERY: Final = 0
EVENT_TRACE_CONTROL_STOP: Final = 1
EVENT_TRACE_CONTROL_FLUSH: Final = 3
#: EnableTraceEx2 ControlCode.
EVENT_CONTROL_CODE_DISABLE_PROVIDER: Final = 0
EVENT_CONTROL_CODE_ENABLE_PROVIDER: Final = 1
ENABLE_TRACE_PARAMETERS_VERSION_2: Final = 2
#: EVENT_TRACE_LOGFILEW.ProcessTraceMode.
PROCESS_TRACE_MODE_REAL_TIME: Final = 0x00000100
PROCESS_TRACE_MODE_EVENT_RECORD: Final = 0x10000000
#: What OpenTraceW returns on failure in a 64-bit process ((TRACEHANDLE)INVALID_HANDLE_VALUE).
INVALID_PROCESSTRACE_HANDLE: Final = 0xFFFFFFFFFFFFFFFF
#: EVENT_HEADER_EXTENDED_DATA_ITEM.ExtType values.
EVENT_HEADER_EXT_TYPE_RELATED_ACTIVITYID: Final = 1
EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL: Final = 11
EVENT_HEADER_EXT_TYPE_PROV_TRAITS: Final = 12
#: Win32 errors the controller handles.
ERROR_ACCESS_DENIED: Final = 5
ERROR_ALREADY_EXISTS: Final = 183
ERROR_WMI_INSTANCE_NOT_FOUND: Final = 4201
ERROR_CTX_CLOSE_PENDING: Final = 7007
#: EVENT_HEADER.Flags: ``ETW_BUFFER_CONTEXT.ProcessorIndex`` (16 bits) holds the processor.
EVENT_HEADER_FLAG_PROCESSOR_INDEX: Final = 0x0200
#: ``EVENT_HEADER.Flags``: the event was written by a 32-bit process (its pointers are 4 bytes).
EVENT_HEADER_FLAG_32_BIT_HEADER: Final = 0x0020


def wide(text: str) -> ctypes.Array[ctypes.c_char]:
    """A NUL-terminated UTF-16-LE copy of ``text`` (an ``LPCWSTR`` on every OS)."""
    raw = text.encode("utf-16-le") + b"\0\0"
    return ctypes.create_string_buffer(raw, len(raw))


# -- structures --------------------------------------------------------------------------------


class GUID(ctypes.Structure):
    """``GUID`` (16 bytes, 4-aligned: Data1 is a ULONG)."""

    _fields_ = (
        ("Data1", ctypes.c_uint32),
        ("Data2", ctypes.c_uint16),
        ("Data3", ctypes.c_uint16),
        ("Data4", ctypes.c_uint8 * 8),
    )

    @classmethod
    def from_uuid(cls, value: uuid.UUID) -> GUID:
        """The GUID structure of ``value`` (its ``bytes_le``)."""
        return cls.from_buffer_copy(value.bytes_le)

    def to_uuid(self) -> uuid.UUID:
        """This GUID as a :class:`uuid.UUID`."""
        return uuid.UUID(bytes_le=bytes(self))


class WNODE_HEADER(ctypes.Structure):
    """``WNODE_HEADER`` (wmistr.h): the head of EVENT_TRACE_PROPERTIES."""

    _fields_ = (
        ("BufferSize", ctypes.c_uint32),
        ("ProviderId", ctypes.c_uint32),
        ("HistoricalContext", ctypes.c_uint64),
        ("TimeStamp", ctypes.c_int64),  # union with CountLost / KernelHandle
        ("Guid", GUID),
        ("ClientContext", ctypes.c_uint32),
        ("Flags", ctypes.c_uint32),
    )


class EVENT_TRACE_PROPERTIES(ctypes.Structure):
    """``EVENT_TRACE_PROPERTIES``: a session's settings; the logger name follows it in memory."""

    _fields_ = (
        ("Wnode", WNODE_HEADER),
        ("BufferSize", ctypes.c_uint32),
        ("MinimumBuffers", ctypes.c_uint32),
        ("MaximumBuffers", ctypes.c_uint32),
        ("MaximumFileSize", ctypes.c_uint32),
        ("LogFileMode", ctypes.c_uint32),
        ("FlushTimer", ctypes.c_uint32),
        ("EnableFlags", ctypes.c_uint32),
        ("AgeLimit", ctypes.c_int32),
        ("NumberOfBuffers", ctypes.c_uint32),
        ("FreeBuffers", ctypes.c_uint32),
        ("EventsLost", ctypes.c_uint32),
        ("BuffersWritten", ctypes.c_uint32),
        ("LogBuffersLost", ctypes.c_uint32),
        ("RealTimeBuffersLost", ctypes.c_uint32),
        ("LoggerThreadId", ctypes.c_void_p),
        ("LogFileNameOffset", ctypes.c_uint32),
        ("LoggerNameOffset", ctypes.c_uint32),
    )


class EVENT_TRACE_HEADER(ctypes.Structure):
    """``EVENT_TRACE_HEADER`` (classic events; only its size matters here)."""

    _fields_ = (
        ("Size", ctypes.c_uint16),
        ("FieldTypeFlags", ctypes.c_uint16),
        ("Version", ctypes.c_uint32),
        ("ThreadId", ctypes.c_uint32),
        ("ProcessId", ctypes.c_uint32),
        ("TimeStamp", ctypes.c_int64),
        ("Guid", GUID),
        ("ProcessorTime", ctypes.c_uint64),
    )


class EVENT_TRACE(ctypes.Structure):
    """``EVENT_TRACE`` (``EVENT_TRACE_LOGFILEW.CurrentEvent``)."""

    _fields_ = (
        ("Header", EVENT_TRACE_HEADER),
        ("InstanceId", ctypes.c_uint32),
        ("ParentInstanceId", ctypes.c_uint32),
        ("ParentGuid", GUID),
        ("MofData", ctypes.c_void_p),
        ("MofLength", ctypes.c_uint32),
        ("BufferContext", ctypes.c_uint32),  # union with ClientContext
    )


class _SYSTEMTIME(ctypes.Structure):
    _fields_ = tuple(
        (name, ctypes.c_uint16)
        for name in ("Year", "Month", "DayOfWeek", "Day", "Hour", "Minute", "Second", "Milliseconds")
    )


class TIME_ZONE_INFORMATION(ctypes.Structure):
    """``TIME_ZONE_INFORMATION`` (172 bytes, inside TRACE_LOGFILE_HEADER)."""

    _fields_ = (
        ("Bias", ctypes.c_int32),
        ("StandardName", ctypes.c_uint16 * 32),
        ("StandardDate", _SYSTEMTIME),
        ("StandardBias", ctypes.c_int32),
        ("DaylightName", ctypes.c_uint16 * 32),
        ("DaylightDate", _SYSTEMTIME),
        ("DaylightBias", ctypes.c_int32),
    )


class TRACE_LOGFILE_HEADER(ctypes.Structure):
    """``TRACE_LOGFILE_HEADER`` (``EVENT_TRACE_LOGFILEW.LogfileHeader``), filled by OpenTraceW."""

    _fields_ = (
        ("BufferSize", ctypes.c_uint32),
        ("Version", ctypes.c_uint32),
        ("ProviderVersion", ctypes.c_uint32),
        ("NumberOfProcessors", ctypes.c_uint32),
        ("EndTime", ctypes.c_int64),
        ("TimerResolution", ctypes.c_uint32),
        ("MaximumFileSize", ctypes.c_uint32),
        ("LogFileMode", ctypes.c_uint32),
        ("BuffersWritten", ctypes.c_uint32),
        ("LogInstanceGuid", GUID),  # union with StartBuffers, PointerSize, EventsLost, CpuSpeedInMHz
        ("LoggerName", ctypes.c_void_p),
        ("LogFileName", ctypes.c_void_p),
        ("TimeZone", TIME_ZONE_INFORMATION),
        ("BootTime", ctypes.c_int64),
        ("PerfFreq", ctypes.c_int64),
        ("StartTime", ctypes.c_int64),
        ("ReservedFlags", ctypes.c_uint32),
        ("BuffersLost", ctypes.c_uint32),
    )


class EVENT_TRACE_LOGFILEW(ctypes.Structure):
    """``EVENT_TRACE_LOGFILEW``: what OpenTraceW opens (a real-time session by ``LoggerName``)."""

    _fields_ = (
        ("LogFileName", ctypes.c_void_p),
        ("LoggerName", ctypes.c_void_p),
        ("CurrentTime", ctypes.c_int64),
        ("BuffersRead", ctypes.c_uint32),
        ("ProcessTraceMode", ctypes.c_uint32),  # union with LogFileMode
        ("CurrentEvent", EVENT_TRACE),
        ("LogfileHeader", TRACE_LOGFILE_HEADER),
        ("BufferCallback", ctypes.c_void_p),
        ("BufferSize", ctypes.c_uint32),
        ("Filled", ctypes.c_uint32),
        ("EventsLost", ctypes.c_uint32),
        ("EventRecordCallback", ctypes.c_void_p),  # union with EventCallback
        ("IsKernelTrace", ctypes.c_uint32),
        ("Context", ctypes.c_void_p),
    )


class ENABLE_TRACE_PARAMETERS(ctypes.Structure):
    """``ENABLE_TRACE_PARAMETERS`` (version 2), the last argument of EnableTraceEx2."""

    _fields_ = (
        ("Version", ctypes.c_uint32),
        ("EnableProperty", ctypes.c_uint32),
        ("ControlFlags", ctypes.c_uint32),
        ("SourceId", GUID),
        ("EnableFilterDesc", ctypes.c_void_p),
        ("FilterDescCount", ctypes.c_uint32),
    )


class EVENT_DESCRIPTOR(ctypes.Structure):
    """``EVENT_DESCRIPTOR`` (evntprov.h), 16 bytes."""

    _fields_ = (
        ("Id", ctypes.c_uint16),
        ("Version", ctypes.c_uint8),
        ("Channel", ctypes.c_uint8),
        ("Level", ctypes.c_uint8),
        ("Opcode", ctypes.c_uint8),
        ("Task", ctypes.c_uint16),
        ("Keyword", ctypes.c_uint64),
    )


class EVENT_HEADER(ctypes.Structure):
    """``EVENT_HEADER`` (evntcons.h), 80 bytes."""

    _fields_ = (
        ("Size", ctypes.c_uint16),
        ("HeaderType", ctypes.c_uint16),
        ("Flags", ctypes.c_uint16),
        ("EventProperty", ctypes.c_uint16),
        ("ThreadId", ctypes.c_uint32),
        ("ProcessId", ctypes.c_uint32),
        ("TimeStamp", ctypes.c_int64),
        ("ProviderId", GUID),
        ("EventDescriptor", EVENT_DESCRIPTOR),
        ("ProcessorTime", ctypes.c_uint64),  # union with KernelTime/UserTime
        ("ActivityId", GUID),
    )


class EVENT_HEADER_EXTENDED_DATA_ITEM(ctypes.Structure):
    """``EVENT_HEADER_EXTENDED_DATA_ITEM`` (evntcons.h), 16 bytes."""

    _fields_ = (
        ("Reserved1", ctypes.c_uint16),
        ("ExtType", ctypes.c_uint16),
        ("Linkage", ctypes.c_uint16),  # bit 0: Linkage; bits 1-15: Reserved2
        ("DataSize", ctypes.c_uint16),
        ("DataPtr", ctypes.c_uint64),
    )


class _ProcessorNumberAlignment(ctypes.Structure):
    _fields_ = (("ProcessorNumber", ctypes.c_uint8), ("Alignment", ctypes.c_uint8))


class _Processor(ctypes.Union):
    _anonymous_ = ("_bytes",)
    _fields_ = (("_bytes", _ProcessorNumberAlignment), ("ProcessorIndex", ctypes.c_uint16))


class EVENT_RECORD(ctypes.Structure):
    """``EVENT_RECORD`` (evntcons.h), 112 bytes: what the EventRecordCallback receives.

    Its ``ETW_BUFFER_CONTEXT`` (offset 80) is a union of ``ProcessorNumber`` + ``Alignment`` (two
    bytes) with the 16-bit ``ProcessorIndex``, then ``LoggerId``; ``ProcessorIndex`` is the one to
    read when the header has :data:`EVENT_HEADER_FLAG_PROCESSOR_INDEX` (Windows 8 and later, and
    the only one right past 255 processors).
    """

    _anonymous_ = ("_processor",)
    _fields_ = (
        ("EventHeader", EVENT_HEADER),
        ("_processor", _Processor),  # ETW_BUFFER_CONTEXT: ProcessorNumber/Alignment | ProcessorIndex
        ("LoggerId", ctypes.c_uint16),
        ("ExtendedDataCount", ctypes.c_uint16),
        ("UserDataLength", ctypes.c_uint16),
        ("ExtendedData", ctypes.POINTER(EVENT_HEADER_EXTENDED_DATA_ITEM)),
        ("UserData", ctypes.c_void_p),
        ("UserContext", ctypes.c_void_p),
    )
