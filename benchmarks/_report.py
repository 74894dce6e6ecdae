"""The tables of docs/performance.md, generated from a results document (``results.json``).

``python benchmarks/run.py --update-docs docs/performance.md`` (what ``nox -s bench`` runs)
rewrites every block between ``<!-- generated: NAME -->`` and ``<!-- end generated -->`` with
:func:`tables`; ``tests/project/test_performance_figures.py`` fails when a block differs from what the
committed ``docs/benchmarks/results.json`` gives, and when a figure quoted in prose (marked
``<!-- results: COMPARISON/CASE[/BASELINE] -->`` right after it) is not the file's ratio.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

__all__ = ["BLOCK", "ratio", "tables", "update_page"]

#: One generated block of a page: its name and its content.
BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)

#: The ratio table: (comparison, case, baseline case or None for the comparison's first).
RATIO_ROWS: list[tuple[str, str, str | None]] = [
    ("disabled", "etw_fast_path", None),
    ("disabled", "etw_console_debug", None),
    ("disabled", "etw_early_drop", None),
    ("disabled", "stdlib_disabled", None),
    ("disabled", "structlog_drop", None),
    ("enabled", "etw_enabled", None),
    ("enabled", "etw_enabled", "orjson_chain"),
    ("enabled", "etw_enabled", "json_chain_unflushed"),
    ("enabled", "etw_enabled_tl", None),
    ("fields_100", "etw_enabled", None),
    ("fields_20", "etw_enabled", None),
    ("enabled", "etw_enabled_sink", None),
    ("enabled", "etw_renderer_only", None),
    ("enabled", "etw_enabled_plain", None),
    ("enabled", "orjson_chain", None),
    ("enabled", "stdlib_json", None),
    ("encode", "tl_encode", None),
    ("encode", "eh_encode", None),
]


def ratio(results: dict[str, Any], comparison: str, case: str, baseline: str | None = None) -> float:
    """The ratio of *case* in *comparison* (to *baseline*, default the comparison's first case:
    the median over rounds of case / baseline, each pair timed back to back)."""
    cases = results["comparisons"][comparison]["cases"]
    if baseline is None:
        return float(cases[case]["ratio"])
    pairs = zip(cases[case]["rounds_ns"], cases[baseline]["rounds_ns"], strict=True)
    return round(statistics.median(c / b for c, b in pairs), 3)


def _goal(results: dict[str, Any], comparison: str, case: str, baseline: str | None) -> tuple[str, str]:
    for g in results.get("goals", []):
        if (g["comparison"], g["case"], g["baseline"]) == (comparison, case, baseline):
            met = "not measured" if g["met"] is None else ("yes" if g["met"] else "**no**")
            every = f" (worst of {len(g['runs'])} runs: {g['ratio']:.2f}x)" if g.get("runs") else ""
            return f"<= {g['limit']:.2f}x", met + every
    return "-", "-"


def _ratio_table(results: dict[str, Any]) -> str:
    lines = [
        "| figure | baseline (same run) | baseline ns | ours ns | ratio | goal | met |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for comparison, case, baseline in RATIO_ROWS:
        comp = results["comparisons"].get(comparison)
        if comp is None or case not in comp["cases"]:
            continue
        base = baseline or comp["baseline"]
        ours, theirs = comp["cases"][case], comp["cases"][base]
        goal, met = _goal(results, comparison, case, baseline)
        lines.append(
            f"| {ours['label']} (`{comparison}/{case}`) | {theirs['label']} | {theirs['ns']:,.0f} | "
            f"{ours['ns']:,.0f} | **{ratio(results, comparison, case, baseline):.2f}x** | {goal} | {met} |"
        )
    return "\n".join(lines) + "\n"


def _goals_table(results: dict[str, Any]) -> str:
    """Every goal of the run: its ratio (the worst run's for a goal held in every run), limit, met."""
    lines = ["| goal | ratio | limit | met |", "|---|---:|---:|---|"]
    for g in results.get("goals", []):
        ratio = "n/a" if g["ratio"] is None else f"{g['ratio']:.2f}x"
        met = "not measured" if g["met"] is None else ("yes" if g["met"] else "**no**")
        lines.append(f"| {g['goal']} | {ratio} | <= {g['limit']:.2f}x | {met} |")
    return "\n".join(lines) + "\n"


def _steps_table(results: dict[str, Any]) -> str:
    comp = results["comparisons"].get("disabled_steps")
    if not comp:
        return "(not measured)\n"
    lines = [
        "| step | ns/call | ratio | this step's share |",
        "|---|---:|---:|---:|",
    ]
    previous = 1.0
    for key, case in comp["cases"].items():
        r = float(case["ratio"])
        share = "-" if key == comp["baseline"] else f"{r - previous:+.2f}x"
        lines.append(f"| {case['label']} | {case['ns']:,.0f} | {r:.2f}x | {share} |")
        previous = r
    return "\n".join(lines) + "\n"


def _runs_table(results: dict[str, Any]) -> str:
    runs = results.get("repeats", {}).get("disabled")
    if not runs:
        return "(one run)\n"
    count = len(next(iter(runs.values())))
    labels = results["comparisons"]["disabled"]["cases"]
    lines = [
        "| case | " + " | ".join(f"run {n}" for n in range(1, count + 1)) + " |",
        "|---|" + "---:|" * count,
    ]
    for key, values in runs.items():
        lines.append(f"| {labels[key]['label']} | " + " | ".join(f"{v:.2f}x" for v in values) + " |")
    return "\n".join(lines) + "\n"


def _scaling_table(results: dict[str, Any]) -> str:
    comps = results["comparisons"]
    fields = [n for n in (1, 5, 20, 100) if f"fields_{n}" in comps]
    sizes = [n for n in (10, 100, 1000, 8000) if f"string_{n}" in comps]
    lines: list[str] = []
    if fields:
        lines += [
            "| fields per event | " + " | ".join(str(n) for n in fields) + " |",
            "|---|" + "---:|" * len(fields),
        ]
        for case, label in (
            ("json_chain", "JSON chain (µs)"),
            ("etw_enabled", "structlog-etw enabled, EventHeader (µs)"),
            ("etw_enabled_tl", "structlog-etw enabled, TraceLogging (µs)"),
            ("structlog_filtered", "structlog filtered-out call (µs)"),
            ("etw_fast_path", "structlog-etw disabled (µs)"),
        ):
            cells = [comps[f"fields_{n}"]["cases"].get(case) for n in fields]
            lines.append(
                f"| {label} | " + " | ".join(f"{c['ns'] / 1000:.2f}" if c else "-" for c in cells) + " |"
            )
            if case in ("etw_enabled", "etw_enabled_tl"):
                lines.append(
                    "| ratio to the JSON chain | "
                    + " | ".join(f"{c['ratio']:.2f}" if c else "-" for c in cells)
                    + " |"
                )
        lines.append("")
    if sizes:
        lines += [
            "| one string of | " + " | ".join(f"{n} B" for n in sizes) + " |",
            "|---|" + "---:|" * len(sizes),
        ]
        for case, label in (
            ("json_chain", "JSON chain (µs)"),
            ("etw_enabled", "structlog-etw enabled, EventHeader (µs)"),
        ):
            cells = [comps[f"string_{n}"]["cases"].get(case) for n in sizes]
            lines.append(
                f"| {label} | " + " | ".join(f"{c['ns'] / 1000:.2f}" if c else "-" for c in cells) + " |"
            )
        cells = [comps[f"string_{n}"]["cases"].get("etw_enabled") for n in sizes]
        lines.append("| ratio | " + " | ".join(f"{c['ratio']:.2f}" if c else "-" for c in cells) + " |")
    return "\n".join(lines).rstrip("\n") + "\n"


def _check_row(label: str, results: dict[str, Any]) -> str:
    """One row of the descriptor-check table: the enabled call with and without the check."""
    cases = results.get("comparisons", {}).get("enabled", {}).get("cases", {})
    checked, unchecked = cases.get("etw_enabled"), cases.get("etw_enabled_unchecked")
    if not checked or not unchecked:
        return f"| {label} | - | - | - | - |\n"
    per_round = [c - u for c, u in zip(checked["rounds_ns"], unchecked["rounds_ns"], strict=True)]
    cost = statistics.median(per_round)
    share = cost / checked["ns"]
    return f"| {label} | {unchecked['ns']:,.0f} | {checked['ns']:,.0f} | {cost:,.0f} | {share:.0%} |\n"


def _check_table(results: dict[str, Any]) -> str:
    """The cost of the user_events descriptor check per enabled event (docs/performance.md)."""
    lines = (
        "| run | enabled call without the check (ns) | with it (ns) | the check per event (ns, median "
        "of the rounds' differences) | share of the enabled call |\n|---|---|---|---|---|\n"
    )
    lines += _check_row("compiled packer", results)
    pure = results.get("pure_python")
    if pure:
        lines += _check_row("pure Python", pure)
    return lines


def tables(results: dict[str, Any]) -> dict[str, str]:
    """Every generated block, by name: ``environment``, ``ratio-table``, ``goals``,
    ``pure-python-goals`` (the enabled goals of the run without the compiled packer),
    ``disabled-steps``, ``disabled-runs``, ``scaling``, ``descriptor-check``."""
    env = results["environment"]
    environment = (
        f"Measured {env['date']} on {env['cpu']} ({env['cpus']} CPUs), {env['platform']}, "
        f"{env['implementation']} {env['python']}, structlog {env['structlog']}, "
        f"traceloggingdynamic {env['traceloggingdynamic']}, commit {env['commit']}; "
        f"{results['rounds']} interleaved rounds of ~{results['round_seconds'] * 1000:.0f} ms per case; "
        f"compiled packer {'loaded' if env.get('speedups') else 'not loaded'}.\n"
    )
    pure = results.get("pure_python")
    pure_goals = _goals_table(pure) if pure else "Not measured in this run.\n"
    return {
        "environment": environment,
        "ratio-table": _ratio_table(results),
        "goals": _goals_table(results),
        "pure-python-goals": pure_goals,
        "disabled-steps": _steps_table(results),
        "disabled-runs": _runs_table(results),
        "scaling": _scaling_table(results),
        "descriptor-check": _check_table(results),
    }


def update_page(path: Path, results: dict[str, Any]) -> None:
    """Rewrite the generated blocks of *path* from *results*."""
    generated = tables(results)
    text = path.read_text(encoding="utf-8")

    def replace(m: re.Match[str]) -> str:
        return m.group(1) + generated.get(m.group("name"), m.group("body")) + m.group(4)

    path.write_text(BLOCK.sub(replace, text), encoding="utf-8")
