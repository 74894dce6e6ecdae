"""Starting to read loads no standard-library module a reader needs only for some values: the
decode command and the read side's modules import no :mod:`uuid` (and the :mod:`platform` it
pulls in), :mod:`ipaddress` or :mod:`datetime` until a value of those kinds is turned into a
Python object, and ``decode --json``/``--perf-json`` write every value of the conformance capture
(UUIDs, IP addresses and times among them) without them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.shared_data import vector

#: What only some values need (``platform``: what :mod:`uuid` imports on Linux).
ON_FIRST_USE = ("uuid", "ipaddress", "datetime", "platform")


def _loaded_after(code: str) -> list[str]:
    """The modules of :data:`ON_FIRST_USE` a fresh interpreter has loaded after ``code``."""
    probe = (
        f"{code}\nimport sys, json\nprint(json.dumps([m for m in {ON_FIRST_USE!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded


def test_importing_the_read_side_loads_none_of_them() -> None:
    """The decoders, the writers and the decode command import none of them."""
    assert _loaded_after("import structlog_etw.cli.decode, structlog_etw.read.writers.console") == []


@pytest.mark.parametrize("mode", ["--json", "--perf-json"])
def test_decoding_the_conformance_capture_loads_none_of_them(mode: str) -> None:
    """Every value of the capture (every EventHeader kind) is written from its bytes: the
    fast plans turn UUIDs, addresses and times into text without those modules."""
    path = vector("perf.data")
    code = (
        "import contextlib, io, sys\n"
        "from structlog_etw.cli import main\n"
        f"sys.argv = ['structlog-etw', 'decode', {mode!r}, {str(path)!r}]\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main()\n"
        "assert code == 0, code\n"
    )
    assert _loaded_after(code) == []
