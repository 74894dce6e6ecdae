"""Run the structlog-etw benchmark suite and write results as JSON and Markdown.

    python benchmarks/run.py [--quick] [--out DIR] [--plot PNG]

(``nox -s bench`` runs exactly this.)  Every figure is a ratio against a baseline timed in the same
run, round-robin with it (see ``_timing.py``).  Absolute nanoseconds depend on the machine; the
ratios are what the goals in docs/performance.md are about.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from _baselines import (  # noqa: E402
    FIVE_FIELDS,
    dropping_logger,
    filtered_out_logger,
    json_chain_logger,
    json_chain_unflushed_logger,
    orjson_chain_logger,
    stdlib_disabled_logger,
    stdlib_json_logger,
)
from _peer import load_traceloggingdynamic  # noqa: E402
from _timing import Case, measure_group  # noqa: E402

FIVE_KWARGS = 'user="ann", attempts=3, latency_ms=12.5, ok=True, region="eu-west-1"'
FIVE_EXTRA = '{"user": "ann", "attempts": 3, "latency_ms": 12.5, "ok": True, "region": "eu-west-1"}'
FIELD_COUNTS = (1, 5, 20, 100)
STRING_SIZES = (10, 100, 1000, 8000)


@dataclass
class Goal:
    """A target ratio: ``case / baseline`` of a comparison must be ``<= limit``.

    ``baseline``: the case divided by (default: the comparison's first case), timed in the same
    rounds; the ratio is the median over rounds of the pair.
    """

    comparison: str
    case: str
    limit: float
    text: str
    baseline: str | None = None
    #: A per-field goal: the ratio is of ``(case - case_<slope_from>) / (baseline -
    #: baseline_<slope_from>)`` per round (the ``_<n>`` cases: the same logger with n fields).
    slope_from: str | None = None


@dataclass
class Comparison:
    """Cases timed together; the first is the baseline every ratio divides by."""

    name: str
    title: str
    cases: list[Case]
    unavailable: dict[str, str] = field(default_factory=dict)
    #: Rounds instead of the suite's (the disabled comparisons: their steps are a few percent).
    rounds: int | None = None


GOALS = [
    Goal(
        "disabled",
        "etw_fast_path",
        1.25,
        "disabled: make_etw_bound_logger, [merge_contextvars, EtwRenderer], provider word 0 (memoryview "
        'over a ctypes uint64), log.info("user_login", 5 kwargs) <= 1.25x structlog\'s filtered call '
        '(make_filtering_bound_logger(INFO), log.debug("user_login", 5 kwargs)), in every run',
    ),
    Goal(
        "enabled", "etw_enabled", 0.35, "enabled EventHeader, 5 fields, real writev <= 0.35x the JSON chain"
    ),
    Goal(
        "enabled",
        "etw_enabled",
        0.55,
        "enabled EventHeader, 5 fields, real writev <= 0.55x the orjson chain",
        baseline="orjson_chain",
    ),
    Goal(
        "enabled",
        "etw_enabled",
        0.40,
        "enabled EventHeader, 5 fields, real writev <= 0.40x the JSON chain without a per-line flush",
        baseline="json_chain_unflushed",
    ),
    Goal(
        "fields_100",
        "etw_enabled",
        0.6,
        "enabled EventHeader, cost per extra field (100 fields minus 5, the same rounds) <= 0.6x the "
        "orjson chain's",
        baseline="orjson_chain",
        slope_from="5",
    ),
    Goal("enabled", "etw_enabled_tl", 0.40, "enabled TraceLogging, 5 fields, writev <= 0.40x the JSON chain"),
    Goal("fields_100", "etw_enabled", 0.8, "enabled EventHeader, 100 fields, writev <= 0.8x the JSON chain"),
    Goal("encode", "tl_encode", 0.5, "TraceLogging encoding >= 2x faster than traceloggingdynamic"),
]


def _ours(kind: str, **kw: Any) -> Any:
    """Build one of our loggers/encoders (imported late: a failure marks only that case unavailable)."""
    import _ours as ours  # noqa: PLC0415 - optional/late import

    return getattr(ours, kind)(**kw)


def _try(comp: Comparison, key: str, label: str, stmt: str, build: Any) -> None:
    try:
        ns = build()
    except Exception as e:  # a module not on this branch yet, or a setup error: report, don't hide
        comp.unavailable[key] = f"{type(e).__name__}: {e}"
        return
    comp.cases.append(Case(key, label, stmt, ns))


def comparisons() -> list[Comparison]:
    """Every comparison of the suite, in report order."""
    out: list[Comparison] = []
    F = FIVE_KWARGS

    c = Comparison(
        "disabled",
        "Nobody listening, 5 fields (baseline: structlog call filtered out by level)",
        [],
        rounds=61,
    )
    _try(
        c,
        "structlog_filtered",
        "structlog filtered-out call (held bound logger)",
        f'log.debug("user_login", {F})',
        lambda: {"log": filtered_out_logger()},
    )
    _try(
        c,
        "stdlib_disabled",
        "stdlib logging, level disabled (the 5 fields in extra=)",
        f'log.debug("user_login", extra={FIVE_EXTRA})',
        lambda: {"log": stdlib_disabled_logger()},
    )
    _try(
        c,
        "structlog_drop",
        "structlog, first processor raises DropEvent",
        f'log.info("user_login", {F})',
        lambda: {"log": dropping_logger()},
    )
    _try(
        c,
        "etw_fast_path",
        "structlog-etw fast-path wrapper (make_etw_bound_logger, [merge_contextvars, EtwRenderer]), "
        "provider word 0 (memoryview)",
        f'log.info("user_login", {F})',
        lambda: {"log": _ours("fast_path_logger", enabled=False)},
    )
    _try(
        c,
        "etw_console_debug",
        "structlog-etw console beside tracing, a debug call (below the console level)",
        f'log.debug("user_login", {F})',
        lambda: {"log": _ours("console_beside_tracing_logger", enabled=False, stream=_devnull_text())},
    )
    _try(
        c,
        "etw_early_drop",
        "structlog-etw early-drop processor (plain structlog BoundLogger)",
        f'log.info("user_login", {F})',
        lambda: {"log": _ours("early_drop_logger", enabled=False)},
    )
    out.append(c)

    c = Comparison(
        "disabled_steps",
        "The disabled path step by step, 5 fields (baseline: structlog call filtered out by level)",
        [],
        rounds=61,
    )
    _try(
        c,
        "structlog_filtered",
        "structlog filtered-out call (held bound logger)",
        f'log.debug("user_login", {F})',
        lambda: {"log": filtered_out_logger()},
    )
    for step, label in (
        ("signature", "our class, a method that returns at once, structlog's signature"),
        ("method", "+ self and event positional-only (keywords bound without name comparisons)"),
        ("provider_word", "+ the provider word read"),
        ("chain_check", "+ the chain check (renderer still at its index)"),
    ):
        _try(
            c,
            f"step_{step}",
            label,
            f'log.info("user_login", {F})',
            lambda step=step: {"log": _ours("disabled_step_logger", step=step)},
        )
    _try(
        c,
        "etw_fast_path",
        "the real method (+ its try, which costs nothing on CPython 3.11+)",
        f'log.info("user_login", {F})',
        lambda: {"log": _ours("fast_path_logger", enabled=False)},
    )
    out.append(c)

    c = Comparison(
        "enabled",
        "A session listening, 5 typical fields, one system call per event on every row "
        "(baseline: structlog JSON chain to /dev/null)",
        [],
    )
    _try(
        c,
        "json_chain",
        "structlog JSON chain -> /dev/null",
        f'log.info("user_login", {F})',
        lambda: {"log": json_chain_logger()},
    )
    _try(
        c,
        "json_chain_unflushed",
        "structlog JSON chain -> /dev/null, no flush per line",
        f'log.info("user_login", {F})',
        lambda: {"log": json_chain_unflushed_logger()},
    )
    _try(
        c,
        "orjson_chain",
        "structlog JSON chain with orjson + BytesLogger -> /dev/null",
        f'log.info("user_login", {F})',
        lambda: {"log": orjson_chain_logger()},
    )
    _try(
        c,
        "stdlib_json",
        "stdlib logging + python-json-logger -> /dev/null (fields in extra=)",
        f'log.info("user_login", extra={FIVE_EXTRA})',
        lambda: {"log": stdlib_json_logger()},
    )
    _try(
        c,
        "etw_enabled",
        "structlog-etw fast-path wrapper -> EventHeader -> writev(/dev/null)",
        f'log.info("user_login", {F})',
        lambda: {"log": _ours("fast_path_logger", enabled=True)},
    )
    _try(
        c,
        "etw_enabled_unchecked",
        "the same, without the descriptor check before each write (the base of its cost)",
        f'log.info("user_login", {F})',
        lambda: {"log": _ours("fast_path_logger", enabled=True, backend="writev_unchecked")},
    )
    _try(
        c,
        "etw_enabled_tl",
        "structlog-etw fast-path wrapper -> TraceLogging -> writev(/dev/null)",
        f'log.info("user_login", {F})',
        lambda: {"log": _ours("fast_path_logger", enabled=True, fmt="tracelogging")},
    )
    _try(
        c,
        "etw_enabled_sink",
        "structlog-etw fast-path wrapper -> EventHeader -> sink (library's own cost, no system call)",
        f'log.info("user_login", {F})',
        lambda: {"log": _ours("fast_path_logger", enabled=True, backend="sink")},
    )
    _try(
        c,
        "etw_enabled_plain",
        "structlog-etw, plain structlog BoundLogger + early drop + EtwRenderer",
        f'log.info("user_login", {F})',
        lambda: {"log": _ours("early_drop_logger", enabled=True)},
    )
    _try(
        c,
        "etw_renderer_only",
        "structlog-etw, plain structlog BoundLogger + merge_contextvars + EtwRenderer (the chain run)",
        f'log.info("user_login", {F})',
        lambda: {"log": _ours("renderer_logger", enabled=True)},
    )
    out.append(c)

    c = Comparison(
        "encode", "Encoding only, the same 5-field event (baseline: traceloggingdynamic EventBuilder)", []
    )
    _try(
        c,
        "tld_builder",
        "traceloggingdynamic EventBuilder (reset + 5 add_*)",
        "eb.reset(b'user_login', 4, 1); eb.add_str8(b'user', 'ann'); eb.add_int64(b'attempts', 3); "
        "eb.add_float64(b'latency_ms', 12.5); eb.add_bool32(b'ok', True); "
        "eb.add_str8(b'region', 'eu-west-1')",
        _peer_namespace,
    )
    _try(
        c,
        "tl_encode",
        "structlog-etw TraceLoggingEncoder.encode (typed fields -> traits, metadata, data)",
        "enc.encode('user_login', fields)",
        lambda: _ours("encoder_namespace", fmt="tracelogging"),
    )
    _try(
        c,
        "eh_encode",
        "structlog-etw EventHeaderEncoder.encode (typed fields -> event bytes)",
        "enc.encode('user_login', fields, 4)",
        lambda: _ours("encoder_namespace", fmt="eventheader"),
    )
    _try(
        c,
        "tl_fields_encode",
        "structlog-etw to_fields + TraceLoggingEncoder.encode",
        "enc.encode('user_login', to_fields(kw.items()))",
        lambda: _ours("encoder_namespace", fmt="tracelogging"),
    )
    out.append(c)

    for n in FIELD_COUNTS:
        kw = {f"f{i}": v for i, v in zip(range(n), _cycle_values(n), strict=True)}
        c = Comparison(f"fields_{n}", f"{n} fields per event", [])
        _add_enabled_cases(c, kw)
        _try(
            c,
            "structlog_filtered",
            "structlog filtered-out call",
            'log.debug("evt", **kw)',
            lambda kw=kw: {"log": filtered_out_logger(), "kw": kw},
        )
        _try(
            c,
            "etw_fast_path",
            "structlog-etw disabled (fast path)",
            'log.info("evt", **kw)',
            lambda kw=kw: {"log": _ours("fast_path_logger", enabled=False), "kw": kw},
        )
        if n == 100:  # the per-field goal: the 5-field calls in the same rounds
            few = {f"f{i}": v for i, v in zip(range(5), _cycle_values(5), strict=True)}
            _try(
                c,
                "orjson_chain_5",
                "structlog JSON chain with orjson, 5 fields (for the cost per extra field)",
                'log.info("evt", **kw)',
                lambda few=few: {"log": orjson_chain_logger(), "kw": few},
            )
            _try(
                c,
                "etw_enabled_5",
                "structlog-etw enabled (EventHeader), 5 fields (for the cost per extra field)",
                'log.info("evt", **kw)',
                lambda few=few: {"log": _ours("fast_path_logger", enabled=True), "kw": few},
            )
        out.append(c)

    for size in STRING_SIZES:
        kw = {"msg": "x" * size, "n": 1}
        c = Comparison(f"string_{size}", f"one string of {size} B (+ one int)", [])
        _add_enabled_cases(c, kw)
        out.append(c)
    return out


def _add_enabled_cases(c: Comparison, kw: dict[str, Any]) -> None:
    """The JSON chains and both enabled formats (writev), each logging *kw* (the scaling comparisons;
    the orjson chain gives the per-field cost the enabled path is held to)."""
    _try(
        c,
        "json_chain",
        "structlog JSON chain -> /dev/null",
        'log.info("evt", **kw)',
        lambda: {"log": json_chain_logger(), "kw": kw},
    )
    _try(
        c,
        "orjson_chain",
        "structlog JSON chain with orjson + BytesLogger -> /dev/null",
        'log.info("evt", **kw)',
        lambda: {"log": orjson_chain_logger(), "kw": kw},
    )
    _try(
        c,
        "etw_enabled",
        "structlog-etw enabled (EventHeader)",
        'log.info("evt", **kw)',
        lambda: {"log": _ours("fast_path_logger", enabled=True), "kw": kw},
    )
    _try(
        c,
        "etw_enabled_tl",
        "structlog-etw enabled (TraceLogging)",
        'log.info("evt", **kw)',
        lambda: {"log": _ours("fast_path_logger", enabled=True, fmt="tracelogging"), "kw": kw},
    )


def _devnull_text() -> Any:
    return open(os.devnull, "w")


def _cycle_values(n: int) -> list[Any]:
    base = list(FIVE_FIELDS.values())
    return [base[i % len(base)] for i in range(n)]


def _peer_namespace() -> dict[str, Any]:
    tld = load_traceloggingdynamic()
    if tld is None:
        raise ImportError("traceloggingdynamic is not installed (pip install traceloggingdynamic)")
    return {"eb": tld.EventBuilder()}


def environment() -> dict[str, Any]:
    """The machine and versions the figures were measured on."""
    import structlog  # noqa: PLC0415 - optional/late import

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        rev = ""
    tld = load_traceloggingdynamic()
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "structlog": structlog.__version__,
        "traceloggingdynamic": getattr(tld, "__version__", None) or _dist_version("traceloggingdynamic"),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "commit": rev,
        "speedups": _speedups_loaded(),
    }


def _speedups_loaded() -> bool:
    """Whether the compiled packer (structlog_etw/write/shapes/_speedups.c) runs the enabled rows' layouts."""
    from structlog_etw.write import shapes as _shapes  # noqa: PLC0415 - optional/late import

    return _shapes.SPEEDUPS is not None


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - optional/late import

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def paired_ratio(case: list[float], base: list[float]) -> float:
    """Median over rounds of case/baseline, each pair timed back to back (robust to machine load)."""
    return statistics.median(c / b for c, b in zip(case, base, strict=True))


def slope_ratio(cases: dict[str, Any], case: str, baseline: str, fewer: str) -> float | None:
    """Median over rounds of (case - case_<fewer>) / (baseline - baseline_<fewer>): the cost per
    extra field against the baseline's, each round's four timings back to back."""
    try:
        rows = [cases[k]["rounds_ns"] for k in (case, f"{case}_{fewer}", baseline, f"{baseline}_{fewer}")]
    except KeyError:
        return None
    return round(statistics.median((a - b) / (c - d) for a, b, c, d in zip(*rows, strict=True)), 3)


def run(quick: bool, only: set[str] | None, repeat_disabled: int = 1) -> dict[str, Any]:
    """Measure every comparison and return the results document.

    *repeat_disabled*: how many runs of the ``disabled`` comparison (the first is the one in the
    tables; every run's ratios go to ``results["repeats"]``, and the disabled goal must hold in
    each).
    """
    rounds, round_s = (5, 0.02) if quick else (15, 0.05)
    results: dict[str, Any] = {
        "environment": environment(),
        "rounds": rounds,
        "round_seconds": round_s,
        "comparisons": {},
        "goals": [],
    }
    for comp in comparisons():
        if only and comp.name not in only:
            continue
        entry: dict[str, Any] = {"title": comp.title, "unavailable": comp.unavailable, "cases": {}}
        results["comparisons"][comp.name] = entry
        if not comp.cases:
            continue
        base = comp.cases[0].key
        entry["baseline"] = base
        print(f"[{comp.name}] {comp.title}", file=sys.stderr, flush=True)
        comp_rounds = comp.rounds if comp.rounds and not quick else rounds
        measured = measure_group(comp.cases, comp_rounds, round_s)
        for case in comp.cases:
            m = measured[case.key]
            entry["cases"][case.key] = {
                "label": case.label,
                "ns": round(m.ns, 1),
                "spread": round(m.spread, 3),
                "ratio": round(paired_ratio(m.rounds_ns, measured[base].rounds_ns), 3),
                "min_ns": round(min(m.rounds_ns), 1),
                "rounds_ns": [round(x, 1) for x in m.rounds_ns],
            }
            print(
                f"    {case.key:20s} {m.ns:10.1f} ns  "
                f"x{paired_ratio(m.rounds_ns, measured[base].rounds_ns):6.3f}  "
                f"(±{m.spread * 100:.0f}%)",
                file=sys.stderr,
                flush=True,
            )
        for key, why in comp.unavailable.items():
            print(f"    {key:20s} UNAVAILABLE {why}", file=sys.stderr, flush=True)
        if comp.name == "disabled" and repeat_disabled > 1:
            runs = {case.key: [entry["cases"][case.key]["ratio"]] for case in comp.cases}
            for n in range(2, repeat_disabled + 1):
                again = measure_group(comp.cases, comp_rounds, round_s)
                for case in comp.cases:
                    runs[case.key].append(
                        round(paired_ratio(again[case.key].rounds_ns, again[base].rounds_ns), 3)
                    )
                print(
                    f"    run {n}: etw_fast_path x{runs.get('etw_fast_path', [0])[-1]:.3f}", file=sys.stderr
                )
            results.setdefault("repeats", {})["disabled"] = runs
    for g in GOALS:
        cases = results["comparisons"].get(g.comparison, {}).get("cases", {})
        case = cases.get(g.case)
        ratio = None
        runs = results.get("repeats", {}).get(g.comparison, {}).get(g.case)
        if case and g.baseline is None and runs:
            ratio = max(runs)  # "in every run": the worst run decides
        elif case and g.baseline is None:
            ratio = case["ratio"]
        elif case and g.slope_from is not None:
            ratio = slope_ratio(cases, g.case, g.baseline or "", g.slope_from)
        elif case and g.baseline in cases:
            ratio = round(paired_ratio(case["rounds_ns"], cases[g.baseline]["rounds_ns"]), 3)
        results["goals"].append(
            {
                "goal": g.text,
                "runs": runs if g.baseline is None else None,
                "comparison": g.comparison,
                "case": g.case,
                "baseline": g.baseline,
                "limit": g.limit,
                "ratio": ratio,
                "met": (ratio <= g.limit) if ratio is not None else None,
            }
        )
    return results


def _goal_rows(goals: list[dict[str, Any]]) -> list[str]:
    """A Markdown table of goals: each one's text, ratio and whether it was met."""
    lines = ["| goal | ratio | met |", "|---|---:|---|"]
    for g in goals:
        ratio = "n/a" if g["ratio"] is None else f"{g['ratio']:.3f}"
        met = "not measured" if g["met"] is None else ("yes" if g["met"] else "NO")
        lines.append(f"| {g['goal']} | {ratio} | {met} |")
    return lines


def markdown(results: dict[str, Any]) -> str:
    """The results document as Markdown tables."""
    env = results["environment"]
    lines = [
        "# structlog-etw benchmark results",
        "",
        f"Measured {env['date']} on {env['cpu']} ({env['cpus']} CPUs), {env['platform']}, "
        f"{env['implementation']} {env['python']}, structlog {env['structlog']}, "
        f"traceloggingdynamic {env['traceloggingdynamic']}, commit {env['commit']}. "
        f"{results['rounds']} interleaved rounds of ~{results['round_seconds'] * 1000:.0f} ms per case; "
        "median ns per call; ratio = median over rounds of (case / first row of its table), "
        "each pair timed back to back.",
        "",
        "## Goals",
        "",
        *_goal_rows(results["goals"]),
    ]
    for name, comp in results["comparisons"].items():
        lines += [
            "",
            f"## {name}: {comp['title']}",
            "",
            "| case | ns/call | ratio | spread (IQR) |",
            "|---|---:|---:|---:|",
        ]
        for c in comp["cases"].values():
            lines.append(f"| {c['label']} | {c['ns']:.0f} | {c['ratio']:.3f} | {c['spread'] * 100:.0f}% |")
        for key, why in comp["unavailable"].items():
            lines.append(f"| {key} | unavailable: {why} | | |")
    pure = results.get("pure_python")
    if pure:
        lines += ["", "## Goals without the compiled packer (STRUCTLOG_ETW_PURE_PYTHON=1)", ""]
        lines += _goal_rows(pure["goals"])
    guest = results.get("guest")
    if guest:
        lines += [
            "",
            f"## guest: the real kernel write (Linux {guest['kernel']}, TCG-emulated guest, perf recording)",
            "",
            "| case | ns/call | ratio |",
            "|---|---:|---:|",
        ]
        for c in guest["cases"].values():
            lines.append(f"| {c['label']} | {c['ns']:.0f} | {c['ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer, shorter rounds (a smoke run)")
    p.add_argument("--out", type=Path, default=HERE / "results", help="directory for results.json/results.md")
    p.add_argument("--only", action="append", help="run only these comparisons (repeatable)")
    p.add_argument(
        "--repeat-disabled",
        type=int,
        default=1,
        help="runs of the disabled comparison (the goal holds in each)",
    )
    p.add_argument(
        "--update-docs",
        type=Path,
        default=None,
        help="rewrite the generated tables of this page (docs/performance.md) from the results",
    )
    p.add_argument("--plot", type=Path, default=None, help="also draw cost vs field count to this PNG")
    p.add_argument(
        "--guest",
        type=Path,
        default=None,
        help="merge guest (real kernel) results from this JSON (benchmarks/guest.py)",
    )
    p.add_argument(
        "--guest-run",
        action="store_true",
        help="also measure the real kernel write (benchmarks/guest.py: boots the virtme-ng guest)",
    )
    p.add_argument(
        "--pure-python-run",
        action="store_true",
        help="also run the enabled comparisons with STRUCTLOG_ETW_PURE_PYTHON=1 (the generated "
        "functions, no compiled packer) and keep their goals in the results (pure_python)",
    )
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    pure: dict[str, Any] | None = None
    if a.pure_python_run:
        pure_out = a.out / "pure-python"
        cmd = [sys.executable, str(HERE / "run.py"), "--out", str(pure_out), "--only", "enabled"]
        cmd += ["--only", "fields_100", *(["--quick"] if a.quick else [])]
        rc = subprocess.call(cmd, env={**os.environ, "STRUCTLOG_ETW_PURE_PYTHON": "1"})
        if rc != 0:
            print(f"pure-Python run failed with exit code {rc}", file=sys.stderr)
            return rc
        done = json.loads((pure_out / "results.json").read_text())
        shutil.rmtree(pure_out)
        measured = [g for g in done["goals"] if g["ratio"] is not None]
        # the enabled comparison too: docs/performance.md's descriptor-check table reads its cases
        enabled = {"enabled": done["comparisons"]["enabled"]}
        pure = {"environment": done["environment"], "goals": measured, "comparisons": enabled}
    if a.guest_run:
        cmd = [sys.executable, str(HERE / "guest.py"), "--out", str(a.out), *(["--quick"] if a.quick else [])]
        rc = subprocess.call(cmd)
        if rc != 0:
            print(f"guest run failed with exit code {rc}", file=sys.stderr)
            return rc
        a.guest = a.out / "guest.json"
    results = run(a.quick, set(a.only) if a.only else None, a.repeat_disabled)
    if a.guest and a.guest.exists():
        results["guest"] = json.loads(a.guest.read_text())
    if pure is not None:
        results["pure_python"] = pure
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (a.out / "results.md").write_text(markdown(results))
    if a.update_docs:
        from _report import update_page  # noqa: PLC0415 - optional/late import

        update_page(a.update_docs, results)
    if a.plot:
        from _plot import plot  # noqa: PLC0415 - optional/late import

        plot(results, a.plot)
    print(f"wrote {a.out / 'results.json'} and {a.out / 'results.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
