"""Where the shared conformance data lives, and how tests react when it is missing."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import struct
import types
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any, NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """``$STRUCTLOG_ETW_SHARED``, else ``<repo>/../shared``."""
    env = os.environ.get("STRUCTLOG_ETW_SHARED")
    return Path(env) if env else REPO.parent / "shared"


def in_ci() -> bool:
    """Whether the tests run in CI (env ``CI`` is ``true``/``1``/``yes``), where nothing may skip."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def skip_or_fail(reason: str, *, allow_module_level: bool = False) -> NoReturn:
    """Skip locally; fail in CI, which installs every tool and package the tests need.

    CI runs with ``CI=true`` and provides gcc, the Python headers (the compiled
    ``structlog_etw.write.shapes._speedups``), traceloggingdynamic and the shared conformance data (noxfile
    ``TEST_DEPS``, ``.ci/run``): there a missing one is a broken set-up, and a skip would hide
    untested code behind a green run.
    """
    if in_ci():
        pytest.fail(f"{reason} (required when CI=true)", pytrace=False)
    pytest.skip(reason, allow_module_level=allow_module_level)


def find_spec_or_skip(module: str) -> ModuleSpec:
    """``importlib.util.find_spec(module)`` with an origin; else :func:`skip_or_fail`."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        skip_or_fail(f"{module} is not installed (pip install {module})")
    return spec


def import_or_skip(module: str) -> types.ModuleType:
    """Import ``module`` (at module level too); if it is missing, :func:`skip_or_fail`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        skip_or_fail(f"{module} is not importable ({exc}; pip install {module})", allow_module_level=True)


def vector(name: str) -> Path:
    """Path of a LinuxTracepoints conformance file; skip (locally) or fail (CI=true) when absent."""
    path = shared_dir() / "vectors" / "linuxtracepoints" / name
    if not path.is_file():
        reason = (
            f"conformance file {path} is missing (set STRUCTLOG_ETW_SHARED to the directory that holds"
            " vectors/linuxtracepoints/)"
        )
        skip_or_fail(reason)
    return path


def load_expected(path: Path) -> list[list[tuple[str, Any]]]:
    """perf-decode's JSON (UTF-8 with BOM, no outer braces, maybe invalid UTF-8) as ordered pairs.

    Objects become lists of ``(key, value)`` pairs so that key order and
    duplicate keys take part in comparisons; invalid UTF-8 is kept as
    surrogateescape characters.
    """
    text = path.read_bytes().decode("utf-8", "surrogateescape").lstrip("\ufeff").strip()
    if not text.startswith("{"):
        text = "{" + text + "}"
    doc = json.loads(text, object_pairs_hook=list)
    ((_, events),) = doc
    return list(events)


def pairs(text: str) -> Any:
    """Parse one JSON text the same way as :func:`load_expected`."""
    return json.loads(text, object_pairs_hook=list)


def read_dat(path: Path) -> list[tuple[str, bytes]]:
    """Records of an EventHeaderInterceptor .dat file: (tracepoint name, event bytes)."""
    data = path.read_bytes()
    out: list[tuple[str, bytes]] = []
    pos = 0
    while pos < len(data):
        (size,) = struct.unpack_from("<I", data, pos)
        assert size > 4, f"bad record size {size} at {pos}"
        body = data[pos + 4 : pos + size]
        nul = body.index(b"\0")
        out.append((body[:nul].decode("utf-8"), body[nul + 1 :]))
        pos += size
    return out


def pipe_mode_copy(data: bytes) -> bytes:
    """Rewrite a file-mode perf.data as perf's pipe mode (perf record -o -): all metadata in records."""
    attr_entry = struct.unpack_from("<Q", data, 16)[0]
    attrs_off, attrs_size = struct.unpack_from("<QQ", data, 24)
    out = bytearray(b"PERFILE2" + struct.pack("<Q", 16))
    for pos in range(attrs_off, attrs_off + attrs_size, attr_entry):
        attr = data[pos : pos + attr_entry - 16]
        ids_off, ids_size = struct.unpack_from("<QQ", data, pos + attr_entry - 16)
        body = attr + data[ids_off : ids_off + ids_size]
        out += struct.pack("<IHH", 64, 0, 8 + len(body)) + body
    # feature sections: the table follows the data section
    data_off, data_size = struct.unpack_from("<QQ", data, 40)
    bits = int.from_bytes(data[72:104], "little")
    table = data_off + data_size
    sections = {}
    for bit in range(256):
        if bits >> bit & 1:
            sections[bit] = struct.unpack_from("<QQ", data, table)
            table += 16
    t_off, t_size = sections[1]
    tracing = data[t_off : t_off + t_size]
    padded = tracing + b"\0" * (-len(tracing) % 8)
    out += struct.pack("<IHHI", 66, 0, 12, len(padded)) + padded
    c_off, c_size = sections[29]
    out += struct.pack("<IHHQ", 80, 0, 16 + c_size, 29) + data[c_off : c_off + c_size]
    out += data[data_off : data_off + data_size]
    return bytes(out)


def untagged(value: Any) -> Any:
    """``value`` (pairs from :func:`pairs`) with perf-decode's field tags (``"name;tag=0x12"``) removed."""
    if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return [(k.split(";tag=", 1)[0] if k != "meta" else k, untagged(v)) for k, v in value]
    if isinstance(value, list):
        return [untagged(v) for v in value]
    return value


def expected_perf_data_events() -> list[list[tuple[str, Any]]]:
    """What the current perf-decode writes for the conformance perf.data.

    ``perf.data.linux.json`` was written by a perf-decode from before field tags; the current
    one writes ``"name;tag=0xBEEF"`` (as ``EventHeaderInterceptorLE64.dat.linux.json``, written by
    it, shows).  The perf.data events come from the same test programs, so each event whose
    fields match an interceptor event's fields once tags are removed takes that event's tagged
    field names; every value and the ``meta`` stay the file's own.
    """
    tagged: dict[str, list[list[tuple[str, Any]]]] = {}
    for event in load_expected(vector("EventHeaderInterceptorLE64.dat.linux.json")):
        tagged.setdefault(dict(event)["n"], []).append([p for p in event if p[0] != "meta"])
    out = []
    for event in load_expected(vector("perf.data.linux.json")):
        body = [p for p in event if p[0] != "meta"]
        for candidate in tagged.get(dict(event)["n"], []):
            if candidate != body and untagged(candidate) == body:
                body = candidate
                break
        out.append([*body, *(p for p in event if p[0] == "meta")])
    return out
