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
    SampleFields,
    parse_lost,
    parse_lost_samples,
    parse_sample,
    record_header,
    sample_id_offset,
    sample_layout,
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


#: A value per fixed field, in the kernel's order (TID: pid and tid; CPU: cpu and its reserved word).
FIXED_VALUES = (
    (S.IDENTIFIER, (7,), "Q"),
    (S.IP, (0x1111,), "Q"),
    (S.TID, (100, 101), "II"),
    (S.TIME, (5000,), "Q"),
    (S.ADDR, (0x2222,), "Q"),
    (S.ID, (42,), "Q"),
    (S.STREAM_ID, (8,), "Q"),
    (S.CPU, (3, 0), "II"),
    (S.PERIOD, (1,), "Q"),
)


def _sample_body(sample_type: int, raw: bytes, order: str) -> bytes:
    """A sample body of ``sample_type`` (fixed fields, one READ value when sampled, then RAW)."""
    body = b"".join(struct.pack(order + code, *v) for bit, v, code in FIXED_VALUES if sample_type & bit)
    if sample_type & S.READ:
        body += struct.pack(order + "Q", 77)
    return body + struct.pack(order + "I", len(raw)) + raw


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("read", [False, True], ids=["one-unpack", "field-by-field"])
def test_every_set_of_fixed_fields_is_read_from_the_one_layout(order: str, read: bool) -> None:
    """All 512 sets of fixed fields (with RAW): the layout reads each field where the kernel puts it,
    in one unpack (no READ) and field by field (READ sampled); the id is IDENTIFIER's, else ID's."""
    raw = b"common!!payload"
    for n in range(1 << len(FIXED_VALUES)):
        sample_type = int(S.RAW) | (int(S.READ) if read else 0)
        for k, (bit, _v, _c) in enumerate(FIXED_VALUES):
            if n >> k & 1:
                sample_type |= bit
        layout = sample_layout(sample_type, 0, order)
        assert (layout.unpack is None) == read
        st = S(sample_type)
        expected = SampleFields(
            7 if S.IDENTIFIER in st else 42 if S.ID in st else None,
            100 if S.TID in st else None,
            101 if S.TID in st else None,
            5000 if S.TIME in st else None,
            3 if S.CPU in st else None,
            raw,
        )
        body = _sample_body(sample_type, raw, order)
        assert parse_sample(body, sample_type, order=order) == expected, hex(sample_type)
        assert layout.id_at == sample_id_offset(sample_type)
        if layout.unpack is not None and layout.unpack.record is not None:  # the whole record
            whole = record_header(order).pack(9, 0, 8 + len(body)) + body
            values = layout.unpack.record(whole, 0)
            one = layout.unpack
            assert values[:2] == (9, 8 + len(body))
            assert (values[one.rec_pid], values[one.rec_pid + 1]) == (100, 101)
            assert (values[one.rec_time], values[one.rec_cpu]) == (5000, 3)
            assert (values[one.rec_id] if one.rec_id >= 0 else None) == expected.id
            assert whole[one.need : one.need + values[-1]] == raw
