"""The release configuration holds together: the Pythons the classifiers name, the wheels
cibuildwheel builds (pyproject.toml), what ``nox -s lint`` checks it against and pins (noxfile),
the release workflow (its pin, its triggers, native runners per architecture, the free-threaded
job on every pull request, trusted publishing on a version tag), and ``nox -s wheels`` among the
sessions CI runs.  (``nox -s lint`` validates the workflow against its schema and prints
cibuildwheel's build identifiers for each platform.)"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own TOML reader before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
RELEASE = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _noxfile(name: str) -> Any:
    """A module-level constant of noxfile.py (a literal: nothing is imported or run)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
                return ast.literal_eval(node.value)
    raise AssertionError(f"noxfile.py has no literal {name}")


def _job(name: str) -> str:
    """The text of one job of release.yml."""
    match = re.search(rf"^  {name}:\n(.*?)(?=^  [\w-]+:\n|\Z)", RELEASE, re.S | re.M)
    assert match, name
    return match.group(1)


def test_the_cibuildwheel_pin_is_one() -> None:
    """The workflow runs the cibuildwheel ``nox -s lint`` checks the configuration with."""
    assert f'CIBUILDWHEEL: "{_noxfile("CIBUILDWHEEL")}"' in RELEASE


def test_the_wheels_built_are_the_pythons_the_classifiers_name() -> None:
    """[tool.cibuildwheel] builds CPython 3.10-3.14 and 3.14t, the tags lint expects; the
    classifiers name exactly those minors and free threading."""
    tags = _noxfile("WHEEL_TAGS")
    assert PYPROJECT["tool"]["cibuildwheel"]["build"] == [f"{t}-*" for t in tags]
    minors = sorted({int(t[3:].rstrip("t")) for t in tags})
    classifiers = PYPROJECT["project"]["classifiers"]
    named = sorted(
        int(m[1])
        for c in classifiers
        if (m := re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c))
    )
    assert named == minors == list(range(10, 15))
    assert any(t.endswith("t") for t in tags)
    assert [c for c in classifiers if c.startswith("Programming Language :: Python :: Free Threading ::")]


def test_every_architecture_is_built_natively() -> None:
    """Each matrix entry builds its runner's own architecture (ARM64 on ARM runners: no emulation),
    and together they cover every architecture pyproject.toml configures."""
    wheels = _job("wheels")
    entries = re.findall(r"\{ os: ([\w.-]+), arch: (\w+) \}", wheels)
    native = {"ubuntu-24.04": "x86_64", "ubuntu-24.04-arm": "aarch64", "macos-15-intel": "x86_64",
              "macos-15": "arm64", "windows-2025": "AMD64", "windows-11-arm": "ARM64"}  # fmt: skip
    assert entries and all(native[os] == arch for os, arch in entries)
    configured = {arch for platform in ("linux", "macos", "windows")
                  for arch in PYPROJECT["tool"]["cibuildwheel"][platform]["archs"]}  # fmt: skip
    assert {arch for _, arch in entries} == configured
    assert "CIBW_ARCHS: ${{ matrix.arch }}" in wheels
    assert "qemu" not in RELEASE.lower()


def test_the_free_threaded_wheel_is_built_and_tested_on_every_pull_request() -> None:
    """The workflow runs on pull requests, and its free-threaded job (cp314t, no condition) builds
    the wheel with cibuildwheel, whose test-command runs the host suite against it."""
    assert re.search(r"^  pull_request:", RELEASE, re.M)
    job = _job("free-threaded")
    assert "CIBW_BUILD: cp314t-manylinux_x86_64" in job and "\n    if:" not in job
    assert "cibuildwheel" in job
    assert ".ci/test_installed.py" in PYPROJECT["tool"]["cibuildwheel"]["test-command"]


def test_publishing_is_trusted_and_only_on_a_version_tag() -> None:
    """The publish job runs on a ``v*`` tag only, with an OIDC token (no stored password), after
    every wheel, the free-threaded one and the sdist; it publishes the sdist and the wheels."""
    assert re.search(r'tags: \["v\*"\]', RELEASE)
    job = _job("publish")
    assert "if: startsWith(github.ref, 'refs/tags/v')" in job
    assert "id-token: write" in job and "pypa/gh-action-pypi-publish" in job
    assert "password" not in job and "secrets." not in RELEASE
    assert "needs: [free-threaded, wheels, sdist]" in job


def test_ci_runs_the_wheels_session_on_every_python_here() -> None:
    """``nox -s wheels`` is a default session (so ``.ci/run`` runs it) over CPython 3.10-3.13, the
    whole suite on the oldest and newest."""
    text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert re.search(r'nox\.options\.sessions = \[[^\]]*"wheels"', text)
    assert _noxfile("WHEEL_PYTHONS") == ["3.10", "3.11", "3.12", "3.13"]
    assert _noxfile("WHEEL_FULL") == ("3.10", "3.13")
    assert ".github/workflows/release.yml" in _noxfile("WORKFLOWS")
