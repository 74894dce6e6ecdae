"""Sphinx configuration of the documentation site (``nox -s docs`` builds it into ``docs/_build/html``).

The stack is structlog's: Sphinx, MyST (the pages stay Markdown that reads well on GitHub too),
Furo, and autodoc + napoleon for the API reference, generated from the docstrings of every name in
the ``__all__`` of every public module (``docs/api/``).  The build runs nitpicky with warnings as
errors, so every cross-reference must resolve.  Choices and how to add a page: DEVELOPERS.md,
"The documentation site".
"""

from __future__ import annotations

import importlib.metadata
import inspect
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.ext import napoleon

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# autodoc imports the package: the checkout's, also when it is not installed.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

try:
    _METADATA = importlib.metadata.metadata("structlog-etw")
except importlib.metadata.PackageNotFoundError as exc:
    raise RuntimeError("install the package first (pip install -e .); nox -s docs does") from exc
#: The project's public addresses: [project.urls] of pyproject.toml is the one place they are set.
URLS: dict[str, str] = dict(u.split(", ", 1) for u in _METADATA.get_all("Project-URL") or [])

project = "structlog-etw"
author = "structlog-etw developers"
copyright = "structlog-etw developers"
release = _METADATA["Version"]
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "public_api",  # docs/_ext/public_api.py: the public-module directive of the API pages
]

root_doc = "index"
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = [
    "_build",
    # GitHub's index of the Markdown pages (what a reader browsing docs/ on GitHub sees); the site's
    # index is index.md with its toctrees.
    "README.md",
]

# -- MyST ------------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
# The pages link to headings GitHub-style (`windows.md#limits-on-windows-size-policy`).
myst_heading_anchors = 4

# -- autodoc ---------------------------------------------------------------------------------------
autodoc_default_options = {
    "members": True,
    "undoc-members": True,
    "show-inheritance": True,
    "member-order": "bysource",
}
autodoc_typehints = "signature"
# Full names in the annotations Sphinx parses ("~pkg.Name" inside "dict[...]" does not parse); the
# rendered text still shows the short names.
autodoc_typehints_format = "fully-qualified"
python_use_unqualified_type_names = True
autodoc_preserve_defaults = False
autoclass_content = "class"
#: Google-style sections (``Args:``, ``Raises:``) of functions and classes, through napoleon's
#: documented stand-alone API; not on constants and attributes, whose ``#:`` comments often start
#: with "Some words: ..." that napoleon would read as "type: description".
NAPOLEON = napoleon.Config(
    napoleon_google_docstring=True, napoleon_numpy_docstring=False, napoleon_use_rtype=False
)


def _google_sections(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if what in ("attribute", "data", "property"):
        # A constant without a ``#:`` comment: autodoc falls back to its type's docstring
        # ("int([x]) -> integer ..."), which says nothing about the constant.
        type_doc = inspect.getdoc(type(obj))
        if type_doc and "\n".join(lines).strip() == type_doc.strip():
            lines[:] = []
        return
    lines[:] = napoleon.GoogleDocstring(lines, NAPOLEON, app, what, name, obj, options).lines()


# -- cross-references ------------------------------------------------------------------------------
nitpicky = True
# The inventories of Python's and structlog's docs are shipped in docs/_inventories/ (Sphinx's plain
# inventory format, version 1: one "name type page" line per object the docstrings name), so the
# build needs no network and gives the same result everywhere; a reference to a name missing there
# fails the build and the name is added in one line.
intersphinx_mapping = {
    "python": ("https://docs.python.org/3/", str(DOCS / "_inventories" / "python.txt")),
    "structlog": ("https://www.structlog.org/en/stable/", str(DOCS / "_inventories" / "structlog.txt")),
}

# -- HTML ------------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"structlog-etw {release}"
html_static_path: list[str] = []
html_theme_options = {
    "source_repository": URLS["Source"] + "/",
    "source_branch": "main",
    "source_directory": "docs/",
}


def _no_object_base(app: Sphinx, name: str, obj: Any, options: Any, bases: list[type]) -> None:
    """No "Bases: object" line: only bases that say something (an enum, a protocol, a subclass)."""
    if bases == [object]:
        bases.clear()


def _drop_empty_bases(app: Sphinx, doctree: nodes.document) -> None:
    # Sphinx 9 still writes "Bases:" when the list is empty.
    for paragraph in list(doctree.findall(nodes.paragraph)):
        if paragraph.astext().strip() == "Bases:" and paragraph.parent is not None:
            paragraph.parent.remove(paragraph)


def setup(app: Sphinx) -> None:
    """This site's own hooks."""
    app.connect("autodoc-process-docstring", _google_sections)
    app.connect("autodoc-process-bases", _no_object_base)
    app.connect("doctree-read", _drop_empty_bases)
