"""perf.data written by :mod:`structlog_etw.perf.datawriter`: read back by our reader, by
``perf script`` and by Microsoft's perf-decode, in the file and the pipe shapes.

The records are built here as the kernel writes them (SAMPLE with identifier, tid, time, cpu,
raw; LOST with the sample_id fields); the real kernel's records go through the same writer in
tests/kernel/test_record_kernel.py.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

from structlog_etw.perf.abi import FILE_HEADER_SIZE, Feature, RecordType
from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.perf.datawriter import (
    EventDescription,
    MachineInfo,
    PerfDataWriter,
    TracingHeaders,
    feature_payloads,
    header_string,
)
from tests.helpers.perf_tools import perf_binary, perf_decode_binary
from tests.helpers.perfdata import eventheader_format
from tests.helpers.written import (
    HEADER_EVENT,
    HEADER_PAGE,
    NAME,
    TP_ID,
    attr_bytes,
    eventheader_event,
    lost_body,
    sample_body,
)


def fill(w: PerfDataWriter) -> None:
    """Two CPUs' events (out of time order across CPUs within a round) and a LOST record."""
    w.machine = MachineInfo(
        "host", "6.12.0", "#1 SMP", "x86_64", 2, 2, ["structlog-etw", "record"], 1, 10**18, 10**9
    )
    w.tracing = TracingHeaders(HEADER_PAGE, HEADER_EVENT, 4096, 8)
    w.add_event(
        EventDescription(f"user_events:{NAME}", attr_bytes(), [101, 102], eventheader_format(NAME, TP_ID))
    )
    w.start()
    w.write_record(RecordType.SAMPLE, 2, sample_body(101, 2_000, 0, eventheader_event("second", 2)))
    w.write_record(RecordType.SAMPLE, 2, sample_body(102, 1_000, 1, eventheader_event("first", 1)))
    w.finished_round()
    w.write_record(RecordType.LOST, 0, lost_body(102, 7, 2_500, 1))
    w.write_record(RecordType.SAMPLE, 2, sample_body(101, 3_000, 0, eventheader_event("third", 3)))
    w.finished_round()
    for t in (1_000, 2_000, 3_000):
        w.note_time(t)


def write_file(path: Path) -> Path:
    """The test file, written through :meth:`PerfDataWriter.create`."""
    w = PerfDataWriter.create(str(path))
    fill(w)
    w.close()
    return path


def write_pipe() -> bytes:
    """The test stream in perf's pipe format."""
    buf = io.BytesIO()
    w = PerfDataWriter.to_stream(buf)
    fill(w)
    w.close()
    return buf.getvalue()


def check_read(f: PerfDataFile) -> None:
    samples = list(f.samples_by_time())
    assert [s.time for s in samples] == [1_000, 2_000, 3_000]
    assert {s.name for s in samples} == {f"user_events:{NAME}"}
    assert [s.cpu for s in samples] == [1, 0, 0]
    assert f.lost == 7
    assert f.problems == []


def test_a_written_file_is_read_back_with_names_times_and_lost_events(tmp_path: Path) -> None:
    """Our reader finds the events by name in time order, the lost count, the clock offset."""
    path = write_file(tmp_path / "out.data")
    with PerfDataFile.open(path) as f:
        check_read(f)
        assert f.clock_offset_ns == 10**18 - 10**9
    assert not [p for p in os.listdir(tmp_path) if p != "out.data"]  # no temporary file left


def test_pipe_format_is_read_back_the_same(tmp_path: Path) -> None:
    """``-o -``: header records first, then the data; our reader reads it as the file."""
    data = write_pipe()
    assert data[:16] == b"PERFILE2" + struct.pack("=Q", 16)
    with PerfDataFile.from_bytes(data) as f:
        check_read(f)


def test_the_header_is_written_last_under_a_temporary_name(tmp_path: Path) -> None:
    """Until close() the target does not exist; the temporary file's header is zeros; abort removes it."""
    target = tmp_path / "perf.data"
    w = PerfDataWriter.create(str(target))
    fill(w)
    w.flush()
    assert not target.exists()
    (temp,) = tmp_path.iterdir()
    assert temp.read_bytes()[:FILE_HEADER_SIZE] == b"\0" * FILE_HEADER_SIZE
    w.abort()
    assert list(tmp_path.iterdir()) == []


def test_features_hold_the_machine_and_the_clock() -> None:
    """OS release, CPU counts, clock id and data, the tracing data's systems: the sections perf writes."""
    m = MachineInfo("h", "6.9.1", "v", "aarch64", 3, 4, [], 1, 50, 20)
    ev = EventDescription("user_events:X_L1K1", attr_bytes(), [5], eventheader_format("X_L1K1", 7))
    feats = feature_payloads(m, TracingHeaders(HEADER_PAGE, HEADER_EVENT), [ev], (1, 9))
    assert feats[Feature.OSRELEASE] == header_string("6.9.1")
    assert len(header_string("6.9.1")) == 4 + 64
    assert struct.unpack("=II", feats[Feature.NRCPUS]) == (4, 3)
    assert struct.unpack("=Q", feats[Feature.CLOCKID]) == (1,)
    assert struct.unpack("=IIQQ", feats[Feature.CLOCK_DATA]) == (1, 1, 50, 20)
    assert struct.unpack("=QQ", feats[Feature.SAMPLE_TIME]) == (1, 9)
    assert b"header_page\0" in feats[Feature.TRACING_DATA]
    assert b"user_events\0" in feats[Feature.TRACING_DATA]
    assert b"user_events:X_L1K1\0" in feats[Feature.EVENT_DESC]


def test_perf_script_reads_the_file_and_the_pipe(tmp_path: Path) -> None:
    """``perf script`` (the perf binary) prints the three events from the file and from the pipe."""
    perf = perf_binary()
    path = write_file(tmp_path / "out.data")
    for args, stdin in ((["-i", str(path)], None), (["-i", "-"], write_pipe())):
        proc = subprocess.run(
            [perf, "script", "--show-lost-events", *args],
            input=stdin,
            capture_output=True,
            check=False,
            timeout=120,
        )
        out = proc.stdout.decode("utf-8", "replace")
        assert proc.returncode == 0, proc.stderr.decode()
        assert out.count(f"user_events:{NAME}") == 3, out
        assert "PERF_RECORD_LOST lost 7" in out, out


def test_perf_decode_reads_the_file(tmp_path: Path) -> None:
    """Microsoft's perf-decode decodes the three EventHeader events with their fields."""
    decoder = perf_decode_binary()
    path = write_file(tmp_path / "out.data")
    proc = subprocess.run([decoder, str(path)], capture_output=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    text = proc.stdout.decode("utf-8-sig", "replace")
    events = _perf_decode_events(text)
    assert [(e["n"], e["value"]) for e in events] == [
        ("MyProv:first", 1),
        ("MyProv:second", 2),
        ("MyProv:third", 3),
    ]
    # the clock data turns CLOCK_MONOTONIC 1000 ns into the wall clock: 10**18 - 10**9 + 1000 ns
    assert events[0]["meta"]["time"] == "2001-09-09T01:46:39.000001000Z"  # type: ignore[index]


def _perf_decode_events(text: str) -> list[dict[str, object]]:
    doc = json.loads(text)
    out: list[dict[str, object]] = []
    for value in doc.values():
        out.extend(e for e in value if isinstance(e, dict) and "n" in e)
    return out


@pytest.mark.parametrize("count", [0, 1])
def test_an_empty_recording_is_still_a_valid_file(tmp_path: Path, count: int) -> None:
    """No events at all (or no samples): the file is complete, and readers open it."""
    w = PerfDataWriter.create(str(tmp_path / "e.data"))
    w.tracing = TracingHeaders(HEADER_PAGE, HEADER_EVENT)
    if count:
        w.add_event(
            EventDescription(f"user_events:{NAME}", attr_bytes(), [1], eventheader_format(NAME, TP_ID))
        )
    w.start()
    w.close()
    with PerfDataFile.open(tmp_path / "e.data") as f:
        assert list(f.samples()) == []
        assert f.problems == []
