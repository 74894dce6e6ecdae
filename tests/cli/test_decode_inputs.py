"""``decode`` on the files perf users have and on files that lie: mixed events, records that run past
their section, many attrs in pipe mode, a file that shrinks while read, a live pipe.

Every file is built here from the perf ABI (tests/helpers/perfdata.py); runs that could hang,
crash or take the machine's memory on a regression run in a bounded subprocess.
"""

from __future__ import annotations

import os
import select
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.hostile import run_bounded
from tests.helpers.perfdata import (
    SOFTWARE,
    Tracepoint,
    attr_record,
    event_desc_record,
    file_mode,
    header_pipe,
    many_attrs,
    plain_format,
    record,
    sample_record,
    tracepoint_raw,
    tracing_data_record,
)
from tests.helpers.shared_data import REPO

TICK = Tracepoint("test", plain_format("tick", 500), 500)
_DECODE = """
import sys
from structlog_etw.cli import main
sys.exit(main(["decode", *sys.argv[1:]]))
"""
_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _ticks(ident: int, n: int, start: int = 0) -> bytes:
    return b"".join(
        sample_record(ident, tracepoint_raw(TICK, struct.pack("<i", i)), start + i) for i in range(n)
    )


def _pipe_head(*, cpu_clock: bool = True) -> bytes:
    out = header_pipe() + attr_record(2, TICK.id, 7)
    if cpu_clock:
        out += attr_record(SOFTWARE, 0, 8)
    out += tracing_data_record([TICK])
    if cpu_clock:
        out += event_desc_record({7: "test:tick", 8: "cpu-clock"})
    return out


def _decode(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _DECODE, *args, str(path)],
        capture_output=True,
        text=True,
        env=_ENV,
        timeout=120,
        check=False,
    )


class TestNotTracepoints:
    """Samples of hardware/software events beside the tracepoints are counted, never called damage."""

    def test_a_mixed_pipe_file_decodes_the_tracepoints_and_exits_0(self, tmp_path: Path) -> None:
        """cpu-clock samples among tracepoint samples: tracepoints written, cpu-clock counted, exit 0."""
        path = tmp_path / "mixed.data"
        path.write_bytes(_pipe_head() + _ticks(7, 3) + sample_record(8, b"", 10) * 12)
        run = _decode(path, "--json")
        assert run.returncode == 0, run.stderr
        assert len(run.stdout.splitlines()) == 3
        assert "12 samples of cpu-clock: not tracepoints" in run.stderr
        assert "damaged" not in run.stderr

    def test_a_mixed_file_mode_file_exits_0(self, tmp_path: Path) -> None:
        """The same in file mode (perf record -e test:tick -e cpu-clock): exit 0, counted by type."""
        path = tmp_path / "mixed.data"
        records = _ticks(7, 2) + sample_record(8, b"", 10) * 4
        path.write_bytes(file_mode(records, [TICK], [(2, TICK.id, 7), (SOFTWARE, 0, 8)]))
        run = _decode(path)
        assert run.returncode == 0, run.stderr
        assert len(run.stdout.splitlines()) == 2
        assert "4 samples of software event (config 0x0): not tracepoints" in run.stderr

    def test_a_file_of_cpu_clock_only_exits_0(self, tmp_path: Path) -> None:
        """A file with no tracepoint at all: nothing written, the samples counted, exit 0."""
        path = tmp_path / "clock.data"
        path.write_bytes(
            header_pipe()
            + attr_record(SOFTWARE, 0, 8)
            + event_desc_record({8: "cpu-clock"})
            + sample_record(8, b"", 1) * 5
        )
        run = _decode(path, "--perf-json")
        assert run.returncode == 0, run.stderr
        assert run.stdout == ""
        assert "5 samples of cpu-clock: not tracepoints" in run.stderr


class TestRecordsPastTheirSection:
    """A record whose size (or the data it announces) runs past its section is a problem with its offset."""

    def test_auxtrace_past_the_end_of_a_pipe_is_reported(self, tmp_path: Path) -> None:
        """One AUXTRACE announcing more bytes than follow: exit 1, its offset, earlier events kept."""
        head = _pipe_head(cpu_clock=False) + _ticks(7, 5)
        aux = record(71, struct.pack("<QQQIII", 1 << 20, 0, 0, 0, 0, 0))
        path = tmp_path / "aux.data"
        path.write_bytes(head + aux + _ticks(7, 1, 5))
        run = _decode(path, "--json")
        assert run.returncode == 1, run.stderr
        assert len(run.stdout.splitlines()) == 5
        assert f"record AUXTRACE at offset {len(head)}" in run.stderr

    def test_auxtrace_past_the_data_section_of_a_file_is_reported(self, tmp_path: Path) -> None:
        """File mode: AUXTRACE data past the data section (into the features) is damage, not skipped."""
        records = _ticks(7, 2)
        aux_at = len(records)
        records += record(71, struct.pack("<QQQIII", 4096, 0, 0, 0, 0, 0)) + _ticks(7, 1, 2)
        data = file_mode(records, [TICK], [(2, TICK.id, 7)])
        path = tmp_path / "aux.data"
        path.write_bytes(data)
        data_off = struct.unpack_from("<Q", data, 40)[0]
        run = _decode(path, "--json")
        assert run.returncode == 1, run.stderr
        expected = f"record AUXTRACE at offset {data_off + aux_at} runs past the end of the data section"
        assert expected in run.stderr

    def test_pipe_tracing_data_of_0xfffffff0_bytes_is_reported(self, tmp_path: Path) -> None:
        """HEADER_TRACING_DATA announcing 4 GiB in a small pipe: exit 1 with its offset, bounded memory."""
        head = header_pipe() + attr_record(2, TICK.id, 7)
        bad = struct.pack("<IHHI", 66, 0, 12, 0xFFFFFFF0)
        data = head + bad + tracing_data_record([TICK]) + _ticks(7, 3)
        run = run_bounded(_DECODE, "-", stdin=data)
        assert not run.hung
        assert run.returncode == 1, run.stderr
        assert f"record HEADER_TRACING_DATA at offset {len(head)} needs" in run.stderr
        assert "Traceback" not in run.stderr

    def test_the_same_tracing_data_in_a_file_is_reported(self, tmp_path: Path) -> None:
        """The same record read from a regular file (pread): reported without reading 4 GiB."""
        path = tmp_path / "tracing.data"
        head = header_pipe() + attr_record(2, TICK.id, 7)
        path.write_bytes(head + struct.pack("<IHHI", 66, 0, 12, 0xFFFFFFF0) + _ticks(7, 3))
        run = run_bounded(_DECODE, str(path))
        assert not run.hung
        assert run.returncode == 1, run.stderr
        assert f"at offset {len(head)}" in run.stderr


_LINES_OF_PARSE = """
import sys
from structlog_etw.perf.datafile import PerfDataFile
data = open(sys.argv[1], "rb").read()
lines = [0]
def trace(frame, event, arg):
    if event == "line":
        lines[0] += 1
    return trace
sys.settrace(trace)
f = PerfDataFile.from_bytes(data)
n = sum(1 for _ in f.samples())
sys.settrace(None)
assert n == 0 and not f.problems, f.problems
assert len(f.attrs) == len(f.formats) == int(sys.argv[2]) and all(a.format for a in f.attrs)
print(lines[0])
"""


class TestFormatsOncePerAttr:
    """Pipe mode's tracepoint formats are matched to attrs once each: linear, not attrs x records."""

    def test_8000_attrs_and_tracing_data_records_take_linear_work(self, tmp_path: Path) -> None:
        """8,000 HEADER_ATTR + HEADER_TRACING_DATA pairs each get their format, and reading them runs
        at most 4.5x the Python lines 2,000 do (linear: 4x; matching every format against every attr:
        16x).  A count, not a timing: their CPU times, at most 8x, are measured by
        benchmarks/input_sizes.py (docs/performance.md)."""
        lines = []
        for n in (2000, 8000):
            path = tmp_path / f"attrs{n}.data"
            path.write_bytes(many_attrs(n))
            run = run_bounded(_LINES_OF_PARSE, str(path), str(n), timeout=300)
            assert not run.hung and run.returncode == 0, run.stderr
            lines.append(int(run.stdout))
        assert lines[1] <= 4.5 * lines[0], lines


_SHRINK = """
import os, sys
from structlog_etw.cli import main
import structlog_etw.perf._source as _source
path = sys.argv[1]
original = _source.FileSource.read  # every pread of the file
done = [False]
def read(self, pos, least, most):
    data = original(self, pos, least, most)
    if len(data) > 100_000 and not done[0]:  # the first read of the data: ~20,000 samples
        done[0] = True  # perf record -o - > file rerun / copytruncate: the file shrinks
        os.truncate(path, os.path.getsize(path) // 2)
    return data
_source.FileSource.read = read
sys.exit(main(["decode", "--order", "file", "--json", path]))
"""


class TestFileShrinksWhileRead:
    """A file that shrinks under the reader is a reported truncation, not a SIGBUS."""

    def test_shrinking_file_is_truncated_at_an_offset_and_output_kept(self, tmp_path: Path) -> None:
        """Cut to half after its first read: exit 1, "truncated at offset N", the events read written."""
        path = tmp_path / "shrinks.data"
        path.write_bytes(_pipe_head(cpu_clock=False) + _ticks(7, 40_000))  # ~1.9 MiB: past one read
        run = run_bounded(_SHRINK, str(path), timeout=300)
        assert not run.hung
        assert run.returncode == 1, (run.returncode, run.stderr)
        assert "truncated at offset" in run.stderr
        assert "shrank" in run.stderr
        lines = run.stdout.splitlines()
        assert len(lines) >= 100
        assert '"fields":{"value":99}' in lines[99]


class TestDecodeStdinLive:
    """``decode -`` shows events as perf writes them, not when the pipe closes."""

    def test_first_events_appear_while_the_pipe_is_still_open(self) -> None:
        """Two rounds written, the pipe left open: their events are on stdout before the writer ends."""
        proc = subprocess.Popen(
            [sys.executable, "-c", _DECODE, "--json", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_ENV,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(_pipe_head(cpu_clock=False) + _ticks(7, 3) + record(68, b"") * 2)
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            assert ready, "no event within 60 s while the pipe stayed open"
            line = proc.stdout.readline()
            assert b'"fields":{"value":0}' in line
            assert proc.poll() is None  # still reading the open pipe
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
            proc.stdout.close()
            assert proc.stderr is not None
            proc.stderr.close()


#: The peak RSS of this process alone (VmHWM; ru_maxrss would include the parent's, kept across exec).
_PEAK = """
def peak_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
"""
_PEAK_OF_STREAM = (
    _PEAK
    + """
from structlog_etw.perf.datafile import PerfDataFile
f = PerfDataFile.from_fd(0, "stdin")
n = sum(1 for _ in f.samples_by_time())
print(n, peak_kib())
"""
)


def _peak_kib(code: str, stdin: bytes) -> tuple[int, int]:
    run = run_bounded(code, stdin=stdin, timeout=300)
    assert not run.hung and run.returncode == 0, run.stderr
    n, peak = run.stdout.split()
    return int(n), int(peak)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc/self/status (VmHWM)")
class TestStreamMemory:
    """Reading a pipe holds the rounds being ordered, not the stream."""

    def test_peak_memory_does_not_grow_with_the_stream(self) -> None:
        """240,000 samples in rounds of 500 on stdin peak within 2 MiB of 30,000 (the stream: 12 MiB more)."""

        def stream(n: int) -> bytes:
            body = b"".join(_ticks(7, 500, start) + record(68, b"") for start in range(0, n, 500))
            return _pipe_head(cpu_clock=False) + body

        small = _peak_kib(_PEAK_OF_STREAM, stream(30_000))
        large = _peak_kib(_PEAK_OF_STREAM, stream(240_000))
        assert (small[0], large[0]) == (30_000, 240_000)
        assert large[1] - small[1] < 2 * 1024, (small, large)


_ENCODERS_AFTER_DECODE = """
import contextlib, io, sys
from structlog_etw.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["decode", "--json", sys.argv[1]])
print(code, sorted(m for m in sys.modules if m.startswith("structlog_etw") and m.endswith("encoder")))
"""


class TestReadSideImports:
    """The read side (``decode``) runs without loading an encoder."""

    def test_decode_loads_no_encoder(self, tmp_path: Path) -> None:
        """``decode --json`` of a file: neither the EventHeader nor the TraceLogging encoder is imported."""
        path = tmp_path / "ticks.data"
        path.write_bytes(_pipe_head(cpu_clock=False) + _ticks(7, 3))
        run = run_bounded(_ENCODERS_AFTER_DECODE, str(path))
        assert run.returncode == 0, run.stderr
        assert run.stdout.split(maxsplit=1) == ["0", "[]\n"]
