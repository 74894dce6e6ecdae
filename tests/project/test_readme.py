"""The README's commands are right for its example: what the example writes, its perf line records."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end >= 0 else None]


def _example_tracepoints() -> set[str]:
    """Run the README's example under the capture (in a fresh interpreter); the tracepoints it wrote."""
    (code,) = re.findall(r"```python\n(.*?)```", _section("Example"), re.DOTALL)
    script = (
        "from structlog_etw.testing import capture_etw_events\n"
        "with capture_etw_events() as capture:\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "print(sorted({r.tracepoint for r in capture.records}))\n"
        "print(len(capture.records))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    names, count = proc.stdout.splitlines()[-2:]
    assert int(count) == len(re.findall(r"^log\.", code, re.MULTILINE))  # every call was written
    return set(ast.literal_eval(names))


def _perf_events(command: str) -> set[str]:
    argv = shlex.split(command)
    return {argv[i + 1].removeprefix("user_events:") for i, arg in enumerate(argv) if arg == "-e"}


class TestPerfCommand:
    """Recorded as written, the README's perf command gets every event of its example."""

    def test_every_tracepoint_the_example_writes_is_recorded(self) -> None:
        """The README's perf record command names every tracepoint the README example writes."""
        written = _example_tracepoints()
        assert written == {"MyCompany_MyService_L4K4", "MyCompany_MyService_L3K4"}
        (command,) = [
            line
            for line in _section("Watching the events with perf (Linux)").splitlines()
            if line.startswith("perf record")
        ]
        assert written <= _perf_events(command)

    def test_the_tracepoints_command_it_names_covers_the_example(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The README's structlog-etw tracepoints command prints a perf line covering the example."""
        from structlog_etw.cli import main  # noqa: PLC0415

        (cmd,) = re.findall(
            r"`structlog-etw (tracepoints [^`]+)`", _section("Watching the events with perf (Linux)")
        )
        assert main(shlex.split(cmd)) == 0
        perf = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("perf record"))
        assert _example_tracepoints() <= _perf_events(perf)


class TestNoxCommands:
    """Every ``nox -s NAME`` the README and DEVELOPERS.md show is a session of noxfile.py."""

    def test_named_sessions_exist(self) -> None:
        """Every nox -s session README.md and DEVELOPERS.md name exists in noxfile.py."""
        tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
        sessions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        text = README + (ROOT / "DEVELOPERS.md").read_text(encoding="utf-8")
        named = set(re.findall(r'nox -s "?([a-z_]+)', text))
        assert named and named <= sessions
        assert "pip install nox" in README  # how nox gets installed, from a fresh clone
