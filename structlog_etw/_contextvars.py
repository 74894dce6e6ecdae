"""Whether any ``etw_*`` control key was ever bound through structlog's contextvars.

The one mechanism the renderer and the wrapper share to skip contextvar look-ups that cannot
find anything.  structlog keeps one ``ContextVar`` per key in its registry
(``structlog.contextvars._CONTEXT_VARS``) and adds it the first time a key is bound
(``bind_contextvars``/``bound_contextvars``), never removing it.  On import this module swaps
that registry for a ``dict`` subclass with the same contents which sets :data:`watch`'s
``bound`` flag when an ``etw_*`` key is first added, and then calls the hooks registered with
:func:`on_first_bind` (the wrapper uses that to switch its built classes to methods that
read contextvars).  Until then nothing on the hot paths touches contextvars at all; after it,
:func:`ctx_has_etw` checks the registered variables' values.

If structlog has no such registry the flag is set from the start (always exact, a little
slower).  A registry key added bypassing the dict methods below is not seen: structlog only
uses ``registry[key] = var``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Final

import structlog.contextvars as _slcv

__all__ = ["CONTROL_KEYS", "ctx_has_etw", "on_first_bind", "watch"]

#: The control keys the renderer takes from the call, the bound context or contextvars.
CONTROL_KEYS: Final = ("etw_keyword", "etw_level", "etw_opcode", "etw_tags", "etw_name")
_PREFIX: Final[str] = getattr(_slcv, "STRUCTLOG_KEY_PREFIX", "structlog_")
_CTX_KEYS: Final = tuple(_PREFIX + k for k in CONTROL_KEYS)
_CTX_SET: Final = frozenset(_CTX_KEYS)


class _CtxWatch:
    """``bound``: an ``etw_*`` key was bound through contextvars at least once in this process.

    ``vars``: structlog's ``ContextVar`` objects of those keys (re-built whenever the flag is
    set or a new one appears).
    """

    __slots__ = ("bound", "hooks", "lock", "vars")

    def __init__(self) -> None:
        self.bound = False
        self.vars: tuple[Any, ...] = ()
        self.hooks: list[Callable[[], None]] = []
        self.lock = threading.Lock()

    def flip(self, registry: dict[str, Any]) -> None:
        """Record that an ``etw_*`` contextvar exists; run the hooks the first time."""
        with self.lock:
            self.vars = tuple(registry[k] for k in _CTX_KEYS if k in registry)
            if self.bound:
                return
            self.bound = True
            hooks, self.hooks = self.hooks, []
        for hook in hooks:
            with contextlib.suppress(Exception):  # a hook must never break bind_contextvars
                hook()


watch: Final = _CtxWatch()


class _WatchedRegistry(dict):  # type: ignore[type-arg]
    """structlog's contextvar registry, telling :data:`watch` when an ``etw_*`` key is added."""

    __slots__ = ()

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if key in _CTX_SET:
            watch.flip(self)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        value = super().setdefault(key, default)
        if key in _CTX_SET:
            watch.flip(self)
        return value

    def update(self, *args: Any, **kw: Any) -> None:
        super().update(*args, **kw)
        if not _CTX_SET.isdisjoint(self):
            watch.flip(self)


def _install() -> None:
    registry = getattr(_slcv, "_CONTEXT_VARS", None)
    if not isinstance(registry, dict):  # pragma: no cover - structlog without the registry
        watch.bound = True
        return
    if not isinstance(registry, _WatchedRegistry):
        registry = _WatchedRegistry(registry)
        _slcv._CONTEXT_VARS = registry
    if not _CTX_SET.isdisjoint(registry):  # bound before structlog_etw was imported
        watch.flip(registry)


_install()


def on_first_bind(hook: Callable[[], None]) -> None:
    """Call *hook* once, when the first ``etw_*`` key is bound through contextvars (now if it was)."""
    with watch.lock:
        if not watch.bound:
            watch.hooks.append(hook)
            return
    hook()


def ctx_has_etw() -> bool:
    """Whether an ``etw_*`` key is bound through structlog's contextvars in the current context.

    ``False`` at once while no such key was ever bound in the process.  A registered variable
    holding structlog's "unset" marker (``Ellipsis``, what ``clear_contextvars``/
    ``unbind_contextvars`` leave) does not count.
    """
    if not watch.bound:
        return False
    for var in watch.vars:  # noqa: SIM110 - a plain loop is cheaper than any() + generator
        if var.get(Ellipsis) is not Ellipsis:
            return True
    return False
