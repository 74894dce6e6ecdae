"""The perf.data reader: headers, names, times, pipe mode, and damaged or truncated files."""

from __future__ import annotations

import dataclasses
import ipaddress
import itertools
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structlog_etw.perf.abi import RecordType, SampleFormat
from structlog_etw.perf.datafile import PerfDataError, PerfDataFile, Sample, read_samples
from structlog_etw.perf.samples import SampleDecodeError, decode_sample
from tests.helpers import perfdata as pd
from tests.helpers.decoded_spans import assert_read_from
from tests.helpers.shared_data import REPO, pipe_mode_copy, vector

#: perf_event_header: type (u32), misc (u16), size (u16); every record starts with one.
PERF_HEADER_SIZE = 8


@pytest.fixture(scope="module")
def perf_bytes() -> bytes:
    return vector("perf.data").read_bytes()


@pytest.fixture(scope="module")
def reference(perf_bytes: bytes) -> list[Sample]:
    return list(PerfDataFile.from_bytes(perf_bytes).samples())


def test_header_attrs_names_and_clock_are_read(perf_bytes: bytes, reference: list[Sample]) -> None:
    """The header's 11 attrs, tracepoint names and clock offset are read, and samples carry their facts."""
    f = PerfDataFile.from_bytes(perf_bytes)
    assert not f.pipe
    assert f.problems == []
    assert len(f.attrs) == 11
    assert {a.name for a in f.attrs} >= {"sched:sched_switch", "user_events:TestProviderC_L5K0"}
    assert f.clock_offset_ns is not None
    first = reference[0]
    assert (first.name, first.cpu, first.pid, first.tid) == ("sched:sched_switch", 0, 2002, 2002)
    assert first.realtime_ns == first.time + f.clock_offset_ns  # type: ignore[operator]
    eh = next(s for s in reference if s.is_eventheader)
    assert eh.name.startswith("user_events:")
    assert eh.data[:1] == b"\x07"  # the EventHeader flags byte, after 8 bytes of common fields
    assert eh.raw[8:] == eh.data


def test_record_counts_and_rounds(perf_bytes: bytes) -> None:
    """Record counts give 539 samples and 2 finished rounds, and time order respects the rounds."""
    f = PerfDataFile.from_bytes(perf_bytes)
    samples = list(f.samples())
    assert f.record_counts["SAMPLE"] == len(samples) == 539
    assert f.record_counts["FINISHED_ROUND"] == 2
    assert f.lost == 0
    ordered = f.samples_in_time_order()
    assert sorted(s.offset for s in ordered) == [s.offset for s in samples]
    for a, b in itertools.pairwise(ordered):
        assert a.round < b.round or (a.time or 0) <= (b.time or 0)


def test_not_a_perf_data_file_is_a_clear_error() -> None:
    """Bytes that are not a perf.data file, or too short, raise PerfDataError saying so."""
    with pytest.raises(PerfDataError, match=r"not a perf\.data file"):
        PerfDataFile.from_bytes(b"hello world, not perf data at all")
    with pytest.raises(PerfDataError, match="too short"):
        PerfDataFile.from_bytes(b"PERF")


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.7, 0.79, 0.8, 0.9, 0.97])
def test_truncated_files_decode_what_they_can_and_report_the_rest(
    perf_bytes: bytes, reference: list[Sample], fraction: float
) -> None:
    """A cut file reports a problem and yields the samples before the cut as they are in the whole file."""
    cut = int(len(perf_bytes) * fraction)
    f = PerfDataFile.from_bytes(perf_bytes[:cut])
    samples = list(f.samples())
    assert f.problems, "a truncated file must report a problem"
    assert len(samples) <= len(reference)
    for got, ref in zip(samples, reference, strict=False):
        assert (got.offset, got.time, got.cpu, got.raw) == (ref.offset, ref.time, ref.cpu, ref.raw)
    decoded = 0
    for s in samples:
        try:
            decode_sample(s)
            decoded += 1
        except SampleDecodeError as exc:
            assert "format unknown" in str(exc)
    if cut > 138632 + 3888 + 2048:  # past the data section and the tracing data: all samples decode
        assert decoded == len(samples)


def test_a_damaged_record_stops_reading_with_a_report(perf_bytes: bytes, reference: list[Sample]) -> None:
    """A record of size 0 stops reading after the 100 samples before it, and a problem names its offset."""
    victim = reference[100].offset
    damaged = bytearray(perf_bytes)
    damaged[victim + 6 : victim + 8] = b"\x00\x00"  # record size 0
    f = PerfDataFile.from_bytes(bytes(damaged))
    samples = list(f.samples())
    assert len(samples) == 100
    assert any(f"offset {victim}" in p for p in f.problems)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 172699), st.integers(0, 255)), min_size=1, max_size=20))
def test_random_damage_never_raises(perf_bytes: bytes, flips: list[tuple[int, int]]) -> None:
    """Random bytes changed in perf.data raise only PerfDataError or SampleDecodeError, nothing else."""
    damaged = bytearray(perf_bytes)
    for pos, value in flips:
        if pos < len(damaged):
            damaged[pos] = value
    """Flipped bytes: the file opens or raises ``PerfDataError``; every sample it yields is a
    distinct record lying inside the file (at most one per 8-byte record header), and every
    event decoded from one was read from the sample's bytes."""
    data = bytes(damaged)
    try:
        f = PerfDataFile.from_bytes(data)
    except PerfDataError:
        return
    samples = list(f.samples())
    assert len(samples) <= len(data) // PERF_HEADER_SIZE
    assert len({s.offset for s in samples}) == len(samples), "a record read twice"
    for s in samples:
        (size,) = struct.unpack_from("<H", data, s.offset + 6)  # perf_event_header.size
        assert s.offset + size <= len(data)
        assert s.raw in data[s.offset : s.offset + size] and s.raw.endswith(s.data)
        try:
            ev = decode_sample(s)
        except SampleDecodeError:
            continue
        if ev.format == "eventheader":
            assert_read_from(ev, s.data, s.data, s.data)
        else:  # a plain tracepoint: fields by its tracefs format
            assert_read_from(ev, s.raw, None, s.raw)


def test_pipe_mode_files_are_read_like_normal_ones(perf_bytes: bytes, reference: list[Sample]) -> None:
    """A pipe-mode copy yields the same samples, times and decoded events as the file, no problems."""
    f = PerfDataFile.from_bytes(pipe_mode_copy(perf_bytes))
    assert f.pipe
    samples = list(f.samples())
    assert f.problems == []
    assert len(samples) == len(reference)
    for got, ref in zip(samples, reference, strict=True):
        assert (got.name, got.time, got.realtime_ns, got.cpu, got.pid, got.raw) == (
            ref.name,
            ref.time,
            ref.realtime_ns,
            ref.cpu,
            ref.pid,
            ref.raw,
        )
        assert repr(decode_sample(got)) == repr(decode_sample(ref))


CAPTURE = REPO / "tests" / "data" / "structlog-etw-capture.perf.data"


def test_a_real_kernel_capture_of_this_projects_events_decodes_to_what_was_written() -> None:
    """tests/data/make_capture.py wrote these events through user_events in the kernel guest and
    perf 6.1 recorded them; every value comes back."""
    f = PerfDataFile.open(CAPTURE)
    samples = list(f.samples())
    assert f.problems == []
    assert [s.name for s in samples] == [
        "user_events:MyCompany_MyService_L4K1",
        "user_events:MyCompany_MyService_L4K1",
        "user_events:MyCompany_MyService_L4K4",
        "user_events:MyCompany_MyService_L4K1",
        "user_events:MyCompany_MyService_L2K1",
        "user_events:MyCompany_MyService_L5K1",
    ]
    events = [decode_sample(s) for s in samples]
    assert all(s.realtime_ns is not None and s.pid == samples[0].pid for s in samples)
    assert [(e.name, e.level, e.keyword, e.opcode) for e in events] == [
        ("service_started", 4, 1, 0),
        ("request", 4, 1, 1),
        ("user_login", 4, 4, 0),
        ("request", 4, 1, 2),
        ("payment_failed", 2, 1, 0),
        ("cache_stats", 5, 1, 0),
    ]
    activity = uuid.UUID("6f1c2a9e-8c1d-4f3e-9a57-1b2c3d4e5f60")
    assert [e.activity_id for e in events] == [None, activity, None, activity, None, None]
    assert events[0].fields == {"version": "1.4.2", "port": 8080, "debug": False}
    assert events[2].fields == {
        "user": "ann",
        "attempts": 3,
        "source": ipaddress.IPv4Address("192.0.2.7"),
        "session": uuid.UUID("0b7e8e43-3c52-4d5e-bd1e-2f9c1d0a7b11"),
        "at": "2026-11-29T17:30:00+00:00",
    }
    assert events[4].fields == {
        "order": {"id": 1017, "total": 49.9, "items": [3, 7]},
        "error": "card declined",
        "retry": True,
    }
    assert events[5].fields == {"hits": [120, 98, 143], "ratio": 0.913, "raw": b"\x00\x01\xfe"}


def test_open_reads_the_file_and_close_releases_it(tmp_path: Path) -> None:
    """An empty file is not a perf.data file; closing the file leaves the samples read valid."""
    empty = tmp_path / "empty.data"
    empty.write_bytes(b"")
    with pytest.raises(PerfDataError, match="too short"):
        PerfDataFile.open(empty)
    with PerfDataFile.open(CAPTURE) as f:
        samples = list(f.samples())
    assert len(samples) == 6
    assert decode_sample(samples[0]).name == "service_started"  # samples outlive the file


def test_read_samples_is_the_file_order_of_perfdatafile() -> None:
    """read_samples() yields the samples in PerfDataFile's file order."""
    expected = [s.offset for s in PerfDataFile.open(CAPTURE).samples()]
    assert [s.offset for s in read_samples(CAPTURE)] == expected


def test_samples_read_in_the_buffer_have_every_field_of_their_dataclass(perf_bytes: bytes) -> None:
    """Samples the reader builds field by field (not through __init__) set every field, as __init__ would."""
    names = [f.name for f in dataclasses.fields(Sample)]
    for order in ("file", "time"):
        f = PerfDataFile.from_bytes(perf_bytes)
        samples = list(f.samples() if order == "file" else f.samples_by_time())
        assert len(samples) == 539
        for s in samples:
            values = {name: getattr(s, name) for name in names}  # AttributeError: a field left unset
            assert Sample(**values) == s
            assert dataclasses.replace(s) == s


def test_samples_of_different_layouts_interleaved_are_each_read_with_their_own() -> None:
    """Attrs of three sample layouts, their samples interleaved: the one read in the buffer (pid,
    time and cpu sampled), one with PERIOD in between (read the same way, but another layout) and
    one without pid and cpu (read field by field) each give their own fields, in file order and
    in time order, equal to what Sample's __init__ builds."""
    sf = SampleFormat
    layouts = {
        1000: sf.IDENTIFIER | sf.TID | sf.TIME | sf.CPU | sf.RAW,
        1001: sf.IDENTIFIER | sf.TID | sf.TIME | sf.CPU | sf.PERIOD | sf.RAW,
        1002: sf.IDENTIFIER | sf.TIME | sf.RAW,
    }
    tps = [pd.Tracepoint("test", pd.plain_format(f"tp{i}", 50 + i), 50 + i) for i in range(3)]
    out = bytearray(pd.header_pipe())
    for (ident, sample_type), tp in zip(layouts.items(), tps, strict=True):
        attr = struct.pack("<IIQQQQQ", 2, 128, tp.id, 1, int(sample_type), 0, 1 << 18)
        out += pd.record(int(RecordType.HEADER_ATTR), attr.ljust(128, b"\0") + struct.pack("<Q", ident))
    out += pd.tracing_data_record(tps)
    order = [1000, 1000, 1002, 1000, 1001, 1001, 1000, 1002, 1002, 1001]
    for n, ident in enumerate(order):
        sample_type = layouts[ident]
        raw = pd.tracepoint_raw(tps[ident - 1000], struct.pack("<i", n))
        raw += b"\0" * (-(len(raw) + 4) % 8)
        body = struct.pack("<Q", ident)
        if sf.TID in sample_type:
            body += struct.pack("<II", 200 + n, 300 + n)
        body += struct.pack("<Q", 10_000 - n)  # TIME: newest first
        if sf.CPU in sample_type:
            body += struct.pack("<II", n % 4, 0)
        if sf.PERIOD in sample_type:
            body += struct.pack("<Q", 1)
        out += pd.record(int(RecordType.SAMPLE), body + struct.pack("<I", len(raw)) + raw)
    f = PerfDataFile.from_bytes(bytes(out))
    samples = list(f.samples())
    assert f.problems == []
    assert [s.id for s in samples] == order
    for n, s in enumerate(samples):
        full = sf.CPU in layouts[order[n]]
        assert s.name == f"test:tp{order[n] - 1000}"
        assert (s.pid, s.tid, s.cpu) == ((200 + n, 300 + n, n % 4) if full else (None, None, None))
        assert s.time == 10_000 - n
        assert decode_sample(s).fields == {"value": n}
        values = {field.name: getattr(s, field.name) for field in dataclasses.fields(Sample)}
        assert Sample(**values) == s
    by_time = list(PerfDataFile.from_bytes(bytes(out)).samples_by_time())
    assert [s.time for s in by_time] == sorted(s.time for s in samples)
