"""What a new value layout per event costs against a cached shape (docs/performance.md).

    python benchmarks/layouts.py [--rounds N] [--out docs/benchmarks/layouts.json]

Per format (EventHeader, TraceLogging) and field count (5, 20, 120): the CPU time
(``time.process_time``, the garbage collector paused as ``timeit`` does) of 2,000
``log.info("e", **fields)`` calls through ``EtwRenderer`` and a ``Provider`` with a capture
backend whose value kinds are drawn at random per event (str, int, float, bool, None, bytes,
UUID, datetime: "churn"), against 2,000 calls of one fixed shape (hot and compiled), the two
interleaved round by round; the figure is the minimum churn time over the minimum fixed time.
The goal (issue 22): at most 3x.  tests/project/test_layout_figures.py holds the page to this file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

import structlog  # noqa: E402

from structlog_etw import EtwRenderer, Provider  # noqa: E402
from structlog_etw.backends.capture import CaptureBackend  # noqa: E402

# The value kinds, shared with tests/write/test_write_path_variability.py (benchmarks import test helpers).
from tests.helpers.value_kinds import VALUES  # noqa: E402

GOAL = 3.0
EVENTS = 2000
FORMATS = ("eventheader", "tracelogging")
FIELD_COUNTS = (5, 20, 120)


def _logger(fmt: str, name: str) -> tuple[Any, CaptureBackend]:
    backend = CaptureBackend(name, format=fmt)
    provider = Provider(name, backend=backend)
    return structlog.wrap_logger(None, processors=[EtwRenderer(name, provider=provider)]), backend


def _cpu(run: Callable[[], None]) -> float:
    gc.disable()
    try:
        start = time.process_time()
        run()
        return time.process_time() - start
    finally:
        gc.enable()


def measure(fmt: str, fields: int, rounds: int) -> dict[str, Any]:
    """The churn and fixed CPU times of every round, and the ratio of their minimums."""
    keys = [f"field_{i}" for i in range(fields)]
    rnd = random.Random(fields)
    fixed_log, fixed_backend = _logger(fmt, f"Fixed_{fmt}_{fields}")
    churn_log, churn_backend = _logger(fmt, f"Churn_{fmt}_{fields}")
    one = {k: VALUES[i % len(VALUES)] for i, k in enumerate(keys)}
    fixed = [dict(one) for _ in range(EVENTS)]
    churn = [{k: rnd.choice(VALUES) for k in keys} for _ in range(EVENTS)]
    for event in fixed[:200]:
        fixed_log.info("e", **event)

    def run(log: Any, backend: CaptureBackend, events: list[dict[str, Any]]) -> Callable[[], None]:
        def go() -> None:
            backend.clear()
            info = log.info
            for event in events:
                info("e", **event)

        return go

    fixed_s: list[float] = []
    churn_s: list[float] = []
    for _ in range(rounds):
        fixed_s.append(_cpu(run(fixed_log, fixed_backend, fixed)))
        churn_s.append(_cpu(run(churn_log, churn_backend, churn)))
    if len(churn_backend.records) != EVENTS:
        raise SystemExit(f"{fmt} {fields}: {len(churn_backend.records)} of {EVENTS} churn events written")
    fixed_s = [round(t, 5) for t in fixed_s]
    churn_s = [round(t, 5) for t in churn_s]
    ratio = round(min(churn_s) / min(fixed_s), 2)
    return {
        "format": fmt,
        "fields": fields,
        "fixed_s": fixed_s,
        "churn_s": churn_s,
        "ratio": ratio,
        "met": ratio <= GOAL,
    }


def main(argv: list[str] | None = None) -> int:
    """Measure every case, write the results file, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "benchmarks" / "layouts.json")
    args = parser.parse_args(argv)
    cases = [measure(fmt, n, args.rounds) for fmt in FORMATS for n in FIELD_COUNTS]
    results = {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "events": EVENTS,
        "rounds": args.rounds,
        "goal": GOAL,
        "cases": cases,
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for case in cases:
        verdict = "met" if case["met"] else "NOT met"
        print(f"{case['format']:13} {case['fields']:4} fields  {case['ratio']:.2f}x  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
