"""The only code that touches ``structlog.contextvars``: ``etw_*`` control keys bound through contextvars.

structlog keeps one ``ContextVar`` per key ever bound with ``bind_contextvars`` in a registry
(``structlog.contextvars._CONTEXT_VARS``: ``"structlog_" + key`` -> variable).  It only grows:
a key's variable is made the first time the key is bound and kept for the life of the process
(unbinding or clearing sets it to ``Ellipsis``).  This module **reads** that registry and
never writes, wraps or replaces it:

* :func:`etw_bound` - **the** predicate "an ``etw_*`` key is bound through contextvars in the
  current context", which every path of the surface (renderer, wrapper, ``EtwEarlyDrop``) asks
  (it is :meth:`ContextvarsWatch.etw_bound` of :data:`WATCH`).  While no ``etw_*`` key was ever
  bound through contextvars it costs a tuple read and a ``len()``: the registry was last seen at
  that size holding no ``etw_*`` variable, and because it only grows, one of that size still
  holds none (``WATCH.clean_size`` is that size).  Otherwise it re-reads the registry after it
  grew, then ``ContextVar.get()`` per ``etw_*`` key found there.
* :meth:`ContextvarsWatch.value` - one key's value.

At import a probe checks the assumption: ``bind_contextvars`` (structlog's public API), called in a
throw-away ``contextvars.Context``, must put its variable into that registry.  That leaves one
variable of structlog's own making in the registry (``structlog_structlog_etw_registry_probe``),
set in no context that logs, so ``merge_contextvars``/``get_contextvars`` never show it.  If structlog has
no such registry, or stores its variables elsewhere, :data:`WATCH` uses the public
``get_contextvars()`` on every call instead (always correct, slower); ``WATCH.clean_size`` is
then ``-1`` so the hot-path test always defers to it.

The async helpers mark the calling thread and frame for structlog's callsite processors the way
structlog's own async methods do (when the structlog version has those variables).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Mapping
from contextvars import ContextVar, Token
from types import FrameType
from typing import Any, Final, TypeAlias

import structlog.contextvars as _slcv

from ..context._resolve import CONTROL_KEYS, CONTROL_SET

__all__ = [
    "PREFIX",
    "REGISTRY",
    "WATCH",
    "AsyncCaller",
    "ContextvarsWatch",
    "etw_bound",
    "mark_async_caller",
    "unmark_async_caller",
]

#: structlog's prefix of its contextvar names (``"structlog_"``).
PREFIX: Final[str] = getattr(_slcv, "STRUCTLOG_KEY_PREFIX", "structlog_")
_VAR_NAMES: Final = tuple(PREFIX + key for key in CONTROL_KEYS)
_PROBE_KEY: Final = "structlog_etw_registry_probe"


def _structlog_registry() -> Mapping[str, ContextVar[Any]] | None:
    """structlog's contextvar registry if ``bind_contextvars`` stores into it, else ``None``."""
    registry = getattr(_slcv, "_CONTEXT_VARS", None)
    if not isinstance(registry, dict):
        return None
    marker = object()

    def probe() -> bool:
        _slcv.bind_contextvars(**{_PROBE_KEY: marker})
        var = registry.get(PREFIX + _PROBE_KEY)
        return (
            isinstance(var, ContextVar)
            and var.get(None) is marker
            and _slcv.get_contextvars().get(_PROBE_KEY) is marker
        )

    try:
        usable = contextvars.Context().run(probe)  # a fresh context: the probe's value dies with it
    except Exception:
        usable = False
    return registry if usable else None


class ContextvarsWatch:
    """Reads structlog's contextvars for ``etw_*`` keys; see the module docstring.

    ``registry`` is structlog's registry (read only), ``clean_size`` the registry size at which
    it was last seen without an ``etw_*`` variable (``-1``: it has one, or the public-API
    fallback is in use).
    """

    __slots__ = ("_has_registry", "_public", "_scan", "clean_size", "registry")

    def __init__(self, registry: Mapping[str, ContextVar[Any]] | None) -> None:
        self._has_registry = registry is not None
        self._public = registry is None
        self.registry: Mapping[str, ContextVar[Any]] = {} if registry is None else registry
        #: (registry size, the etw_* variables it held): replaced as one tuple, never torn.
        self._scan: tuple[int, tuple[ContextVar[Any], ...]] = (-1, ())
        self.clean_size = -1
        if not self._public:
            self._rescan()

    @property
    def uses_public_api(self) -> bool:
        """Whether every check goes through ``structlog.contextvars.get_contextvars()``."""
        return self._public

    def use_public_api(self, enabled: bool = True) -> None:
        """Check through ``get_contextvars()`` from now on (``False``: read the registry again, if any).

        For tests and for a structlog the import probe did not catch; switch while nothing logs.
        """
        self._public = enabled or not self._has_registry
        self.clean_size = -1
        self._scan = (-1, ())  # never the registry's size: every check takes the slow branch
        if not self._public:
            self._rescan()

    def _rescan(self) -> tuple[ContextVar[Any], ...]:
        registry = self.registry
        size = len(registry)  # before the scan: a key added meanwhile is in the scan or the size
        found = tuple(var for var in map(registry.get, _VAR_NAMES) if var is not None)
        self._scan = (size, found)
        self.clean_size = -1 if found else size
        return found

    def etw_variables(self) -> tuple[ContextVar[Any], ...]:
        """structlog's variables of the ``etw_*`` keys bound through contextvars so far (any context);
        empty with the public API."""
        size, found = self._scan
        if size != len(self.registry) and not self._public:
            found = self._rescan()
        return found

    def etw_bound(self) -> bool:
        """Whether an ``etw_*`` key holds a value through contextvars in the current context.

        While the registry has the size it was last scanned at, that scan's variables are read
        (none at all while no ``etw_*`` key was ever bound: the hot path).  A variable holding
        structlog's "unset" marker (``Ellipsis``, what ``clear_contextvars``/``unbind_contextvars``
        leave) does not count.
        """
        if len(self.registry) == self.clean_size:  # no etw_* variable was ever made: the hot path
            return False
        size, found = self._scan
        if size != len(self.registry):  # the registry grew, or the public API is in use (size -1)
            if self._public:
                return not _slcv.get_contextvars().keys().isdisjoint(CONTROL_SET)
            found = self._rescan()
        for var in found:  # noqa: SIM110 - a plain loop is cheaper than any()
            if var.get(Ellipsis) is not Ellipsis:
                return True
        return False

    def value(self, key: str) -> object:
        """The value ``bind_contextvars(key=...)`` set in the current context, else ``None``."""
        if self._public:
            return _slcv.get_contextvars().get(key)
        var = self.registry.get(PREFIX + key)
        if var is None:
            return None
        value = var.get(Ellipsis)
        return None if value is Ellipsis else value


#: The one watch of the process.
WATCH: Final = ContextvarsWatch(_structlog_registry())
#: structlog's registry, read only (an empty dict without one: ``len(REGISTRY)`` is then never
#: ``WATCH.clean_size``, which stays -1).
REGISTRY: Final = WATCH.registry
#: The one predicate: whether an ``etw_*`` key holds a value through contextvars in the current
#: context (:meth:`ContextvarsWatch.etw_bound` of :data:`WATCH`, bound once: one call, no look-up).
etw_bound: Final = WATCH.etw_bound

# --- async calls: structlog's markers of the calling thread and frame --------------------------

_ASYNC_THREAD: ContextVar[Any] | None = getattr(_slcv, "_ASYNC_CALLING_THREAD", None)
_ASYNC_STACK: ContextVar[Any] | None = getattr(_slcv, "_ASYNC_CALLING_STACK", None)

#: The tokens :func:`mark_async_caller` set, for :func:`unmark_async_caller`.
AsyncCaller: TypeAlias = "tuple[Token[Any] | None, Token[Any] | None]"


def mark_async_caller(frame: FrameType | None) -> AsyncCaller:
    """Record the calling thread and *frame* like structlog's async log methods (if it has them)."""
    thread = (
        _ASYNC_THREAD.set((threading.get_ident(), threading.current_thread().name))
        if _ASYNC_THREAD is not None
        else None
    )
    stack = _ASYNC_STACK.set(frame) if _ASYNC_STACK is not None else None
    return thread, stack


def unmark_async_caller(tokens: AsyncCaller) -> None:
    """Undo :func:`mark_async_caller`."""
    thread, stack = tokens
    if stack is not None and _ASYNC_STACK is not None:
        _ASYNC_STACK.reset(stack)
    if thread is not None and _ASYNC_THREAD is not None:
        _ASYNC_THREAD.reset(thread)
