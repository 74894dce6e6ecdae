"""The built sdist and wheel: license, metadata, and the wheel working from a fresh venv."""

from __future__ import annotations

import email.parser
import email.policy
import importlib.util
import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from email.message import Message
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _wheel_metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.BytesParser(policy=email.policy.compat32).parsebytes(z.read(name))


def test_the_wheel_carries_the_license_and_says_so(wheel: Path) -> None:
    """The wheel holds LICENSE and py.typed, no tests or docs, and its metadata says MIT with LICENSE."""
    with zipfile.ZipFile(wheel) as z:
        licenses = [n for n in z.namelist() if ".dist-info/licenses/" in n]
        assert [n.rsplit("/", 1)[-1] for n in licenses] == ["LICENSE"]
        assert z.read(licenses[0]) == (ROOT / "LICENSE").read_bytes()
        assert "structlog_etw/py.typed" in z.namelist()
        assert not [n for n in z.namelist() if n.startswith(("tests/", "docs/"))]
    metadata = _wheel_metadata(wheel)
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]


def test_the_sdist_carries_the_license_and_says_so(sdist: Path) -> None:
    """The sdist holds LICENSE, and its PKG-INFO names it as License-File."""
    with tarfile.open(sdist) as t:
        top = t.getnames()[0].split("/")[0]
        license_file = t.extractfile(f"{top}/LICENSE")
        assert license_file is not None
        assert license_file.read() == (ROOT / "LICENSE").read_bytes()
        pkg_info = t.extractfile(f"{top}/PKG-INFO")
        assert pkg_info is not None
        metadata = email.parser.BytesParser(policy=email.policy.compat32).parsebytes(pkg_info.read())
    assert metadata.get_all("License-File") == ["LICENSE"]


def test_the_wheel_metadata_has_the_urls_and_classifiers(wheel: Path) -> None:
    """The wheel's metadata has the four https project URLs, the classifiers and a markdown description."""
    metadata = _wheel_metadata(wheel)
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL") or [])
    assert sorted(urls) == ["Changelog", "Documentation", "Issues", "Source"]
    assert all(u.startswith("https://") for u in urls.values())
    classifiers = metadata.get_all("Classifier") or []
    for classifier in ("Framework :: Pytest", "Typing :: Typed", "Programming Language :: Python :: 3.10"):
        assert classifier in classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert metadata["Description-Content-Type"] == "text/markdown"


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed (no network): its python.

    The wheel goes in with ``pip install --no-deps --no-index``; its dependency structlog comes from
    this environment, through a ``.pth`` line naming the directory structlog is installed in (nox
    installs it in the session's venv, which does not hold structlog-etw itself).
    """
    spec = importlib.util.find_spec("structlog")
    assert spec is not None and spec.origin is not None, "structlog must be installed here"
    structlog_home = Path(spec.origin).parents[1]
    target = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(target)
    bindir = "Scripts" if os.name == "nt" else "bin"
    python = target / bindir / ("python.exe" if os.name == "nt" else "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout.strip()
    Path(purelib, "structlog_from_the_test_env.pth").write_text(f"{structlog_home}\n", encoding="utf-8")
    subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check", wheel],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return python


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def test_the_installed_package_is_the_wheels_not_the_source_tree(installed: Path, tmp_path: Path) -> None:
    """The venv's installed package is imported from the venv, not from the source tree."""
    out = subprocess.run(
        [installed, "-c", "import structlog_etw, sys; print(structlog_etw.__file__); print(sys.prefix)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_clean_env(),
        timeout=600,
    ).stdout.split("\n")
    package, prefix = Path(out[0]).resolve(), Path(out[1]).resolve()
    assert prefix in package.parents, f"{package} is not in the venv {prefix}"
    assert ROOT not in package.parents


def test_the_demo_runs_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    """``python -m structlog_etw demo`` and the ``structlog-etw`` script, run outside the checkout."""
    demo = subprocess.run(
        [installed, "-m", "structlog_etw", "demo"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_clean_env(),
        timeout=120,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "request_started" in demo.stdout, demo.stdout
    # The demo's traceback names the file it ran: the installed copy, not this checkout's.
    assert "demo.py" in demo.stdout
    assert str(ROOT / "structlog_etw") not in demo.stdout
    script = installed.parent / ("structlog-etw.exe" if sys.platform == "win32" else "structlog-etw")
    guid = subprocess.run(
        [script, "guid", "MyCompany.MyService"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_clean_env(),
        timeout=600,
    )
    assert guid.returncode == 0, guid.stdout + guid.stderr
    assert "195e7706-085e-56ca-2ff6-31025e0cf78c" in guid.stdout
