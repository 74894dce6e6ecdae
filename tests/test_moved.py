"""structlog_etw._moved: every public module path of 0.5 still imports, warns, and is the new module."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import warnings
from collections.abc import Iterator

import pytest

import structlog_etw
from structlog_etw import _moved

#: The public module paths of 0.5's API reference that moved (docs/api of 0.5).
OLD_PUBLIC_PATHS = [
    "structlog_etw.fields",
    "structlog_etw.header",
    "structlog_etw.decoded",
    "structlog_etw.live",
    "structlog_etw.eventheader",
    "structlog_etw.eventheader.spec",
    "structlog_etw.eventheader.encoder",
    "structlog_etw.eventheader.decoder",
    "structlog_etw.eventheader.perf_decode",
    "structlog_etw.tracelogging",
    "structlog_etw.tracelogging.spec",
    "structlog_etw.tracelogging.encoder",
    "structlog_etw.tracelogging.decoder",
    "structlog_etw.cli.render",
    "structlog_etw.cli.chrome_trace",
]


@pytest.fixture
def forget_old_paths() -> Iterator[None]:
    """The old paths leave sys.modules before and after a test, so each import is a first import."""

    def forget() -> None:
        for name in OLD_PUBLIC_PATHS:
            sys.modules.pop(name, None)
            parent, _, leaf = name.rpartition(".")
            if parent == "structlog_etw":
                structlog_etw.__dict__.pop(leaf, None)

    forget()
    yield
    forget()


def test_the_table_holds_every_old_public_path() -> None:
    """Every moved public path of 0.5 is in the table (a module in MOVED, a package in PACKAGES)."""
    assert sorted([*_moved.MOVED, *_moved.PACKAGES]) == sorted(OLD_PUBLIC_PATHS)
    for names in _moved.PACKAGES.values():  # an old module, or a module of the package
        assert all(old in _moved.MOVED or importlib.util.find_spec(old) for old in names.values())


@pytest.mark.usefixtures("forget_old_paths")
@pytest.mark.parametrize(("old", "new"), sorted(_moved.MOVED.items()))
def test_an_old_module_path_warns_and_is_the_new_module(old: str, new: str) -> None:
    """``import <old>`` warns (DeprecationWarning naming the new path, at the importing line) and
    gives the new module object, which keeps its own name and spec."""
    with pytest.warns(DeprecationWarning) as caught:  # and its old package's, on first import
        module = importlib.import_module(old)
    ours = [w for w in caught if str(w.message).startswith(f"{old} moved to {new} ")]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert module is importlib.import_module(new)
    assert sys.modules[old] is module
    assert module.__name__ == new
    assert module.__spec__ is not None and module.__spec__.name == new
    assert ours[0].filename == importlib.__file__  # import_module's line: the caller's import


@pytest.mark.usefixtures("forget_old_paths")
def test_the_warning_points_at_the_import_statement() -> None:
    """A plain ``import`` statement is the warning's location, not the import system's frames."""
    with pytest.warns(DeprecationWarning) as caught:
        import structlog_etw.header  # noqa: F401, PLC0415
    assert caught[0].filename == __file__


@pytest.mark.usefixtures("forget_old_paths")
@pytest.mark.parametrize("package", sorted(_moved.PACKAGES))
def test_an_old_package_offers_its_old_names_from_their_new_homes(package: str) -> None:
    """``structlog_etw.eventheader`` / ``.tracelogging``: a warning on import, then every old name
    (and every old submodule) is the object of its new home, each with a docstring."""
    with pytest.warns(DeprecationWarning, match=f"{package} moved to"):
        facade = importlib.import_module(package)
    names = _moved.PACKAGES[package]
    assert facade.__all__ == sorted(names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name, old in names.items():
            obj = getattr(facade, name)
            assert obj is getattr(importlib.import_module(_moved.MOVED.get(old, old)), name)
            assert obj.__doc__, f"{package}.{name} has no docstring"
        for old, new in _moved.MOVED.items():
            if old.startswith(package + "."):
                assert getattr(facade, old.rpartition(".")[2]) is importlib.import_module(new)
    with pytest.raises(AttributeError):
        facade.no_such_name  # noqa: B018


_LOADED_WRITE_MODULES = """
import sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
{imports}
print(sorted(m for m in sys.modules if m.startswith("structlog_etw.write")))
"""


@pytest.mark.parametrize(
    "imports",
    [
        "import structlog_etw.eventheader.decoder",
        "import structlog_etw.eventheader.perf_decode",
        "from structlog_etw.eventheader import decode_event, perf_json, tracepoint_name, Header",
        "import structlog_etw.tracelogging.decoder",
        "from structlog_etw.tracelogging import decode, decode_traits, provider_id",
        "import structlog_etw.decoded, structlog_etw.live, structlog_etw.header",
        "import structlog_etw.eventheader.spec, structlog_etw.tracelogging.spec",
        "from structlog_etw.cli.render import event_json, event_pretty, EventMeta",
        "import structlog_etw.cli.chrome_trace",
    ],
)
def test_an_old_read_only_path_loads_no_write_module(imports: str) -> None:
    """In a fresh interpreter, an old read-only path (decoder, writer, spec) loads nothing of
    ``structlog_etw.write``: the facades stay lazy."""
    run = subprocess.run(
        [sys.executable, "-c", _LOADED_WRITE_MODULES.format(imports=imports)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert run.stdout.strip() == "[]", run.stdout


def test_importtime_of_the_old_decoder_path_shows_no_write_module() -> None:
    """``python -X importtime -c "import structlog_etw.eventheader.decoder"`` imports no module of
    ``structlog_etw.write``."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-W", "ignore::DeprecationWarning", "-c",
         "import structlog_etw.eventheader.decoder"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    imported = [line.rpartition("|")[2].strip() for line in run.stderr.splitlines() if "|" in line]
    assert "structlog_etw.read.decode.eventheader" in imported
    assert [m for m in imported if m.startswith("structlog_etw.write")] == []


def test_importing_the_package_does_not_load_the_table() -> None:
    """``import structlog_etw`` installs the finder only; the table loads with the first old path."""
    code = (
        "import sys, structlog_etw; a = 'structlog_etw._moved' in sys.modules; "
        "import structlog_etw.write.fields; b = 'structlog_etw._moved' in sys.modules; "
        "import warnings; warnings.simplefilter('ignore'); import structlog_etw.fields; "
        "print(a, b, 'structlog_etw._moved' in sys.modules, "
        "sum(getattr(f, 'structlog_etw_moved', False) for f in sys.meta_path))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert run.stdout.split() == ["False", "False", "True", "1"]


def test_a_missing_module_of_the_package_is_still_missing() -> None:
    """A path that is neither a module nor in the table raises ModuleNotFoundError as before."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("structlog_etw.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("structlog_etw._provider")  # private paths are not served
