"""The package as ``nox -s wheels`` installs it from a wheel into a fresh venv: imported from that
venv (not the checkout), with its compiled packer when the wheel was built with a C compiler and
without it (pure Python, same behaviour) when it was not.

Selected where ``STRUCTLOG_ETW_WHEEL_VENV`` names the venv (conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import structlog_etw
from structlog_etw.write import shapes as _shapes

VENV = os.environ.get("STRUCTLOG_ETW_WHEEL_VENV")
KIND = os.environ.get("STRUCTLOG_ETW_WHEEL_KIND")


def _in_venv(path: str | None) -> bool:
    assert VENV is not None and path is not None
    return Path(path).resolve().is_relative_to(Path(VENV).resolve())


def test_the_package_is_imported_from_the_venv() -> None:
    """``structlog_etw.__file__`` and the interpreter are the venv's: the tests test the wheel."""
    assert _in_venv(structlog_etw.__file__), structlog_etw.__file__
    assert Path(sys.prefix).resolve() == Path(VENV or "").resolve()
    assert "site-packages" in Path(structlog_etw.__file__).parts


def test_the_compiled_packer_is_the_wheels_or_absent_in_a_pure_install() -> None:
    """A wheel built with a compiler: its compiled packer is loaded, from the venv.  Built without
    one (pure Python): there is none in the install, and the encoders run the generated functions."""
    assert KIND in ("compiled", "pure")
    package = Path(structlog_etw.__file__).parent
    compiled = [p for p in package.rglob("_speedups*") if p.suffix in (".so", ".pyd")]
    if KIND == "compiled":
        assert _shapes.SPEEDUPS is not None
        assert _in_venv(_shapes.SPEEDUPS.__file__), _shapes.SPEEDUPS.__file__
    else:
        assert compiled == [] and _shapes.SPEEDUPS is None


def test_an_event_is_encoded_by_the_installed_package() -> None:
    """The installed package encodes an event dict by its shape path, once hot (compiled packer or
    generated function), to the general route's bytes."""
    from structlog_etw.write.eventheader import EventHeaderEncoder  # noqa: PLC0415
    from structlog_etw.write.fields import dict_fields  # noqa: PLC0415

    fast, general = EventHeaderEncoder(), EventHeaderEncoder()
    for i in range(200):
        event = {"n": i, "s": "é", "f": 1.5, "b": True, "none": None}
        assert fast.encode_dict("E", event, None) == general.encode_fields(
            "E", dict_fields(event.items(), None)
        )


#: Run in a fresh interpreter: the installed package in an isolated subinterpreter (its own GIL:
#: only extensions declaring per-interpreter-GIL support load) and in the main one, same bytes.
_SUBINTERPRETER = r"""
import json, sys
CODE = '''
import json, structlog_etw.write.shapes as s
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.eventheader._codec import CODEC
from structlog_etw.write.fields import BOOL, BYTES, F64, I64, STR
assert s.SPEEDUPS is not None
events = [{"a": "é" * i, "b": i - 2**40, "c": i / 3, "d": bool(i % 2), "e": b"x" * i} for i in range(40)]
packer = s.compiled_packer((STR, I64, F64, BOOL, BYTES), CODEC.ops)
encoder = EventHeaderEncoder()
out = [packer(e, b"H", b"M").hex() for e in events]
out += [encoder.encode_dict("E", e, None).hex() for e in events]
with open(PATH, "w") as f:
    json.dump([s.SPEEDUPS.__file__, out], f)
'''
# The main interpreter first: 3.12.1 aborts importing datetime in the main interpreter after a
# subinterpreter imported it (a CPython bug, not this package: datetime alone does it).
exec("PATH = %r\n" % (sys.argv[1] + ".main",) + CODE)
try:
    import _interpreters as interpreters
    iid = interpreters.create("isolated")
except ImportError:
    import _xxsubinterpreters as interpreters
    iid = interpreters.create(isolated=True)
failed = interpreters.run_string(iid, "PATH = %r\n" % (sys.argv[1] + ".sub",) + CODE)
interpreters.destroy(iid)
if failed is not None:
    raise SystemExit(f"the subinterpreter failed: {failed}")
"""


def test_an_isolated_subinterpreter_imports_it_and_writes_the_same_bytes(tmp_path: Path) -> None:
    """On 3.12+ (the 3.12 and 3.13 runs of ``nox -s wheels``, 3.14 at release): an isolated
    subinterpreter with its own GIL imports the installed package, loads its compiled packer (not
    the pure-Python fallback) and packs and encodes events to the main interpreter's bytes.  (The
    private ``_interpreters``/``_xxsubinterpreters`` modules are the only way on 3.12 and 3.13.)"""
    if sys.version_info < (3, 12) or KIND != "compiled":
        pytest.skip("isolated subinterpreters: Python 3.12+, with the compiled packer installed")
    out = subprocess.run(
        [sys.executable, "-c", _SUBINTERPRETER, str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    sub = json.loads((tmp_path / "out.sub").read_text())
    main = json.loads((tmp_path / "out.main").read_text())
    assert sub == main and _in_venv(sub[0])
