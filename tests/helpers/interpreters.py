"""The CPython interpreters of this machine, found as ``noxfile.py``'s ``_python`` finds them."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

#: The CPython minors the package supports and this project tests on every machine (pyenv's here,
#: the GitHub workflows install them): tests that build or run on each of them go over this list.
VERSIONS = ("3.10", "3.11", "3.12", "3.13")


def pyenv_root() -> Path:
    """``$PYENV_ROOT``, else ``~/.pyenv``."""
    return Path(os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv"))


def python(version: str) -> str | None:
    """A ``python{version}`` that runs: the one on PATH, else the newest pyenv install of that
    version (a pyenv shim on PATH exists for every installed version but runs only selected ones)."""
    installs = glob.glob(str(pyenv_root() / "versions" / f"{version}.*" / "bin" / f"python{version}"))
    for candidate in [shutil.which(f"python{version}"), *sorted(installs, reverse=True)]:
        if candidate and "t" not in Path(candidate).name.removeprefix("python"):
            runs = subprocess.run([candidate, "-c", ""], capture_output=True, check=False, timeout=60)
            if runs.returncode == 0:
                return candidate
    return None


def config(interpreter: str) -> tuple[str, str]:
    """(include directory, extension suffix) of ``interpreter``."""
    code = (
        "import sysconfig; print(sysconfig.get_paths()['include'])\n"
        "print(sysconfig.get_config_var('EXT_SUFFIX'))"
    )
    out = subprocess.run([interpreter, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    include, suffix = out.stdout.split("\n")[:2]
    return include, suffix


def this_config() -> tuple[str, str]:
    """:func:`config` of the running interpreter."""
    return sysconfig.get_paths()["include"], str(sysconfig.get_config_var("EXT_SUFFIX"))
