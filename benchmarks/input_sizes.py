"""What large and pathological inputs cost, against a baseline timed in the same run (docs/performance.md).

    python benchmarks/input_sizes.py [--rounds N] [--out docs/benchmarks/input_sizes.json]
                                     [--update-docs docs/performance.md] [--render-only]

Each case is timed against its baseline round by round, interleaved (the case first in even
rounds, the baseline first in odd ones): CPU time (``time.process_time``) with the garbage
collector paused as ``timeit`` does, both sides running the same number of loops (calibrated
so that the baseline's round takes at least 20 ms).  The figure is the minimum case round over
the minimum baseline round; the median of the per-round ratios is recorded beside it.  The goals
are the margins tests/write/test_write_path_variability.py and tests/cli/test_decode_inputs.py used to
assert with timers (the tests now hold only what does not depend on the machine):

* ``dotted_name``: ``KeywordsByLogger(mapping).lookup("a." * 100_000)`` against the look-up of a
  dotless name of the same length, ``"a" * 200_000``: at most 50x (a look-up is linear in the
  name, whatever its dots);
* ``list_300k/FORMAT``: ``log.info("e", items=[...])`` with 300,000 short strings (cut to what
  fits) against ``json.dumps`` of the list: at most 3x (the cost follows what is written);
* ``text_20mb/FORMAT``: ``log.info("e", text=...)`` with a 20 MB string holding a lone surrogate
  against a 200 KB one (both cut to the same budget): at most 5x (text is cleaned and encoded
  over what is kept only);
* ``pipe_attrs_8000``: ``PerfDataFile.from_bytes`` of 8,000 HEADER_ATTR + HEADER_TRACING_DATA
  pairs (pipe mode) against 2,000: at most 8x (linear: 4x; matching every format against every
  attr: 16x).

``--update-docs`` rewrites the table of the page's section held to the results file
(``--render-only``: from the results file as it is, measuring nothing);
tests/project/test_input_size_figures.py holds the page to the file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import math
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT)]

import structlog  # noqa: E402

from structlog_etw import EtwRenderer, KeywordsByLogger, Provider  # noqa: E402
from structlog_etw.backends.capture import CaptureBackend  # noqa: E402
from structlog_etw.perf.datafile import PerfDataFile  # noqa: E402
from tests.helpers.perfdata import many_attrs  # noqa: E402

#: Where the committed results go, and the page whose held section shows them.
RESULTS = ROOT / "docs" / "benchmarks" / "input_sizes.json"
PAGE = ROOT / "docs" / "performance.md"
#: The held section's opening marker (tests/project/test_performance_figures.py knows the form).
HELD_MARKER = "<!-- held: benchmarks/input_sizes.json (tests/project/test_input_size_figures.py) -->"
FORMATS = ("eventheader", "tracelogging")
#: A baseline round takes at least this much CPU time (the loop count is set from it).
MIN_ROUND_S = 0.02


@dataclass
class Case:
    """A case and its baseline, each a function doing one loop, and a check of what was done."""

    id: str
    what: str
    baseline: str
    goal: float
    case: Callable[[], object]
    base: Callable[[], object]
    #: Run after the rounds: a message when the work was not what the case claims, else None.
    check: Callable[[int], str | None]
    #: Run after every round, untimed (clears capture backends).
    reset: Callable[[], None] = lambda: None


def _logger(fmt: str, name: str) -> tuple[Any, Provider, CaptureBackend]:
    backend = CaptureBackend(name, format=fmt)
    provider = Provider(name, backend=backend)
    return structlog.wrap_logger(None, processors=[EtwRenderer(name, provider=provider)]), provider, backend


def _written_truncated(provider: Provider, calls: Callable[[], int]) -> Callable[[int], str | None]:
    def check(_loops: int) -> str | None:
        stats = provider.stats()
        n = calls()
        if stats["dropped"] or stats["written"] != n or stats["truncated"] != n:
            written, truncated = stats["written"], stats["truncated"]
            return f"{n} calls, but written {written}, truncated {truncated}, dropped {stats['dropped']}"
        return None

    return check


def _counting(run: Callable[[], object], counter: list[int]) -> Callable[[], object]:
    def go() -> object:
        counter[0] += 1
        return run()

    return go


def cases() -> list[Case]:
    """Every case, its baseline and its check, built fresh (loggers, names, files)."""
    out: list[Case] = []
    mapping = {"db": 2, "a.b": 4, "app_*": 8}
    dotted, dotless = "a." * 100_000, "a" * 200_000
    out.append(
        Case(
            "dotted_name",
            '`KeywordsByLogger(mapping).lookup("a." * 100_000)`, a 200 KB dotted logger name',
            'the same for a dotless name of the same length, `"a" * 200_000`',
            50.0,
            lambda: KeywordsByLogger(mapping).lookup(dotted),
            lambda: KeywordsByLogger(mapping).lookup(dotless),
            lambda _loops: (
                None
                if {KeywordsByLogger(mapping).lookup(name) for name in (dotted, dotless)} == {None}
                else "a look-up matched a key"
            ),
        )
    )
    items = [f"item{i}" for i in range(300_000)]
    big, small = "\ud800" + "x" * 20_000_000, "\ud800" + "x" * 200_000
    for fmt in FORMATS:
        log, provider, backend = _logger(fmt, f"BigList_{fmt}")
        calls = [0]
        out.append(
            Case(
                f"list_300k/{fmt}",
                f'{fmt}: `log.info("e", items=items)`, a list of 300,000 short strings (cut to what fits)',
                "`json.dumps(items)`",
                3.0,
                _counting(lambda log=log: log.info("e", items=items), calls),
                lambda: json.dumps(items),
                _written_truncated(provider, lambda calls=calls: calls[0]),
                backend.clear,
            )
        )
    for fmt in FORMATS:
        log, provider, backend = _logger(fmt, f"BigText_{fmt}")
        calls = [0]
        out.append(
            Case(
                f"text_20mb/{fmt}",
                f'{fmt}: `log.info("e", text=big)`, a 20 MB string with a lone surrogate',
                "the same with a 200 KB one (both are cut to the same budget)",
                5.0,
                _counting(lambda log=log: log.info("e", text=big), calls),
                _counting(lambda log=log: log.info("e", text=small), calls),
                _written_truncated(provider, lambda calls=calls: calls[0]),
                backend.clear,
            )
        )
    files = {n: many_attrs(n) for n in (2000, 8000)}

    def parse(n: int) -> Callable[[], object]:
        def go() -> object:
            f = PerfDataFile.from_bytes(files[n])
            return sum(1 for _ in f.samples()), f

        return go

    def check_parse(_loops: int) -> str | None:
        for n, data in files.items():
            f = PerfDataFile.from_bytes(data)
            samples = sum(1 for _ in f.samples())  # pipe mode: the records are read here
            if samples or f.problems or len(f.attrs) != n or not all(a.format for a in f.attrs):
                return f"{n} attrs: {len(f.attrs)} read, problems {f.problems}"
        return None

    out.append(
        Case(
            "pipe_attrs_8000",
            "`PerfDataFile.from_bytes` of 8,000 HEADER_ATTR + HEADER_TRACING_DATA pairs (pipe mode)",
            "the same with 2,000 pairs",
            8.0,
            parse(8000),
            parse(2000),
            check_parse,
        )
    )
    return out


def _cpu(run: Callable[[], object], loops: int) -> float:
    gc.disable()
    try:
        start = time.process_time()
        for _ in range(loops):
            run()
        return time.process_time() - start
    finally:
        gc.enable()


def measure(case: Case, rounds: int) -> dict[str, Any]:
    """The case's and the baseline's CPU time of every round, and their ratios."""
    case.case(), case.base()  # warm-up: caches, compiled shapes, first allocations
    case.reset()
    single = min(_cpu(case.base, 1) for _ in range(3))
    loops = max(1, math.ceil(MIN_ROUND_S / max(single, 1e-9)))
    case_s: list[float] = []
    base_s: list[float] = []
    for i in range(rounds):
        if i % 2:
            base_s.append(_cpu(case.base, loops))
            case_s.append(_cpu(case.case, loops))
        else:
            case_s.append(_cpu(case.case, loops))
            base_s.append(_cpu(case.base, loops))
        case.reset()
    problem = case.check(loops)
    if problem:
        raise SystemExit(f"{case.id}: {problem}")
    case_s = [round(t, 6) for t in case_s]
    base_s = [round(t, 6) for t in base_s]
    ratio = round(min(case_s) / min(base_s), 2)
    return {
        "id": case.id,
        "what": case.what,
        "baseline": case.baseline,
        "goal": case.goal,
        "loops": loops,
        "case_s": case_s,
        "baseline_s": base_s,
        "ratio": ratio,
        "median_ratio": median_ratio(case_s, base_s),
        "met": ratio <= case.goal,
    }


def median_ratio(case_s: list[float], base_s: list[float]) -> float:
    """The median over rounds of case / baseline timed in that round, to two places."""
    return round(statistics.median(c / b for c, b in zip(case_s, base_s, strict=True)), 2)


def table(results: dict[str, Any]) -> str:
    """The page's table, rendered from the results file."""
    rows = [
        "| case | what | baseline (same run) | ratio of minimums | median of rounds | goal | met |",
        "|---|---|---|---:|---:|---|---|",
    ]
    for c in results["cases"]:
        met = "yes" if c["met"] else "**no**"
        rows.append(
            f"| `{c['id']}` | {c['what']} | {c['baseline']} | {c['ratio']:.2f}x | {c['median_ratio']:.2f}x"
            f" | <= {c['goal']:g}x | {met} |"
        )
    return "\n".join(rows)


def rounds_sentence(results: dict[str, Any]) -> str:
    """The page's sentence naming the rounds the file was measured with."""
    return f"the minimum of {results['rounds']} interleaved rounds each"


def update_page(page: Path, results: dict[str, Any]) -> None:
    """Rewrite the table and the rounds sentence of the page's section held to the results file."""
    text = page.read_text(encoding="utf-8")
    start = text.index(HELD_MARKER)
    end = text.index("<!-- end held -->", start)
    section = text[start:end]
    section, tables = re.subn(r"^\|.*\|\n(?:\|.*\|\n)*", table(results) + "\n", section, count=1, flags=re.M)
    rounds = r"the minimum of \d+ interleaved rounds each"
    section, sentences = re.subn(rounds, rounds_sentence(results), section)
    if tables != 1 or sentences != 1:
        raise SystemExit(f"{page}: the held section needs one table and one rounds sentence")
    page.write_text(text[:start] + section + text[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Measure every case, write the results file (and the page), print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--update-docs", type=Path, metavar="PAGE", help="rewrite the page's held table")
    parser.add_argument(
        "--render-only", action="store_true", help="measure nothing: rewrite --update-docs from --out"
    )
    args = parser.parse_args(argv)
    if args.render_only:
        update_page(args.update_docs or PAGE, json.loads(args.out.read_text()))
        return 0
    measured = []
    for case in cases():
        measured.append(measure(case, args.rounds))
        c = measured[-1]
        verdict = "met" if c["met"] else "NOT met"
        figures = f"{c['ratio']:6.2f}x (median {c['median_ratio']:.2f}x) <= {c['goal']:g}x"
        print(f"{c['id']:24} {figures}  {verdict}")
    results = {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "rounds": args.rounds,
        "min_round_s": MIN_ROUND_S,
        "cases": measured,
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.update_docs:
        update_page(args.update_docs, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
