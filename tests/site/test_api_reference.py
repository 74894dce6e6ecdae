"""The API reference documents every public name, with the parameters that exist only in docstrings."""

from __future__ import annotations

import functools
import html
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "structlog_etw"


def _public_modules() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if not any(p.startswith("_") for p in parts) and parts[-1] != "__main__":
            out.append(".".join(parts))
    return out


@functools.cache
def _inventory(site: Path) -> set[str]:
    from sphinx.util.inventory import InventoryFile  # noqa: PLC0415 - installed by nox -s docs

    with (site / "objects.inv").open("rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    return {name for kind, entries in inventory.items() if kind.startswith("py:") for name in entries}


def test_every_public_module_has_a_public_module_directive() -> None:
    """docs/api/ has a public-module directive for each public module, and none for anything else."""
    pages = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs" / "api").glob("*.rst")))
    listed = set(re.findall(r"^\.\. public-module:: (\S+)$", pages, re.M))
    assert sorted(set(_public_modules()) - listed) == [], "add a `.. public-module::` line in docs/api/"
    assert sorted(listed - set(_public_modules())) == []


@pytest.mark.parametrize("module", _public_modules())
def test_every_name_of_all_is_in_the_api_reference(site: Path, module: str) -> None:
    """Each public module and every name of its __all__ is in the built API reference's inventory."""
    documented = _inventory(site)
    names = importlib.import_module(module).__all__
    missing = [name for name in [module, *(f"{module}.{n}" for n in names)] if name not in documented]
    assert missing == []


def _signature(site: Path, page: str, anchor: str) -> str:
    text = (site / page).read_text(encoding="utf-8")
    m = re.search(rf'<dt class="sig[^"]*" id="{re.escape(anchor)}">(.*?)</dt>', text, re.S)
    assert m, f"{anchor} not on {page}"
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1)))


def test_the_renderer_and_the_wrapper_show_their_docstring_only_parameters(site: Path) -> None:
    """The API reference shows EtwRenderer's and make_etw_bound_logger's docstring-only parameters."""
    renderer = _signature(site, "api/structlog_etw.html", "structlog_etw.EtwRenderer")
    for parameter in ("group", "provider", "provider_id", "keywords_by_logger", "passthrough"):
        assert re.search(rf"\b{parameter}:", renderer), (parameter, renderer)
    wrapper = _signature(site, "api/structlog_etw.html", "structlog_etw.make_etw_bound_logger")
    for parameter in ("default_keyword", "group", "provider_id"):
        assert re.search(rf"\b{parameter}:", wrapper), (parameter, wrapper)
