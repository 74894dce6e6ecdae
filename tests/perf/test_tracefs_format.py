"""tracefs ``format`` files: field layouts, plain-field values as perf-decode prints them, and
where an EventHeader event starts in a tracepoint's raw data."""

from __future__ import annotations

import struct

import pytest

from structlog_etw.perf.samples import tracefs_perf_json_head
from structlog_etw.perf.tracefs_format import eventheader_offset, parse_format
from structlog_etw.read.decoded import DecodedEvent

#: The common fields every tracepoint's format starts with (Linux 6.12).
COMMON_FIELDS = """\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
"""

SCHED_FORMAT = (
    "name: sched_switch\nID: 316\nformat:\n"
    + COMMON_FIELDS
    + """
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] msg;\toffset:28;\tsize:4;\tsigned:0;
\tfield:unsigned long flags;\toffset:32;\tsize:8;\tsigned:0;
\tfield:const char * ptr;\toffset:40;\tsize:8;\tsigned:0;
\tfield:u16 ports[2];\toffset:48;\tsize:4;\tsigned:0;

print fmt: "prev_comm=%s", REC->prev_comm
"""
)


# The format file of a user_events EventHeader tracepoint as Linux 6.12 prints it.
FORMAT = (
    "name: MyProv_L4K1\nID: 1234\nformat:\n"
    + COMMON_FIELDS
    + """
\tfield:u8 eventheader_flags;\toffset:8;\tsize:1;\tsigned:0;
\tfield:u8 version;\toffset:9;\tsize:1;\tsigned:0;
\tfield:u16 id;\toffset:10;\tsize:2;\tsigned:0;
\tfield:u16 tag;\toffset:12;\tsize:2;\tsigned:0;
\tfield:u8 opcode;\toffset:14;\tsize:1;\tsigned:0;
\tfield:u8 level;\toffset:15;\tsize:1;\tsigned:0;

print fmt: "eventheader_flags=%u ..."
"""
)


def test_eventheader_starts_after_the_common_fields_of_the_format() -> None:
    """The EventHeader starts right after the format's common fields; a format without any is refused."""
    assert eventheader_offset(FORMAT) == 8
    common_only = "\n".join(line for line in FORMAT.splitlines() if "common_" in line or "format:" in line)
    assert eventheader_offset(common_only.replace("size:4", "size:8")) == 12
    with pytest.raises(ValueError):
        eventheader_offset("name: x\nformat:\n")


def test_tracefs_format_fields_and_perf_decode_conventions() -> None:
    """tracefs format fields give their values, and render as perf-decode does (hex for unknown types)."""
    fmt = parse_format("sched", SCHED_FORMAT)
    assert fmt is not None
    assert (fmt.full_name, fmt.id, fmt.common_count, fmt.common_size) == ("sched:sched_switch", 316, 4, 8)
    assert not fmt.is_eventheader
    names = [f.name for f in fmt.own_fields]
    assert names == ["prev_comm", "prev_pid", "msg", "flags", "ptr", "ports"]
    raw = bytearray(60)
    raw[8:13] = b"perf\0"
    raw[24:28] = struct.pack("<i", 0x950)
    raw[28:32] = struct.pack("<I", (3 << 16) | 52)
    raw[52:55] = b"hi\0"
    raw[32:40] = struct.pack("<Q", 0xFF)
    raw[40:48] = struct.pack("<Q", 0x1000)
    raw[48:52] = struct.pack("<HH", 80, 443)
    values = {f.name: f.value(bytes(raw), "<") for f in fmt.own_fields}
    assert values == {
        "prev_comm": "perf",
        "prev_pid": 0x950,
        "msg": "hi",
        "flags": 0xFF,
        "ptr": 0x1000,
        "ports": [80, 443],
    }
    event = DecodedEvent(
        "sched",
        "sched_switch",
        0,
        0,
        field_list=tuple(f.decoded(bytes(raw), "<") for f in fmt.own_fields),
        format="tracefs",
    )
    assert tracefs_perf_json_head(event) == ",".join(
        [
            '"n":"sched:sched_switch"',
            '"prev_comm":"perf"',
            '"prev_pid":"0x950"',  # pid_t: an unknown type, printed in hex like perf-decode
            '"msg":"hi"',
            '"flags":"0xFF"',  # unsigned long: hex
            '"ptr":"0x1000"',  # pointers: hex
            '"ports":[80,443]',
        ]
    )


def test_an_eventheader_tracepoint_format_is_recognised() -> None:
    """A format with the eventheader_flags field is recognised as EventHeader, its payload at offset 8."""
    eh_field = "\tfield:u8 eventheader_flags;\toffset:8;\tsize:1;\tsigned:0;\n\tfield:char x[16];"
    text = SCHED_FORMAT.replace("name: sched_switch", "name: P_L4K1")
    text = text.replace("\tfield:char prev_comm[16];", eh_field)
    fmt = parse_format("user_events", text)
    assert fmt is not None
    assert fmt.is_eventheader
    assert fmt.payload_offset == 8
