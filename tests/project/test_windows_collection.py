"""The host suite collects and runs without the Unix-only standard modules, as on Windows.

Windows has no ``fcntl``, ``resource``, ``termios``, ``pwd``, ... (the list is
``tests/helpers/without_unix/sitecustomize.py``); a module-level import of one of them in a test
module, a conftest or a helper stops the Windows job at collection.  These tests run pytest in a
subprocess with that folder first on ``PYTHONPATH``, where importing any of them fails wherever it
is written (also in modules added later), and ask for:

* the whole host suite to collect without an error;
* the tests that can reach one of those modules to pass or skip (with the reason, on Windows only:
  ``tests/helpers/unix.py``), never to fail.  They are found from the source, not from a list:
  every test module that imports a hidden module at any depth, or imports a module of ``tests/``
  that does (at any depth), or a module of the package that does at module level (transitively).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.shared_data import REPO
from tests.helpers.unix import HIDDEN_ENV

SELF = Path(__file__).resolve()
WITHOUT_UNIX = REPO / "tests" / "helpers" / "without_unix"
#: Deselected in a plain run anyway (they check what other nox sessions build or need a kernel).
_NOT_HOST = ("tests/kernel/", "tests/site/", "tests/packaging/")


def _hidden() -> frozenset[str]:
    tree = ast.parse((WITHOUT_UNIX / "sitecustomize.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "HIDDEN" for t in node.targets
        ):
            call = node.value
            assert isinstance(call, ast.Call)
            return frozenset(ast.literal_eval(call.args[0]))
    raise AssertionError("sitecustomize.py defines no HIDDEN")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runs_at_import(top: ast.stmt) -> bool:
    """Whether a module-level statement's imports run when the module is imported."""
    if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return False
    return not (isinstance(top, ast.If) and "TYPE_CHECKING" in ast.unparse(top.test))


#: Calls that import the module named by their first argument.
_IMPORTING_CALLS = frozenset(("unix_module", "importorskip", "import_module", "__import__"))


def _imports(path: Path, *, module_level_only: bool) -> set[str]:
    """The absolute names a module imports (``from a import b``: ``a`` and ``a.b``; also
    ``unix_module("x")``, ``importorskip("x")``, ``import_module("x")``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    if module_level_only:
        nodes = [node for top in tree.body if _runs_at_import(top) for node in ast.walk(top)]
    else:
        nodes = list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in _IMPORTING_CALLS and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return names


def unix_reaching_test_files() -> list[str]:
    """The host test modules that can reach a hidden module (see the module docstring)."""
    hidden = _hidden()
    graph: dict[str, set[str]] = {}
    for path in (REPO / "structlog_etw").rglob("*.py"):
        graph[_module_name(path)] = _imports(path, module_level_only=True)
    tests: dict[str, Path] = {}
    for path in (REPO / "tests").rglob("*.py"):
        if WITHOUT_UNIX in path.parents:
            continue
        graph[_module_name(path)] = _imports(path, module_level_only=False)
        tests[_module_name(path)] = path
    reaching: set[str] = set()
    changed = True
    while changed:
        changed = False
        for module, imported in graph.items():
            if module in reaching:
                continue
            if any(name.split(".")[0] in hidden or name in reaching for name in imported):
                reaching.add(module)
                changed = True
    files = []
    for module, path in tests.items():
        rel = path.relative_to(REPO).as_posix()
        if (
            module in reaching
            and path.name.startswith("test_")
            and not rel.startswith(_NOT_HOST)
            and path != SELF
        ):
            files.append(rel)
    return sorted(files)


def _python_without_unix(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python *argv`` from the repository root with the Unix-only modules hidden."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WITHOUT_UNIX), str(REPO)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [sys.executable, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _pytest_without_unix(*args: str) -> subprocess.CompletedProcess[str]:
    return _python_without_unix("-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *args)


@pytest.mark.skipif(
    sys.platform == "win32" or bool(os.environ.get(HIDDEN_ENV)),
    reason="the simulation runs on Unix (Windows runs the suite itself; no simulation inside the simulation)",
)
class TestWithoutUnixModules:
    """The host suite as Windows sees it: no Unix-only standard module can be imported."""

    def test_the_hidden_modules_cannot_be_imported(self) -> None:
        """The simulation is real: every listed module fails to import in the child; the package imports."""
        code = (
            "import importlib, sys\n"
            f"for name in {sorted(_hidden())!r}:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ModuleNotFoundError:\n"
            "        continue\n"
            "    sys.exit(f'{name} imports')\n"
            "import structlog_etw, structlog_etw.backends.user_events, structlog_etw.etw\n"
        )
        run = _python_without_unix("-c", code)
        assert run.returncode == 0, run.stdout + run.stderr

    def test_the_whole_host_suite_collects(self) -> None:
        """``pytest --collect-only tests`` finds no collection error with the Unix-only modules hidden."""
        run = _pytest_without_unix("--collect-only", "tests")
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
        summary = run.stdout.strip().splitlines()[-1]
        assert "collected" in summary and "error" not in summary, run.stdout[-3000:]

    def test_the_tests_that_reach_a_unix_module_pass_or_skip(self) -> None:
        """Every test module that can reach a hidden module runs: passes, or skips for that module."""
        files = unix_reaching_test_files()
        # the test modules that stopped the Windows collection (with tests/kernel's conftest) are among them
        for known in (
            "tests/backends/test_user_events.py",
            "tests/cli/test_hostile.py",
            "tests/read/decode/test_eventheader_hostile.py",
            "tests/perf/test_hostile.py",
            "tests/provider/test_provider_status.py",
            "tests/read/decode/test_tracelogging_hostile.py",
        ):
            assert known in files
        run = _pytest_without_unix(*files)
        assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-3000:]
