"""The one parser of perf record bodies (shared by the perf.data reader and the live reader), and the
perf ABI's names."""

from __future__ import annotations

import struct

import pytest

from structlog_etw.perf.abi import (
    FEATURE_NAMES,
    RECORD_NAMES,
    Feature,
    ReadFormat,
    RecordType,
    SampleFormat,
    record_name,
)
from structlog_etw.perf.records import (
    parse_lost,
    parse_lost_samples,
    parse_sample,
    record_header,
    sample_id_offset,
)

S = SampleFormat
#: Every fixed-size field, in the kernel's order: IDENTIFIER IP TID TIME ADDR ID STREAM_ID CPU PERIOD.
EVERY_FIXED = int(S.IDENTIFIER | S.IP | S.TID | S.TIME | S.ADDR | S.ID | S.STREAM_ID | S.CPU | S.PERIOD)


def _fixed(order: str) -> bytes:
    return struct.pack(order + "QQIIQQQQIIQ", 7, 0x1111, 100, 101, 5000, 0x2222, 8, 0x3333, 3, 0, 1)


@pytest.mark.parametrize("order", ["<", ">"])
def test_every_fixed_field_is_found_in_the_kernels_order(order: str) -> None:
    """With every fixed sample field set, each is read in the kernel's order, in either byte order."""
    s = parse_sample(_fixed(order), EVERY_FIXED, order=order)
    assert (s.id, s.pid, s.tid, s.time, s.cpu, s.raw) == (7, 100, 101, 5000, 3, b"")


def test_id_comes_from_identifier_first_else_from_id() -> None:
    """The sample id is read from IDENTIFIER first, else from ID at its offset; None without either."""
    body = struct.pack("<QQQ", 0x1111, 5000, 42)  # IP, TIME, ID
    st = int(S.IP | S.TIME | S.ID)
    assert parse_sample(body, st, order="<").id == 42
    assert sample_id_offset(st) == 16
    assert sample_id_offset(EVERY_FIXED) == 0
    assert sample_id_offset(int(S.TID | S.TIME | S.RAW)) is None


def test_read_and_callchain_are_skipped_to_reach_the_raw_data() -> None:
    """READ values (group or single) and the callchain are skipped to reach the raw data."""
    raw = b"common!!EVENT"
    raw_part = struct.pack("<I", len(raw)) + raw
    group = struct.pack("<Q", 2) + struct.pack("<QQQQ", 10, 11, 20, 21)  # nr 2, then (value, id) twice
    callchain = struct.pack("<QQQ", 2, 0xA, 0xB)  # nr 2, then 2 addresses
    body = struct.pack("<Q", 9) + group + callchain + raw_part
    s = parse_sample(
        body, int(S.TIME | S.READ | S.CALLCHAIN | S.RAW), int(ReadFormat.GROUP | ReadFormat.ID), "<"
    )
    assert (s.time, s.raw) == (9, raw)
    single = struct.pack("<QQQ", 9, 77, 5) + raw_part  # time, then the value and its time enabled
    s = parse_sample(single, int(S.TIME | S.READ | S.RAW), int(ReadFormat.TOTAL_TIME_ENABLED), "<")
    assert (s.time, s.raw) == (9, raw)


def test_short_bodies_are_rejected_with_the_readers_messages() -> None:
    """Bodies cut short or raw data past the record raise ValueError with the reader's messages."""
    with pytest.raises(ValueError, match="record too short for its sample_type"):
        parse_sample(_fixed("<")[:-8], EVERY_FIXED, order="<")  # PERIOD cut off: nothing read there
    raw_past = struct.pack("<I", 100) + b"x" * 10
    with pytest.raises(ValueError, match="raw data runs past the record"):
        parse_sample(raw_past, int(S.RAW))
    with pytest.raises(ValueError, match="record too short for its sample_type"):
        parse_sample(b"\0\0", int(S.RAW))


def test_lost_records() -> None:
    """LOST and LOST_SAMPLES records give their id and counts; a short one raises ValueError."""
    assert parse_lost(struct.pack(">QQ", 3, 99), ">") == (3, 99)
    assert parse_lost_samples(struct.pack("<Q", 12), "<") == 12
    with pytest.raises(ValueError):
        parse_lost_samples(b"\0" * 4)


def test_record_header_and_names() -> None:
    """The record header unpacks type, misc, size; record and feature names come from the tables."""
    assert record_header("<").unpack(struct.pack("<IHH", 9, 1, 24)) == (9, 1, 24)
    assert RECORD_NAMES[9] == "SAMPLE" == RecordType.SAMPLE.name
    assert RECORD_NAMES[68] == "FINISHED_ROUND"
    assert record_name(83) == "COMPRESSED2"
    assert record_name(999) == "TYPE_999"
    assert FEATURE_NAMES[Feature.CLOCK_DATA] == "CLOCK_DATA"
    assert len(RECORD_NAMES) == 41 and len(FEATURE_NAMES) == 31
