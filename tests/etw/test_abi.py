"""The ctypes structures of structlog_etw.etw.abi have the Windows SDK's x64 sizes and offsets.

The numbers are derived from the declarations in the Windows SDK headers evntrace.h, evntcons.h,
evntprov.h and wmistr.h (the same declarations as mingw-w64's mingw-w64-headers/include/evntrace.h
and evntcons.h) with the x64 rules: ULONG 4, USHORT 2, pointers, HANDLE, ULONG64 and LARGE_INTEGER 8
and 8-aligned, GUID 16 and 4-aligned.  docs/windows.md has the derivation; the C stand-in
(tests/csrc/fake_eventing.c) asserts the same numbers with _Static_assert.
"""

from __future__ import annotations

import ctypes
import uuid

import pytest

from structlog_etw.etw import abi

SIZES = {
    abi.GUID: 16,
    abi.WNODE_HEADER: 48,
    abi.EVENT_TRACE_PROPERTIES: 120,
    abi.EVENT_TRACE_HEADER: 48,
    abi.EVENT_TRACE: 88,
    abi.TIME_ZONE_INFORMATION: 172,
    abi.TRACE_LOGFILE_HEADER: 280,
    abi.EVENT_TRACE_LOGFILEW: 448,
    abi.ENABLE_TRACE_PARAMETERS: 48,
    abi.EVENT_DESCRIPTOR: 16,
    abi.EVENT_HEADER: 80,
    abi.EVENT_HEADER_EXTENDED_DATA_ITEM: 16,
    abi.EVENT_RECORD: 112,
}

OFFSETS = {
    abi.WNODE_HEADER: {
        "BufferSize": 0,
        "HistoricalContext": 8,
        "TimeStamp": 16,
        "Guid": 24,
        "ClientContext": 40,
        "Flags": 44,
    },
    abi.EVENT_TRACE_PROPERTIES: {
        "Wnode": 0,
        "BufferSize": 48,
        "MinimumBuffers": 52,
        "MaximumBuffers": 56,
        "MaximumFileSize": 60,
        "LogFileMode": 64,
        "FlushTimer": 68,
        "EnableFlags": 72,
        "AgeLimit": 76,
        "NumberOfBuffers": 80,
        "FreeBuffers": 84,
        "EventsLost": 88,
        "BuffersWritten": 92,
        "LogBuffersLost": 96,
        "RealTimeBuffersLost": 100,
        "LoggerThreadId": 104,
        "LogFileNameOffset": 112,
        "LoggerNameOffset": 116,
    },
    abi.EVENT_TRACE: {
        "Header": 0,
        "InstanceId": 48,
        "ParentGuid": 56,
        "MofData": 72,
        "MofLength": 80,
        "BufferContext": 84,
    },
    abi.TRACE_LOGFILE_HEADER: {
        "EndTime": 16,
        "TimerResolution": 24,
        "BuffersWritten": 36,
        "LogInstanceGuid": 40,
        "LoggerName": 56,
        "LogFileName": 64,
        "TimeZone": 72,
        "BootTime": 248,
        "PerfFreq": 256,
        "StartTime": 264,
        "ReservedFlags": 272,
        "BuffersLost": 276,
    },
    abi.EVENT_TRACE_LOGFILEW: {
        "LogFileName": 0,
        "LoggerName": 8,
        "CurrentTime": 16,
        "BuffersRead": 24,
        "ProcessTraceMode": 28,
        "CurrentEvent": 32,
        "LogfileHeader": 120,
        "BufferCallback": 400,
        "BufferSize": 408,
        "Filled": 412,
        "EventsLost": 416,
        "EventRecordCallback": 424,
        "IsKernelTrace": 432,
        "Context": 440,
    },
    abi.ENABLE_TRACE_PARAMETERS: {
        "Version": 0,
        "EnableProperty": 4,
        "ControlFlags": 8,
        "SourceId": 12,
        "EnableFilterDesc": 32,
        "FilterDescCount": 40,
    },
    abi.EVENT_DESCRIPTOR: {
        "Id": 0,
        "Version": 2,
        "Channel": 3,
        "Level": 4,
        "Opcode": 5,
        "Task": 6,
        "Keyword": 8,
    },
    abi.EVENT_HEADER: {
        "Size": 0,
        "HeaderType": 2,
        "Flags": 4,
        "EventProperty": 6,
        "ThreadId": 8,
        "ProcessId": 12,
        "TimeStamp": 16,
        "ProviderId": 24,
        "EventDescriptor": 40,
        "ProcessorTime": 56,
        "ActivityId": 64,
    },
    abi.EVENT_HEADER_EXTENDED_DATA_ITEM: {
        "Reserved1": 0,
        "ExtType": 2,
        "Linkage": 4,
        "DataSize": 6,
        "DataPtr": 8,
    },
    abi.EVENT_RECORD: {
        "EventHeader": 0,
        "ProcessorNumber": 80,
        "Alignment": 81,
        "ProcessorIndex": 80,
        "LoggerId": 82,
        "ExtendedDataCount": 84,
        "UserDataLength": 86,
        "ExtendedData": 88,
        "UserData": 96,
        "UserContext": 104,
    },
}

pytestmark = pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="the numbers are the x64 layout")


@pytest.mark.parametrize("struct", list(SIZES), ids=lambda s: s.__name__)
def test_size_is_the_sdk_x64_size(struct: type[ctypes.Structure]) -> None:
    """Each ETW ctypes structure has the Windows SDK's x64 size."""
    assert ctypes.sizeof(struct) == SIZES[struct]


@pytest.mark.parametrize("struct", list(OFFSETS), ids=lambda s: s.__name__)
def test_offsets_are_the_sdk_x64_offsets(struct: type[ctypes.Structure]) -> None:
    """Each ETW ctypes structure's fields sit at the Windows SDK's x64 offsets."""
    got = {name: getattr(struct, name).offset for name in OFFSETS[struct]}
    assert got == OFFSETS[struct]


def test_guid_round_trips_as_bytes_le() -> None:
    """A GUID structure holds a UUID's bytes_le and gives the same UUID back; it is 4-byte aligned."""
    u = uuid.UUID("b3864c38-4273-58c5-545b-8b3608343471")
    g = abi.GUID.from_uuid(u)
    assert bytes(g) == u.bytes_le
    assert g.to_uuid() == u
    assert abi.EVENT_TRACE_PROPERTIES.Wnode.size == 48 and ctypes.alignment(abi.GUID) == 4


def test_wide_is_nul_terminated_utf16le() -> None:
    """wide() gives NUL-terminated UTF-16LE text."""
    assert abi.wide("ab").raw == b"a\0b\0\0\0"
