"""A package's public names loaded on first use (PEP 562), from one table of name -> module.

A package ``__init__`` that keeps its imports cheap names each public object and the module that
defines it, and gets its module ``__getattr__`` and ``__dir__`` here::

    __getattr__, __dir__ = lazy_exports(globals(), {"PerfDataFile": ".datafile"})

The first use of a name imports its module and stores the object in the package, so later uses
are plain attribute reads; ``dir()`` lists every table name, loaded or not.  A type checker sees
the names through the package's own ``if TYPE_CHECKING:`` imports.

Stdlib only.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: importing typing would double `import structlog_etw`'s time
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping
    from typing import Any


def lazy_exports(
    namespace: MutableMapping[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose ``globals()`` is ``namespace``.

    ``exports`` maps each lazy public name to the module that defines it (relative to the
    package, as ``".datafile"``, or absolute).
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    __getattr__.__doc__ = f"Load a public name of {package} from its module on first use."
    __dir__.__doc__ = f"The public names of {package} (``dir()``), loaded or not."
    return __getattr__, __dir__


class LazyModule:
    """A stand-in for a standard-library module a reader needs only on some paths, bound to a
    module global: the first attribute read imports the module (``importlib.import_module``,
    under the import system's lock) and rebinds the global to it, so every later use is the
    module itself::

        if TYPE_CHECKING:
            import uuid
        else:
            uuid = LazyModule("uuid", globals())

    ``typing.get_type_hints`` of a class annotated with ``uuid.UUID`` resolves through it too.
    """

    __slots__ = ("_as", "_name", "_namespace")

    def __init__(self, name: str, namespace: MutableMapping[str, Any], as_name: str | None = None) -> None:
        self._name = name
        self._namespace = namespace
        self._as = as_name or name

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        self._namespace[self._as] = module
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"
