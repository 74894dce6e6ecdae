"""No stdout, no problem: the recommended configuration needs no stream.

Where a process has no ``sys.stdout`` (``pythonw.exe``, a Windows service, a Linux service
started with fd 1 closed) structlog's default logger factory cannot make its ``PrintLogger``:
newer structlog raises ``TypeError`` on every log call, before any processor runs.  The
configuration every example of the README and docs uses names a factory that creates nothing
per call (structlog's ``ReturnLoggerFactory``), so it works with whatever structlog is installed
(``nox -s "tests(oldest)"`` runs this module on the oldest structlog the package allows).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
#: The failure docs/reliability.md names (structlog's PrintLogger with ``sys.stdout`` None).
FAILURE = "cannot create weak reference to 'NoneType' object"


def _without_stdout(body: str) -> dict[str, object]:
    """Run ``body`` in a process whose ``sys.stdout`` is None when structlog is imported."""
    script = (
        f"import json, sys\nsys.stdout = None\nsys.path.insert(0, {str(REPO)!r})\n"
        + "import structlog\nfrom structlog_etw import EtwRenderer\n"
        + "from structlog_etw.testing import capture_etw_events\nout = {}\n"
        + textwrap.dedent(body)
        + "\nsys.stderr.write(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stderr.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_recommended_configuration_needs_no_stdout() -> None:
    """configure(..., logger_factory=ReturnLoggerFactory()) and wrap_logger(ReturnLogger(), ...)
    log without sys.stdout: no exception, every event written."""
    out = _without_stdout(
        """
        with capture_etw_events() as capture:
            structlog.configure(
                processors=[EtwRenderer("SlEtw_NoStdout")],
                logger_factory=structlog.ReturnLoggerFactory(),
            )
            structlog.get_logger().info("configured", n=1)
            structlog.wrap_logger(structlog.ReturnLogger(), processors=[EtwRenderer("SlEtw_NoStdout")]).info(
                "wrapped", n=2
            )
        out["events"] = [e.name for e in capture.events]
        """
    )
    assert out["events"] == ["configured", "wrapped"]


def test_the_default_factory_without_stdout_fails_only_as_reliability_md_says() -> None:
    """With the default factory and no stdout, a log call either works (older structlog) or
    raises exactly the TypeError docs/reliability.md names, next to its fix."""
    out = _without_stdout(
        """
        with capture_etw_events() as capture:
            structlog.configure(processors=[EtwRenderer("SlEtw_DefaultFactory")])
            try:
                structlog.get_logger().info("default_factory")
                out["raised"] = None
            except Exception as exc:
                out["raised"] = f"{type(exc).__name__}: {exc}"
        out["events"] = [e.name for e in capture.events]
        """
    )
    if out["raised"] is None:
        assert out["events"] == ["default_factory"]
    else:
        assert out["raised"] == f"TypeError: {FAILURE}"
    reliability = (REPO / "docs" / "reliability.md").read_text()
    assert FAILURE in reliability
    assert "logger_factory=structlog.ReturnLoggerFactory()" in reliability


def _configure_blocks(text: str) -> list[str]:
    """Every ``structlog.configure(...)`` call in ``text`` (balanced parentheses)."""
    blocks = []
    for m in re.finditer(r"structlog\.configure\(", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        blocks.append(text[m.start() : i])
    return blocks


def test_every_docs_example_uses_a_factory_that_needs_no_stream() -> None:
    """No README/docs example hands structlog None as the logger, and every configure() whose
    chain ends with the renderer (nothing printed) names a logger factory: only chains that
    render to the console or to logging (passthrough, ProcessorFormatter) keep a stream."""
    offenders = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        if "wrap_logger(None" in text:
            offenders.append(f"{path.name}: wrap_logger(None, ...)")
        for block in _configure_blocks(text):
            printing = ("passthrough=True", "ProcessorFormatter", "JSONRenderer", "ConsoleRenderer")
            if "logger_factory=" not in block and not any(p in block for p in printing):
                offenders.append(f"{path.name}: {block.splitlines()[0]}...")
    assert offenders == []
