"""Claims equal measurements: every table of docs/performance.md between ``generated`` markers is
what benchmarks/_report.py makes of docs/benchmarks/results.json, and every ratio quoted in the
README and the docs carries a marker naming its row of that file and equals it."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "benchmarks" / "results.json"
PAGE = ROOT / "docs" / "performance.md"
#: A quoted ratio and its marker: ``**1.15x**<!-- results: disabled/etw_fast_path -->``.
QUOTED = re.compile(
    r"(?P<figure>\d+\.\d+)x\**\s*<!-- results: (?P<comparison>[a-z_0-9]+)/(?P<case>[a-z_0-9]+)"
    r"(?:/(?P<baseline>[a-z_0-9]+))? -->"
)
#: Any ratio figure (``1.15x``): in the README every one must be a quoted, marked ratio.
RATIO = re.compile(r"(?<![\w.])\d+\.\d+x\b")
#: A section whose figures another results file and test hold (``<!-- held: PATH (TEST) -->``).
HELD = re.compile(r"<!-- held: (?P<path>\S+) [^>]*-->\n.*?<!-- end held -->", re.S)


def _report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_bench_report", ROOT / "benchmarks" / "_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    """The committed results file."""
    return json.loads(RESULTS.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


class TestGeneratedTables:
    """docs/performance.md's tables are the results file's, as the bench session writes them."""

    def test_every_generated_block_equals_the_results_file(self, results: dict[str, Any]) -> None:
        """Each ``<!-- generated: NAME -->`` block is what ``_report.tables`` renders now."""
        report = _report()
        tables = report.tables(results)
        text = PAGE.read_text(encoding="utf-8")
        blocks = {m.group("name"): m.group("body") for m in report.BLOCK.finditer(text)}
        assert set(blocks) >= {"environment", "ratio-table", "disabled-steps", "disabled-runs", "scaling"}
        for name, body in blocks.items():
            assert body == tables[name], f"docs/performance.md block {name!r} differs from {RESULTS.name}"

    def test_a_changed_ratio_is_caught(self, results: dict[str, Any]) -> None:
        """The check can fail: one ratio of the file changed gives another ratio table."""
        report = _report()
        changed = json.loads(json.dumps(results))
        case = changed["comparisons"]["disabled"]["cases"]["etw_fast_path"]
        case["ratio"] = round(case["ratio"] + 0.01, 3)
        assert report.tables(changed)["ratio-table"] != report.tables(results)["ratio-table"]


class TestQuotedFigures:
    """A ratio in prose is marked with its row and equals the file's, rounded as quoted."""

    @pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
    def test_every_marked_ratio_is_the_results_files(self, page: Path, results: dict[str, Any]) -> None:
        """``N.NNx<!-- results: comparison/case[/baseline] -->``: N.NN is that row's ratio."""
        report = _report()
        for m in QUOTED.finditer(page.read_text(encoding="utf-8")):
            expected = report.ratio(results, m.group("comparison"), m.group("case"), m.group("baseline"))
            figure = m.group("figure")
            assert float(figure) == round(expected, len(figure.split(".")[1])), (
                f"{page.name}: {m.group(0)!r} but {RESULTS.name} says {expected}"
            )

    def test_the_readme_quotes_no_unmarked_ratio(self) -> None:
        """Every ``N.NNx`` of the README is a marked figure (the site's front page is its text)."""
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        marked = {m.start() for m in QUOTED.finditer(text)}
        unmarked = [m.group(0) for m in RATIO.finditer(text) if m.start() not in marked]
        assert unmarked == []
        assert marked, "the README quotes the disabled figure"

    def test_the_performance_page_quotes_no_unmarked_ratio_outside_its_tables(self) -> None:
        """Outside the generated blocks, docs/performance.md's ratios are marked figures or limits."""
        report = _report()
        text = report.BLOCK.sub("", PAGE.read_text(encoding="utf-8"))
        # A section held equal to another results file by its own test (decode throughput).
        for held in HELD.finditer(text):
            assert (PAGE.parent / held.group("path")).is_file(), held.group("path")
        text = HELD.sub("", text)
        marked = {m.start() for m in QUOTED.finditer(text)}
        unmarked = [
            m.group(0)
            for m in RATIO.finditer(text)
            if m.start() not in marked
            and not text[max(0, m.start() - 8) : m.start()].rstrip().endswith("within")
        ]
        assert unmarked == []
