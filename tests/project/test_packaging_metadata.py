"""The packaging metadata: license, the project's addresses, classifiers, and README links that
work where the README is shown away from the repository (PyPI).

Read from the installed distribution's metadata (the test sessions install the checkout), which
setuptools builds from pyproject.toml; the built sdist and wheel themselves are checked by
tests/packaging/ under ``nox -s build``.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
METADATA = importlib.metadata.metadata("structlog-etw")
URLS = dict(u.split(", ", 1) for u in METADATA.get_all("Project-URL") or [])


def test_the_license_file_is_mit_and_declared() -> None:
    """LICENSE is the MIT text and the metadata declares MIT and that file."""
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert "Permission is hereby granted, free of charge" in text
    assert METADATA["License-Expression"] == "MIT"
    assert METADATA.get_all("License-File") == ["LICENSE"]


def test_the_project_urls_are_the_documentation_changelog_source_and_issues() -> None:
    """The project URLs are Documentation, Changelog, Source and Issues, each under its parent."""
    assert sorted(URLS) == ["Changelog", "Documentation", "Issues", "Source"]
    assert URLS["Issues"].startswith(URLS["Source"])
    assert URLS["Changelog"].startswith(URLS["Documentation"])


def test_the_classifiers_name_every_supported_python_from_requires_python() -> None:
    """The classifiers name every Python minor from Requires-Python on, no gap, plus Pytest and Typed."""
    classifiers = METADATA.get_all("Classifier") or []
    minors = sorted(
        int(m.group(1))
        for c in classifiers
        if (m := re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c))
    )
    lowest = re.fullmatch(r">=3\.(\d+)", METADATA["Requires-Python"])
    assert lowest is not None
    assert minors == list(range(int(lowest.group(1)), minors[-1] + 1)), "one classifier per minor, no gap"
    assert sys.version_info[1] in minors or sys.version_info[1] > minors[-1]
    for classifier in (
        "Framework :: Pytest",
        "Typing :: Typed",
        "Programming Language :: Python :: 3 :: Only",
    ):
        assert classifier in classifiers
    assert [c for c in classifiers if c.startswith("Development Status :: ")]


def _readme_links() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_readme_link_is_absolute_and_under_a_project_url() -> None:
    """PyPI shows the README away from the repository: a relative link there leads nowhere."""
    links = _readme_links()
    assert links
    bases = (URLS["Documentation"], URLS["Source"] + "/", "https://www.structlog.org/")
    assert [link for link in links if not link.startswith(bases)] == []


@pytest.mark.parametrize("link", [link for link in _readme_links() if link.startswith(URLS["Documentation"])])
def test_every_readme_docs_link_names_a_page_of_the_site(link: str) -> None:
    """Every README link into the docs site names an .html page with a docs/*.md source."""
    page = link[len(URLS["Documentation"]) :].split("#", maxsplit=1)[0] or "index.html"
    assert page.endswith(".html"), link
    assert (ROOT / "docs" / page).with_suffix(".md").is_file(), f"{link}: no docs/{page[:-5]}.md"


@pytest.mark.parametrize("link", [link for link in _readme_links() if link.startswith(URLS["Source"] + "/")])
def test_every_readme_source_link_names_a_file_of_the_repository(link: str) -> None:
    """Every README link into the repository names an existing file on main."""
    m = re.fullmatch(re.escape(URLS["Source"]) + r"/(?:blob|tree)/main/(.+)", link)
    assert m, link
    assert (ROOT / m.group(1)).exists(), link
