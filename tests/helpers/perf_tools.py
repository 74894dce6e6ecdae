"""The outside readers a written perf.data is held against: the ``perf`` binary and Microsoft's
``perf-decode`` (built once per test run from ``../shared/ref`` with its script, into a temporary
directory outside the repository; ``$STRUCTLOG_ETW_PERF_DECODE`` names one already built).

Where a tool is missing the test is skipped with the reason, except under ``CI=true``, where a
missing perf or a failed build fails the test.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Microsoft's build script (see ../shared/ref/README.md).
BUILD_SCRIPT = REPO.parent / "shared" / "ref" / "build-perf-decode.sh"
_ALT_SCRIPT = Path("/work/shared/ref/build-perf-decode.sh")


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: a missing reader is a failure)", pytrace=False)
    pytest.skip(reason)


def perf_binary() -> str:
    """The ``perf`` binary's path (skip, or fail under CI, when there is none)."""
    found = shutil.which("perf")
    if found is None:
        _missing("no perf binary on PATH")
    assert found is not None
    return found


@functools.cache
def _build_perf_decode(out_dir: str) -> tuple[str | None, str]:
    script = BUILD_SCRIPT if BUILD_SCRIPT.is_file() else _ALT_SCRIPT
    if not script.is_file():
        return None, f"no build script at {BUILD_SCRIPT}"
    try:
        proc = subprocess.run(
            ["bash", str(script), out_dir], capture_output=True, text=True, check=False, timeout=1200
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"perf-decode build failed: {e}"
    path = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not os.access(path, os.X_OK):
        log = ""
        for name in ("cmake.log", "make.log"):
            p = Path(out_dir) / name
            if p.is_file():
                log += p.read_text(errors="replace")[-1500:]
        return None, f"perf-decode build failed (exit {proc.returncode}): {proc.stderr[-500:]}{log}"
    return path, ""


def _executable_copy(path: str) -> str:
    """A copy of ``path`` where it may run (the guest mounts kernel-out without exec)."""
    target = os.path.join(tempfile.mkdtemp(prefix="perf-decode-"), "perf-decode")
    shutil.copyfile(path, target)
    os.chmod(target, 0o755)
    return target


def perf_decode_binary(out_dir: str | None = None) -> str:
    """perf-decode's path: ``$STRUCTLOG_ETW_PERF_DECODE``, else the one in ``kernel-out/perf-decode``
    (tests/kernel/run_in_guest.py builds it there), else built once into ``out_dir`` (default: a temporary
    directory outside the repository)."""
    given = os.environ.get("STRUCTLOG_ETW_PERF_DECODE")
    if given and os.access(given, os.X_OK):
        return given
    for base in (os.environ.get("STRUCTLOG_ETW_KERNEL_OUT"), str(REPO / "kernel-out")):
        built = os.path.join(base, "perf-decode", "bin", "perf-decode") if base else ""
        if built and os.path.isfile(built):  # built by run_in_guest.py before the guest boots
            return built if os.access(built, os.X_OK) else _executable_copy(built)
    where = out_dir or os.path.join(tempfile.gettempdir(), f"structlog-etw-perf-decode-{os.getuid()}")
    path, reason = _build_perf_decode(where)
    if path is None:
        _missing(reason)
    assert path is not None
    return path
