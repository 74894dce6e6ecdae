"""Records as the kernel writes them into a recorder's ring (SAMPLE with identifier, tid, time,
cpu, raw; LOST with the sample_id fields), and the tracefs texts a recording carries, for tests of
the perf.data writer and of what reads its files."""

from __future__ import annotations

import struct
from pathlib import Path

from structlog_etw.perf.abi import AttrFlag, EventType, RecordType, SampleFormat
from structlog_etw.perf.datawriter import EventDescription, MachineInfo, PerfDataWriter, TracingHeaders
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import to_fields
from tests.helpers.perfdata import eventheader_format

SAMPLE_TYPE = int(
    SampleFormat.IDENTIFIER | SampleFormat.TID | SampleFormat.TIME | SampleFormat.CPU | SampleFormat.RAW
)
TP_ID = 1500
NAME = "MyProv_L4K1"
HEADER_PAGE = (
    b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
    b"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
    b"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
    b"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n"
)
HEADER_EVENT = (
    b"# compressed entry header\n\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n"
    b"\tarray       :   32 bits\n\n\tpadding     : type == 29\n\ttime_extend : type == 30\n"
    b"\ttime_stamp : type == 31\n\tdata max type_len  == 28\n"
)


def attr_bytes() -> bytes:
    """A tracepoint's ``perf_event_attr`` (112 bytes) as the recorder opens it: every event sampled
    with SAMPLE_TYPE, disabled until enabled, sample_id_all, CLOCK_MONOTONIC (built here from the
    kernel's layout, not by the code under test)."""
    flags = int(AttrFlag.DISABLED | AttrFlag.SAMPLE_ID_ALL | AttrFlag.USE_CLOCKID)
    attr = bytearray(112)
    struct.pack_into("=IIQQQQQI", attr, 0, EventType.TRACEPOINT, 112, TP_ID, 1, SAMPLE_TYPE, 0, flags, 1)
    struct.pack_into("=i", attr, 92, 1)  # clockid
    return bytes(attr)


def eventheader_event(name: str, value: int) -> bytes:
    """An EventHeader event (level 4, keyword 1) with one u32 field."""
    data = EventHeaderEncoder().encode(name, to_fields([("value", value)]), 4)
    assert data is not None
    return data


def sample_body(ident: int, time_ns: int, cpu: int, payload: bytes, pid: int = 4242) -> bytes:
    """A PERF_RECORD_SAMPLE body of SAMPLE_TYPE: the kernel pads the raw data to 8-byte alignment."""
    raw = struct.pack("=HBBi", TP_ID, 0, 0, pid) + payload
    raw += b"\0" * (-(len(raw) + 4) % 8)
    return struct.pack("=QIIQII", ident, pid, pid, time_ns, cpu, 0) + struct.pack("=I", len(raw)) + raw


def lost_body(ident: int, count: int, time_ns: int, cpu: int) -> bytes:
    """A PERF_RECORD_LOST body with the sample_id fields (sample_id_all)."""
    return struct.pack("=QQIIQIIQ", ident, count, 0xFFFFFFFF, 0xFFFFFFFF, time_ns, cpu, 0, ident)


def write_many(path: Path, count: int) -> Path:
    """A perf.data file of ``count`` EventHeader events on one CPU, a round every 1000."""
    w = PerfDataWriter.create(str(path))
    w.tracing = TracingHeaders(HEADER_PAGE, HEADER_EVENT, 4096, 8)
    w.add_event(EventDescription(f"user_events:{NAME}", attr_bytes(), [101], eventheader_format(NAME, TP_ID)))
    w.start()
    payloads = [eventheader_event("tick", i) for i in range(16)]
    for i in range(count):
        w.write_record(RecordType.SAMPLE, 2, sample_body(101, 1000 + i, 0, payloads[i % 16]))
        if i % 1000 == 999:
            w.finished_round()
    w.machine = MachineInfo(cpus_online=1, cpus_available=1)
    w.close()
    return path
