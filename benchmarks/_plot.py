"""Draw cost vs field count (ours vs baselines) from a results document (matplotlib: bench-only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot"]

_SERIES = [
    ("json_chain", "structlog JSON chain -> /dev/null", "tab:red", "o"),
    ("etw_enabled", "structlog-etw enabled, EventHeader", "tab:blue", "s"),
    ("etw_enabled_tl", "structlog-etw enabled, TraceLogging", "tab:cyan", "^"),
    ("structlog_filtered", "structlog filtered-out call", "tab:gray", "x"),
    ("etw_fast_path", "structlog-etw disabled (fast path)", "tab:green", "d"),
]


def plot(results: dict[str, Any], out: Path) -> None:
    """Write a PNG: ns per call against fields per event, one line per case (log-log)."""
    import matplotlib  # noqa: PLC0415 - optional/late import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - optional/late import

    comps = results["comparisons"]
    counts = sorted(int(k.split("_")[1]) for k in comps if k.startswith("fields_"))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for key, label, color, marker in _SERIES:
        xs, ys = [], []
        for n in counts:
            case = comps[f"fields_{n}"]["cases"].get(key)
            if case:
                xs.append(n)
                ys.append(case["ns"] / 1000)
        if xs:
            ax1.plot(xs, ys, marker=marker, color=color, label=label)
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xticks(counts, [str(n) for n in counts])
    ax1.set_xlabel("fields per event")
    ax1.set_ylabel("µs per log call (median)")
    ax1.set_title("Cost vs field count")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8)

    sizes = sorted(int(k.split("_")[1]) for k in comps if k.startswith("string_"))
    for key, label, color, marker in _SERIES[:3]:
        xs, ys = [], []
        for s in sizes:
            case = comps[f"string_{s}"]["cases"].get(key)
            if case:
                xs.append(s)
                ys.append(case["ns"] / 1000)
        if xs:
            ax2.plot(xs, ys, marker=marker, color=color, label=label)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("string field size (bytes)")
    ax2.set_ylabel("µs per log call (median)")
    ax2.set_title("Cost vs string size")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8)
    env = results["environment"]
    fig.suptitle(
        f"structlog-etw {env['commit']} — {env['implementation']} {env['python']}, "
        f"structlog {env['structlog']}, {env['cpu']}",
        fontsize=9,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
