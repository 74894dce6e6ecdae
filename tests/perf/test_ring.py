"""The ring-buffer reader and record parsers the live ``listen`` path uses, fed synthetic rings."""

from __future__ import annotations

import ctypes
import struct
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.perf.abi import DATA_HEAD_OFFSET, DATA_TAIL_OFFSET, RecordType
from structlog_etw.perf.listener import SAMPLE_TYPE
from structlog_etw.perf.records import parse_lost, parse_sample
from structlog_etw.perf.ring import RingBuffer, read_records
from tests.helpers.unix import missing_by_design

PERF_RECORD_LOST = RecordType.LOST
PERF_RECORD_SAMPLE = RecordType.SAMPLE

PAGE = 4096


class FakeKernel:
    """Writes records into a bytearray laid out like a perf mmap, as the kernel does."""

    def __init__(self, data_size: int) -> None:
        self.buf = bytearray(PAGE + data_size)
        self.size = data_size
        self.head = 0

    def start_at(self, pos: int) -> None:
        self.head = pos
        struct.pack_into("=Q", self.buf, DATA_HEAD_OFFSET, pos)
        struct.pack_into("=Q", self.buf, DATA_TAIL_OFFSET, pos)

    def put(self, rtype: int, body: bytes, misc: int = 0) -> None:
        record = struct.pack("=IHH", rtype, misc, 8 + len(body)) + body
        for i, b in enumerate(record):
            self.buf[PAGE + (self.head + i) % self.size] = b
        self.head += len(record)

    def publish(self) -> None:
        struct.pack_into("=Q", self.buf, DATA_HEAD_OFFSET, self.head)

    @property
    def tail(self) -> int:
        return int(struct.unpack_from("=Q", self.buf, DATA_TAIL_OFFSET)[0])


def sample_body(ident: int, pid: int, tid: int, time: int, cpu: int, raw: bytes) -> bytes:
    # IDENTIFIER, TID, TIME, CPU, RAW; raw padded so the record stays 8-byte aligned.
    pad = (-(4 + len(raw))) % 8
    return (
        struct.pack("=QIIQII", ident, pid, tid, time, cpu, 0)
        + struct.pack("=I", len(raw) + pad)
        + raw
        + bytes(pad)
    )


def test_sample_fields_are_parsed_in_kernel_order() -> None:
    """A sample's id, pid, tid, time, cpu and raw data are parsed in the kernel's order, raw 8-aligned."""
    body = sample_body(7, 100, 101, 123456789, 3, b"\x01\x02\x03\x04common!!EVENT")
    s = parse_sample(body, SAMPLE_TYPE)
    assert (s.id, s.pid, s.tid, s.time, s.cpu) == (7, 100, 101, 123456789, 3)
    assert s.raw.startswith(b"\x01\x02\x03\x04common!!EVENT")
    assert len(s.raw) % 8 == 4  # size field + raw keeps 8-byte alignment


def test_truncated_sample_is_rejected_not_misread() -> None:
    """A truncated sample body raises ValueError instead of being misread."""
    body = sample_body(7, 1, 1, 1, 0, b"x" * 20)
    with pytest.raises(ValueError):
        parse_sample(body[:-12], SAMPLE_TYPE)
    with pytest.raises(ValueError):
        parse_sample(body[:10], SAMPLE_TYPE)


def test_lost_record_gives_id_and_count() -> None:
    """A LOST record gives its id and lost count; a short one raises ValueError."""
    assert parse_lost(struct.pack("=QQ", 9, 1234)) == (9, 1234)
    with pytest.raises(ValueError):
        parse_lost(b"\0" * 8)


def test_records_wrapping_the_end_of_the_ring_are_reassembled() -> None:
    """Records wrapping the ring's end are reassembled in order, and all their space is handed back."""
    k = FakeKernel(1024)
    k.start_at(1024 * 5 - 20)  # free-running counter: 20 bytes before the end of the area
    raws = [bytes([i]) * (30 + i) for i in range(6)]
    for i, raw in enumerate(raws):
        k.put(PERF_RECORD_SAMPLE, sample_body(1, 10, 11, 1000 + i, 0, raw))
    k.publish()
    ring = RingBuffer(k.buf, PAGE)
    records = ring.read()
    assert [r[0] for r in records] == [PERF_RECORD_SAMPLE] * 6
    samples = [parse_sample(body, SAMPLE_TYPE) for _t, _m, body in records]
    assert [s.time for s in samples] == [1000 + i for i in range(6)]
    assert [s.raw[: len(raw)] for s, raw in zip(samples, raws, strict=True)] == raws
    assert k.tail == k.head  # space handed back to the kernel
    assert ring.read() == []
    ring.release()


def test_reading_in_steps_continues_where_the_last_read_stopped() -> None:
    """Reading in steps round the ring many times returns every sample and lost record once, in order."""
    k = FakeKernel(128)
    k.start_at(100)
    ring = RingBuffer(k.buf, PAGE)
    seen = []
    for step in range(20):  # goes round the 128-byte area many times
        k.put(PERF_RECORD_SAMPLE, sample_body(2, 1, 1, step, 1, b"abc"))
        if step % 3 == 0:
            k.put(PERF_RECORD_LOST, struct.pack("=QQ", 2, step))
        k.publish()
        for rtype, _misc, body in ring.read():
            if rtype == PERF_RECORD_SAMPLE:
                seen.append(("s", parse_sample(body, SAMPLE_TYPE).time))
            else:
                seen.append(("l", parse_lost(body)[1]))
    expected = []
    for step in range(20):
        expected.append(("s", step))
        if step % 3 == 0:
            expected.append(("l", step))
    assert seen == expected
    ring.release()


def test_a_corrupt_record_size_ends_the_walk_instead_of_looping() -> None:
    """A record size smaller than a header or running past head ends the walk with no records."""
    data = bytearray(64)
    struct.pack_into("=IHH", data, 0, PERF_RECORD_SAMPLE, 0, 4)  # size smaller than a header
    assert read_records(data, 0, 32) == []
    struct.pack_into("=IHH", data, 0, PERF_RECORD_SAMPLE, 0, 40)  # runs past head
    assert read_records(data, 0, 32) == []


def test_data_area_must_be_a_power_of_two() -> None:
    """A ring whose data area is not a power of two pages raises ValueError."""
    with pytest.raises(ValueError):
        RingBuffer(bytearray(PAGE + 100), PAGE)


@settings(max_examples=200, deadline=None)
@given(
    start=st.integers(min_value=0, max_value=2**40),
    bodies=st.lists(st.binary(min_size=0, max_size=60).map(lambda b: b + bytes(-len(b) % 8)), max_size=12),
)
def test_any_record_sequence_at_any_position_comes_back_intact(start: int, bodies: list[bytes]) -> None:
    """Any record sequence starting at any ring position comes back intact, and the tail reaches head."""
    k = FakeKernel(1024)  # 12 records of at most 72 bytes fit
    k.start_at(start)
    for i, body in enumerate(bodies):
        k.put(PERF_RECORD_SAMPLE if i % 2 else PERF_RECORD_LOST, body, misc=i)
    k.publish()
    ring = RingBuffer(k.buf, PAGE)
    got = ring.read()
    ring.release()
    assert got == [
        (PERF_RECORD_SAMPLE if i % 2 else PERF_RECORD_LOST, i, body) for i, body in enumerate(bodies)
    ]
    assert k.tail == k.head


LINUX_ONLY = pytest.mark.skipif(
    not sys.platform.startswith("linux") or missing_by_design("fcntl"), reason="perf_event_open is Linux-only"
)


@LINUX_ONLY
def test_online_cpu_lists_in_the_kernels_format_are_expanded() -> None:
    """parse_cpu_list expands the kernel's online-CPU lists: single CPUs, ranges, comma-separated."""
    from structlog_etw.perf.perf_event_open import parse_cpu_list  # noqa: PLC0415 - Linux-only module (fcntl)

    assert parse_cpu_list("0") == [0]
    assert parse_cpu_list("0-3\n") == [0, 1, 2, 3]
    assert parse_cpu_list("0-1,4,6-7") == [0, 1, 4, 6, 7]


@LINUX_ONLY
def test_perf_event_attr_has_the_kernels_ver5_layout() -> None:
    """PerfEventAttr is 112 bytes with the kernel's VER5 field offsets."""
    from structlog_etw.perf.perf_event_open import PerfEventAttr  # noqa: PLC0415 - Linux-only module (fcntl)

    assert ctypes.sizeof(PerfEventAttr) == 112
    assert PerfEventAttr.config.offset == 8
    assert PerfEventAttr.sample_type.offset == 24
    assert PerfEventAttr.read_format.offset == 32
    assert PerfEventAttr.flags.offset == 40
    assert PerfEventAttr.wakeup_events.offset == 48
    assert PerfEventAttr.clockid.offset == 92
