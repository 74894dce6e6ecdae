"""The public ``structlog_etw.perf`` package: what it exports, that it imports on every OS, and that
its reading machinery never prints (printing is the CLI's job)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from structlog_etw import perf

PERF_DIR = Path(perf.__file__).parent
REPO = PERF_DIR.parents[1]


def test_every_exported_name_exists_and_is_documented() -> None:
    """Every name in structlog_etw.perf.__all__ exists and has a docstring, as does the package."""
    for name in perf.__all__:
        obj = getattr(perf, name)
        assert (obj.__doc__ or "").strip(), f"structlog_etw.perf.{name} has no docstring"
    assert perf.__doc__


# Run as another OS would: no fcntl and no select.poll (Windows), then sys.platform not linux
# (set after the imports: the stdlib itself picks its Windows modules by sys.platform).
ELSEWHERE = """
import select, sys
sys.modules["fcntl"] = None
if hasattr(select, "poll"):
    del select.poll
import structlog_etw.perf as perf
for name in perf.__all__:  # the package loads each name's module on first use: all of them
    getattr(perf, name)
sys.platform = "win32"
loaded = sorted(m for m in sys.modules if m.startswith("structlog_etw.perf."))
assert loaded == [
    "structlog_etw.perf._framing",
    "structlog_etw.perf._header",
    "structlog_etw.perf._sample_reader",
    "structlog_etw.perf._source",
    "structlog_etw.perf._time_order",
    "structlog_etw.perf._tracepoints",
    "structlog_etw.perf.abi",
    "structlog_etw.perf.datafile",
    "structlog_etw.perf.listener",
    "structlog_etw.perf.records",
    "structlog_etw.perf.samples",
    "structlog_etw.perf.tracefs_format",
], loaded
try:
    perf.Listener("MyCompany_MyService")
except perf.ListenError as e:
    assert "needs Linux" in str(e), e
else:
    raise AssertionError("Listener started without Linux")
assert perf.decode_sample.__module__ == "structlog_etw.perf.samples"
assert issubclass(perf.SampleDecodeError, ValueError)
"""


def test_the_package_imports_where_there_is_no_linux() -> None:
    """structlog_etw.perf imports where there are no Linux-only modules."""
    proc = subprocess.run(
        [sys.executable, "-c", ELSEWHERE],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr


# What ``structlog-etw decode`` imports of the package: the reader, not the listener.
READER_ONLY = """
import sys
import structlog_etw.perf
assert not [m for m in sys.modules if m.startswith("structlog_etw.perf.")], sorted(sys.modules)
import structlog_etw.perf.datafile
loaded = sorted(m for m in sys.modules if m.startswith("structlog_etw.perf."))
assert loaded == [
    "structlog_etw.perf._framing",
    "structlog_etw.perf._header",
    "structlog_etw.perf._sample_reader",
    "structlog_etw.perf._source",
    "structlog_etw.perf._time_order",
    "structlog_etw.perf.abi",
    "structlog_etw.perf.datafile",
    "structlog_etw.perf.records",
    "structlog_etw.perf.tracefs_format",
], loaded
assert "pathlib" not in sys.modules
"""


def test_the_package_loads_a_module_when_one_of_its_names_is_used() -> None:
    """Importing structlog_etw.perf loads none of its modules, and its perf.data reader loads
    neither the listener nor pathlib (the start-up of ``structlog-etw decode``)."""
    proc = subprocess.run(
        [sys.executable, "-c", READER_ONLY],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr


def _prints(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"{path.name}:{node.lineno} print()")
        if isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr"):
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
    return found


def test_the_reading_machinery_never_prints() -> None:
    """No module of structlog_etw/perf calls print()."""
    found = [hit for path in sorted(PERF_DIR.glob("*.py")) for hit in _prints(path)]
    assert found == []
