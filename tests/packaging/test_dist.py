"""The built sdist and wheel: license, metadata, contents, the compiled module, and the wheel
working from a fresh venv."""

from __future__ import annotations

import email.parser
import email.policy
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from email.message import Message
from pathlib import Path

import pytest

from tests.helpers.shared_data import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
#: The optional compiled accelerator (setup.py), as a file of the wheel: ``_speedups.<tag>.so``/``.pyd``.
SPEEDUPS = re.compile(r"structlog_etw/write/shapes/_speedups\.[^/]+\.(so|pyd)")
#: Its C source, which the sdist carries and the wheel does not.
SPEEDUPS_SOURCE = "structlog_etw/write/shapes/_speedups.c"


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


def _wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def _sdist_names(sdist: Path) -> set[str]:
    """The sdist's files, relative to its top directory."""
    with tarfile.open(sdist) as t:
        return {m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile() and "/" in m.name}


def _compiled(names: list[str]) -> list[str]:
    return [n for n in names if SPEEDUPS.fullmatch(n)]


class TestContents:
    """What the wheel and the sdist hold, file by file, against the checkout."""

    def test_the_wheel_holds_the_package_modules_py_typed_and_nothing_else(self, wheel: Path) -> None:
        """The wheel's ``structlog_etw/`` is every ``.py`` of the checkout's package and subpackages,
        ``py.typed`` and at most the compiled ``_speedups``: not its C source, nothing more."""
        package = [n for n in _wheel_names(wheel) if n.startswith("structlog_etw/")]
        expected = {p.relative_to(ROOT).as_posix() for p in (ROOT / "structlog_etw").rglob("*.py")}
        assert set(package) - set(_compiled(package)) == expected | {"structlog_etw/py.typed"}
        assert len(_compiled(package)) <= 1, _compiled(package)
        assert SPEEDUPS_SOURCE not in package

    def test_the_sdist_holds_every_tracked_file_and_no_built_one(self, sdist: Path) -> None:
        """The sdist holds every file ``git ls-files`` lists (the C source, tests, docs, CI scripts;
        MANIFEST.in), and no compiled module, bytecode or cache; what else it holds is setuptools'
        own (PKG-INFO, setup.cfg, the egg-info)."""
        git = shutil.which("git")
        if git is None or not (ROOT / ".git").exists():
            skip_or_fail("git or the checkout's .git not found: the tracked files are unknown")
        tracked = subprocess.run(
            [git, "ls-files", "-z"], check=True, capture_output=True, text=True, cwd=ROOT, timeout=120
        ).stdout.split("\0")
        names = _sdist_names(sdist)
        assert SPEEDUPS_SOURCE in names
        assert sorted({n for n in tracked if n} - names) == []
        built = [n for n in names if n.endswith((".so", ".pyd", ".pyc")) or "__pycache__/" in n]
        assert built == []
        assert sorted(n for n in names - set(tracked) if not n.startswith("structlog_etw.egg-info/")) == [
            "PKG-INFO",
            "setup.cfg",
        ]


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


def _run_outside(cmd: list[str | Path], cwd: Path, timeout: float = 600) -> str:
    """Run ``cmd`` in ``cwd`` (outside the checkout) without this venv's environment; it must exit 0.
    Its stdout."""
    done = subprocess.run(
        cmd, check=False, capture_output=True, text=True, cwd=cwd, env=_clean_env(), timeout=timeout
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_installed_package_is_the_wheels_not_the_source_tree(installed: Path, tmp_path: Path) -> None:
    """The venv's installed package is imported from the venv, not from the source tree."""
    code = "import structlog_etw, sys; print(structlog_etw.__file__); print(sys.prefix)"
    out = _run_outside([installed, "-c", code], tmp_path).split("\n")
    package, prefix = Path(out[0]).resolve(), Path(out[1]).resolve()
    assert prefix in package.parents, f"{package} is not in the venv {prefix}"
    assert ROOT not in package.parents


def test_the_demo_runs_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    """``python -m structlog_etw demo`` and the ``structlog-etw`` script, run outside the checkout."""
    demo = _run_outside([installed, "-m", "structlog_etw", "demo"], tmp_path, timeout=120)
    assert "request_started" in demo, demo
    # The demo's traceback names the file it ran: the installed copy, not this checkout's.
    assert "demo.py" in demo
    assert str(ROOT / "structlog_etw") not in demo
    script = installed.parent / ("structlog-etw.exe" if sys.platform == "win32" else "structlog-etw")
    guid = _run_outside([script, "guid", "MyCompany.MyService"], tmp_path)
    assert "195e7706-085e-56ca-2ff6-31025e0cf78c" in guid


def _compiled_or_skip(wheel: Path) -> list[str]:
    """The wheel's compiled ``_speedups``; skip (locally) or fail (``CI=true``) where it has none."""
    compiled = _compiled(_wheel_names(wheel))
    if not compiled:
        skip_or_fail(
            f"{wheel.name} holds no compiled structlog_etw.write.shapes._speedups (no C compiler or headers?)"
        )
    return compiled


class TestTheCompiledModule:
    """The optional C extension ``structlog_etw.write.shapes._speedups``: in the wheel and imported from the
    venv.

    Where it cannot be compiled (no C compiler or Python headers) setuptools builds the wheel without
    it: these tests then skip on a developer's machine and fail under ``CI=true``, whose set-up
    (gcc, python3-dev in .ci/run; MSVC on the Windows runners) must build it.
    """

    def test_the_wheel_holds_the_compiled_module_for_this_python(self, wheel: Path) -> None:
        """The wheel holds one ``structlog_etw/write/shapes/_speedups`` with an extension suffix of the Python
        that built it (this one), and a platform tag (not ``py3-none-any``)."""
        compiled = _compiled_or_skip(wheel)
        suffixes = importlib.machinery.EXTENSION_SUFFIXES
        assert [
            n for n in compiled if any(n == f"structlog_etw/write/shapes/_speedups{s}" for s in suffixes)
        ] == compiled
        assert len(compiled) == 1, compiled
        assert not wheel.name.endswith("-none-any.whl"), wheel.name

    def test_the_installed_package_imports_its_compiled_module(
        self, wheel: Path, installed: Path, tmp_path: Path
    ) -> None:
        """``import structlog_etw.write.shapes._speedups`` in the fresh venv loads the wheel's extension
        module from the venv, not the checkout's in-place build."""
        _compiled_or_skip(wheel)
        code = (
            "import importlib.machinery, sys, structlog_etw.write.shapes._speedups as m\n"
            "assert isinstance(m.__loader__, importlib.machinery.ExtensionFileLoader), m.__loader__\n"
            "print(m.__file__); print(sys.prefix)"
        )
        out = _run_outside([installed, "-c", code], tmp_path)
        module, prefix = (Path(line).resolve() for line in out.splitlines()[:2])
        assert prefix in module.parents, f"{module} is not in the venv {prefix}"
        assert ROOT not in module.parents
