"""The write side's one code generator (``write/shapes/_generate.py``) and the package layout around it."""

from __future__ import annotations

import ast
import pathlib

import structlog_etw
from structlog_etw.write import shapes
from structlog_etw.write.shapes import _caches, _codec_table, _generate, _layout, _tiers, _walk

PACKAGE = pathlib.Path(structlog_etw.__file__).parent


def _exec_calls() -> list[str]:
    """Every ``exec(...)`` call in the package's modules, as ``path:line``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "exec":
                found.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno}")
    return found


def test_one_exec_in_the_package_in_the_generator() -> None:
    """The package calls ``exec`` once: in ``compile_shape_function``, write/shapes/_generate.py."""
    calls = _exec_calls()
    assert len(calls) == 1, calls
    assert calls[0].startswith("write/shapes/_generate.py:")
    source = pathlib.Path(_generate.__file__).read_text(encoding="utf-8")
    function = next(
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef) and node.name == "compile_shape_function"
    )
    assert function.lineno <= int(calls[0].rpartition(":")[2]) <= (function.end_lineno or 0)


def test_the_package_re_exports_each_roles_names() -> None:
    """Every name of ``write.shapes.__all__`` is the very object its private module defines, and
    each private module's ``__all__`` is re-exported."""
    modules = (_caches, _codec_table, _generate, _layout, _tiers, _walk)
    homes = {name: module for module in modules for name in module.__all__}
    assert set(shapes.__all__) == set(homes)
    for name, module in homes.items():
        assert getattr(shapes, name) is getattr(module, name), name


def test_the_compiled_packer_keeps_its_module_name() -> None:
    """The extension is still ``structlog_etw.write.shapes._speedups`` (setup.py builds that name),
    loaded by the generator's module when it is built."""
    assert _generate.SPEEDUPS is shapes.SPEEDUPS
    if shapes.SPEEDUPS is not None:
        assert shapes.SPEEDUPS.__name__ == "structlog_etw.write.shapes._speedups"
    setup = (pathlib.Path(__file__).parents[3] / "setup.py").read_text(encoding="utf-8")
    assert '"structlog_etw.write.shapes._speedups", ["structlog_etw/write/shapes/_speedups.c"]' in setup


def test_no_function_of_the_write_side_over_100_lines() -> None:
    """No function or method under structlog_etw/write is longer than 100 lines."""
    long = []
    for path in sorted((PACKAGE / "write").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 100:
                    long.append(f"{path.name}:{node.name} ({lines})")
    assert long == []
