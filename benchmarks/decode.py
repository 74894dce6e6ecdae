"""Decode throughput: ``structlog-etw decode`` against Microsoft's C++ ``perf-decode`` on the same file.

    python benchmarks/decode.py [--copies N] [--repeat R] [--perf-decode PATH | --linuxtracepoints DIR]
                                [--out docs/benchmarks/decode.json]

The file: the conformance capture (``../shared/vectors/linuxtracepoints/perf.data``, 539 samples:
254 EventHeader events of every field type, 285 ``sched:sched_switch``) with its sample records
replicated ``--copies`` times (default 186: 100,254 samples), each copy's timestamps shifted past
the previous one's and followed by a FINISHED_ROUND record, the header's data size and the feature
section offsets moved to match: a file perf could have written.  A second file holds the same
records without any FINISHED_ROUND (for the memory of time order without rounds).

perf-decode: ``--perf-decode PATH`` (or ``$PERF_DECODE``), else built with cmake from a
microsoft/LinuxTracepoints source tree given by ``--linuxtracepoints DIR`` (or
``$LINUXTRACEPOINTS_SRC``); without either the comparison is skipped with a message.

Figures: the CPU time (user + system, from the child's rusage) of each run, the minimum of
``--repeat`` runs, and the ratio ours / perf-decode's for ``--json``, text and ``--perf-json``;
the peak RSS of each process (``VmHWM`` of /proc/PID/status, polled) in time order on the file
without rounds.

Bytecode: an installed package has its ``.pyc`` files, so our decoder is timed with them.  Before
timing, the ``structlog_etw`` package the child processes import is byte-compiled once
(``python -m compileall -q``), and the children run without ``PYTHONDONTWRITEBYTECODE`` (which
some machines set: every run would compile every module again, tens of ms that an installed
``structlog-etw decode`` never spends).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = Path(os.environ.get("STRUCTLOG_ETW_SHARED", ROOT.parent / "shared"))
VECTOR = SHARED / "vectors" / "linuxtracepoints" / "perf.data"
DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "decode.json"
#: The goal of issue 24: our CPU time at most this many times perf-decode's.
GOAL = 5.0
#: The goal for the peak memory of time order on a file without rounds.
MEMORY_GOAL = 2.0

_SAMPLE = 9
_FINISHED_ROUND = 68
# PERF_SAMPLE_* bits before TIME, each one u64 when set: IDENTIFIER, IP, TID
_BEFORE_TIME = (0x10000, 0x1, 0x2)
_TIME = 0x4


def replicate(capture: bytes, copies: int, rounds: bool = True) -> bytes:
    """The capture with its sample records repeated ``copies`` times (see the module docstring)."""
    assert capture[:8] == b"PERFILE2", "a little-endian file-mode perf.data"
    attr_size, attrs_off, attrs_size, data_off, data_size = struct.unpack_from("<5Q", capture, 16)
    sample_types = {
        struct.unpack_from("<Q", capture, pos + 24)[0]
        for pos in range(attrs_off, attrs_off + attrs_size, attr_size)
    }
    offsets = {8 + 8 * sum(1 for bit in _BEFORE_TIME if st & bit) for st in sample_types if st & _TIME}
    assert len(offsets) == 1, "every attr has its sample time at the same place"
    time_at = offsets.pop()
    data = capture[data_off : data_off + data_size]
    samples: list[bytes] = []
    times: list[int] = []
    kept = bytearray()  # every record but FINISHED_ROUND (the copies add their own)
    pos = 0
    while pos < len(data):
        typ, _misc, size = struct.unpack_from("<IHH", data, pos)
        rec = data[pos : pos + size]
        if typ == _SAMPLE:
            samples.append(rec)
            times.append(struct.unpack_from("<Q", rec, time_at)[0])
        if typ != _FINISHED_ROUND or rounds:
            kept += rec
        pos += size
    span = max(times) - min(times) + 1
    out = bytearray(kept)
    round_record = struct.pack("<IHH", _FINISHED_ROUND, 0, 8)
    for k in range(1, copies):
        shift = k * span
        for rec, t in zip(samples, times, strict=True):
            out += rec[:time_at] + struct.pack("<Q", t + shift) + rec[time_at + 8 :]
        if rounds:
            out += round_record
    delta = len(out) - data_size
    header = bytearray(capture[:data_off])
    struct.pack_into("<Q", header, 48, len(out))
    table_at = data_off + data_size
    features = sum(w << (64 * i) for i, w in enumerate(struct.unpack_from("<4Q", capture, 72)))
    n_features = bin(features).count("1")
    table = bytearray(capture[table_at : table_at + 16 * n_features])
    for i in range(n_features):
        off, size = struct.unpack_from("<QQ", table, 16 * i)
        struct.pack_into("<QQ", table, 16 * i, off + delta, size)
    return bytes(header + out + table + capture[table_at + 16 * n_features :])


def _cmake_build(source: Path, build: Path) -> Path | None:
    """perf-decode built from a microsoft/LinuxTracepoints tree (cached in ``build``), or None."""
    binary = build / "bin" / "perf-decode"
    if binary.exists():
        return binary
    cmake = shutil.which("cmake")
    if cmake is None or (shutil.which("c++") is None and shutil.which("g++") is None):
        print("decode benchmark: cmake or a C++ compiler missing: cannot build perf-decode", file=sys.stderr)
        return None
    for cmd in (
        [cmake, "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
        [cmake, "--build", str(build), "--target", "perf-decode"],
    ):
        run = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            print(f"decode benchmark: {' '.join(cmd)} failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
            return None
    return binary if binary.exists() else None


def find_perf_decode(path: str | None, source: str | None) -> Path | None:
    """The perf-decode binary: given, or built from a LinuxTracepoints source tree; None: skip."""
    path = path or os.environ.get("PERF_DECODE")
    if path:
        return Path(path)
    source = source or os.environ.get("LINUXTRACEPOINTS_SRC")
    if source:
        return _cmake_build(Path(source), ROOT / ".bench" / "perf-decode")
    return None


def _peak_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return None


def child_env() -> dict[str, str]:
    """The environment of the timed commands: ours, without ``PYTHONDONTWRITEBYTECODE``."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_package() -> None:
    """Byte-compile the ``structlog_etw`` package the timed commands import (see the module docstring)."""
    env = child_env()
    where = subprocess.run(
        [sys.executable, "-c", "import os, structlog_etw; print(os.path.dirname(structlog_etw.__file__))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    run = subprocess.run([sys.executable, "-m", "compileall", "-q", where], env=env, check=False)
    if run.returncode != 0:
        print(f"decode benchmark: compileall {where} failed: timing without bytecode", file=sys.stderr)


def run_once(cmd: list[str], cwd: str | None = None) -> tuple[float, int | None]:
    """CPU seconds (user + system) of ``cmd`` (its stdout to /dev/null) and its peak RSS in KiB,
    run in ``cwd`` (default: this process's)."""
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen(cmd, stdout=devnull, stderr=subprocess.PIPE, env=child_env(), cwd=cwd)
        peak = None
        while True:
            seen = _peak_kib(proc.pid)
            if seen is not None:
                peak = seen
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.005)
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.stderr.close()
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{cmd} failed ({proc.returncode}): {err[-2000:]!r}")
    return usage.ru_utime + usage.ru_stime, peak


def measure(cmds: dict[str, list[str]], repeat: int) -> dict[str, dict[str, Any]]:
    """Every command ``repeat`` times, round-robin; the minimum CPU time and the largest peak."""
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    peaks: dict[str, list[int]] = {k: [] for k in cmds}
    for _ in range(repeat):
        for name, cmd in cmds.items():
            seconds, peak = run_once(cmd)
            cpu[name].append(seconds)
            if peak is not None:
                peaks[name].append(peak)
    return {
        k: {"cpu_s": min(cpu[k]), "runs_s": cpu[k], "peak_kib": max(peaks[k], default=None)} for k in cmds
    }


def main(argv: list[str] | None = None) -> int:
    """Build the files, time both decoders, write the results (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--copies", type=int, default=186)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--perf-decode", help="perf-decode binary (default: $PERF_DECODE)")
    parser.add_argument("--linuxtracepoints", help="microsoft/LinuxTracepoints source tree to build it from")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not VECTOR.exists():
        print(f"decode benchmark: skipped: {VECTOR} missing (set STRUCTLOG_ETW_SHARED)")
        return 0
    perf_decode = find_perf_decode(args.perf_decode, args.linuxtracepoints)
    if perf_decode is None:
        print(
            "decode benchmark: skipped: no perf-decode (give --perf-decode PATH or $PERF_DECODE, or a"
            " microsoft/LinuxTracepoints tree as --linuxtracepoints DIR or $LINUXTRACEPOINTS_SRC)"
        )
        return 0
    capture = VECTOR.read_bytes()
    compile_package()
    ours = [sys.executable, "-m", "structlog_etw", "decode"]
    with tempfile.TemporaryDirectory() as tmp:
        rounds = Path(tmp) / "perf.data"
        rounds.write_bytes(replicate(capture, args.copies))
        flat = Path(tmp) / "no-rounds.data"
        flat.write_bytes(replicate(capture, args.copies, rounds=False))
        del capture
        cmds = {
            "perf-decode": [str(perf_decode), str(rounds)],
            "json": [*ours, "--json", str(rounds)],
            "text": [*ours, str(rounds)],
            "perf-json": [*ours, "--perf-json", str(rounds)],
        }
        speed = measure(cmds, args.repeat)
        memory = measure(
            {"perf-decode": [str(perf_decode), str(flat)], "json": [*ours, "--json", str(flat)]}, 1
        )
        samples = args.copies * 539
        size = rounds.stat().st_size
    base = speed["perf-decode"]["cpu_s"]
    results: dict[str, Any] = {
        "file": {"samples": samples, "bytes": size, "copies": args.copies},
        "goal_cpu_ratio": GOAL,
        "goal_memory_ratio": MEMORY_GOAL,
        "cpu": speed,
        "ratios": {m: round(speed[m]["cpu_s"] / base, 2) for m in ("json", "text", "perf-json")},
        "events_per_s": {m: round(samples / speed[m]["cpu_s"]) for m in cmds},
        "memory_without_rounds": memory,
        "memory_ratio": round(memory["json"]["peak_kib"] / memory["perf-decode"]["peak_kib"], 2)
        if memory["json"]["peak_kib"] and memory["perf-decode"]["peak_kib"]
        else None,
        "python": sys.version.split()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"decode throughput, {samples} samples ({size} bytes), CPU time, min of {args.repeat}:")
    for m in cmds:
        ratio = (
            "" if m == "perf-decode" else f"  {speed[m]['cpu_s'] / base:5.2f}x perf-decode (goal <= {GOAL}x)"
        )
        print(f"  {m:12} {speed[m]['cpu_s']:7.2f} s  {results['events_per_s'][m]:>9} events/s{ratio}")
    print(f"peak RSS in time order without rounds: {memory}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
