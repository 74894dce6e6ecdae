"""Development sessions; plain ``nox`` runs lint, docs, build, kernel, wheels, queue_handler and tests
(README.md).

Install nox with ``python3 -m pip install nox`` (or ``pipx install nox``); every session makes its
own venv.

* ``tests``  - the host test suite (kernel tests are deselected here and run by ``kernel``), once per
  structlog version: ``nox -s "tests(oldest)"`` (the oldest pyproject.toml allows) and
  ``nox -s "tests(newest)"``; ``nox -s tests`` runs both.
* ``queue_handler`` - the queue-handler tests of tests/surface/test_setups.py on Python 3.12, whose dictConfig
  builds ``queue_handler``'s listener (the host suite's Python may be older); a default session
  where a Python 3.12 is found (on PATH or in pyenv), and always under ``CI=true``, where a missing
  one fails the run.
* ``kernel`` - every ``kernel``-marked test in one virtme-ng guest with a user_events kernel
  (``tests/kernel/run_in_guest.py``), or directly on a host whose kernel has user_events.
* ``lint``   - ruff check, ruff format --check, mypy --strict, the workflows against their schema, and
  ``cibuildwheel --print-build-identifiers`` for Linux, macOS and Windows (the release wheels).
* ``docs``   - runs every ```python block of README.md and docs/*.md, builds the site (Sphinx, nitpicky,
  warnings as errors) into docs/_build/html and checks it (tests/site/: the API reference covers
  every public name; the pages render in headless chromium with no missing image or broken link).
* ``wheels`` - builds the wheel with each of CPython 3.10-3.13 (pyenv's or on PATH; under CI=true a
  missing one fails), installs it into a fresh venv, checks the compiled packer loads from there
  and runs the host suite against the installed package (whole on 3.10 and 3.13, the subset of
  ``.ci/test_installed.py`` on 3.11 and 3.12); the same for the pure-Python wheel (built with no C
  compiler on PATH) on 3.10 and 3.13; ``auditwheel show`` on each Linux wheel.
  ``nox -s wheels -- 3.12-compiled 3.10-pure`` runs those alone.
* ``build``  - builds the sdist and wheel into dist/, checks their metadata with twine, and installs
  the wheel into a fresh venv to run the demo from outside the source tree (tests/packaging/).
* ``bench``  - the benchmark suite (``benchmarks/run.py``): ratios against structlog (JSON chain, the
  same with orjson), stdlib logging (+ python-json-logger) and traceloggingdynamic measured in the
  same run; ``nox -s bench -- --guest-run`` adds the real kernel write in the virtme-ng guest; then
  the OpenTelemetry exporters, new layouts (``benchmarks/layouts.py``) and large inputs
  (``benchmarks/input_sizes.py``), each against baselines of its own run.  Not part of the default
  sessions.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import time

import nox


def _python(version: str) -> str | None:
    """A ``python{version}`` that runs: the one on PATH, else a pyenv install of that version
    (a pyenv shim is on PATH for every installed version, but runs only the selected ones)."""
    pyenv = os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")
    for candidate in [shutil.which(f"python{version}"), *sorted(glob.glob(pyenv), reverse=True)]:
        runs = candidate and subprocess.run([candidate, "-c", ""], capture_output=True, check=False)
        if runs and runs.returncode == 0:
            return candidate
    return None


#: The Python of the ``queue_handler`` session: 3.12's dictConfig builds ``queue_handler``'s listener.
QUEUE_PYTHON = "3.12"
#: That interpreter here (a path nox can use), or the version (nox then finds none: the session fails).
QUEUE_INTERPRETER = _python(QUEUE_PYTHON)

nox.options.default_venv_backend = "venv"
# The host suite runs last: its pytest summary line closes the CI log.  ``queue_handler`` runs by
# default where a Python 3.12 is found, and always under CI=true (a missing one then fails).
nox.options.sessions = ["lint", "docs", "build", "kernel", "wheels", "tests"]
if QUEUE_INTERPRETER or os.environ.get("CI") == "true":
    nox.options.sessions.insert(-1, "queue_handler")
nox.options.error_on_missing_interpreters = True

# The OpenTelemetry SDK: the otel integration is tested (and documented) against the real one.
# traceloggingdynamic: Microsoft's TraceLogging builder, the differential encoder tests' reference.
# django, uvicorn, gunicorn: the stdlib logging recipes of docs/stdlib.md run against the real ones.
# opentelemetry-instrumentation-structlog: its processor beside EtwRenderer (tests/surface/test_setups.py).
# DISSECT (pinned): the independent LZXpress decompressor and .etl reader our .etl reading is
# compared with (tests/etw/test_lzxpress.py, tests/etw/test_etl_compressed.py, benchmarks/etl_decode.py).
DISSECT = ["dissect.util==3.24", "dissect.etl==3.14"]
TEST_DEPS = [
    "pytest>=7",
    "hypothesis>=6",
    "opentelemetry-api>=1.20",
    "opentelemetry-sdk>=1.20",
    "opentelemetry-instrumentation-structlog",
    "traceloggingdynamic",
    "django>=4.2",
    "uvicorn>=0.20",
    "gunicorn>=21",
    *DISSECT,
]
# Linters pinned: a new ruff or mypy release must not turn a green tree red by itself.
# check-jsonschema validates .github/workflows/*.yml against the GitHub workflow schema it ships
# (pure Python: actionlint's PyPI wrapper downloads its binary at install time, which CI cannot).
LINT_DEPS = ["ruff==0.17.6", "mypy==2.4.1", "check-jsonschema==0.39.0"]
WORKFLOWS = [".github/workflows/ci.yml", ".github/workflows/release.yml"]
#: The cibuildwheel the release workflow runs (its CIBUILDWHEEL pin is the same:
#: tests/project/test_release_workflow.py); ``lint`` prints its build identifiers for each platform.
CIBUILDWHEEL = "cibuildwheel==4.3.5"
#: What pyproject.toml's [tool.cibuildwheel] must build on each platform: these CPythons on these
#: platform tags (every pair), nothing else.
WHEEL_TAGS = ["cp310", "cp311", "cp312", "cp313", "cp314", "cp314t"]
WHEEL_PLATFORMS = {
    "linux": ["manylinux_x86_64", "manylinux_aarch64", "musllinux_x86_64", "musllinux_aarch64"],
    "macos": ["macosx_x86_64", "macosx_arm64"],
    "windows": ["win_amd64", "win_arm64"],
}
# The site's stack, pinned for the same reason: the build treats every warning as an error.
# selenium drives Debian's chromium (and chromedriver) for the rendering test.
DOCS_DEPS = ["sphinx==9.0.4", "myst-parser==5.2.0", "furo==2025.12.19", "selenium==4.51.0"]
BUILD_DEPS = ["build==1.6.1", "twine==7.0.0", "pytest>=7"]
#: Where ``nox -s docs`` builds the site.
SITE = "docs/_build/html"


#: The oldest structlog pyproject.toml allows (``structlog>=23.1``; tests/surface/test_structlog_versions.py
#: holds the two together): the surface reads structlog's contextvars registry, subclasses its bound
#: logger and runs inside its ProcessorFormatter, so both ends of the range are tested.
OLDEST_STRUCTLOG = "23.1.0"
#: ``tests`` runs once per entry: the requirement installed over the package's own.
STRUCTLOG_VERSIONS = {"oldest": f"structlog=={OLDEST_STRUCTLOG}", "newest": "structlog"}


@nox.session
@nox.parametrize("structlog", list(STRUCTLOG_VERSIONS), ids=list(STRUCTLOG_VERSIONS))
def tests(session: nox.Session, structlog: str) -> None:
    """Run the host test suite against the oldest and against the newest structlog."""
    session.install("-e", ".", *TEST_DEPS)
    session.install("--upgrade", STRUCTLOG_VERSIONS[structlog])
    session.run("python", "-c", "import importlib.metadata as m; print('structlog', m.version('structlog'))")
    session.run("python", "-m", "pytest", *(session.posargs or ["-q"]))


@nox.session(python=QUEUE_INTERPRETER or QUEUE_PYTHON)
def queue_handler(session: nox.Session) -> None:
    """3.12's dictConfig ``queue_handler`` recipe (docs/stdlib.md) for real: the queue-handler tests
    of tests/surface/test_setups.py on Python 3.12, where the host suite's Python may be older."""
    session.install("-e", ".", "pytest>=7")
    # STRUCTLOG_ETW_NO_SKIP: the dictConfig test fails instead of skipping when it cannot run.
    session.run(
        "python", "-m", "pytest", "-q", "-rs", "tests/surface/test_setups.py::TestQueueHandler",
        *session.posargs,
        env={"STRUCTLOG_ETW_NO_SKIP": "1"},
    )  # fmt: skip


@nox.session
def kernel(session: nox.Session) -> None:
    """Run the kernel tests in one virtme-ng guest (or here if this kernel has user_events)."""
    # The guest runs this session's interpreter from the host's (read-only) filesystem.
    session.install("-e", ".", *TEST_DEPS, "virtme-ng")
    session.run("python", "tests/kernel/run_in_guest.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, mypy --strict, the GitHub workflows' schema check and the
    release wheels' build identifiers on each platform."""
    session.install("-e", ".", *LINT_DEPS, *TEST_DEPS)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "--strict")
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *WORKFLOWS)
    # The release configuration: what cibuildwheel would build on each platform is what we ship.
    session.install(CIBUILDWHEEL)
    for platform, tags in WHEEL_PLATFORMS.items():
        out = session.run(
            "cibuildwheel", "--print-build-identifiers", "--platform", platform, silent=True,
            env={"CIBW_ARCHS": None, "CIBW_BUILD": None, "CIBW_SKIP": None},
        )  # fmt: skip
        got = sorted(str(out).split())
        want = sorted(f"{py}-{tag}" for py in WHEEL_TAGS for tag in tags)
        session.log(f"cibuildwheel {platform}: {' '.join(got)}")
        if got != want:
            session.error(f"cibuildwheel would build {got} on {platform}, not {want}")


@nox.session
def docs(session: nox.Session) -> None:
    """Execute the docs' examples, build the site (warnings are errors) and check it in chromium."""
    session.install("-e", ".", *TEST_DEPS, *DOCS_DEPS)
    session.run("python", "-m", "pytest", "-v", "tests/project/test_docs.py", *session.posargs)
    # -n: nitpicky (every cross-reference must resolve); -W --keep-going: all warnings, then fail;
    # -E: a fresh environment, so a warning of an unchanged page is not hidden by the cache.
    session.run("python", "-m", "sphinx", "-b", "html", "-n", "-W", "--keep-going", "-E", "docs", SITE)
    session.run("python", "-m", "pytest", "-v", "tests/site", env={"STRUCTLOG_ETW_SITE": SITE})


@nox.session
def build(session: nox.Session) -> None:
    """Build sdist and wheel, check their metadata, run the demo from the installed wheel."""
    session.install(*BUILD_DEPS)  # not the package itself: the test must find the wheel's copy
    shutil.rmtree("dist", ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", "dist", ".")
    session.run("python", "-m", "twine", "check", "--strict", *sorted(glob.glob("dist/*")))
    session.install("structlog")  # the wheel's one dependency, for the test's fresh venv
    session.run("python", "-m", "pytest", "-v", "tests/packaging", env={"STRUCTLOG_ETW_DIST": "dist"})


#: The CPythons ``wheels`` builds a wheel with and tests it on (pyenv's or on PATH; under CI=true a
#: missing one fails): every minor from requires-python to the newest this machine image has.
WHEEL_PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
#: Where ``wheels`` runs the whole host suite against the installed wheel (oldest and newest), also
#: for the pure-Python install (built with no C compiler on PATH); the others run the subset of
#: ``.ci/test_installed.py`` (the whole suite runs on them from the checkout in ``tests``).
WHEEL_FULL = ("3.10", "3.13")
#: The shared libraries a Linux wheel's compiled module may link (manylinux's allowed set, of
#: which the packer needs the C library alone).
WHEEL_ALLOWED_LIBS = {"libc.so.6", "libpthread.so.0", "libm.so.6", "libdl.so.2", "librt.so.1"}
WHEEL_DEPS = ["auditwheel==6.8.2", "build==1.6.1"]


@nox.session
def wheels(session: nox.Session) -> None:
    """Build the wheel (from the sdist) with each of CPython 3.10-3.13, install it into a fresh
    venv, check the compiled packer loads from that venv, and run the host suite against the
    installed package (whole on the oldest and newest, ``.ci/test_installed.py --subset`` on the
    others); the same for the pure-Python install (no C compiler on PATH) on the oldest and
    newest; ``auditwheel show`` on each Linux wheel names only :data:`WHEEL_ALLOWED_LIBS`."""
    session.install(*WHEEL_DEPS)
    tmp = os.path.abspath(session.create_tmp())
    checkout = os.getcwd()
    # Every wheel is built from the sdist (unpacked afresh each time, as pip does for a platform
    # with no wheel on PyPI): a build left in the checkout (build/, an in-place module) cannot
    # leak into a wheel, the pure-Python one least of all.
    sdist_dir = os.path.join(tmp, "sdist")
    shutil.rmtree(sdist_dir, ignore_errors=True)
    session.run("python", "-m", "build", "--sdist", "--outdir", sdist_dir, checkout)
    (sdist,) = glob.glob(os.path.join(sdist_dir, "structlog_etw-*.tar.gz"))
    runs = [(v, "compiled") for v in WHEEL_PYTHONS] + [(v, "pure") for v in WHEEL_FULL]
    only = set(session.posargs)  # e.g. ``nox -s wheels -- 3.10-pure``: those runs alone
    suites = _Suites(session, tmp)
    try:
        for version, kind in runs:
            if only and f"{version}-{kind}" not in only:
                continue
            interpreter = _python(version)
            if interpreter is None:
                if os.environ.get("CI") == "true":
                    session.error(f"no Python {version} (on PATH or in pyenv): required under CI=true")
                session.warn(f"no Python {version} here: its wheel is not tested")
                continue
            work = os.path.join(tmp, f"{version}-{kind}")
            shutil.rmtree(work, ignore_errors=True)
            venv_dir = os.path.join(work, "venv")
            session.run(interpreter, "-m", "venv", venv_dir, external=True)
            py = os.path.join(venv_dir, "bin", "python")
            env: dict[str, str | None] = {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
            if kind == "pure":  # no compiler: PATH holds the venv alone, and no CC names one
                env = {**env, "PATH": os.path.dirname(py), "CC": None, "LDSHARED": None}
            dist = os.path.join(work, "dist")
            session.run(
                py, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, sdist, env=env, external=True
            )
            (wheel,) = glob.glob(os.path.join(dist, "structlog_etw-*.whl"))
            if kind == "compiled" and sys.platform == "linux":
                _auditwheel(session, wheel)
            session.run(py, "-m", "pip", "install", "-q", wheel, *TEST_DEPS, env=env, external=True)
            command = [py, ".ci/test_installed.py", checkout, "--kind", kind, "-q"]
            if version not in WHEEL_FULL:
                command.append("--subset")
            if not _others_can_run(interpreter):
                # The non-root demo test runs the interpreter as nobody, which cannot reach this one
                # (pyenv's under /root); the ``tests`` session runs it with the system Python.
                session.log(
                    f"{interpreter}: not runnable by other users; the non-root demo test is deselected"
                )
                command.append(f"--deselect={NON_ROOT_DEMO}")
            suites.start(f"{version}-{kind}", command)  # runs while the next wheel is built
    except BaseException:  # a failed build: the suites already started are stopped
        suites.stop()
        raise
    suites.finish()


#: The test that runs the demo as an unprivileged user (needs an interpreter that user can run).
NON_ROOT_DEMO = "tests/cli/test_demo.py::test_python_m_structlog_etw_demo_works_for_a_non_root_user"
#: How many installed-wheel suites run at once (each in its own venv, copy and pytest basetemp):
#: they wait on subprocesses and I/O much of the time, so two share CI's two cores well.
WHEEL_JOBS = 2


def _others_can_run(path: str) -> bool:
    """Whether a user other than the owner can reach and run ``path`` (it and every folder above
    it open to others)."""
    current = os.path.realpath(path)
    while True:
        if not os.stat(current).st_mode & 0o001:
            return False
        parent = os.path.dirname(current)
        if parent == current:
            return True
        current = parent


class _Suites:
    """The installed-wheel suites, :data:`WHEEL_JOBS` at a time, each into its own log."""

    def __init__(self, session: nox.Session, tmp: str) -> None:
        self.session, self.tmp = session, tmp
        self.running: list[tuple[str, subprocess.Popen[bytes], str, float]] = []
        self.done: list[tuple[str, int, str, float]] = []

    def start(self, name: str, command: list[str]) -> None:
        """Start a suite once fewer than :data:`WHEEL_JOBS` run."""
        while len(self.running) >= WHEEL_JOBS:
            self._reap()
        log = os.path.join(self.tmp, f"{name}.log")
        self.session.log(f"{name}: {' '.join(command)} > {log}")
        with open(log, "wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.running.append((name, proc, log, time.monotonic()))

    def _reap(self) -> None:
        time.sleep(1)
        for item in list(self.running):
            name, proc, log, started = item
            if proc.poll() is not None:
                self.running.remove(item)
                self.done.append((name, proc.returncode, log, time.monotonic() - started))

    def stop(self) -> None:
        """Stop the suites still running (the session failed meanwhile)."""
        for _, proc, _, _ in self.running:
            proc.kill()
            proc.wait()
        self.running.clear()

    def finish(self) -> None:
        """Wait for every suite; print each log's end (all of a failed one's) with its time; fail
        if any failed."""
        while self.running:
            self._reap()
        failed = []
        for name, code, log, seconds in self.done:
            with open(log, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
            print(f"---- {name}: exit {code} in {seconds:.0f} s ({log})")
            print("\n".join(lines if code else lines[-3:]))
            if code:
                failed.append(name)
        if failed:
            self.session.error(f"the installed-wheel suites failed: {', '.join(failed)}")


def _auditwheel(session: nox.Session, wheel: str) -> None:
    """``auditwheel show``: the wheel's compiled module links only allowed system libraries."""
    out = session.run("auditwheel", "show", wheel, silent=True)
    text = " ".join(str(out).split())
    session.log(text)
    libs = set(re.findall(r"\b(lib[\w+-]+\.so(?:\.\d+)*)", text))
    if not libs or not libs <= WHEEL_ALLOWED_LIBS:
        session.error(f"auditwheel: the wheel links {sorted(libs)}; allowed {sorted(WHEEL_ALLOWED_LIBS)}")


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks; results in docs/benchmarks/ (linked from docs/performance.md), plot in docs/."""
    # Benchmark-only: the peer encoder, the plot, the guest, and the baselines' serialisers.
    session.install(
        "-e", ".", "traceloggingdynamic", "matplotlib", "virtme-ng", "orjson", "python-json-logger",
        # benchmarks/otel_exporters.py: the SDK's exporters and the OTLP serialisation as baselines
        "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-common",
    )  # fmt: skip
    session.run(
        "python",
        "benchmarks/run.py",
        "--out",
        "docs/benchmarks",
        "--plot",
        "docs/performance.png",
        "--repeat-disabled",
        "5",
        "--pure-python-run",
        "--update-docs",
        "docs/performance.md",
        *session.posargs,
    )
    session.run("python", "benchmarks/otel_exporters.py", "--out", "docs/benchmarks/otel_exporters.json")
    session.run("python", "benchmarks/layouts.py", "--out", "docs/benchmarks/layouts.json")
    # Large inputs (huge logger names, lists, strings, pipe-mode attrs) against same-run baselines.
    session.run(
        "python", "benchmarks/input_sizes.py", "--out", "docs/benchmarks/input_sizes.json",
        "--update-docs", "docs/performance.md",
    )  # fmt: skip
    # Compressed .etl: decode --json against dissect.etl's iteration (pinned, as in TEST_DEPS).
    session.install(*DISSECT)
    session.run("python", "benchmarks/etl_decode.py", "--out", "docs/benchmarks/etl_decode.json")
    # Same speed as 0.5.0: both versions in venvs of their own, side by side in the same rounds.
    session.run(
        "python", "benchmarks/versions.py", "--out", "docs/benchmarks/versions.json",
        "--update-docs", "docs/performance.md",
    )  # fmt: skip
