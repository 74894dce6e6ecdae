"""Compressed .etl reading: ``structlog-etw decode --json`` against dissect.etl's iteration of the same file.

    python benchmarks/etl_decode.py [--repeat R] [--copies N] [--out docs/benchmarks/etl_decode.json]

The file: PerfView's recording ``../shared/vectors/perfview/net.4.5.2.x86.etl.zip`` (unzipped to a
temporary directory): 276 buffers, 275 of them LZXpress-compressed, 168,298 events of the kernel,
CLR and rundown providers of a 32-bit .NET process.

The two sides, each a fresh process, timed round-robin ``--repeat`` times (the minimum CPU time,
user + system from the child's rusage):

- ``decode --json``: ``python -m structlog_etw decode FILE --json``: every buffer decompressed,
  every record framed into an ``EtlEvent`` (kind, provider, time, ids), the records merged in
  time order across CPUs, TraceLogging events decoded and written (this file has none), the rest
  counted by source on stderr.
- ``dissect.etl``: ``for record in ETL(fh): pass`` with dissect.etl (pinned in noxfile's bench
  session): every buffer decompressed by dissect.util's LZXpress and every record framed (its
  header parsed; payloads left unparsed), in file order.

Memory: the peak RSS of each process (``VmHWM``, polled), and ours again on a file holding the
recording's 275 event buffers ``--copies`` times (default 4; the header's BuffersWritten
patched): the reader holds one buffer per CPU, so the peak stays where it was while the file
grows.

Decompression alone: in this process, the CPU time (``time.process_time``) of our
decompressor and of dissect.util's over the file's 275 compressed buffers, the minimum of
``--repeat`` rounds taken alternately (the outputs are checked equal first).

Bytecode as in benchmarks/decode.py: the package is byte-compiled once before timing.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from decode import SHARED, compile_package, measure

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ARCHIVE = SHARED / "vectors" / "perfview" / "net.4.5.2.x86.etl.zip"
DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "etl_decode.json"
EVENTS = 168_298  # dissect.etl's count, the vectors' README
#: The goal: ours at most dissect.etl's CPU time.
GOAL = 1.0
_BUFFERS_WRITTEN_AT = 140  # TRACE_LOGFILE_HEADER.BuffersWritten in this file's first buffer

_DISSECT = """
import sys
from dissect.etl.etl import ETL
n = 0
with open(sys.argv[1], "rb") as fh:
    for _record in ETL(fh):
        n += 1
assert n == int(sys.argv[2]), n
"""


def replicated(data: bytes, copies: int) -> bytes:
    """The file with its event buffers (all but the first, the header's) ``copies`` times."""
    first = struct.unpack_from("<I", data, 0)[0]
    head = bytearray(data[:first])
    written = struct.unpack_from("<I", head, _BUFFERS_WRITTEN_AT)[0]
    struct.pack_into("<I", head, _BUFFERS_WRITTEN_AT, 1 + (written - 1) * copies)
    return bytes(head) + data[first:] * copies


def compressed_buffers(data: bytes) -> list[tuple[bytes, int]]:
    """``(compressed bytes, decompressed size)`` of each compressed buffer of an .etl file."""
    out = []
    offset = 0
    while offset + 72 <= len(data):
        size, filled = struct.unpack_from("<II", data, offset)
        if struct.unpack_from("<H", data, offset + 0x34)[0] & 0x40:
            out.append((data[offset + 72 : offset + size], filled - 72))
        offset += size
    return out


def time_decompressors(data: bytes, repeat: int) -> dict[str, Any]:
    """CPU seconds of ours and of dissect.util's LZXpress over every compressed buffer, min of ``repeat``."""
    from dissect.util.compression import lzxpress  # noqa: PLC0415 - a bench dependency

    from structlog_etw.etw._lzxpress import decompress  # noqa: PLC0415

    buffers = compressed_buffers(data)
    for stream, size in buffers:
        if decompress(stream, size) != lzxpress.decompress(stream):
            raise RuntimeError("the decompressors disagree")
    runs: dict[str, list[float]] = {"ours": [], "dissect.util": []}
    for _ in range(repeat):
        start = time.process_time()
        for stream, size in buffers:
            decompress(stream, size)
        runs["ours"].append(time.process_time() - start)
        start = time.process_time()
        for stream, _size in buffers:
            lzxpress.decompress(stream)
        runs["dissect.util"].append(time.process_time() - start)
    return {
        "buffers": len(buffers),
        "bytes_in": sum(len(s) for s, _ in buffers),
        "bytes_out": sum(n for _, n in buffers),
        "cpu_s": {k: min(v) for k, v in runs.items()},
        "runs_s": runs,
    }


def main(argv: list[str] | None = None) -> int:
    """Unzip the recording, time both readers, write the results (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not ARCHIVE.exists():
        print(f"etl decode benchmark: skipped: {ARCHIVE} missing (set STRUCTLOG_ETW_SHARED)")
        return 0
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(ARCHIVE) as z:
            z.extract("net.4.5.2.x86.etl", tmp)
        path = Path(tmp) / "net.4.5.2.x86.etl"
        big = Path(tmp) / "replicated.etl"
        data = path.read_bytes()
        big.write_bytes(replicated(data, args.copies))
        ours = [sys.executable, "-m", "structlog_etw", "decode", "--json"]
        cmds = {
            "json": [*ours, str(path)],
            "dissect.etl": [sys.executable, "-c", _DISSECT, str(path), str(EVENTS)],
        }
        speed = measure(cmds, args.repeat)
        grown = measure({"json": [*ours, str(big)]}, 1)["json"]
        lzx = time_decompressors(data, args.repeat)
        size, big_size = len(data), big.stat().st_size
    results: dict[str, Any] = {
        "file": {"events": EVENTS, "bytes": size, "buffers": 276, "compressed_buffers": 275},
        "goal_cpu_ratio": GOAL,
        "cpu": speed,
        "ratio": round(speed["json"]["cpu_s"] / speed["dissect.etl"]["cpu_s"], 2),
        "events_per_s": {k: round(EVENTS / v["cpu_s"]) for k, v in speed.items()},
        "memory": {
            "json_peak_kib": speed["json"]["peak_kib"],
            "dissect_peak_kib": speed["dissect.etl"]["peak_kib"],
            "copies": args.copies,
            "copies_bytes": big_size,
            "copies_json_peak_kib": grown["peak_kib"],
        },
        "decompression": lzx,
        "python": sys.version.split()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"compressed .etl, {EVENTS} events ({size} bytes), CPU time, min of {args.repeat}:")
    for k, v in speed.items():
        rate = results["events_per_s"][k]
        print(f"  {k:12} {v['cpu_s']:6.2f} s  {rate:>8} events/s  peak {v['peak_kib']} KiB")
    print(f"  ratio {results['ratio']}x dissect.etl (goal <= {GOAL}x)")
    print(f"  {args.copies} copies ({big_size} bytes): peak {grown['peak_kib']} KiB")
    print(f"  decompression of {lzx['buffers']} buffers: {lzx['cpu_s']}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
