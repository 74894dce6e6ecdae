"""The decode throughput figures in docs/performance.md are the ones benchmarks/decode.py wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "docs" / "benchmarks" / "decode.json"
PAGE = ROOT / "docs" / "performance.md"
_LABELS = {
    "perf-decode": "perf-decode (C++)",
    "json": "`decode --json`",
    "text": "`decode` (text)",
    "perf-json": "`decode --perf-json`",
}


def decode_table(results: dict[str, Any]) -> str:
    """The page's table of CPU times, as rendered from the results file."""
    base = results["cpu"]["perf-decode"]["cpu_s"]
    rows = ["| run | CPU time | events/s | vs perf-decode |", "|---|---|---|---|"]
    for key, label in _LABELS.items():
        cpu = results["cpu"][key]["cpu_s"]
        ratio = "1x" if key == "perf-decode" else f"{cpu / base:.1f}x"
        rows.append(f"| {label} | {cpu:.2f} s | {results['events_per_s'][key]:,} | {ratio} |")
    return "\n".join(rows)


def memory_line(results: dict[str, Any]) -> str:
    """The page's sentence on peak memory without rounds, from the results file."""
    mem = results["memory_without_rounds"]
    ours, theirs = mem["json"]["peak_kib"], mem["perf-decode"]["peak_kib"]
    return (
        f"peak RSS {ours / 1024:.1f} MiB against perf-decode's {theirs / 1024:.1f} MiB ({ours / theirs:.2f}x)"
    )


def spread_line(results: dict[str, Any]) -> str:
    """The page's sentence on how the runs spread, from the results file."""
    cpu = results["cpu"]
    base = cpu["perf-decode"]["runs_s"]
    parts = [f"perf-decode {min(base):.2f} s to {max(base):.2f} s"]
    for key in ("json", "text", "perf-json"):
        runs = cpu[key]["runs_s"]
        parts.append(f"{_LABELS[key]} {min(runs):.2f} s to {max(runs):.2f} s")
    return "; ".join(parts)


class TestDecodeFigures:
    """docs/performance.md's "Decode throughput" section shows docs/benchmarks/decode.json."""

    def test_the_table_is_the_results_file(self) -> None:
        """The CPU-time table in the page equals the one rendered from the results."""
        results = json.loads(RESULTS.read_text())
        assert decode_table(results) in PAGE.read_text()

    def test_the_memory_figures_are_the_results_file(self) -> None:
        """The peak-memory sentence in the page equals the one rendered from the results."""
        results = json.loads(RESULTS.read_text())
        assert memory_line(results) in PAGE.read_text()

    def test_the_spread_of_the_runs_is_the_results_file(self) -> None:
        """The page's sentence on the spread of every side's runs is the results file's."""
        results = json.loads(RESULTS.read_text())
        assert spread_line(results) in " ".join(PAGE.read_text().split())

    def test_the_file_size_is_the_results_file(self) -> None:
        """The page names the benchmark file's sample count as the results record it."""
        results = json.loads(RESULTS.read_text())
        assert f"{results['file']['samples']:,} samples" in PAGE.read_text()
