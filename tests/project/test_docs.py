"""Every ```python block of README.md and docs/*.md runs without error.

A block fenced as ```python no-run is shown to readers but not executed here (it needs
root, Windows, a live trace session, ...).  Each block runs on its own, in a fresh
interpreter, from a temporary directory, so blocks must be self-contained.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def _doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [f for f in files if f.is_file()]


def _blocks() -> list[tuple[str, str, bool]]:
    out: list[tuple[str, str, bool]] = []
    for path in _doc_files():
        text = path.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            runnable = "no-run" not in m.group(1).split()
            out.append((f"{path.relative_to(ROOT)}:{line}", m.group(2), runnable))
    return out


BLOCKS = _blocks()


def test_the_docs_have_python_examples() -> None:
    """README.md and docs/ hold at least one runnable python block."""
    msg = "no runnable ```python block found in README.md or docs/"
    assert any(runnable for _, _, runnable in BLOCKS), msg


@pytest.mark.parametrize(
    ("where", "code"),
    [(where, code) for where, code, runnable in BLOCKS if runnable],
    ids=[where for where, _, runnable in BLOCKS if runnable],
)
def test_python_block_runs(where: str, code: str, tmp_path: Path) -> None:
    """Every runnable python block of README.md and docs/ exits 0 on its own in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.returncode == 0, f"{where} failed:\n{proc.stdout}\n{proc.stderr}"
