"""The package's folder rules, read from its source: write and read apart, privates stay private.

docs/architecture.md draws the folders and their rules; these tests hold the code to that drawing,
so a change that breaks a rule fails here rather than being noticed later.  Every import counts, also one made
inside a function (lazy imports are still dependencies).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.unix import missing_by_design

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "structlog_etw"
PKG = "structlog_etw"

#: The folder rules below the top: each folder of the package and the other folders its modules may
#: import.  write/ is imported by none of formats/, read/, perf/, etw/, backends/, _util/.
_BELOW_THE_TOP: dict[str, set[str]] = {
    "_util": set(),
    "formats": {"_util"},
    "backends": {"formats", "_util"},
    "read": {"formats", "_util"},
    "write": {"formats", "_util"},
    "perf": {"read", "backends", "formats", "_util"},
    "etw": {"read", "backends", "formats", "_util"},
    "provider": {"write", "backends", "formats", "_util"},
    "context": {"provider", "write", "backends", "formats", "_util"},
    "otel": {"context", "provider", "write", "backends", "formats", "_util"},
    "surface": {"context", "otel", "provider", "write", "backends", "formats", "_util"},
}
#: The folder rules: those above, then the two on top.  ``""`` is the root modules (``__init__``,
#: ``testing``, ``pytest_plugin``, ``_moved``): every folder above.  ``cli`` (with ``__main__``):
#: every other folder, the root's included; only cli/ imports cli/.  docs/architecture.md draws
#: this table.
FOLDER_RULES: dict[str, set[str]] = {
    **_BELOW_THE_TOP,
    "": set(_BELOW_THE_TOP),
    "cli": {"", *_BELOW_THE_TOP},
}
#: Folders whose modules import only the standard library (and the folders FOLDER_RULES allows).
STDLIB_ONLY = {"_util", "formats"}
#: The modules that may import structlog: the structlog surface, the root's public modules, the CLI.
STRUCTLOG_FOLDERS = {"surface", "", "cli"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _folder(module: str) -> str:
    """The folder of a module (its first dotted part), ``""`` for the root modules."""
    if module == "__main__":
        return "cli"
    first = module.split(".", maxsplit=1)[0]
    return first if (PACKAGE / first).is_dir() and first else ""


@dataclass(frozen=True)
class Import:
    """One import statement of a package module."""

    module: str  # the importing module (dotted, below the package)
    target: str  # the imported module: dotted below the package, or an absolute external name
    internal: bool
    names: tuple[str, ...]
    line: int
    type_only: bool  # under ``if TYPE_CHECKING:``: for annotations, never run


def _modules() -> dict[str, ast.Module]:
    return {
        _module_name(p): ast.parse(p.read_text(encoding="utf-8"), str(p))
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if module else []
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    parts = base + (target.split(".") if target else [])
    return ".".join(parts)


def _type_only_lines(tree: ast.Module) -> set[int]:
    """Lines of the statements under ``if TYPE_CHECKING:``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


def _imports(modules: dict[str, ast.Module]) -> Iterator[Import]:
    packages = {m for m in modules if (PACKAGE / m.replace(".", "/") / "__init__.py").exists() or m == ""}
    for module, tree in modules.items():
        typed = _type_only_lines(tree)
        for node in ast.walk(tree):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.name
                    if name == PKG or name.startswith(PKG + "."):
                        yield Import(module, name[len(PKG) + 1 :], True, (), line, line in typed)
                    else:
                        yield Import(module, name, False, (), line, line in typed)
            elif isinstance(node, ast.ImportFrom):
                names = tuple(a.name for a in node.names)
                if node.level:
                    target = _resolve_relative(module, module in packages, node.level, node.module)
                    yield Import(module, target, True, names, line, line in typed)
                elif node.module and (node.module == PKG or node.module.startswith(PKG + ".")):
                    yield Import(module, node.module[len(PKG) + 1 :], True, names, line, line in typed)
                elif node.module:
                    yield Import(module, node.module, False, names, line, line in typed)


def _targets(imp: Import, modules: dict[str, ast.Module]) -> list[str]:
    """The package modules an import loads (``from . import x`` loads the module ``x`` too)."""
    if not imp.names:
        return [imp.target]
    out = []
    for name in imp.names:
        sub = f"{imp.target}.{name}" if imp.target else name
        out.append(sub if sub in modules else imp.target)
    return out


MODULES = _modules()
IMPORTS = list(_imports(MODULES))
PACKAGES = {m for m in MODULES if (PACKAGE / m.replace(".", "/") / "__init__.py").exists() or m == ""}


class TestFolderRules:
    """Data flows one way (event dict -> typed fields -> encoder -> backend) and the folders say so."""

    def test_every_folder_has_a_rule(self) -> None:
        """Every folder of the package is in FOLDER_RULES, and every rule names a folder."""
        folders = {_folder(m) for m in MODULES}
        assert folders == set(FOLDER_RULES)
        assert set().union(*FOLDER_RULES.values()) <= folders

    def test_no_module_imports_a_folder_its_rule_forbids(self) -> None:
        """No import, lazy and type-only ones included, goes to a folder the rules forbid (an
        annotation naming another folder's class is a dependency of the interface, and draws the
        same arrow)."""
        offenders = []
        for imp in IMPORTS:
            if not imp.internal:
                continue
            here = _folder(imp.module)
            for target in _targets(imp, MODULES):
                there = _folder(target)
                if target in MODULES and there != here and there not in FOLDER_RULES[here]:
                    offenders.append(f"{imp.module}:{imp.line} imports {target or PKG}")
        assert offenders == []

    def test_the_write_side_is_imported_by_no_reader_or_shared_folder(self) -> None:
        """write/ is in no rule of formats/, read/, perf/, etw/, backends/, _util/; only cli/ imports cli/."""
        for folder in ("formats", "read", "perf", "etw", "backends", "_util"):
            assert "write" not in FOLDER_RULES[folder], folder
        assert [f for f, allowed in FOLDER_RULES.items() if "cli" in allowed] == []

    def test_stdlib_only_folders_import_only_the_standard_library(self) -> None:
        """formats/ and _util/ import nothing outside the standard library."""
        offenders = [
            f"{imp.module}:{imp.line} imports {imp.target}"
            for imp in IMPORTS
            if _folder(imp.module) in STDLIB_ONLY
            and not imp.internal
            and imp.target.split(".")[0] not in sys.stdlib_module_names
        ]
        assert offenders == []

    def test_the_folder_rules_have_no_cycle(self) -> None:
        """The folders stand in floors: no folder may import one that may import it back."""
        allowed = {folder: rule - {folder} for folder, rule in FOLDER_RULES.items()}
        placed: list[str] = []
        while len(placed) < len(allowed):
            ready = sorted(f for f, rule in allowed.items() if f not in placed and rule <= set(placed))
            assert ready, f"a circle among {sorted(set(allowed) - set(placed))}"
            placed.extend(ready)

    def test_the_import_graph_has_no_cycle(self) -> None:
        """The run-time import graph between modules (package-to-submodule edges aside) has no cycle."""
        graph: dict[str, set[str]] = {m: set() for m in MODULES}
        for imp in IMPORTS:
            if imp.internal and not imp.type_only:  # a type-only import is no dependency at run time
                graph[imp.module].update(
                    t for t in _targets(imp, MODULES) if t in MODULES and t != imp.module
                )
        # A package imports its submodules and they import the package's siblings: that is how Python
        # packages work, not a cycle of logic.  Count only edges between non-package modules and
        # from a package's modules to other packages.
        for pkg in PACKAGES:
            graph[pkg] = {t for t in graph[pkg] if not (t.startswith(pkg + ".") or pkg == "")}
        state: dict[str, int] = {}
        stack: list[str] = []

        def visit(node: str) -> None:
            state[node] = 1
            stack.append(node)
            for nxt in sorted(graph[node]):
                if state.get(nxt) == 1:
                    cycle = [*stack[stack.index(nxt) :], nxt]
                    pytest.fail("import cycle: " + " -> ".join(m or PKG for m in cycle))
                if nxt not in state:
                    visit(nxt)
            stack.pop()
            state[node] = 2

        for module in sorted(graph):
            if module not in state:
                visit(module)


ARCHITECTURE_PAGE = ROOT / "docs" / "architecture.md"


class TestTheArchitecturePage:
    """docs/architecture.md draws the folder rules this file enforces, and every module."""

    def test_the_page_folder_rules_are_the_enforced_ones(self) -> None:
        """Each row of the page's folder-rules table names the folders FOLDER_RULES allows that folder."""
        text = ARCHITECTURE_PAGE.read_text(encoding="utf-8")
        table = text.split("\n## Folder rules\n", 1)[1].split("\n#", 1)[0]
        drawn = {}
        for line in table.splitlines():
            cells = line.split("|")
            if len(cells) < 4 or not cells[1].strip().startswith("`"):
                continue
            folder = re.findall(r"`([^`]+)`", cells[1])[0]
            allowed = [name for name in re.findall(r"`([^`]+)`", cells[2]) if name.endswith("/")]
            drawn[_page_folder(folder)] = {_page_folder(name) for name in allowed}
        assert drawn == FOLDER_RULES

    def test_every_module_is_on_the_page(self) -> None:
        """The page's module tables name every module file (a package's ``__init__.py`` aside)."""
        text = ARCHITECTURE_PAGE.read_text(encoding="utf-8")
        tables = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
        first_cells = "\n".join(line.split("|")[1] for line in tables.splitlines() if line.startswith("|"))
        named = set(re.findall(r"`([\w/]+\.py)`", first_cells))
        files = [p.relative_to(PACKAGE).as_posix() for p in sorted(PACKAGE.rglob("*.py"))]
        assert [f for f in files if f not in named and not f.endswith("/__init__.py")] == []


def _page_folder(name: str) -> str:
    """A folder as the page spells it (``write/``; the root modules are ``structlog_etw/``)."""
    name = name.rstrip("/")
    return "" if name == PKG else name


class TestStructlogBoundary:
    """Nothing below the structlog surface imports structlog; the CLI sits on top and nothing imports it."""

    def test_only_the_structlog_surface_the_root_and_the_cli_import_structlog(self) -> None:
        """Only surface/, the root's public modules and the CLI import structlog."""
        offenders = [
            f"{imp.module}:{imp.line}"
            for imp in IMPORTS
            if not imp.internal
            and (imp.target == "structlog" or imp.target.startswith("structlog."))
            and _folder(imp.module) not in STRUCTLOG_FOLDERS
        ]
        assert offenders == []

    def test_the_console_script_is_the_cli(self) -> None:
        """pyproject's structlog-etw console script is structlog_etw.cli:main."""
        text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
        assert 'structlog-etw = "structlog_etw.cli:main"' in text


#: The read side: read/, perf/, etw/ and the commands that show what they read.  None of them may
#: load the write side, directly or through what it imports.
READ_SIDE: list[str] = [
    "read",
    "read.*",
    "perf",
    "perf.*",
    "etw",
    "etw.*",
    "cli.decode",
    "cli.decode_etl",
    "cli.listen",
    "cli.output",
]
WRITE_SIDE = {m for m in MODULES if _folder(m) == "write"}


def _matches(module: str, patterns: list[str]) -> bool:
    return any(module.startswith(p[:-1]) if p.endswith(".*") else module == p for p in patterns)


def _run_time_graph() -> dict[str, set[str]]:
    """What importing each module loads: every import but type-only ones (also those inside
    functions), and the packages a submodule import runs first (``a.b.c`` runs ``a`` and ``a.b``)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if not imp.internal or imp.type_only:
            continue
        for target in _targets(imp, MODULES):
            if target not in MODULES:
                continue
            parts = target.split(".")
            graph[imp.module].update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    for module, targets in graph.items():
        targets.discard(module)
    return graph


def _chain_to(graph: dict[str, set[str]], start: str, goal: set[str]) -> list[str] | None:
    """The shortest import chain from ``start`` to a module of ``goal`` (None: there is none)."""
    parent: dict[str, str] = {}
    queue = [start]
    seen = {start}
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node]):
            if nxt in seen:
                continue
            seen.add(nxt)
            parent[nxt] = node
            if nxt in goal:
                chain = [nxt]
                while chain[-1] != start:
                    chain.append(parent[chain[-1]])
                return chain[::-1]
            queue.append(nxt)
    return None


#: Fresh interpreters: importing these loads nothing of write/ (the ``python -X importtime``
#: check), and ``forbidden`` prefixes name what else each must not load.
_FRESH_IMPORTS: dict[str, tuple[str, ...]] = {
    "structlog_etw.read.decode.eventheader": (),
    "structlog_etw.read.decode.tracelogging": (),
    "structlog_etw.read.writers.perf_json": (),
    "structlog_etw.etw.consumer": ("structlog_etw.perf",),  # the read loop lives in read.live, not perf
    "structlog_etw.etw.etl": ("structlog_etw.perf",),
    "structlog_etw.cli.decode": (),
    "structlog_etw.cli.listen": (),
    "structlog_etw.cli.decode_etl": (),
    "structlog_etw.perf": (),
}

_LOADED = """
import sys
import {module}
print("\\n".join(sorted(m for m in sys.modules if m == "structlog_etw" or m.startswith("structlog_etw."))))
"""


def _importtime_modules(stderr: str) -> set[str]:
    """Module names of ``-X importtime`` lines (``import time: self | cumulative | name``)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


class TestReadSide:
    """The read side (read/, perf/, etw/, decode, listen) never loads write/: reading never pays for
    writing."""

    def test_every_read_side_entry_names_a_module(self) -> None:
        """Each READ_SIDE entry matches a module, so the list cannot go stale silently."""
        assert [p for p in READ_SIDE if not any(_matches(m, [p]) for m in MODULES)] == []
        assert {"write.eventheader._encoder", "write.tracelogging._encoder", "write.fields"} <= WRITE_SIDE

    def test_no_read_side_module_loads_the_write_side(self) -> None:
        """No read-side module imports a module of write/, directly or through any module it imports."""
        graph = _run_time_graph()
        offenders = []
        for module in sorted(MODULES):
            if _matches(module, READ_SIDE):
                chain = _chain_to(graph, module, WRITE_SIDE)
                if chain is not None:
                    offenders.append(" -> ".join(m or PKG for m in chain))
        assert offenders == []

    def test_the_rule_sees_a_write_import(self) -> None:
        """The chain search finds write/ behind a package import (the rule can fail)."""
        graph = {"cli.decode": {"x"}, "x": {"write"}, "write": {"write.fields"}, "write.fields": set()}
        assert _chain_to(graph, "cli.decode", WRITE_SIDE) == ["cli.decode", "x", "write"]

    @pytest.mark.parametrize("module", sorted(_FRESH_IMPORTS))
    def test_a_fresh_import_loads_no_write_module(self, module: str) -> None:
        """``python -X importtime -c "import M"`` loads nothing of write/ (nor what M must not load)."""
        loaded = _fresh_import(module)
        assert module in loaded
        forbidden = (f"{PKG}.write",) + _FRESH_IMPORTS[module]
        assert sorted(m for m in loaded if m.startswith(forbidden)) == []

    def test_the_fresh_import_check_sees_a_write_module(self) -> None:
        """The same check on the TraceLogging encoder finds write/ (the check can fail)."""
        assert f"{PKG}.write.tracelogging._encoder" in _fresh_import(f"{PKG}.write.tracelogging")


def _fresh_import(module: str) -> set[str]:
    """Our modules a fresh ``python -X importtime -c "import module"`` loads: ``sys.modules`` after the
    import, checked against the importtime lines (both must name the same modules)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _LOADED.format(module=module)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = set(proc.stdout.split())
    timed = {m for m in _importtime_modules(proc.stderr) if m == PKG or m.startswith(PKG + ".")}
    assert loaded == timed, loaded ^ timed
    return loaded


def _own_private_attributes(tree: ast.Module) -> set[str]:
    """``_names`` a module defines for its own objects: self/cls attributes, slots, class attributes."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr.startswith("_"):
            own.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                targets: list[ast.expr] = []
                if isinstance(stmt, ast.Assign):
                    targets = list(stmt.targets)
                elif isinstance(stmt, ast.AnnAssign):
                    targets = [stmt.target]
                elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    own.add(stmt.name)
                for t in targets:
                    if isinstance(t, ast.Name):
                        own.add(t.id)
                    if isinstance(t, ast.Name) and t.id == "__slots__" and isinstance(stmt, ast.Assign):
                        for elt in getattr(stmt.value, "elts", []):
                            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                                own.add(elt.value)
    return own


#: Private names of structlog that structlog-etw reads, and the one module allowed to read them.
STRUCTLOG_PRIVATE_READERS = {"_contextvars"}
#: Underscore names that are documented API of what they belong to: structlog's ``BoundLoggerBase``
#: members for subclasses (``_context``, ``_logger``, ``_process_event``, ``_proxy_to_logger``;
#: the wrapper class subclasses it, as structlog's own stdlib ``BoundLogger`` does) and
#: ``sys._getframe``.
DOCUMENTED_UNDERSCORE_API = {"_context", "_logger", "_process_event", "_proxy_to_logger", "_getframe"}


class TestPrivacy:
    """No module reads another module's (or another module's objects') private names."""

    def test_no_private_name_is_imported_from_another_module(self) -> None:
        """No module imports another module's private name (private modules as modules aside)."""
        offenders = []
        for imp in IMPORTS:
            for name in imp.names:
                if name.startswith("_") and not name.startswith("__"):
                    sub = f"{imp.target}.{name}" if imp.target else name
                    if imp.internal and sub in MODULES:
                        continue  # a private module, imported as a module: allowed
                    offenders.append(f"{imp.module}:{imp.line} imports {name} from {imp.target or PKG}")
        assert offenders == []

    def test_no_private_attribute_of_another_module_is_read(self) -> None:
        """No module reads a private attribute it does not define, documented underscore API aside."""
        offenders = []
        for module, tree in MODULES.items():
            own = _own_private_attributes(tree)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Attribute):
                    continue
                attr = node.attr
                if not attr.startswith("_") or attr.startswith("__") or attr in own:
                    continue
                if attr in DOCUMENTED_UNDERSCORE_API:
                    continue
                if module in STRUCTLOG_PRIVATE_READERS:
                    continue
                offenders.append(f"{module}:{node.lineno} reads .{attr}")
        assert offenders == []


_PY_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def _doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


class TestDocs:
    """Docs and the README show only public modules."""

    def test_no_doc_example_imports_a_private_module(self) -> None:
        """No Python example in the README or docs/ names a private structlog_etw module."""
        offenders = []
        for path in _doc_files():
            for block in _PY_BLOCK.findall(path.read_text(encoding="utf-8")):
                for line in block.splitlines():
                    if re.search(r"\bstructlog_etw(\.\w+)*\._\w", line):
                        offenders.append(f"{path.relative_to(ROOT)}: {line.strip()}")
        assert offenders == []


def _public_modules() -> list[str]:
    """Dotted names of the public modules: no path component starts with ``_`` (``__init__`` aside)."""
    out = []
    for module in MODULES:
        parts = module.split(".") if module else []
        if any(p.startswith("_") for p in parts):
            continue
        out.append(f"{PKG}.{module}" if module else PKG)
    return sorted(out)


class TestPublicModules:
    """Every public module says what it is, lists its API in ``__all__``, and documents every name of it."""

    @pytest.mark.parametrize("name", _public_modules())
    def test_module_docstring_all_and_a_docstring_on_every_public_name(self, name: str) -> None:
        """Every public module has a docstring, an __all__, and a docstring on every public name in it."""
        import importlib  # noqa: PLC0415
        import inspect  # noqa: PLC0415
        import sys  # noqa: PLC0415

        linux = sys.platform.startswith("linux") and not missing_by_design("fcntl")
        if name.endswith("perf_event_open") and not linux:
            pytest.skip("perf_event_open(2) exists on Linux only")
        module = importlib.import_module(name)
        assert module.__doc__, f"{name} has no docstring"
        names = getattr(module, "__all__", None)
        assert names is not None, f"{name} has no __all__"
        undocumented = []
        for attr in names:
            obj = getattr(module, attr)  # every name of __all__ exists
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue  # constants and aliases carry #: comments
            if not inspect.getdoc(obj):
                undocumented.append(attr)
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if member.startswith("_"):
                        continue
                    doc = value.__doc__ if isinstance(value, property) else inspect.getdoc(value)
                    if (inspect.isfunction(value) or isinstance(value, property)) and not doc:
                        undocumented.append(f"{attr}.{member}")
        assert undocumented == [], f"{name}: no docstring on {undocumented}"


TESTS = ROOT / "tests"

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _test_functions(tree: ast.Module) -> Iterator[tuple[str, _Function]]:
    """What pytest collects from a test module: ``test*`` functions, also in ``Test*`` classes (nested too).

    Statements that only wrap definitions (``if``, ``try``, ``with``) are looked into; functions
    inside functions and methods of other classes are not tests.
    """

    def walk(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, _Function]]:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("test"):
                    yield prefix + node.name, node
            elif isinstance(node, ast.ClassDef):
                if node.name.startswith("Test"):
                    yield from walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.If | ast.With | ast.Try):
                for part in ("body", "orelse", "finalbody"):
                    yield from walk(getattr(node, part, []), prefix)
                for handler in getattr(node, "handlers", []):
                    yield from walk(handler.body, prefix)

    yield from walk(tree.body, "")


def _undocumented_tests(source: str, where: str) -> list[str]:
    """``where:line name`` of every test function of ``source`` without a (non-blank) docstring."""
    return [
        f"{where}:{fn.lineno} {name}"
        for name, fn in _test_functions(ast.parse(source))
        if not (ast.get_docstring(fn) or "").strip()
    ]


def _test_files() -> list[Path]:
    """Every file pytest's default ``python_files`` (``test_*.py``, ``*_test.py``) picks under tests/."""
    return sorted({*TESTS.rglob("test_*.py"), *TESTS.rglob("*_test.py")})


class TestEveryTestSaysWhatItProves:
    """Every test function under tests/ has a docstring saying what it proves, as structlog's tests do."""

    def test_every_test_function_has_a_docstring(self) -> None:
        """No test function in any test file under tests/ (subdirectories included) lacks a docstring."""
        files = _test_files()
        assert len(files) > 100, files  # the whole suite was looked at, not an empty glob
        offenders = [
            offender
            for path in files
            for offender in _undocumented_tests(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
        ]
        assert offenders == [], f"{len(offenders)} test functions have no docstring:\n" + "\n".join(offenders)

    def test_the_check_finds_exactly_the_tests_pytest_would_collect_without_one(self) -> None:
        """The check names undocumented test functions and Test-class methods, and nothing else."""
        source = '''
import sys

def test_bare(): pass

def test_documented():
    """It works."""

async def test_async_bare(): pass

def test_blank_docstring():
    """   """

def helper_without_docstring(): pass

if sys.platform == "linux":
    def test_only_on_linux(): pass

class TestGroup:
    """A group."""

    def test_method_bare(self): pass

    def test_method_documented(self):
        """It works too."""

    def helper(self): pass

    class TestInner:
        def test_inner_bare(self): pass

class Helper:
    def test_not_collected(self): pass

def test_outer():
    """Documented."""

    def test_nested_is_not_a_test(): pass
'''
        assert _undocumented_tests(source, "t.py") == [
            "t.py:4 test_bare",
            "t.py:9 test_async_bare",
            "t.py:11 test_blank_docstring",
            "t.py:17 test_only_on_linux",
            "t.py:22 TestGroup.test_method_bare",
            "t.py:30 TestGroup.TestInner.test_inner_bare",
        ]
