"""The "Same speed as 0.5.0" table of docs/performance.md is the one benchmarks/versions.py wrote."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "performance.md"


def _bench() -> ModuleType:
    """benchmarks/versions.py, whose table renderer the page is held to."""
    path = ROOT / "benchmarks" / "versions.py"
    spec = importlib.util.spec_from_file_location("_bench_versions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_page_table_is_the_results_files() -> None:
    """The generated block between the markers is exactly the table rendered from
    docs/benchmarks/versions.json (a rerun that changed the figures must update the page)."""
    bench = _bench()
    results = json.loads((ROOT / "docs" / "benchmarks" / "versions.json").read_text())
    page = PAGE.read_text()
    block = page.split(bench.TABLE_START, 1)[1].split(bench.TABLE_END, 1)[0]
    assert block.strip() == bench.table(results)


def test_every_case_of_the_probe_has_a_figure_against_0_5_0() -> None:
    """The committed run compared every logging case the probe knows, both decode modes and the
    start-up cases, with
    the release commit as the old side and the script's rounds (what ``nox -s bench`` runs)."""
    bench = _bench()
    results = json.loads((ROOT / "docs" / "benchmarks" / "versions.json").read_text())
    assert results["old_ref"] == bench.RELEASE_0_5_0 and results["rounds"] == bench.ROUNDS
    want = set(bench.CASES) | {f"decode {mode}" for mode in bench.DECODE_MODES} | set(bench.STARTUP)
    assert set(results["figures"]) == want


def test_the_page_states_the_run_the_results_file_holds() -> None:
    """The prose above the table names the committed run's rounds, copies, interpreter and
    machine as docs/benchmarks/versions.json records them (a rerun must update it too)."""
    results = json.loads((ROOT / "docs" / "benchmarks" / "versions.json").read_text())
    section = " ".join(PAGE.read_text().split("## Same speed as 0.5.0", 1)[1].split("<!-- held")[0].split())
    assert f"median over {results['rounds']} rounds" in section
    assert f"({results['copies']} copies of the conformance capture)" in section
    assert f"({results['python']}, {results['machine']})" in section
    assert f"(commit `{results['old_ref']}`)" in section


def test_the_reading_of_the_table_is_the_run_s() -> None:
    """The text under the table gives, from the committed run, the smallest and largest median of
    the rows it calls within 4% of 0.5.0's time (every one but the checked write and the import,
    each with a rounds' range that includes equal speed) and the import's ratio (faster in every
    round)."""
    results = json.loads((ROOT / "docs" / "benchmarks" / "versions.json").read_text())
    figures = results["figures"]
    section = " ".join(PAGE.read_text().split("<!-- end held -->", 1)[1].split("## Method")[0].split())
    assert "every row but `enabled/fast_path` (below) takes within 4% of 0.5.0's time" in section
    rows = {case: f for case, f in figures.items() if case not in ("enabled/fast_path", "start-up/import")}
    low = min(f["ratio"] for f in rows.values())
    high = max(f["ratio"] for f in rows.values())
    assert f"lie between {low:.2f} and {high:.2f}," in section
    assert all(f["min"] <= 1.0 <= f["max"] for f in rows.values())
    assert high < 1.04  # "within 4%", by median
    assert f"`import structlog_etw` takes {figures['start-up/import']['ratio']:.2f} of 0.5.0's" in section
    assert figures["start-up/import"]["max"] < 1.0  # "faster": in every round
