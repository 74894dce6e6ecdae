"""The package's layering, read from its source: imports only go down, privates stay private.

docs/architecture.md draws the layers; these tests hold the code to that drawing, so a change that
breaks a rule fails here rather than being noticed later.  Every import counts, also one made
inside a function (lazy imports are still dependencies).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.unix import missing_by_design

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "structlog_etw"
PKG = "structlog_etw"

#: Layer of every module (by dotted name below the package, "" for the package itself).  A module
#: may import modules of its own layer or below.  Subpackages are listed by their modules.
LAYERS: dict[str, int] = {}
_LAYER_TABLE: list[tuple[int, list[str]]] = [
    # 1: format-neutral data and the two formats' numbers (standard library only)
    (
        1,
        [
            "fields",
            "decoded",
            "eventheader.spec",
            "tracelogging.spec",
            "_size_policy",
            "_shapes",
            "_levels",
            "_header",
            "_counters",
        ],
    ),
    # 2: encoders and decoders
    (2, ["eventheader", "eventheader.*", "tracelogging", "tracelogging.*"]),
    # 3: where events go, and reading what perf and the kernel recorded
    # (etw: the ETW session consumer; it decodes with tracelogging and yields perf.listener's
    # ListenedEvent, so listen prints Windows and Linux events alike)
    (3, ["backends", "backends.*", "perf", "perf.*", "etw", "etw.*"]),
    # 4: the provider, the OS backend choice and status it reports, the process registry
    (4, ["_platform", "_registry", "_provider"]),
    # 5: structlog-free surface helpers
    (5, ["_resolve", "_activity", "_otel", "_common_schema", "otel"]),
    # 6: the structlog surface
    (6, ["_contextvars", "_renderer", "_wrapper", "_stdlib", "testing", "pytest_plugin", ""]),
    # 7: the command line, on top of everything
    (7, ["cli", "cli.*", "__main__"]),
]

#: The only modules that may import structlog (the structlog surface, and the CLI on top of it).
STRUCTLOG_IMPORTERS = {"", "_contextvars", "_renderer", "_wrapper", "_stdlib", "testing"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    for layer, patterns in _LAYER_TABLE:
        for pattern in patterns:
            if pattern.endswith(".*"):
                if module.startswith(pattern[:-1]):
                    return layer
            elif module == pattern:
                return layer
    raise AssertionError(f"module {module!r} has no layer in tests/test_architecture.py: add it")


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


class TestLayers:
    """Data flows one way: event dict -> typed fields -> encoder -> backend; imports only go down."""

    def test_every_module_has_a_layer(self) -> None:
        for module in MODULES:
            _layer(module)

    def test_no_module_imports_a_higher_layer(self) -> None:
        upward = []
        for imp in IMPORTS:
            if not imp.internal:
                continue
            for target in _targets(imp, MODULES):
                if target in MODULES and _layer(target) > _layer(imp.module):
                    upward.append(f"{imp.module}:{imp.line} imports {target or PKG} (layer {_layer(target)})")
        assert upward == []

    def test_the_import_graph_has_no_cycle(self) -> None:
        graph: dict[str, set[str]] = {m: set() for m in MODULES}
        for imp in IMPORTS:
            if imp.internal and not imp.type_only:  # a type-only import is no dependency at run time
                graph[imp.module].update(
                    t for t in _targets(imp, MODULES) if t in MODULES and t != imp.module
                )
        # A package imports its submodules and they import the package's siblings: that is how Python
        # packages work, not a cycle of logic.  Count only edges between non-package modules and
        # from a package's modules to other packages.
        packages = {m for m in MODULES if (PACKAGE / m.replace(".", "/") / "__init__.py").exists() or m == ""}
        for pkg in packages:
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


class TestStructlogBoundary:
    """Nothing below the structlog surface imports structlog; the CLI sits on top and nothing imports it."""

    def test_only_the_structlog_surface_and_the_cli_import_structlog(self) -> None:
        offenders = [
            f"{imp.module}:{imp.line}"
            for imp in IMPORTS
            if not imp.internal
            and (imp.target == "structlog" or imp.target.startswith("structlog."))
            and imp.module not in STRUCTLOG_IMPORTERS
            and _layer(imp.module) < 7
        ]
        assert offenders == []

    def test_nothing_imports_the_cli(self) -> None:
        offenders = [
            f"{imp.module}:{imp.line}"
            for imp in IMPORTS
            if imp.internal
            and any(t == "cli" or t.startswith("cli.") for t in _targets(imp, MODULES))
            and not (imp.module in {"__main__", "cli"} or imp.module.startswith("cli."))
        ]
        assert offenders == []

    def test_the_console_script_is_the_cli(self) -> None:
        text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
        assert 'structlog-etw = "structlog_etw.cli:main"' in text


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
#: members for subclasses (``_context``, ``_logger``, ``_proxy_to_logger``; the wrapper class
#: subclasses it, as structlog's own stdlib ``BoundLogger`` does) and ``sys._getframe``.
DOCUMENTED_UNDERSCORE_API = {"_context", "_logger", "_proxy_to_logger", "_getframe"}


class TestPrivacy:
    """No module reads another module's (or another module's objects') private names."""

    def test_no_private_name_is_imported_from_another_module(self) -> None:
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
