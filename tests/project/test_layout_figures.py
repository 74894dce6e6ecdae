"""The new-layout figures in docs/performance.md are the ones benchmarks/layouts.py wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "docs" / "benchmarks" / "layouts.json"
PAGE = ROOT / "docs" / "performance.md"
#: The opening marker of the page's section held to the results file.
HELD_MARKER = "<!-- held: benchmarks/layouts.json (tests/project/test_layout_figures.py) -->"


def _section() -> str:
    """The page's section held to the results file (other sections quote other rounds)."""
    text = PAGE.read_text()
    start = text.index(HELD_MARKER)
    return text[start : text.index("<!-- end held -->", start)]


def layout_table(results: dict[str, Any]) -> str:
    """The page's table of new-layout ratios, as rendered from the results file."""
    rows = [
        "| format | fields | new layout per event / fixed shape | goal | met |",
        "|---|---:|---:|---|---|",
    ]
    for case in results["cases"]:
        met = "yes" if case["met"] else "no"
        ratio = f"{case['ratio']:.2f}x"
        rows.append(f"| {case['format']} | {case['fields']} | {ratio} | <= {results['goal']:g}x | {met} |")
    return "\n".join(rows)


class TestLayoutFigures:
    """docs/performance.md's "What a new layout costs" shows docs/benchmarks/layouts.json."""

    def test_the_table_is_the_results_file(self) -> None:
        """The ratio table in the page's held section equals the one rendered from the results."""
        results = json.loads(RESULTS.read_text())
        assert layout_table(results) in _section()

    def test_each_ratio_and_verdict_follow_from_the_runs(self) -> None:
        """Every case's ratio is its minimum churn time over its minimum fixed time, and its
        verdict is that ratio against the goal: the file's figures are its own measurements."""
        results = json.loads(RESULTS.read_text())
        assert {(c["format"], c["fields"]) for c in results["cases"]} == {
            (fmt, n) for fmt in ("eventheader", "tracelogging") for n in (5, 20, 120)
        }
        for case in results["cases"]:
            assert len(case["churn_s"]) == len(case["fixed_s"]) == results["rounds"]
            assert case["ratio"] == round(min(case["churn_s"]) / min(case["fixed_s"]), 2)
            assert case["met"] == (case["ratio"] <= results["goal"])

    def test_the_rounds_sentence_is_the_results_file(self) -> None:
        """The page's held section names the number of rounds the file was measured with."""
        results = json.loads(RESULTS.read_text())
        assert f"the minimum of {results['rounds']} interleaved rounds each" in _section()
