"""The package as ``nox -s wheels`` installs it from a wheel into a fresh venv: imported from that
venv (not the checkout), with its compiled packer when the wheel was built with a C compiler and
without it (pure Python, same behaviour) when it was not.

Selected where ``STRUCTLOG_ETW_WHEEL_VENV`` names the venv (conftest.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import structlog_etw
from structlog_etw import _shapes

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
    from structlog_etw.eventheader.encoder import EventHeaderEncoder  # noqa: PLC0415
    from structlog_etw.fields import dict_fields  # noqa: PLC0415

    fast, general = EventHeaderEncoder(), EventHeaderEncoder()
    for i in range(200):
        event = {"n": i, "s": "é", "f": 1.5, "b": True, "none": None}
        assert fast.encode_dict("E", event, None) == general.encode_fields(
            "E", dict_fields(event.items(), None)
        )
