"""``structlog_etw._util.lazy``: a package's ``__getattr__``/``__dir__`` from its name -> module table,
and the five packages that use it."""

from __future__ import annotations

import importlib
import subprocess
import sys
import typing
import uuid
from typing import Any

import pytest

from structlog_etw._util.lazy import lazy_exports
from structlog_etw.read.decoded import DecodedEvent

#: The packages whose public names load on first use, and the table each builds them from.
PACKAGES = {
    "structlog_etw": "_EXPORTS",
    "structlog_etw.perf": "_EXPORTS",
    "structlog_etw.backends": "_EXPORTS",
    "structlog_etw.etw": "_LAZY",
    "structlog_etw.otel": None,
}


def test_a_name_loads_its_module_on_first_use_and_stays() -> None:
    """The first use imports the name's module (relative to the package) and stores the object in the
    package's namespace, so the next use is a plain attribute read."""
    namespace: dict[str, Any] = {"__name__": "email"}
    getattr_, _ = lazy_exports(namespace, {"Message": ".message", "dumps": "json"})
    assert getattr_("Message") is sys.modules["email.message"].Message
    assert namespace["Message"] is sys.modules["email.message"].Message
    assert getattr_("dumps") is importlib.import_module("json").dumps  # an absolute module too


def test_an_unknown_name_is_the_usual_attribute_error() -> None:
    """A name outside the table raises AttributeError naming the package."""
    getattr_, _ = lazy_exports({"__name__": "somepkg"}, {"x": ".nowhere"})
    with pytest.raises(AttributeError, match=r"^module 'somepkg' has no attribute 'y'$"):
        getattr_("y")


def test_dir_lists_the_table_loaded_or_not() -> None:
    """``dir()`` is the namespace's names and every table name, sorted, before any is loaded."""
    _, dir_ = lazy_exports({"__name__": "somepkg", "b": 1}, {"c": ".m", "a": ".m"})
    assert dir_() == ["__name__", "a", "b", "c"]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_each_package_exports_exactly_its_table(package: str) -> None:
    """Every name of the package's ``__all__`` is served (the table has no other lazy name), and
    ``dir()`` lists all of them."""
    module = importlib.import_module(package)
    table = getattr(module, PACKAGES[package]) if PACKAGES[package] else dict.fromkeys(module.__all__)
    assert set(table) == set(module.__all__) - {"__version__"}
    assert set(module.__all__) <= set(dir(module))
    for name in module.__all__:
        assert getattr(module, name) is not None
    with pytest.raises(AttributeError):
        _ = module.no_such_name


def test_a_lazy_module_imports_on_first_attribute_and_rebinds_its_global() -> None:
    """:class:`LazyModule` imports nothing when made; the first attribute read imports the module
    and puts the module itself in the namespace under its name (or ``as_name``)."""
    code = (
        "import sys\n"
        "from structlog_etw._util.lazy import LazyModule\n"
        "ns = {}\n"
        "ns['_ip'] = LazyModule('ipaddress', ns, '_ip')\n"
        "before = 'ipaddress' in sys.modules\n"
        "cls = ns['_ip'].IPv4Address\n"
        "import ipaddress\n"
        "print(before, cls is ipaddress.IPv4Address, ns['_ip'] is ipaddress)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True"]


def test_the_decoded_event_s_annotations_resolve_through_a_lazy_uuid() -> None:
    """``typing.get_type_hints`` of :class:`~structlog_etw.read.decoded.DecodedEvent` resolves its
    ``uuid.UUID`` annotations although the module imports :mod:`uuid` only on first use."""
    hints = typing.get_type_hints(DecodedEvent)
    assert hints["activity_id"] == uuid.UUID | None
