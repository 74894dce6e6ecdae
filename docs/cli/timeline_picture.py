"""Draw a ``structlog-etw decode --format chrome-trace`` file the way a trace viewer lays it out.

ui.perfetto.dev and chrome://tracing need a browser and a network; this renders the same
document offline (matplotlib) for the picture in docs/cli/timeline.md:

    python docs/cli/timeline_picture.py timeline.json docs/cli/timeline.png

One band per thread (``pid/tid``), duration slices stacked by nesting depth, async slices in a
band of their own under their thread, instant events as ticks.  A development tool: not part of
the package.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

_COLORS = {"request": "#4e79a7", "db_query": "#f28e2b", "render": "#59a14f", "job": "#b07aa1"}


def _layout(events: list[dict[str, Any]]) -> tuple[list[tuple[str, list[Any], list[Any]]], float]:
    """Per band: (label, slices (start, end, depth, name), instants (ts, name)); and the first ts."""
    t0 = min(e["ts"] for e in events)
    bands: dict[tuple[int, int, bool], tuple[list[Any], list[Any]]] = {}
    stacks: dict[tuple[int, int], list[dict[str, Any]]] = {}
    asyncs: dict[tuple[int, int, str], list[dict[str, Any]]] = {}
    for e in events:
        key = (e["pid"], e["tid"])
        slices, instants = bands.setdefault((*key, False), ([], []))
        if e["ph"] == "B":
            stacks.setdefault(key, []).append(e)
        elif e["ph"] == "E":
            begin = stacks[key].pop()
            slices.append((begin["ts"] - t0, e["ts"] - t0, len(stacks[key]), begin["name"]))
        elif e["ph"] == "b":
            asyncs.setdefault((*key, str(e["id"])), []).append(e)
        elif e["ph"] == "e":
            begin = asyncs[(*key, str(e["id"]))].pop()
            band = bands.setdefault((*key, True), ([], []))[0]
            band.append((begin["ts"] - t0, e["ts"] - t0, 0, begin["name"]))
        elif e["ph"] == "i":
            instants.append((e["ts"] - t0, e["name"]))
    out = []
    for (pid, tid, is_async), (slices, instants) in sorted(bands.items()):
        label = f"pid {pid} / tid {tid}" + (" (async)" if is_async else "")
        out.append((label, slices, instants))
    return out, t0


def _draw_bands(ax: Any, bands: list[tuple[str, list[Any], list[Any]]], depth: int, label_ms: float) -> None:
    yticks, ylabels = [], []
    for row, (label, slices, instants) in enumerate(bands):
        base = row * (depth + 1.2)
        yticks.append(base + depth / 2)
        ylabels.append(label)
        for start, end, d, name in slices:
            y = base + depth - 1 - d
            ax.barh(y, (end - start) / 1000, left=start / 1000, height=0.8, align="edge",
                    color=_COLORS.get(name, "#9c755f"), edgecolor="black", linewidth=0.4)  # fmt: skip
            if (end - start) / 1000 > label_ms:
                ax.text(start / 1000 + label_ms / 10, y + 0.4, name, va="center", fontsize=7, color="white",
                        clip_on=True)  # fmt: skip
        for ts, _name in instants:
            ax.plot([ts / 1000, ts / 1000], [base - 0.35, base - 0.05], color="#e15759", linewidth=1)
    ax.set_yticks(yticks, ylabels, fontsize=8)
    ax.grid(axis="x", linestyle=":", linewidth=0.5)


def draw(trace: Path, png: Path) -> None:
    """Render ``trace`` (trace-event JSON) to ``png``: the whole capture, then its last part zoomed."""
    events = json.loads(trace.read_text())["traceEvents"]
    bands, _t0 = _layout(events)
    depth = max((d for _, slices, _ in bands for *_, d, _n in slices), default=0) + 1
    end = max(e for _, slices, _ in bands for _s, e, *_ in slices) / 1000
    fig, (whole, zoom) = plt.subplots(2, 1, figsize=(12, 2.0 + 1.6 * len(bands)))
    _draw_bands(whole, bands, depth, label_ms=end / 40)
    whole.set_title(
        "structlog-etw decode --format chrome-trace, a real capture: activities as slices, events as ticks"
    )
    whole.set_xlabel(
        "milliseconds from the first event (perf clock); the first requests are slow"
        " (first use, in an emulated guest)"
    )
    # the steady state: from the last 12 % of the capture
    start = end * 0.88
    _draw_bands(zoom, bands, depth, label_ms=(end - start) / 25)
    zoom.set_xlim(start, end * 1.005)
    zoom.set_title(
        "the same, zoomed into the end: nested requests per worker thread, then two interleaved asyncio jobs"
    )
    zoom.set_xlabel("milliseconds from the first event (perf clock)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    draw(Path(sys.argv[1]), Path(sys.argv[2]))
