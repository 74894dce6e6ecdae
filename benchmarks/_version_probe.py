"""One round of the logging cases of ``benchmarks/versions.py``, in the interpreter of one version.

    python benchmarks/_version_probe.py BENCH_DIR LOOPS_JSON

``BENCH_DIR`` is that version's own ``benchmarks/`` folder: its ``_ours.py`` builds the loggers
from that version's modules (the same builder names in every version since 0.5.0), so this file
imports nothing of structlog-etw itself and runs unchanged against either side.  ``LOOPS_JSON``
maps a case name to how many calls to time (the same number on both sides).  Prints one JSON
object: case -> nanoseconds per call (the best of three repeats of that many calls), and the
cases this version cannot build under ``"unavailable"``.
"""

from __future__ import annotations

import json
import sys
import timeit
from collections.abc import Callable
from typing import Any

#: case -> (builder name in _ours, enabled, format, backend)
CASES: dict[str, tuple[str, bool, str, str]] = {
    "disabled/fast_path": ("fast_path_logger", False, "eventheader", "writev"),
    "disabled/early_drop": ("early_drop_logger", False, "eventheader", "writev"),
    "disabled/renderer": ("renderer_logger", False, "eventheader", "writev"),
    "enabled/fast_path": ("fast_path_logger", True, "eventheader", "writev"),
    "enabled/fast_path_unchecked": ("fast_path_logger", True, "eventheader", "writev_unchecked"),
    "enabled/renderer_sink": ("renderer_logger", True, "eventheader", "sink"),
    "enabled/fast_path_sink": ("fast_path_logger", True, "eventheader", "sink"),
    "enabled/tracelogging_sink": ("fast_path_logger", True, "tracelogging", "sink"),
}


def _call(ours: Any, five: dict[str, Any], case: str) -> Callable[[], object] | None:
    builder, enabled, fmt, backend = CASES[case]
    try:
        log = getattr(ours, builder)(enabled, fmt, backend)
    except (KeyError, TypeError, AttributeError, ImportError):
        return None  # a backend or builder this version does not have
    info = log.info
    return lambda: info("user_login", **five)


def main(argv: list[str]) -> int:
    """Time each case of ``argv[2]`` with the builders of ``argv[1]``; print the JSON."""
    bench_dir, loops = argv[1], json.loads(argv[2])
    sys.path.insert(0, bench_dir)
    import _baselines  # noqa: PLC0415  (that version's)
    import _ours  # noqa: PLC0415

    out: dict[str, Any] = {"unavailable": []}
    for case, number in loops.items():
        call = _call(_ours, _baselines.FIVE_FIELDS, case)
        if call is None:
            out["unavailable"].append(case)
            continue
        call()  # the first call builds what the logger caches
        best = min(timeit.repeat(call, number=number, repeat=3))
        out[case] = best / number * 1e9
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
