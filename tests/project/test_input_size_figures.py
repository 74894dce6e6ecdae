"""The large-input figures in docs/performance.md are the ones benchmarks/input_sizes.py wrote."""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "docs" / "benchmarks" / "input_sizes.json"
PAGE = ROOT / "docs" / "performance.md"
#: The goals the timed assertions of the tests had, now the benchmark's (issue margins).
GOALS = {
    "dotted_name": 50.0,
    "list_300k/eventheader": 3.0,
    "list_300k/tracelogging": 3.0,
    "text_20mb/eventheader": 5.0,
    "text_20mb/tracelogging": 5.0,
    "pipe_attrs_8000": 8.0,
}


def _bench() -> ModuleType:
    """benchmarks/input_sizes.py, whose table renderer the page is held to."""
    path = ROOT / "benchmarks" / "input_sizes.py"
    spec = importlib.util.spec_from_file_location("_bench_input_sizes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """The benchmark module (loaded once)."""
    return _bench()


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    """The committed results file."""
    return json.loads(RESULTS.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _section(bench: ModuleType) -> str:
    """The page's section held to the results file (from its marker to the end of the hold)."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(bench.HELD_MARKER)
    return text[start : text.index("<!-- end held -->", start)]


class TestInputSizeFigures:
    """docs/performance.md's "What large inputs cost" shows docs/benchmarks/input_sizes.json."""

    def test_the_table_is_the_results_file(self, bench: ModuleType, results: dict[str, Any]) -> None:
        """The held section's table equals the one rendered from the results."""
        assert bench.table(results) in _section(bench)

    def test_the_rounds_sentence_is_the_results_file(
        self, bench: ModuleType, results: dict[str, Any]
    ) -> None:
        """The held section names the number of rounds the file was measured with."""
        assert bench.rounds_sentence(results) in _section(bench)

    def test_a_changed_ratio_is_caught(self, bench: ModuleType, results: dict[str, Any]) -> None:
        """The check can fail: one ratio of the file changed renders a table the page does not hold."""
        changed = json.loads(json.dumps(results))
        changed["cases"][0]["ratio"] = round(changed["cases"][0]["ratio"] + 0.01, 2)
        assert bench.table(changed) not in _section(bench)

    def test_the_cases_are_the_goals_the_tests_left(self, results: dict[str, Any]) -> None:
        """The file measures exactly the cases whose timed assertions left the tests, with their
        margins as goals."""
        assert {c["id"]: c["goal"] for c in results["cases"]} == GOALS

    def test_each_ratio_and_verdict_follow_from_the_runs(self, results: dict[str, Any]) -> None:
        """Every case's ratio is its minimum round over its baseline's minimum round, its median
        the median of the per-round ratios, its verdict that ratio against the goal: the file's
        figures are its own measurements, every round timed on both sides."""
        for case in results["cases"]:
            runs, base = case["case_s"], case["baseline_s"]
            assert len(runs) == len(base) == results["rounds"] and case["loops"] >= 1
            assert min(base) > 0
            assert case["ratio"] == round(min(runs) / min(base), 2)
            ratios = [c / b for c, b in zip(runs, base, strict=True)]
            assert case["median_ratio"] == round(statistics.median(ratios), 2)
            assert case["met"] == (case["ratio"] <= case["goal"])
