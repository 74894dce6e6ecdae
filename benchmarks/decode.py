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
        struct.unpack_from("<Q", capture, pos + 24)[0] for pos in range(attrs_off, attrs_off + attrs_size, attr_size)
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
