"""The compressed-.etl figures in docs/performance.md are the ones benchmarks/etl_decode.py wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "benchmarks" / "etl_decode.json"
PAGE = ROOT / "docs" / "performance.md"
_LABELS = {"dissect.etl": "dissect.etl 3.14, iteration (frames records)", "json": "`decode --json`"}


def etl_table(results: dict[str, Any]) -> str:
    """The page's table of CPU times and peaks, as rendered from the results file."""
    base = results["cpu"]["dissect.etl"]["cpu_s"]
    rows = ["| run | CPU time | events/s | vs dissect.etl | peak RSS |", "|---|---|---|---|---|"]
    for key, label in _LABELS.items():
        run = results["cpu"][key]
        ratio = "1x" if key == "dissect.etl" else f"{run['cpu_s'] / base:.2f}x"
        rows.append(
            f"| {label} | {run['cpu_s']:.2f} s | {results['events_per_s'][key]:,} | {ratio}"
            f" | {run['peak_kib'] / 1024:.1f} MiB |"
        )
    return "\n".join(rows)


def memory_line(results: dict[str, Any]) -> str:
    """The page's sentence on memory as the file grows, from the results file."""
    mem = results["memory"]
    return (
        f"peak RSS {mem['json_peak_kib'] / 1024:.1f} MiB on the {results['file']['bytes'] / 2**20:.1f} MiB"
        f" file and {mem['copies_json_peak_kib'] / 1024:.1f} MiB on {mem['copies']} copies of its"
        f" buffers ({mem['copies_bytes'] / 2**20:.1f} MiB)"
    )


def spread_line(results: dict[str, Any]) -> str:
    """The page's sentence on how the runs spread, from the results file."""
    parts = []
    for key, label in _LABELS.items():
        runs = results["cpu"][key]["runs_s"]
        parts.append(f"{label.split(',')[0]} {min(runs):.2f} s to {max(runs):.2f} s")
    return "; ".join(parts)


def decompression_line(results: dict[str, Any]) -> str:
    """The page's sentence on decompression alone, from the results file."""
    lzx = results["decompression"]
    ours, theirs = lzx["cpu_s"]["ours"], lzx["cpu_s"]["dissect.util"]
    return (
        f"{lzx['buffers']} buffers, {lzx['bytes_in'] / 2**20:.1f} MiB in,"
        f" {lzx['bytes_out'] / 2**20:.1f} MiB out: ours {ours:.2f} s of CPU,"
        f" dissect.util's {theirs:.2f} s ({ours / theirs:.2f}x)"
    )


def _page() -> str:
    return " ".join(PAGE.read_text().split())


class TestEtlDecodeFigures:
    """docs/performance.md's "Compressed .etl files" section shows docs/benchmarks/etl_decode.json."""

    def test_the_table_is_the_results_file(self) -> None:
        """The CPU-time table in the page equals the one rendered from the results."""
        assert etl_table(json.loads(RESULTS.read_text())) in PAGE.read_text()

    def test_the_memory_sentence_is_the_results_file(self) -> None:
        """The page's memory sentence equals the one rendered from the results."""
        assert memory_line(json.loads(RESULTS.read_text())) in _page()

    def test_the_spread_is_the_results_file(self) -> None:
        """The page's sentence on the spread of the runs is the results file's."""
        assert spread_line(json.loads(RESULTS.read_text())) in _page()

    def test_the_verdict_follows_the_figures(self) -> None:
        """The page says the goal is met exactly when the recorded ratio is within it."""
        results = json.loads(RESULTS.read_text())
        met = results["ratio"] <= results["goal_cpu_ratio"]
        verdict = f"ratio {results['ratio']:.2f}x: **the goal is {'met' if met else 'not met'}**"
        assert verdict in _page()

    def test_the_file_is_the_results_file(self) -> None:
        """The page names the event count the results record."""
        results = json.loads(RESULTS.read_text())
        assert f"{results['file']['events']:,} events" in _page()

    def test_the_decompression_sentence_is_the_results_file(self) -> None:
        """The page's figures for decompression alone are the results file's."""
        assert decompression_line(json.loads(RESULTS.read_text())) in _page()
