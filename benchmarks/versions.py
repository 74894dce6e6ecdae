"""Same speed as a release: this checkout against an earlier version, side by side in the same run.

    python benchmarks/versions.py [--old-ref REF] [--rounds N] [--copies N]
                                  [--out docs/benchmarks/versions.json] [--update-docs docs/performance.md]

Each side gets a venv of its own with its tree installed (compiled packer built; the structlog
of this interpreter pinned in both), made from ``git archive`` of ``--old-ref`` (default: the
0.5.0 release commit) and of the working tree.  A round runs, in turn and in alternating order
(old, new; then new, old), one process per side that times the logging cases of
``_version_probe.py`` with *that version's own* ``benchmarks/_ours.py`` builders, and one
``structlog-etw decode --json`` and ``--perf-json`` of the same replicated perf.data per side,
then :data:`STARTUP_RUNS` fresh interpreters per side and start-up case (CPU seconds from the
children's rusage).  The decode and start-up children run in the temporary directory, never in
the checkout (``-m`` and ``-c`` put the working directory first on ``sys.path``), and each side
is checked to import its own venv's package.  The figure of each case is the median over rounds of
that round's ratio new / old (a round's two sides ran a moment apart, so the machine's drift
cancels), with the smallest and largest ratio of the rounds as its spread.

``enabled/fast_path`` includes, on the new side, the descriptor check before every write that
0.5.0 did not make (docs/performance.md, "The descriptor check"): ``enabled/fast_path_unchecked``
(new side only, against 0.5.0's ``enabled/fast_path``) is the same write without it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _version_probe import CASES  # noqa: E402
from decode import VECTOR, child_env, replicate, run_once  # noqa: E402

#: The commit of the 0.5.0 release (CHANGELOG "0.5.0"; the benchmarks rerun that closed it).
RELEASE_0_5_0 = "f39b870"
DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "versions.json"
#: Rounds of a run (about 3 minutes on 2 CPUs): enough that the median of a few-percent step is
#: stable; the committed docs/benchmarks/versions.json is a run of this many.
ROUNDS = 61
#: Calls per timed repeat of each case (about 20-60 ms per repeat on a 2020s machine).
LOOPS = {case: (20000 if case.startswith("disabled") else 10000) for case in CASES}
#: The start-up cases: a fresh interpreter each, what a process pays before it logs.  The first
#: event is the README's example (the provider runs disabled where the machine has no
#: user_events: the same on both sides).
FIRST_EVENT = (
    "import structlog\n"
    "from structlog_etw import EtwRenderer\n"
    "structlog.configure(processors=[EtwRenderer('MyCompany_MyService')])\n"
    "structlog.get_logger().bind(etw_keyword=0x4).info('user_login', user='ann', attempts=3)\n"
)
STARTUP = {
    "start-up/import": ["-c", "import structlog_etw"],
    "start-up/first_event": ["-c", FIRST_EVENT],
}
#: Processes of each start-up case per side and round, their CPU times summed (one is a few tens
#: of milliseconds).
STARTUP_RUNS = 3
#: Cases compared against a differently named case of the old side.
OLD_CASE = {"enabled/fast_path_unchecked": "enabled/fast_path"}
DECODE_MODES = ("--json", "--perf-json")


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def make_side(tree: Path, venv: Path) -> Path:
    """A venv at ``venv`` with ``tree`` installed (compiled packer built), its ``python``."""
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    import structlog  # noqa: PLC0415

    _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
          f"structlog=={structlog.__version__}", str(tree)])  # fmt: skip
    _run([str(python), "-m", "compileall", "-q", str(venv / "lib")])
    return python


def export(ref: str | None, target: Path) -> Path:
    """``ref``'s tree (``None``: the working tree's tracked files as they are now) at ``target``."""
    target.mkdir(parents=True)
    if ref is None:
        files = _run(["git", "-C", str(ROOT), "ls-files", "-z"]).stdout.split("\0")
        for name in filter(None, files):
            source = ROOT / name
            if source.is_file():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                (target / name).write_bytes(source.read_bytes())
        return target
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def probe(python: Path, tree: Path) -> dict[str, Any]:
    """One process of ``_version_probe.py`` with ``tree``'s builders; its case -> ns."""
    out = _run([str(python), str(HERE / "_version_probe.py"), str(tree / "benchmarks"), json.dumps(LOOPS)],
               cwd=str(tree / "benchmarks"), env=child_env())  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def decode_cpu(python: Path, data: Path, mode: str) -> float:
    """CPU seconds of one ``structlog-etw decode MODE data`` by ``python`` (run beside ``data``)."""
    seconds, _peak = run_once(
        [str(python), "-m", "structlog_etw", "decode", mode, str(data)], cwd=str(data.parent)
    )
    return seconds


def installed_from(python: Path, cwd: Path) -> str:
    """Where ``python`` run in ``cwd`` imports ``structlog_etw`` from (``-m`` and ``-c`` put the
    working directory first on ``sys.path``: run in a checkout, they would import the checkout)."""
    code = "import structlog_etw; print(structlog_etw.__file__)"
    return _run([str(python), "-c", code], cwd=str(cwd), env=child_env()).stdout.strip()


def summarise(ratios: list[float]) -> dict[str, float]:
    """The median of the rounds' ratios, and their smallest and largest."""
    return {"ratio": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def compare(rounds: int, copies: int, old_ref: str) -> dict[str, Any]:
    """Build both sides and run ``rounds`` rounds; the figures as docs/benchmarks/versions.json holds them."""
    with tempfile.TemporaryDirectory(prefix="bench-versions-") as tmp_name:
        tmp = Path(tmp_name)
        sides = {}
        for side, ref in (("old", old_ref), ("new", None)):
            tree = export(ref, tmp / f"{side}-tree")
            sides[side] = (make_side(tree, tmp / f"{side}-venv"), tree)
        data = tmp / "perf.data"
        data.write_bytes(replicate(VECTOR.read_bytes(), copies))
        for side, (python, _tree) in sides.items():  # each side runs its own installed code
            where = installed_from(python, tmp)
            if not where.startswith(str(python.parent.parent)):
                raise SystemExit(f"the {side} side imports structlog_etw from {where}, not its venv")
        ns: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
        cpu: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
        unavailable: dict[str, list[str]] = {}
        for n in range(rounds):
            order = ("old", "new") if n % 2 == 0 else ("new", "old")
            for side in order:
                python, tree = sides[side]
                got = probe(python, tree)
                unavailable[side] = got.pop("unavailable")
                for case, value in got.items():
                    ns[side].setdefault(case, []).append(value)
            for mode in DECODE_MODES:
                for side in order:
                    cpu[side].setdefault(mode, []).append(decode_cpu(sides[side][0], data, mode))
            for case, args in STARTUP.items():
                for side in order:
                    python = sides[side][0]
                    spent = sum(run_once([str(python), *args], cwd=tmp_name)[0] for _ in range(STARTUP_RUNS))
                    cpu[side].setdefault(case, []).append(spent / STARTUP_RUNS)
        figures: dict[str, Any] = {}
        for case in CASES:
            old_case = OLD_CASE.get(case, case)
            if case not in ns["new"] or old_case not in ns["old"]:
                continue
            pairs = list(zip(ns["new"][case], ns["old"][old_case], strict=True))
            figures[case] = {
                "old_case": old_case,
                "old_ns": statistics.median(ns["old"][old_case]),
                "new_ns": statistics.median(ns["new"][case]),
                **summarise([new / old for new, old in pairs]),
            }
        for mode in DECODE_MODES:
            pairs = list(zip(cpu["new"][mode], cpu["old"][mode], strict=True))
            figures[f"decode {mode}"] = {
                "old_s": statistics.median(cpu["old"][mode]),
                "new_s": statistics.median(cpu["new"][mode]),
                **summarise([new / old for new, old in pairs]),
            }
        for case in STARTUP:
            pairs = list(zip(cpu["new"][case], cpu["old"][case], strict=True))
            figures[case] = {
                "old_s": statistics.median(cpu["old"][case]),
                "new_s": statistics.median(cpu["new"][case]),
                **summarise([new / old for new, old in pairs]),
            }
    return {
        "old_ref": old_ref,
        "new_commit": _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]).stdout.strip(),
        "rounds": rounds,
        "copies": copies,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the end",
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "unavailable": unavailable,
        "figures": figures,
    }


TABLE_START = "<!-- held: benchmarks/versions.json (tests/project/test_versions_figures.py) -->"
TABLE_END = "<!-- end held -->"


def table(results: dict[str, Any]) -> str:
    """The Markdown table of docs/performance.md's "Same speed as 0.5.0" section."""
    rows = [
        "| case | 0.5.0 | this code | ratio (median of rounds) | rounds' range |",
        "|---|---|---|---|---|",
    ]
    for case, fig in results["figures"].items():
        if case.startswith("decode"):
            old, new = f"{fig['old_s']:.2f} s CPU", f"{fig['new_s']:.2f} s CPU"
        elif case in STARTUP:
            old, new = f"{fig['old_s'] * 1e3:.1f} ms CPU", f"{fig['new_s'] * 1e3:.1f} ms CPU"
        else:
            old, new = f"{fig['old_ns']:,.0f} ns", f"{fig['new_ns']:,.0f} ns"
        rows.append(f"| `{case}` | {old} | {new} | {fig['ratio']:.2f}x | {fig['min']:.2f}-{fig['max']:.2f} |")
    return "\n".join(rows)


def update_docs(path: Path, results: dict[str, Any]) -> None:
    """Replace the generated versions table in ``path``."""
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(TABLE_START) + r".*?" + re.escape(TABLE_END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path}: no {TABLE_START} ... {TABLE_END} block")
    block = f"{TABLE_START}\n{table(results)}\n{TABLE_END}"
    path.write_text(pattern.sub(lambda _m: block, text), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, write the JSON (and the docs table)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--old-ref", default=RELEASE_0_5_0)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--update-docs", type=Path)
    args = parser.parse_args(argv)
    results = compare(args.rounds, args.copies, args.old_ref)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(table(results))
    if args.update_docs:
        update_docs(args.update_docs, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
