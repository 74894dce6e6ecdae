"""The enabled path with the REAL kernel write: structlog call -> EventHeader -> writev -> perf.

    python benchmarks/guest.py --out DIR [--quick]

On a kernel with user_events (and perf) this measures here; otherwise it boots the project's
user_events kernel with virtme-ng (software emulation, like ``tests/kernel/run_in_guest.py``) and
runs itself inside, writing ``DIR/guest.json``.  A ``perf record -a`` session is attached to the
tracepoint for the whole measurement, so every write goes through the kernel into perf's buffer.

The guest is emulated (TCG): absolute nanoseconds are many times the host's.  The ratios against
the JSON chain measured in the same guest, same rounds, are the figures of interest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "kernel"))

FIVE = 'log.info("user_login", user="ann", attempts=3, latency_ms=12.5, ok=True, region="eu-west-1")'


def measure(out: Path, quick: bool) -> dict[str, Any]:
    """Run the comparison on this kernel (user_events must be available)."""
    import logging  # noqa: PLC0415

    import structlog  # noqa: PLC0415
    from _baselines import json_chain_logger  # noqa: PLC0415
    from _ours import fast_path_logger  # noqa: PLC0415
    from _timing import Case, measure_group  # noqa: PLC0415
    from kernel_harness import PerfSession, wait_until  # noqa: PLC0415

    from structlog_etw.backends.user_events import UserEventsBackend  # noqa: PLC0415
    from structlog_etw.provider._provider import Provider  # noqa: PLC0415
    from structlog_etw.surface._bound_logger import make_etw_bound_logger  # noqa: PLC0415
    from structlog_etw.surface._renderer import EtwRenderer  # noqa: PLC0415

    prov = Provider(f"BenchGuest{os.getpid()}")
    assert isinstance(prov.backend, UserEventsBackend), prov.stats()
    real = structlog.wrap_logger(
        None,
        wrapper_class=make_etw_bound_logger(prov, min_level=logging.DEBUG),
        processors=[structlog.contextvars.merge_contextvars, EtwRenderer(prov.name, provider=prov)],
    ).bind()
    cases = [
        Case("json_chain", "structlog JSON chain -> /dev/null", FIVE, {"log": json_chain_logger()}),
        Case(
            "etw_kernel", "structlog-etw -> EventHeader -> writev -> perf (real kernel)", FIVE, {"log": real}
        ),
        Case(
            "etw_sink",
            "structlog-etw -> EventHeader -> sink backend",
            FIVE,
            {"log": fast_path_logger(enabled=True)},
        ),
    ]
    rounds, round_s = (5, 0.05) if quick else (21, 0.05)
    tp = f"{prov.name}_L4K1"
    with PerfSession([tp], out, label="bench", extra_args=["-m", "64"]) as session:
        wait_until(lambda: prov.enabled(4, 1), what="perf to enable the tracepoint")
        t0 = time.monotonic()
        measured = measure_group(cases, rounds, round_s)
        took = time.monotonic() - t0
    stats = prov.stats()
    base = measured["json_chain"].rounds_ns
    result: dict[str, Any] = {
        "kernel": os.uname().release,
        "seconds": round(took, 1),
        "rounds": rounds,
        "provider_stats": {k: stats[k] for k in ("written", "dropped", "errors")},
        "perf_data_bytes": session.path.stat().st_size if session.path.exists() else 0,
        "cases": {},
    }
    for key, m in measured.items():
        ratios = sorted(a / b for a, b in zip(m.rounds_ns, base, strict=True))
        result["cases"][key] = {
            "label": next(c.label for c in cases if c.key == key),
            "ns": round(m.ns, 1),
            "ratio": round(ratios[len(ratios) // 2], 3),
        }
    return result


def boot(out: Path, quick: bool) -> int:
    """Boot the user_events kernel and run this script inside (the guest writes DIR/guest.json)."""
    images = sorted((ROOT.parent / "shared" / "kernel").glob("bzImage-*"))
    image = os.environ.get("STRUCTLOG_ETW_KERNEL_IMAGE") or next(
        (str(p) for p in images if not p.name.endswith(".sha256")), None
    )
    vng = shutil.which("vng", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    if image is None or vng is None:
        print("guest.py: no kernel image or vng: cannot measure the real kernel write", file=sys.stderr)
        return 2
    cmd = [
        vng,
        "--disable-kvm",
        "-r",
        image,
        "--memory",
        "1G",
        "--cpus",
        "2",
        "--cwd",
        str(ROOT),
        "--rwdir",
        str(out),
        "--",
        sys.executable,
        str(Path(__file__).resolve()),
        "--out",
        str(out),
        "--in-guest",
        *(["--quick"] if quick else []),
    ]
    print("guest.py: " + " ".join(cmd), file=sys.stderr, flush=True)
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    # Relay the guest's output through a pipe: qemu opens its stdout with O_TRUNC and would
    # truncate a log file this run is redirected into.
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    while chunk := os.read(proc.stdout.fileno(), 65536):
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
    return proc.wait(timeout=1800)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.out = a.out.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    from kernel_harness import user_events_unavailable_reason  # noqa: PLC0415

    if user_events_unavailable_reason() is None:
        result = measure(a.out, a.quick)
        (a.out / "guest.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 0
    if a.in_guest:
        print(
            f"guest.py: user_events unavailable in the guest: {user_events_unavailable_reason()}",
            file=sys.stderr,
        )
        return 2
    return boot(a.out, a.quick)


if __name__ == "__main__":
    raise SystemExit(main())
