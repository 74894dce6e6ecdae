"""Time order in bounded memory: :meth:`PerfDataFile.samples_by_time` holds a window of samples,
not the file, when perf's FINISHED_ROUND records are missing (or rounds are huge)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structlog_etw.perf.datafile import REORDER_WINDOW_BYTES, PerfDataFile
from tests.helpers.hostile import run_bounded
from tests.helpers.perfdata import (
    Tracepoint,
    attr_record,
    header_pipe,
    plain_format,
    record,
    sample_record,
    tracepoint_raw,
    tracing_data_record,
)

TICK = Tracepoint("test", plain_format("tick", 500), 500)


def _no_rounds(times: list[int]) -> bytes:
    """A pipe-mode file of one tick per time in ``times``, in that order, without FINISHED_ROUND."""
    head = header_pipe() + attr_record(2, TICK.id, 7) + tracing_data_record([TICK])
    raw = [tracepoint_raw(TICK, struct.pack("<i", i) + b"x" * 96) for i in range(len(times))]
    body = b"".join(sample_record(7, r, t) for r, t in zip(raw, times, strict=True))
    return head + body


def _with_rounds(times: list[int | None]) -> bytes:
    """A pipe-mode file of one tick per int of ``times`` (its value: the index), a FINISHED_ROUND per None."""
    head = header_pipe() + attr_record(2, TICK.id, 7) + tracing_data_record([TICK])
    body = b"".join(
        record(68, b"") if t is None else sample_record(7, tracepoint_raw(TICK, struct.pack("<i", i)), t)
        for i, t in enumerate(times)
    )
    return head + body


def _perf_order(times: list[int | None]) -> list[int]:
    """The indexes of ``times`` in the order the docstring of samples_by_time says (no window
    reached): at a round's end the samples up to the time newest when the previous round ended,
    in (time, file order); one older than a sample already out at once; the rest at the end."""
    held: list[tuple[int, int]] = []
    out: list[int] = []
    horizon: int | None = None
    newest: int | None = None
    released: int | None = None
    for i, t in enumerate(times):
        if t is not None:
            if released is not None and t < released:
                out.append(i)  # late
            else:
                held.append((t, i))
                newest = t if newest is None else max(newest, t)
            continue
        held.sort()
        if horizon is not None:
            going = [h for h in held if h[0] <= horizon]
            if going:
                released = going[-1][0]
                out += [i for _, i in going]
                held = held[len(going) :]
        if newest is not None:
            horizon = newest
    return out + [i for _, i in sorted(held)]


class TestReorderWindow:
    """Without rounds, samples are ordered within a window of bytes; older ones are late, not lost."""

    def test_local_disorder_is_sorted(self) -> None:
        """Swapped neighbours in a file without rounds come out in time order, none late."""
        times = [t for pair in range(0, 2000, 2) for t in (pair + 1, pair)]
        f = PerfDataFile.from_bytes(_no_rounds(times))
        assert [s.time for s in f.samples_by_time()] == sorted(times)
        assert f.late == 0

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.none() | st.integers(0, 6), max_size=60))
    def test_rounds_and_equal_times_come_out_as_documented(self, times: list[int | None]) -> None:
        """Rounds anywhere, many equal times, some late: (time, file order) within what a round releases."""
        f = PerfDataFile.from_bytes(_with_rounds(times))
        got = [struct.unpack_from("<i", s.raw, 8)[0] for s in f.samples_by_time()]
        assert got == _perf_order(times)
        assert f.problems == []

    def test_disorder_wider_than_the_window_is_late_and_counted(self) -> None:
        """A sample older than what the window already released is written at once and counted late."""
        times = [*range(100, 3100), 5]  # 3000 samples of ~600 counted bytes: past a 64 KiB window
        f = PerfDataFile.from_bytes(_no_rounds(times))
        out = [s.time for s in f.samples_by_time(window=64 << 10)]
        assert sorted(out) == sorted(times)
        assert f.late == 1
        assert out.index(5) > 0  # written when it was read, after newer ones: not dropped, not sorted

    def test_the_default_window_is_documented_and_bounded(self) -> None:
        """The default window is tens of MiB: wider than perf's rounds, far below a capture's size."""
        assert 8 << 20 <= REORDER_WINDOW_BYTES <= 64 << 20


_PEAK_OF_FILE = """
import sys
def peak_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
from structlog_etw.perf.datafile import PerfDataFile
with PerfDataFile.open(sys.argv[1]) as f:
    n = sum(1 for _ in f.samples_by_time(window=int(sys.argv[2])))
print(n, peak_kib())
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc/self/status (VmHWM)")
class TestReorderMemory:
    """What time order holds does not grow with a file without rounds."""

    def test_peak_memory_of_a_file_without_rounds_does_not_grow_with_it(self, tmp_path: Path) -> None:
        """160,000 samples (23 MiB) peak within 6 MiB of 20,000 with a 4 MiB window (held whole: +60 MiB)."""
        peaks = []
        for n in (20_000, 160_000):
            path = tmp_path / f"{n}.data"
            times = [t for pair in range(0, n, 2) for t in (pair + 1, pair)]
            path.write_bytes(_no_rounds(times))
            run = run_bounded(_PEAK_OF_FILE, str(path), str(4 << 20), timeout=300)
            assert not run.hung and run.returncode == 0, run.stderr
            count, peak = map(int, run.stdout.split())
            assert count == n
            peaks.append(peak)
        assert peaks[1] - peaks[0] < 6 * 1024, peaks
