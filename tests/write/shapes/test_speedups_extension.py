"""The compiled packer as a current CPython extension (``structlog_etw/write/shapes/_speedups.c``): built
warning-free against the headers of every supported Python, loaded by isolated subinterpreters
(own GIL) where it packs the same bytes, one module object and one heap type per load, a Program
immutable once made, no private API, and a caller's dict changed by other threads while it packs.

The interpreters are this machine's (``tests/helpers/interpreters.py``: on PATH or pyenv's); under
``CI=true`` a missing one fails."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from structlog_etw.write import shapes as _shapes
from tests.helpers.interpreters import VERSIONS, config, python
from tests.helpers.shared_data import in_ci, skip_or_fail

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "structlog_etw" / "write" / "shapes" / "_speedups.c"
SPEEDUPS = _shapes.SPEEDUPS
needs_speedups = pytest.mark.skipif(
    SPEEDUPS is None and (not in_ci() or os.environ.get("STRUCTLOG_ETW_WHEEL_KIND") == "pure"),
    reason="the compiled packer is not built here; under CI=true its absence fails test_speedups.py",
)
#: Py_TPFLAGS_HEAPTYPE, Py_TPFLAGS_IMMUTABLETYPE (Include/object.h).
HEAPTYPE, IMMUTABLETYPE = 1 << 9, 1 << 8

#: Layouts (op names) and events packed in each interpreter: every op, edge values, a mismatch.
CASES: list[tuple[list[str], dict[str, Any]]] = [
    (
        ["str", "i64", "f64", "bool8", "bool32", "bytes"],
        {"a": "é€😀", "b": -(2**63), "c": -0.0, "d": True, "e": False, "f": b"\0x"},
    ),
    (
        ["null_empty", "null_text", "i64_counted", "f64_counted", "skip"],
        {"a": None, "b": None, "c": 2**63 - 1, "d": 1e308, "exc_info": object()},
    ),
    (["str", "i64"], {"a": "x", "b": "not an int"}),
    (["str"] * 200, {f"k{i}": "v" * i for i in range(200)}),
    ([], {}),
]
#: What each interpreter runs: its outcome for every case, as JSON (hex bytes, None or the error).
PACK_CASES = """
import json
def pack_cases(speedups, cases):
    out = []
    for names, event in cases:
        program = speedups.Program(bytes(speedups.OPS[n] for n in names))
        event = {k: (object() if v == "<object>" else v) for k, v in event.items()}
        try:
            got = program.pack(event, b"HEAD", b"META")
            out.append(None if got is None else got.hex())
        except Exception as exc:
            out.append(type(exc).__name__)
    return out
"""


def _json_cases() -> str:
    return repr([(names, {k: ("<object>" if type(v) is object else v) for k, v in event.items()})
                 for names, event in CASES])  # fmt: skip


def _interpreter(version: str) -> str:
    found = python(version)
    if found is None:
        skip_or_fail(f"no Python {version} here (on PATH or in pyenv)")
    return found


def _gcc() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        skip_or_fail("gcc is not installed")
    return gcc


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Path]]:
    """version -> (interpreter, the extension built for it with -Wall -Wextra -Werror), for every
    supported version found (the warnings test reports a missing one)."""
    out: dict[str, tuple[str, Path]] = {}
    gcc = shutil.which("gcc")
    for version in VERSIONS:
        interpreter = python(version)
        if interpreter is None or gcc is None:
            continue
        include, suffix = config(interpreter)
        target = tmp_path_factory.mktemp(f"py{version}") / f"_speedups{suffix}"
        built = subprocess.run(
            [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{include}", str(SOURCE),
             "-o", str(target)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert built.returncode == 0, f"{version}: {built.stderr[-4000:]}"
        out[version] = (interpreter, target)
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_it_compiles_warning_free_against_each_pythons_headers(
    version: str, builds: dict[str, tuple[str, Path]]
) -> None:
    """gcc -Wall -Wextra -Werror builds the module against the headers of 3.10, 3.11, 3.12 and
    3.13 (the fixture asserts each build; this names the version that is missing)."""
    _gcc()
    _interpreter(version)
    assert builds[version][1].is_file()


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= "3.12"])
def test_an_isolated_subinterpreter_loads_it_and_packs_the_same_bytes(
    version: str, builds: dict[str, tuple[str, Path]]
) -> None:
    """In Python 3.12 and 3.13, an isolated subinterpreter (its own GIL, only extensions that
    declare per-interpreter-GIL support may load) imports the module built for that Python and
    packs every case to the bytes the main interpreter packs, which are this interpreter's too."""
    _gcc()
    interpreter = _interpreter(version)
    target = builds[version][1]
    # The private modules are the only way to make a subinterpreter on 3.12 and 3.13 (tests only).
    cases = target.with_suffix(".cases")
    cases.write_text(_json_cases())
    # Each interpreter reads the cases from the file and writes its outcomes as JSON.
    run = (
        PACK_CASES
        + f"""
import ast, importlib.util
spec = importlib.util.spec_from_file_location("structlog_etw.write.shapes._speedups", {str(target)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with open(OUT, "w") as f:
    f.write(json.dumps(pack_cases(module, ast.literal_eval(open({str(cases)!r}).read()))))
"""
    )
    code = f"""
OUT = {str(target) + ".main.json"!r}
exec({run!r})
try:
    import _interpreters as interpreters
    iid = interpreters.create("isolated")
except ImportError:
    import _xxsubinterpreters as interpreters
    iid = interpreters.create(isolated=True)
failed = interpreters.run_string(iid, "OUT = " + {str(target) + ".sub.json"!r}.__repr__() + "\\n" + {run!r})
interpreters.destroy(iid)
if failed is not None:
    raise SystemExit(f"the subinterpreter failed: {{failed}}")
"""
    out = subprocess.run([interpreter, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-4000:] + out.stdout[-2000:]
    main = json.loads(Path(str(target) + ".main.json").read_text())
    sub = json.loads(Path(str(target) + ".sub.json").read_text())
    assert sub == main
    assert main[2] is None and main[0] and main[-1] == "48454144" + "4d455441"
    if SPEEDUPS is not None:  # and this interpreter's module packs the same
        here: dict[str, Any] = {}
        exec(PACK_CASES, here)
        assert here["pack_cases"](SPEEDUPS, eval(_json_cases())) == main


def _load_again() -> ModuleType:
    """A second module object from the same file (what another interpreter gets)."""
    assert SPEEDUPS is not None
    spec = importlib.util.spec_from_file_location(SPEEDUPS.__name__, SPEEDUPS.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_speedups
class TestCurrentExtension:
    """What CPython 3.12+ expects of an extension, seen from Python."""

    def test_each_load_is_its_own_module_with_its_own_heap_type(self) -> None:
        """Multi-phase initialisation: loading the file again gives a new module object whose
        Program is another (heap, immutable) type; programs of both pack the same bytes."""
        assert SPEEDUPS is not None
        other = _load_again()
        assert other is not SPEEDUPS and other.Program is not SPEEDUPS.Program
        for module in (SPEEDUPS, other):
            assert module.Program.__flags__ & HEAPTYPE and module.Program.__flags__ & IMMUTABLETYPE
        assert other.OPS == SPEEDUPS.OPS and other.ABI_VERSION == SPEEDUPS.ABI_VERSION
        ops = bytes([SPEEDUPS.OPS["str"], SPEEDUPS.OPS["f64"]])
        event = {"a": "é", "b": 2.5}
        assert other.Program(ops).pack(event, b"H") == SPEEDUPS.Program(ops).pack(event, b"H")

    def test_a_program_cannot_be_changed_once_made(self) -> None:
        """``Program.__init__`` run again on a live object changes nothing (its ops are set by
        ``Program()`` alone); the type takes no new attributes and no subclass."""
        assert SPEEDUPS is not None
        program = SPEEDUPS.Program(bytes([SPEEDUPS.OPS["i64"]]))
        before = program.pack({"a": 7}, b"")
        program.__init__(bytes([SPEEDUPS.OPS["str"], SPEEDUPS.OPS["str"]]))
        assert program.pack({"a": 7}, b"") == before == (7).to_bytes(8, "little")
        with pytest.raises(TypeError):
            SPEEDUPS.Program.pack = None
        with pytest.raises(TypeError):
            type("Sub", (SPEEDUPS.Program,), {})

    def test_free_threaded_builds_keep_the_gil_off(self) -> None:
        """Importing the package leaves the GIL as it was: off on a free-threaded build (3.14t in
        the release workflow: ``Py_mod_gil``), on with the GIL (the declaration's presence in the
        source: test_no_private_api_and_no_deprecated_pattern)."""
        code = "import sys, structlog_etw.write.shapes as s\n"
        code += "print(s.SPEEDUPS is not None, getattr(sys, '_is_gil_enabled', lambda: True)())"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
        )
        free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
        assert out.stdout.split() == ["True", str(not free_threaded)], out.stderr

    def test_threads_changing_the_dict_while_it_packs(self) -> None:
        """Threads pack one dict while another adds and removes keys and swaps values: every
        outcome is the layout's bytes, None (another class) or the length error, never a crash
        or a value of another layout (the dict is read under its critical section on a
        free-threaded build, as one step under the GIL)."""
        assert SPEEDUPS is not None
        program = SPEEDUPS.Program(bytes([SPEEDUPS.OPS["i64"]] * 3))
        event: dict[str, object] = {"a": 1, "b": 2, "c": 3}
        good = b"".join(n.to_bytes(8, "little") for n in (1, 2, 3))
        stop = threading.Event()
        seen: set[object] = set()

        def change() -> None:
            while not stop.is_set():
                event["d"] = 4
                del event["d"]
                event["b"] = "x"
                event["b"] = 2

        def pack() -> None:
            for _ in range(20000):
                try:
                    got = program.pack(event, b"")
                except ValueError:
                    got = "length"
                assert got in (good, None, "length"), got
                seen.add(got)

        changer = threading.Thread(target=change)
        packers = [threading.Thread(target=pack) for _ in range(3)]
        changer.start()
        for t in packers:
            t.start()
        for t in packers:
            t.join()
        stop.set()
        changer.join()
        assert good in seen


def test_no_private_api_and_no_deprecated_pattern() -> None:
    """The C source calls no private ``_Py`` function and no ``PyModule_AddObject`` (which steals
    a reference only on success); it has no single-phase ``PyModule_Create``; it declares
    ``Py_mod_gil`` not used (with its reasoning) and per-interpreter-GIL support where the
    headers have them."""
    source = SOURCE.read_text()
    slot = r"#ifdef Py_mod_gil\n(\s*/\*.*?\*/\n)?\s*\{Py_mod_gil, Py_MOD_GIL_NOT_USED\}"
    assert re.search(slot, source, re.S)
    assert "{Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED}" in source
    code = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    assert not re.findall(r"\b_Py[A-Za-z_]+\s*\(", code)
    assert "PyModule_AddObject(" not in code and "PyModule_Create" not in code
    assert "PyModuleDef_Init" in code and "PyType_FromModuleAndSpec" in code
