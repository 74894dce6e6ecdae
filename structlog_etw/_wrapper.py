"""The zero-cost disabled path: a bound-logger class that returns before building an event dict.

``make_etw_bound_logger`` is to structlog-etw what structlog's ``make_filtering_bound_logger``
is to structlog: everything that can be decided when the class is built is decided then, and
what depends on bound context is decided at bind time.  A log call nobody listens to costs
one enable-word read (plus two dict look-ups when the call passes keyword arguments).

``EtwEarlyDrop`` is the processor form for users who keep another wrapper class.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import logging
import sys
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import structlog
import structlog.contextvars as _slcv
from structlog.typing import EventDict, FilteringBoundLogger, WrappedLogger

from ._contextvars import CONTROL_KEYS, ctx_has_etw, on_first_bind, watch
from ._provider import Provider, check_provider_id, get_provider
from ._renderer import EtwRenderer
from ._resolve import METHOD_LEVELS, KeywordsByLogger, level_from_method, valid_keyword, valid_level
from .backends.base import Slot

__all__ = ["EtwEarlyDrop", "make_etw_bound_logger"]

_STDLIB_LEVEL = {"critical": 50, "error": 40, "warning": 30, "info": 20, "debug": 10}
_ETW_LEVEL = {"critical": 1, "error": 2, "warning": 3, "info": 4, "debug": 5}
_NAME_FOR_ETW = {1: "critical", 2: "error", 3: "warning", 4: "info", 5: "debug"}
_NAME_TO_STDLIB = {
    "critical": 50,
    "fatal": 50,
    "error": 40,
    "exception": 40,
    "warning": 30,
    "warn": 30,
    "info": 20,
    "msg": 20,
    "debug": 10,
    "notset": 0,
}


def _cv_value(key: str) -> Any:
    """The value ``bind_contextvars(key=...)`` set in this context, else ``Ellipsis`` (no copy)."""
    var = _slcv._CONTEXT_VARS.get(_slcv.STRUCTLOG_KEY_PREFIX + key)
    return Ellipsis if var is None else var.get()


_ASYNC_THREAD: contextvars.ContextVar[Any] | None = getattr(_slcv, "_ASYNC_CALLING_THREAD", None)
_ASYNC_STACK: contextvars.ContextVar[Any] | None = getattr(_slcv, "_ASYNC_CALLING_STACK", None)


def _maybe_interpolate(event: Any, args: tuple[Any, ...]) -> Any:
    """``event % args`` like structlog's filtering loggers (a lone mapping: dict interpolation)."""
    if not args:
        return event
    if len(args) == 1 and isinstance(args[0], collections.abc.Mapping) and args[0]:
        return event % args[0]
    return event % args


def _resolve_provider(
    target: str | Provider | EtwRenderer,
    default_keyword: int | None,
    keywords_by_logger: Mapping[str, int] | None,
    group: str | None,
    provider_id: uuid.UUID | str | None = None,
) -> tuple[Provider, int, KeywordsByLogger]:
    """Turn the factory arguments into (provider, default keyword, name map); raise on bad set-up.

    The default keyword and every keyword of the name map are registered at levels 1-5 up
    front (on Linux perf can then name those tracepoints before the first event).
    """
    if default_keyword is not None and not valid_keyword(default_keyword):
        raise ValueError(f"default_keyword must be an int in [0, 2**64), got {default_keyword!r}")
    if isinstance(target, EtwRenderer):
        provider = target.provider
        keyword = target.default_keyword if default_keyword is None else default_keyword
        names = (
            target.keywords_by_logger if keywords_by_logger is None else KeywordsByLogger(keywords_by_logger)
        )
    elif isinstance(target, Provider):
        provider = target
        keyword = provider.default_keyword if default_keyword is None else default_keyword
        names = KeywordsByLogger(keywords_by_logger)
    elif isinstance(target, str):
        names = KeywordsByLogger(keywords_by_logger)
        options: dict[str, Any] = {"keywords": names.keywords()}
        if group is not None:
            options["group"] = group
        if provider_id is not None:
            options["provider_id"] = provider_id
        if default_keyword is not None:
            options["default_keyword"] = default_keyword
        provider = get_provider(target, **options)
        keyword = provider.default_keyword if default_keyword is None else default_keyword
    else:
        raise TypeError(f"expected a provider name, a Provider or an EtwRenderer, got {target!r}")
    if provider_id is not None and not isinstance(target, str):
        check_provider_id(provider, provider_id)
    for extra in (keyword, *names.keywords()):
        for level in range(1, 6):
            provider.slot(level, extra)
    return provider, keyword, names


class _EtwState:
    """What one wrapper class decided at build time (shared by its instances)."""

    __slots__ = ("default_keyword", "has_names", "names", "provider", "slots")

    def __init__(self, provider: Provider, default_keyword: int, names: KeywordsByLogger) -> None:
        self.provider = provider
        self.default_keyword = default_keyword
        self.names = names
        self.has_names = bool(names)  # KeywordsByLogger.__bool__ is a Python call: once here
        # (keyword, fixed level or 0) -> slot per ETW level, index 0 unused.
        self.slots: dict[tuple[int, int], tuple[Slot, ...]] = {}

    def slots_for(self, keyword: int, fixed_level: int) -> tuple[Slot, ...]:
        key = (keyword, fixed_level)
        try:
            return self.slots[key]
        except KeyError:
            pass
        provider = self.provider
        if fixed_level:
            one = provider.slot(fixed_level, keyword)
            slots: tuple[Slot, ...] = (one, one, one, one, one, one)
        else:
            first = provider.slot(1, keyword)
            slots = (first, first, *(provider.slot(lvl, keyword) for lvl in range(2, 6)))
        if len(self.slots) < 1024:
            self.slots[key] = slots
        return slots

    def name_keyword(self, logger: object, context: Mapping[str, Any]) -> int:
        """The keyword a logger's name selects (bound ``logger`` key, else the wrapped logger's ``name``)."""
        if self.has_names:
            name = context.get("logger")
            if type(name) is not str:
                name = getattr(logger, "name", None)
            keyword = self.names.lookup(name)
            if keyword is not None:
                return keyword
        return self.default_keyword

    def listening(
        self, etw_level: int, context: Mapping[str, Any], logger: object, kw: Mapping[str, Any]
    ) -> bool:
        """The full (slow) resolution: call > bound > contextvars > logger name > default."""
        try:
            level = kw.get("etw_level")
            if not valid_level(level):
                level = context.get("etw_level")
                if not valid_level(level):
                    level = _cv_value("etw_level") if watch.bound else None
                    if not valid_level(level):
                        level = etw_level
            keyword = kw.get("etw_keyword")
            if not valid_keyword(keyword):
                keyword = context.get("etw_keyword")
                if not valid_keyword(keyword):
                    keyword = _cv_value("etw_keyword") if watch.bound else None
                    if not valid_keyword(keyword):
                        keyword = self.name_keyword(logger, context)
            return bool(self.provider.slot(cast(int, level), cast(int, keyword)).word[0])
        except Exception:
            return True  # cannot tell: let the chain run; the renderer decides and counts


def _nop(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
    return None


async def _anop(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
    return None


async def _in_executor(self: Any, method_name: str, event: Any, kw: dict[str, Any]) -> Any:
    """Run the chain in the default executor with a copy of the caller's context (like structlog)."""
    thread_token = (
        _ASYNC_THREAD.set((threading.get_ident(), threading.current_thread().name))
        if _ASYNC_THREAD is not None
        else None
    )
    stack_token = _ASYNC_STACK.set(sys._getframe().f_back) if _ASYNC_STACK is not None else None
    ctx = contextvars.copy_context()
    try:
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: ctx.run(lambda: self._proxy_to_logger(method_name, event, **kw))
        )
    finally:
        if stack_token is not None and _ASYNC_STACK is not None:
            _ASYNC_STACK.reset(stack_token)
        if thread_token is not None and _ASYNC_THREAD is not None:
            _ASYNC_THREAD.reset(thread_token)


def _make_methods(name: str, etw_level: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The sync and async log methods for one level; the disabled check comes first.

    The check reads the enable word of the slot resolved at bind time; only a call with an
    ``etw_keyword``/``etw_level`` argument takes the slower exact resolution.
    """

    def meth(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
        if not self._etw_slots[etw_level].word[0] and (
            (not kw or ("etw_keyword" not in kw and "etw_level" not in kw))
            or not self._etw.listening(etw_level, self._context, self._logger, kw)
        ):
            return None
        return self._proxy_to_logger(name, _maybe_interpolate(event, args) if args else event, **kw)

    async def ameth(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
        if not self._etw_slots[etw_level].word[0] and (
            (not kw or ("etw_keyword" not in kw and "etw_level" not in kw))
            or not self._etw.listening(etw_level, self._context, self._logger, kw)
        ):
            return None
        return await _in_executor(self, name, _maybe_interpolate(event, args), kw)

    meth.__name__ = name
    ameth.__name__ = f"a{name}"
    meth.__doc__ = f"Log *event* at {name} level (returns at once when nobody listens)."
    ameth.__doc__ = f"Log *event* at {name} level from async code (chain runs in an executor)."
    return meth, ameth


def _make_cv_methods(name: str, etw_level: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Like :func:`_make_methods`, but contextvar-bound ``etw_*`` keys count too.

    Classes switch to these the first time an ``etw_*`` key is bound through structlog's
    contextvars anywhere in the process (``_ctxwatch``); until then no call reads contextvars.
    A disabled call then also checks those variables (unless keyword and level are both bound
    on the logger) and takes the exact resolution when one is set.
    """

    def meth(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
        if not self._etw_slots[etw_level].word[0] and (
            (
                (not kw or ("etw_keyword" not in kw and "etw_level" not in kw))
                and (not self._etw_cv or not ctx_has_etw())
            )
            or not self._etw.listening(etw_level, self._context, self._logger, kw)
        ):
            return None
        return self._proxy_to_logger(name, _maybe_interpolate(event, args) if args else event, **kw)

    async def ameth(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
        if not self._etw_slots[etw_level].word[0] and (
            (
                (not kw or ("etw_keyword" not in kw and "etw_level" not in kw))
                and (not self._etw_cv or not ctx_has_etw())
            )
            or not self._etw.listening(etw_level, self._context, self._logger, kw)
        ):
            return None
        return await _in_executor(self, name, _maybe_interpolate(event, args), kw)

    meth.__name__ = name
    ameth.__name__ = f"a{name}"
    meth.__doc__ = f"Log *event* at {name} level (returns at once when nobody listens)."
    ameth.__doc__ = f"Log *event* at {name} level from async code (chain runs in an executor)."
    return meth, ameth


def _method_table(
    factory: Callable[[str, int], tuple[Callable[..., Any], Callable[..., Any]]], min_level: int
) -> dict[str, Any]:
    """The log methods of a class built with *min_level*, made by *factory*."""
    # log()/alog() take any level number >= min_level, also one that maps down to a
    # standard level below min_level (25 with min_level 25 -> info): they use "_etw_methods".
    full = {name: factory(name, etw_level) for name, etw_level in _ETW_LEVEL.items()}
    meths: dict[str, Any] = {"_etw_methods": full}
    for name in _ETW_LEVEL:
        if _STDLIB_LEVEL[name] < min_level:
            meths[name], meths[f"a{name}"] = _nop, _anop
        else:
            meths[name], meths[f"a{name}"] = full[name]
    meths["fatal"] = meths["critical"]
    meths["afatal"] = meths["acritical"]
    meths["warn"] = meths["warning"]
    meths["awarn"] = meths["awarning"]
    meths["msg"] = meths["info"]
    meths["amsg"] = meths["ainfo"]
    return meths


#: Classes built while no ``etw_*`` key was bound through contextvars, to switch to the
#: contextvar-aware methods when the first one is.
_PLAIN_CLASSES: weakref.WeakSet[type[Any]] = weakref.WeakSet()
_PLAIN_LOCK = threading.Lock()


def _switch_to_cv_methods() -> None:
    with _PLAIN_LOCK:
        classes = list(_PLAIN_CLASSES)
        _PLAIN_CLASSES.clear()
    for cls in classes:
        for attr, value in _method_table(_make_cv_methods, cls._etw_min_level).items():
            setattr(cls, attr, value)


on_first_bind(_switch_to_cv_methods)


def _exception(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
    """Log *event* at error level with the current exception (``exc_info=True`` unless given)."""
    kw.setdefault("exc_info", True)
    return self.error(event, *args, **kw)


async def _aexception(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
    """Async :meth:`exception`: the exception is captured before the chain leaves this thread."""
    if kw.get("exc_info", True) is True:
        kw["exc_info"] = sys.exc_info()
    return await self.aerror(event, *args, **kw)


class _EtwBoundLoggerBase(structlog.BoundLoggerBase):
    """Base of the classes ``make_etw_bound_logger`` builds: bound slots are resolved at bind time."""

    _etw: _EtwState
    _etw_min_level: int
    _etw_slots: tuple[Slot, ...]
    _etw_cv: bool
    _etw_methods: dict[str, tuple[Callable[..., Any], Callable[..., Any]]]

    def __init__(self, logger: WrappedLogger, processors: Iterable[Any], context: Any) -> None:
        super().__init__(logger, processors, context)
        self._etw_bind()

    def _etw_bind(self) -> None:
        """Resolve the bound keyword and level to slots once, for every later call."""
        context = self._context
        state = self._etw
        keyword = context.get("etw_keyword")
        bound_keyword = valid_keyword(keyword)
        if not bound_keyword:
            keyword = state.name_keyword(self._logger, context)
        level = context.get("etw_level")
        bound_level = valid_level(level)
        self._etw_slots = state.slots_for(cast(int, keyword), cast(int, level) if bound_level else 0)
        # contextvars (which the renderer reads too) can still change keyword/level per call
        # unless both are bound here (read only once an etw_* contextvar was ever bound).
        self._etw_cv = not (bound_keyword and bound_level)

    def unbind(self, *keys: str) -> Any:
        """Return a new logger with *keys* removed from the context (``KeyError`` if missing)."""
        bl = super().unbind(*keys)
        bl._etw_bind()
        return bl

    def try_unbind(self, *keys: str) -> Any:
        """Like :meth:`unbind`, but missing keys are ignored."""
        bl = super().try_unbind(*keys)
        bl._etw_bind()
        return bl

    def log(self, level: int, event: Any = None, *args: Any, **kw: Any) -> Any:
        """Log at stdlib level number *level* (custom numbers map to the standard level below)."""
        if level < self._etw_min_level:
            return None
        return self._etw_methods[_method_for_stdlib(level)][0](self, event, *args, **kw)

    async def alog(self, level: int, event: Any = None, *args: Any, **kw: Any) -> Any:
        """Async :meth:`log`."""
        if level < self._etw_min_level:
            return None
        return await self._etw_methods[_method_for_stdlib(level)][1](self, event, *args, **kw)

    def is_enabled_for(self, level: int) -> bool:
        """Whether *level* passes the minimum level (listeners are checked per call)."""
        return level >= self._etw_min_level

    def get_effective_level(self) -> int:
        """The minimum level this class was built with."""
        return self._etw_min_level

    def is_etw_enabled(self, method_name: str = "info") -> bool:
        """Whether a session listens for this logger's events at *method_name*'s level right now."""
        if _NAME_TO_STDLIB.get(method_name, 20) < self._etw_min_level:
            return False
        return self._etw.listening(level_from_method(method_name), self._context, self._logger, {})


def _method_for_stdlib(level: int) -> str:
    if level >= 50:
        return "critical"
    if level >= 40:
        return "error"
    if level >= 30:
        return "warning"
    if level >= 20:
        return "info"
    return "debug"


def make_etw_bound_logger(
    provider_or_name: str | Provider | EtwRenderer,
    min_level: int | str = logging.NOTSET,
    *,
    default_keyword: int | None = None,
    keywords_by_logger: Mapping[str, int] | None = None,
    group: str | None = None,
    provider_id: uuid.UUID | str | None = None,
) -> type[FilteringBoundLogger]:
    """Build a bound-logger class whose calls return at once when no trace session listens.

    Use it as ``structlog.configure(wrapper_class=make_etw_bound_logger("MyCompany_MyService"))``
    next to an ``EtwRenderer`` for the same provider.  Like structlog's
    ``make_filtering_bound_logger`` it has ``debug``/``info``/``warning``/``warn``/``error``/
    ``exception``/``critical``/``fatal``/``msg``/``log`` and ``a``-prefixed async variants, and
    methods below *min_level* are a plain ``return None``.  A method above it first reads the
    enable word of the provider's slot for the call's level and keyword and returns ``None``
    before any event dict is built when it is zero.  The keyword is the call's
    ``etw_keyword``, else the bound one (resolved once at bind time), else one bound with
    ``structlog.contextvars.bind_contextvars``, else the one *keywords_by_logger* gives the
    logger's name, else *default_keyword*; ``etw_level`` overrides the level the same way.
    Contextvars cost nothing until an ``etw_*`` key is first bound through them anywhere in the
    process: then every class switches to methods whose disabled path also checks those
    variables (a few ``ContextVar.get()``).  When someone
    listens, the call behaves exactly like structlog's bound logger (processors run,
    ``exception`` adds ``exc_info``).

    Args:
        provider_or_name: a provider name (shared with renderers of that name), a
            ``Provider``, or an ``EtwRenderer`` whose provider, default keyword and
            keywords by logger name are then used.
        min_level: stdlib level number or name (``"info"``); calls below it are dropped.
        default_keyword: keyword of events without ``etw_keyword`` (default: the provider's, 1).
        keywords_by_logger: logger name (or dotted prefix, or ``"prefix*"``) -> keyword;
            must match the renderer's.  Its keywords are registered up front.
        group: provider group (only with a provider name).
        provider_id: ETW provider GUID (``uuid.UUID`` or GUID text) instead of the name hash;
            with a ``Provider`` or ``EtwRenderer`` it must equal theirs.

    Raises:
        ValueError, TypeError: on an invalid set-up (never at log time).
    """
    if isinstance(min_level, str):
        try:
            min_level = _NAME_TO_STDLIB[min_level.lower()]
        except KeyError:
            raise ValueError(f"min_level: unknown level name {min_level!r}") from None
    if type(min_level) is not int:
        raise TypeError(f"min_level must be an int or a level name, got {min_level!r}")
    provider, keyword, names = _resolve_provider(
        provider_or_name, default_keyword, keywords_by_logger, group, provider_id
    )
    state = _EtwState(provider, keyword, names)
    with _PLAIN_LOCK:
        plain = not watch.bound
        meths = _method_table(_make_methods if plain else _make_cv_methods, min_level)
        meths.update(
            {"_etw": state, "_etw_min_level": min_level, "exception": _exception, "aexception": _aexception}
        )
        level_name = logging.getLevelName(min_level).capitalize().replace(" ", "")
        cls = type(f"EtwBoundLoggerAt{level_name}", (_EtwBoundLoggerBase,), meths)
        if plain:
            _PLAIN_CLASSES.add(cls)
    if plain and watch.bound:  # an etw_* contextvar appeared while the class was being built
        _switch_to_cv_methods()
    return cast("type[FilteringBoundLogger]", cls)


_CONTROL_SET = frozenset(CONTROL_KEYS)
_DropEvent = structlog.DropEvent


class EtwEarlyDrop:
    """A processor that drops an event at the front of the chain when no session listens.

    For users who keep another wrapper class: put it first in ``processors`` (it reads
    contextvar-bound ``etw_keyword``/``etw_level`` itself, so it may come before
    ``merge_contextvars``).  It raises ``structlog.DropEvent`` when the provider's slot for the
    event's level and keyword is not enabled.  An event without any ``etw_*`` key (in the
    event dict or in contextvars) costs one dict look-up of a slot prebuilt per method name
    (plus the logger-name look-up with *keywords_by_logger*) and one enable-word read; only an
    event with such a key takes the full resolution.  Its cost is still that of a structlog
    call that builds the event dict and enters the chain (several times the wrapper's disabled
    path, which returns before any event dict exists); it saves the rest of the chain.
    Never raises anything else: when in doubt it lets the event through.  It takes the same
    provider options as :func:`make_etw_bound_logger` (``group``, ``provider_id``, ...).
    """

    __slots__ = ("_by_method", "_lookup", "_names", "_state", "_tables", "_verbose")

    def __init__(
        self,
        provider_or_name: str | Provider | EtwRenderer,
        *,
        default_keyword: int | None = None,
        keywords_by_logger: Mapping[str, int] | None = None,
        group: str | None = None,
        provider_id: uuid.UUID | str | None = None,
    ) -> None:
        state = _EtwState(
            *_resolve_provider(provider_or_name, default_keyword, keywords_by_logger, group, provider_id)
        )
        self._state = state
        self._names = bool(state.names)
        # method name -> slot at the default keyword (used without keywords_by_logger)
        slots = state.slots_for(state.default_keyword, 0)
        self._by_method: dict[str, Slot] = {name: slots[level] for name, level in METHOD_LEVELS.items()}
        self._verbose = slots[5]  # unknown method names: level 5, like the renderer
        self._lookup = state.names.lookup
        # keyword -> slot per ETW level, for the default keyword and every name keyword
        self._tables = {kw: state.slots_for(kw, 0) for kw in (state.default_keyword, *state.names.keywords())}

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        """Return *event_dict* unchanged, or raise ``DropEvent`` when nobody listens."""
        if _CONTROL_SET.isdisjoint(event_dict) and (not watch.bound or not ctx_has_etw()):
            if self._names:
                try:
                    name = event_dict.get("logger")
                    if type(name) is not str:
                        name = getattr(logger, "name", None)
                    keyword = self._lookup(name)
                    slots = self._tables[self._state.default_keyword if keyword is None else keyword]
                    enabled = slots[METHOD_LEVELS.get(method_name, 5)].word[0]
                except Exception:
                    return event_dict  # cannot tell: let the chain run
            else:
                enabled = self._by_method.get(method_name, self._verbose).word[0]
            if enabled:
                return event_dict
            raise _DropEvent
        if not self._state.listening(level_from_method(method_name), event_dict, logger, {}):
            raise _DropEvent
        return event_dict

    def __repr__(self) -> str:
        return f"EtwEarlyDrop({self._state.provider!r})"
