"""tests/project/typing_example.py (checked by ``mypy --strict`` in ``nox -s lint``) covers the public API."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import structlog_etw
import structlog_etw.testing

EXAMPLE = Path(__file__).with_name("typing_example.py")


class TestCoversThePublicApi:
    """A name added to a public module's ``__all__`` without a typed use in the example fails here."""

    @pytest.mark.parametrize("module", [structlog_etw, structlog_etw.testing], ids=lambda m: m.__name__)
    def test_every_public_name_is_used(self, module: object) -> None:
        """Every name in __all__ of structlog_etw and structlog_etw.testing is used in typing_example.py."""
        tree = ast.parse(EXAMPLE.read_text(encoding="utf-8"))
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        missing = sorted(set(module.__all__) - used)  # type: ignore[attr-defined]
        assert missing == []

    def test_example_is_in_the_mypy_files(self) -> None:
        """pyproject's mypy files list tests/project/typing_example.py."""
        pyproject = (EXAMPLE.parents[2] / "pyproject.toml").read_text(encoding="utf-8")
        assert '"tests/project/typing_example.py"' in pyproject
