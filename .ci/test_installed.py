"""Run the host test suite against the structlog-etw installed in this interpreter (from a wheel).

    python .ci/test_installed.py PROJECT [--kind compiled|pure] [--subset] [pytest args...]

Used by ``nox -s wheels`` (each Python's wheel in a fresh venv) and by cibuildwheel's
test-command (each release wheel, pyproject.toml ``[tool.cibuildwheel]``).  The suite must import
the installed package, not the checkout: pytest puts the rootdir first on ``sys.path``
(``tests/`` is a package, and pyproject.toml's ``pythonpath``), and many tests start Pythons with
the project on ``PYTHONPATH``.  So the project's files are copied to a temporary folder *less the
package itself* (``structlog_etw/``), and pytest runs there: the only ``structlog_etw`` left to
import is the installed one (``tests/installed`` asserts it).

``--kind``: what the wheel was built with (``compiled``: with a C compiler, so its compiled packer
must load; ``pure``: without one).  ``--subset``: :data:`SUBSET` instead of the whole suite.
Exit status: pytest's.  Stdlib only: it runs before anything but the wheel is installed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: What ``--subset`` runs: the installed-package checks, the compiled packer and its fallback, the
#: encoders, the provider and the free-threading stress test.
SUBSET = [
    "tests/installed",
    "tests/write",
    "tests/provider",
    "tests/surface/test_roundtrip.py",
]
#: Tests of the source tree rather than of the installed package (they read or compile the files
#: of ``structlog_etw/``, which the copy leaves out): the checkout's runs (``nox -s tests``) have them.
SOURCE_ONLY = [
    "tests/project/test_architecture.py",
    "tests/write/shapes/test_speedups.py::TestUnderAddressSanitizer",
    "tests/write/shapes/test_speedups.py::TestPurePythonSuite",
    "tests/write/shapes/test_speedups_extension.py::test_it_compiles_warning_free_against_each_pythons_headers",
    "tests/write/shapes/test_speedups_extension.py::test_an_isolated_subinterpreter_loads_it_and_packs_the_same_bytes",
    "tests/write/shapes/test_speedups_extension.py::test_no_private_api_and_no_deprecated_pattern",
    "tests/project/test_windows_collection.py::TestWithoutUnixModules::test_the_tests_that_reach_a_unix_module_pass_or_skip",
    "tests/write/shapes/test_speedups.py::TestOpTable::test_the_c_enum_is_the_python_table",
    "tests/surface/test_contextvars.py::test_the_predicate_has_one_home",
]
#: Never copied: the package (the point), and what builds, venvs and caches leave.
LEFT_OUT = {"structlog_etw", ".git", ".venv", ".nox", "build", "dist", "__pycache__", ".pytest_cache",
            ".mypy_cache", ".ruff_cache", "wheelhouse", "_build"}  # fmt: skip


def copy_without_the_package(project: Path, target: Path) -> None:
    """``project``'s files at ``target``, less :data:`LEFT_OUT` (at any depth for the caches, at
    the top for the package)."""
    for root, dirs, files in os.walk(project):
        dirs[:] = [d for d in dirs if d not in LEFT_OUT and not d.endswith(".egg-info")]
        rel = Path(root).relative_to(project)
        (target / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            if not name.endswith((".so", ".pyd")):
                shutil.copy2(Path(root) / name, target / rel / name)


def main(argv: list[str]) -> int:
    """Copy, then run pytest in the copy; pytest's exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--kind", choices=["compiled", "pure"], default="compiled")
    parser.add_argument("--subset", action="store_true")
    args, pytest_args = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory(prefix="structlog-etw-installed-") as tmp:
        tree = Path(tmp) / "project"
        copy_without_the_package(args.project.resolve(), tree)
        env = {**os.environ, "STRUCTLOG_ETW_WHEEL_VENV": sys.prefix, "STRUCTLOG_ETW_WHEEL_KIND": args.kind}
        env.pop("PYTHONPATH", None)
        shared = args.project.resolve().parent / "shared"  # the tests' default: beside the project
        if "STRUCTLOG_ETW_SHARED" not in env and shared.is_dir():
            env["STRUCTLOG_ETW_SHARED"] = str(shared)
        command = [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={Path(tmp) / 'basetemp'}",
            *(f"--deselect={test}" for test in SOURCE_ONLY),
            *pytest_args, *(SUBSET if args.subset else []),
        ]  # fmt: skip
        print(f"in {tree} (the project less structlog_etw/): {' '.join(command)}", flush=True)
        return subprocess.run(command, cwd=tree, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
