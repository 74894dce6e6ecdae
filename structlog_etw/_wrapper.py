"""The zero-cost disabled path: a bound-logger class that returns before building an event dict.

``make_etw_bound_logger`` is to structlog-etw what structlog's ``make_filtering_bound_logger``
is to structlog: everything that can be decided when the class is built is decided then, and
what depends on the bound context and the chain is decided when a logger is created (its class is
chosen in ``__new__``).  A call may be skipped only at a level the logger's chain would give its
``EtwRenderer`` alone (:func:`_plan`); any other chain runs as with structlog's filtering logger.
A log call nobody listens to costs one enable-word read, a check that the renderer is still where
it was in the chain, two dict look-ups (``etw_keyword``/``etw_level`` in the call) and a ``len()``
of structlog's contextvar registry (see :mod:`structlog_etw._contextvars`).  When it cannot return
at once, :meth:`~structlog_etw._resolve.Resolver.listening` decides by the rule the renderer
follows.  An enabled call of an ETW-only chain is written without running it (:func:`_write_direct`),
and ``%``-arguments that do not fit the event text never raise (:func:`_format`).

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
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple, cast

import structlog
from structlog.contextvars import merge_contextvars
from structlog.typing import EventDict, FilteringBoundLogger, WrappedLogger

from ._contextvars import REGISTRY, WATCH, mark_async_caller, unmark_async_caller
from ._levels import (
    LEVEL_NAMES,
    METHOD_LEVELS,
    STDLIB_LEVELS,
    STDLIB_NUMBERS,
    level_from_method,
    method_for_stdlib,
    stdlib_level,
)
from ._provider import Provider
from ._renderer import EtwRenderer, in_processor_formatter, resolver_for
from ._resolve import CONTROL_KEYS, Resolver
from .backends.base import Slot

__all__ = ["EtwEarlyDrop", "make_etw_bound_logger"]


def _maybe_interpolate(event: Any, args: tuple[Any, ...]) -> Any:
    """``event % args`` like structlog's filtering loggers (a lone mapping: dict interpolation)."""
    if not args:
        return event
    if len(args) == 1 and isinstance(args[0], collections.abc.Mapping) and args[0]:
        return event % args[0]
    return event % args


#: The field that holds the positional arguments of a call whose ``event % args`` failed.
FORMAT_ARGS_KEY: Final = "format_args"


def _format(self: Any, event: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``event % args``; when that raises (``log.info("disk at 100%", "sda")``) the template
    stays the event, the arguments go into the ``format_args`` field and the provider counts
    it (``stats()["invalid"]["format_args"]``): a log call never raises."""
    try:
        return _maybe_interpolate(event, args)
    except Exception:
        self._etw.provider.count_invalid(FORMAT_ARGS_KEY)
        kw.setdefault(FORMAT_ARGS_KEY, args)
        return event


def _nop(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
    return None


async def _anop(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
    return None


async def _in_executor(self: Any, method_name: str, event: Any, kw: dict[str, Any]) -> Any:
    """Run the chain in the default executor with a copy of the caller's context (like structlog)."""
    caller = mark_async_caller(sys._getframe().f_back)
    ctx = contextvars.copy_context()
    try:
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: ctx.run(lambda: self._proxy_to_logger(method_name, event, **kw))
        )
    finally:
        unmark_async_caller(caller)


#: The event the async methods pass to their sync method to run only its "does anyone listen" check.
_CHECK_ONLY: Any = object()

# --- what the chain lets the fast path do ------------------------------------------------------

#: ``skip_below`` of a chain whose ``EtwRenderer`` passes nothing on: every level may be skipped.
_EVERY_LEVEL: Final = 1 << 30


class _Direct(NamedTuple):
    """A chain the enabled path writes without running it: ``[merge_contextvars?, renderer]``."""

    renderer: EtwRenderer
    merge: Callable[..., Any] | None
    length: int


class _Plan(NamedTuple):
    """What a logger's chain allows, decided when the logger is bound.

    ``tier``: how many method levels, from debug up, a call may be skipped at when nobody
    listens (0: none, the chain wants every call; 5: all).  ``at``, ``renderer``: where the
    chain's ``EtwRenderer`` is; every skip checks it is still there (``capture_logs()`` and
    reconfiguration replace the contents of a held logger's list; what comes after the
    renderer never sees a call it skips, what comes before only feeds it).  ``direct``: the
    chain, when the enabled path may write without running it.
    """

    tier: int
    at: int
    renderer: object
    direct: _Direct | None


_NO_SKIP: Final = _Plan(0, 0, None, None)


def _same_resolution(renderer: EtwRenderer, resolver: Resolver) -> bool:
    """Whether *renderer* resolves slots as *resolver* does (same provider, keyword and map)."""
    names = renderer.keywords_by_logger
    return (
        renderer.provider is resolver.provider
        and renderer.default_keyword == resolver.default_keyword
        and (names is resolver.names or not (names or resolver.names))
    )


def _plan(resolver: Resolver, processors: object) -> _Plan:
    """The :class:`_Plan` of a chain, for a wrapper class of *resolver*.

    Calls may be skipped only when the chain holds exactly one ``EtwRenderer``, of this
    resolution: then a call whose level that renderer passes on to no later processor
    (``passthrough_level``) does nothing but a trace event.  Any other chain (``capture_logs``,
    ``LogCapture``, a reconfigured application) is run for every call above the minimum level,
    as with structlog's ``make_filtering_bound_logger``.
    """
    if type(processors) not in (list, tuple) or not processors:
        return _NO_SKIP
    chain = cast("list[Any]", processors)
    found = [p for p in chain if isinstance(p, EtwRenderer)]
    if len(found) != 1 or not _same_resolution(found[0], resolver):
        return _NO_SKIP
    renderer = found[0]
    passed_on = renderer.passthrough_level
    skip_below = _EVERY_LEVEL if passed_on is None else passed_on
    tier = sum(1 for level in LEVEL_NAMES if STDLIB_NUMBERS[level] < skip_below)
    direct = None
    if (
        type(renderer) is EtwRenderer  # a subclass may do more in __call__
        and passed_on is None
        and chain[-1] is renderer
        and (len(chain) == 1 or (len(chain) == 2 and chain[0] is merge_contextvars))
    ):
        direct = _Direct(renderer, chain[0] if len(chain) == 2 else None, len(chain))
    return _Plan(tier, chain.index(renderer), renderer, direct)


def _write_direct(self: Any, name: str, event: Any, kw: dict[str, Any], direct: _Direct) -> Any:
    """The enabled call of an ETW-only chain: the event dict structlog would build, written
    without running the chain (no ``DropEvent`` raised and caught).  The chain is checked to be
    the same list contents first; otherwise it runs as usual."""
    chain = self._etw_chain
    renderer = direct.renderer
    merge = direct.merge
    if (
        len(chain) != direct.length
        or chain[-1] is not renderer
        or (merge is not None and chain[0] is not merge)
    ):
        return self._proxy_to_logger(name, event, **kw)
    # What BoundLoggerBase._process_event builds: context, then the call's keys, then "event".
    event_dict = {**self._context, **kw}
    if event is not None:
        event_dict["event"] = event
    logger = self._logger
    if merge is not None:
        try:
            event_dict = merge(logger, name, event_dict)
        except Exception:
            renderer.provider.count_dropped("render_error")
            return None
    renderer.write_event(logger, name, event_dict)
    return None


def _make_methods(
    name: str, etw_level: int, by_name: bool, class_slots: tuple[Slot, ...] | None, skip: bool
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The sync and async log methods for one level.

    With *skip* false the chain wants every call of this level: the methods run it (structlog's
    filtering behaviour, with ``%``-args that cannot be formatted kept as a field).

    With *skip*, the disabled check comes first.  A call returns at once when the slot for this
    level is not enabled, the chain's ``EtwRenderer`` is still where it was at bind time
    (``_etw_at``: a non-negative list index, which the interpreter specialises, unlike ``[-1]``), the
    call passes neither ``etw_keyword`` nor ``etw_level`` (nor ``logger`` when *by_name*: the
    name may select another keyword) and no ``etw_*`` key can come from contextvars: none was
    ever bound through them (``len(REGISTRY) == WATCH.clean_size``), the logger has both keys
    bound, or none holds a value in this context.  Otherwise the exact resolution
    (:meth:`~structlog_etw._resolve.Resolver.listening`, the renderer's rule) decides.  An
    enabled call of an ETW-only chain is written directly (:func:`_write_direct`).

    The slot is the class's own (*class_slots*, held by the closure: no attribute look-up)
    for loggers that bind no ``etw_*`` key, else the one resolved when the logger was bound.
    """
    if not skip:

        def run(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
            if args:
                event = _format(self, event, args, kw)
            return self._proxy_to_logger(name, event, **kw)

        async def arun(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
            if args:
                event = _format(self, event, args, kw)
            return await _in_executor(self, name, event, kw)

        return _named(run, arun, name)

    if class_slots is not None:  # loggers that bind no etw_* key: the class's slot, no logger name
        class_slot = class_slots[etw_level]

        def meth(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
            try:
                if (
                    not class_slot.word[0]
                    and self._etw_chain[self._etw_at] is self._etw_renderer
                    and (
                        (
                            "etw_keyword" not in kw
                            and "etw_level" not in kw
                            and (len(REGISTRY) == WATCH.clean_size or not WATCH.etw_bound())
                        )
                        or not self._etw.listening(etw_level, self._logger, ChainMap(kw, self._context))
                    )
                ):
                    return None
            except Exception:
                pass  # cannot tell (e.g. the chain was emptied): run it
            if event is _CHECK_ONLY:  # asked by the async method
                return True
            if args:
                event = _format(self, event, args, kw)
            direct = self._etw_direct
            if direct is not None:
                return _write_direct(self, name, event, kw, direct)
            return self._proxy_to_logger(name, event, **kw)

    else:  # loggers with etw_* keys bound, or a keywords_by_logger class: the logger's own slots

        def meth(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
            try:
                if (
                    not self._etw_slots[etw_level].word[0]
                    and self._etw_chain[self._etw_at] is self._etw_renderer
                    and (
                        (
                            "etw_keyword" not in kw
                            and "etw_level" not in kw
                            and not (by_name and "logger" in kw)
                            and (
                                len(REGISTRY) == WATCH.clean_size or self._etw_fixed or not WATCH.etw_bound()
                            )
                        )
                        or not self._etw.listening(etw_level, self._logger, ChainMap(kw, self._context))
                    )
                ):
                    return None
            except Exception:
                pass  # cannot tell (e.g. the chain was emptied): run it
            if event is _CHECK_ONLY:  # asked by the async method
                return True
            if args:
                event = _format(self, event, args, kw)
            direct = self._etw_direct
            if direct is not None:
                return _write_direct(self, name, event, kw, direct)
            return self._proxy_to_logger(name, event, **kw)

    async def ameth(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
        if meth(self, _CHECK_ONLY, **kw) is None:  # the same check; nobody listens
            return None
        if args:
            event = _format(self, event, args, kw)
        return await _in_executor(self, name, event, kw)

    return _named(meth, ameth, name)


def _named(
    meth: Callable[..., Any], ameth: Callable[..., Any], name: str
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    meth.__name__ = name
    ameth.__name__ = f"a{name}"
    meth.__doc__ = f"Log *event* at {name} level (returns at once when nobody wants the call)."
    ameth.__doc__ = f"Log *event* at {name} level from async code (chain runs in an executor)."
    return meth, ameth


def _method_table(
    min_level: int, by_name: bool, class_slots: tuple[Slot, ...] | None, tier: int
) -> dict[str, Any]:
    """The log methods of a class built with *min_level* (*by_name*: it has ``keywords_by_logger``;
    *class_slots*: the slots of loggers that bind no ``etw_*`` key, ``None``: each logger's own;
    *tier*: how many levels from debug up may be skipped, see :class:`_Plan`)."""
    # log()/alog() take any level number >= min_level, also one that maps down to a
    # standard level below min_level (25 with min_level 25 -> info): they use "_etw_methods".
    full = {
        name: _make_methods(name, level, by_name, class_slots, level > len(LEVEL_NAMES) - tier)
        for level, name in LEVEL_NAMES.items()
    }
    meths: dict[str, Any] = {"_etw_methods": full}
    for level, name in LEVEL_NAMES.items():
        if STDLIB_NUMBERS[level] < min_level:
            meths[name], meths[f"a{name}"] = _nop, _anop
        else:
            meths[name], meths[f"a{name}"] = full[name]
    for alias in ("fatal", "warn", "msg"):  # structlog's aliases of critical, warning, info
        target = LEVEL_NAMES[METHOD_LEVELS[alias]]
        meths[alias], meths[f"a{alias}"] = meths[target], meths[f"a{target}"]
    return meths


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
    """Base of the classes ``make_etw_bound_logger`` builds: bound slots and the chain's plan
    are resolved at bind time."""

    _etw: Resolver
    _etw_min_level: int
    _etw_slots: tuple[Slot, ...]
    _etw_fixed: bool = False
    _etw_chain: Iterable[Any]
    _etw_renderer: object = None
    _etw_at: int = 0
    _etw_direct: _Direct | None = None
    #: Whether every logger resolves its own slots (the class has ``keywords_by_logger``).
    _etw_by_name: bool
    #: (own slots?, tier) -> the class of loggers of that kind; built on first use.
    _etw_family: dict[tuple[bool, int], type[Any]]
    #: One cached (processors, length, last processor, plan): loggers share their chain.
    _etw_cache: list[tuple[Any, int, Any, _Plan] | None]
    _etw_build: Callable[[tuple[bool, int]], type[Any]]
    #: Whether loggers of this class read the class's own slots (they bind no ``etw_*`` key).
    _etw_own: bool
    #: The class ``make_etw_bound_logger`` returned (every logger of the family is an instance).
    _etw_root: type[Any]
    _etw_methods: dict[str, tuple[Callable[..., Any], Callable[..., Any]]]

    def __new__(
        cls, logger: WrappedLogger = None, processors: Iterable[Any] = (), context: Any = None
    ) -> Any:
        """A logger of the family class its chain and bound keys call for (see :meth:`_etw_kind`).

        Chosen here rather than by assigning ``__class__`` later: an object whose class was
        reassigned loses CPython's inline attribute values, and every call would pay for it.
        Without a context (``copy``/``pickle`` re-creating an object whose state they restore)
        it is a plain instance of *cls*.
        """
        if context is None:
            return object.__new__(cls)
        kind, plan = cls._etw_kind(processors, context)
        self = object.__new__(kind)
        self._etw_renderer = plan.renderer
        self._etw_at = plan.at
        self._etw_direct = plan.direct if type(context) is dict else None
        if not issubclass(kind, cls):  # Python runs __init__ only for instances of the class called
            self.__init__(logger, processors, context)
        return self

    def __init__(self, logger: WrappedLogger, processors: Iterable[Any], context: Any) -> None:
        super().__init__(logger, processors, context)
        self._etw_chain = processors  # the list structlog runs (capture_logs changes its contents)
        if not self._etw_own:
            keyword, level = context.get("etw_keyword"), context.get("etw_level")
            self._etw_slots = self._etw.bound_slots(logger, context)
            # With both keys bound, contextvars cannot change the slot (the first place decides).
            self._etw_fixed = keyword is not None and level is not None

    @classmethod
    def _etw_kind(cls, processors: Iterable[Any], context: Any) -> tuple[type[Any], _Plan]:
        """The class of a logger with this chain and context, and the chain's plan.

        The chain decides which levels may be skipped when nobody listens (:func:`_plan`).  A
        logger that binds no ``etw_*`` key (and whose class has no ``keywords_by_logger``) reads
        the class's own slots; one that does reads the slots resolved when it is bound.  All are
        instances of the class ``make_etw_bound_logger`` returned.
        """
        own = not cls._etw_by_name and context.get("etw_keyword") is None and context.get("etw_level") is None
        plan = cls._etw_plan(processors)
        key = (own, plan.tier)
        kind = cls._etw_family.get(key) or cls._etw_build(key)
        return kind, plan

    @classmethod
    def _etw_plan(cls, processors: Any) -> _Plan:
        """:func:`_plan`, cached for the last chain seen (loggers of a configuration share it)."""
        cache = cls._etw_cache
        entry = cache[0]
        try:
            if (
                entry is not None
                and entry[0] is processors
                and entry[1] == len(processors)
                and entry[2] is processors[-1]
            ):
                return entry[3]
            plan = _plan(cls._etw, processors)
            cache[0] = (processors, len(processors), processors[-1], plan)
        except Exception:
            return _NO_SKIP
        return plan

    def _etw_rebound(self) -> Any:
        """This logger's chain and context in a logger of the class they now call for."""
        return self._etw_root(self._logger, self._etw_chain, self._context)

    def unbind(self, *keys: str) -> Any:
        """Return a new logger with *keys* removed from the context (``KeyError`` if missing)."""
        return super().unbind(*keys)._etw_rebound()

    def try_unbind(self, *keys: str) -> Any:
        """Like :meth:`unbind`, but missing keys are ignored."""
        return super().try_unbind(*keys)._etw_rebound()

    def log(self, level: int, event: Any = None, *args: Any, **kw: Any) -> Any:
        """Log at stdlib level number *level* (custom numbers map to the standard level below)."""
        if level < self._etw_min_level:
            return None
        return self._etw_methods[method_for_stdlib(level)][0](self, event, *args, **kw)

    async def alog(self, level: int, event: Any = None, *args: Any, **kw: Any) -> Any:
        """Async :meth:`log`."""
        if level < self._etw_min_level:
            return None
        return await self._etw_methods[method_for_stdlib(level)][1](self, event, *args, **kw)

    def is_enabled_for(self, level: int) -> bool:
        """Whether *level* passes the minimum level (listeners are checked per call)."""
        return level >= self._etw_min_level

    def get_effective_level(self) -> int:
        """The minimum level this class was built with."""
        return self._etw_min_level

    def is_etw_enabled(self, method_name: str = "info") -> bool:
        """Whether a session listens for this logger's events at *method_name*'s level right now."""
        if STDLIB_LEVELS.get(method_name, 20) < self._etw_min_level:
            return False
        return self._etw.listening(level_from_method(method_name), self._logger, self._context)


def _build(
    name: str, base: type[_EtwBoundLoggerBase], namespace: dict[str, Any]
) -> type[_EtwBoundLoggerBase]:
    return cast("type[_EtwBoundLoggerBase]", type(name, (base,), namespace))


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
    logger's name, else *default_keyword*; ``etw_level`` overrides the level the same way (an
    invalid value means the default, as in the renderer).  Until an ``etw_*`` key is first
    bound through contextvars anywhere in the process, checking them costs a ``len()`` of
    structlog's registry; after that, a few ``ContextVar.get()`` unless the logger has both
    keys bound.  When someone listens, the call behaves exactly like structlog's bound logger
    (processors run, ``exception`` adds ``exc_info``); a chain that is exactly
    ``[merge_contextvars, renderer]`` or ``[renderer]`` is written without running it, with the
    same events.

    Calls are skipped only when the logger's chain (read when the logger is created, checked per
    call) holds exactly one ``EtwRenderer`` of this provider and that renderer passes nothing on
    below the call's level (``passthrough``); any other chain - ``structlog.testing.capture_logs()``,
    a ``LogCapture``, a reconfigured application - runs for every call at or above *min_level*,
    as with ``make_filtering_bound_logger``.  ``%``-arguments that do not fit the event text are
    written as a ``format_args`` field and counted (``stats()["invalid"]["format_args"]``) instead
    of raising.

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
    min_level = stdlib_level(min_level)
    resolver = resolver_for(provider_or_name, default_keyword, keywords_by_logger, group, provider_id)
    by_name = resolver.by_name  # the keyword follows each logger's name: every logger resolves its slots
    class_slots = None if by_name else resolver.level_slots(resolver.default_keyword, 0)
    level_name = logging.getLevelName(min_level).capitalize().replace(" ", "")
    cls_name = f"EtwBoundLoggerAt{level_name}"
    family: dict[tuple[bool, int], type[Any]] = {}
    lock = threading.Lock()

    def build(key: tuple[bool, int]) -> type[Any]:
        """The class of loggers of *key* (own slots?, tier); a subclass of ``cls``."""
        own, tier = key
        with lock:
            if key not in family:
                family[key] = _build(
                    cls_name,
                    cls,
                    {
                        **_method_table(min_level, by_name, class_slots if own else None, tier),
                        "_etw_own": own,
                    },
                )
            return family[key]

    full_tier = len(LEVEL_NAMES)
    cls = _build(
        cls_name,
        _EtwBoundLoggerBase,
        {
            **_method_table(min_level, by_name, class_slots, full_tier),
            "_etw": resolver,
            "_etw_min_level": min_level,
            "_etw_by_name": by_name,
            "_etw_family": family,
            "_etw_cache": [None],
            "_etw_build": staticmethod(build),
            "_etw_own": not by_name,
            "exception": _exception,
            "aexception": _aexception,
        },
    )
    # The class itself serves loggers of an ETW-only chain that bind no etw_* key (the usual case).
    family[(not by_name, full_tier)] = cls
    cls._etw_root = cls
    return cast("type[FilteringBoundLogger]", cls)


_CONTROL_SET: Final = frozenset(CONTROL_KEYS)


class EtwEarlyDrop:
    """A processor that drops an event at the front of the chain when no session listens.

    For users who keep another wrapper class: put it first in ``processors`` (it reads
    contextvar-bound ``etw_keyword``/``etw_level`` itself, so it may come before
    ``merge_contextvars``).  It raises ``structlog.DropEvent`` when the provider's slot for the
    event's level and keyword is not enabled.  An event without any ``etw_*`` key (in the
    event dict or in contextvars) costs one dict look-up of a slot prebuilt per method name
    (plus the logger-name look-up with *keywords_by_logger*) and one enable-word read; only an
    event with such a key takes the full resolution (the renderer's rule).  Its cost is still
    that of a structlog call that builds the event dict and enters the chain (several times the
    wrapper's disabled path, which returns before any event dict exists); it saves the rest of
    the chain.  Never raises anything else: when in doubt it lets the event through.  It takes
    the same provider options as :func:`make_etw_bound_logger` (``group``, ``provider_id``, ...).
    """

    __slots__ = ("_resolver",)

    def __init__(
        self,
        provider_or_name: str | Provider | EtwRenderer,
        *,
        default_keyword: int | None = None,
        keywords_by_logger: Mapping[str, int] | None = None,
        group: str | None = None,
        provider_id: uuid.UUID | str | None = None,
    ) -> None:
        self._resolver = resolver_for(
            provider_or_name, default_keyword, keywords_by_logger, group, provider_id
        )

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        """Return *event_dict* unchanged, or raise ``DropEvent`` when nobody listens."""
        resolver = self._resolver
        if _CONTROL_SET.isdisjoint(event_dict) and (
            len(REGISTRY) == WATCH.clean_size or not WATCH.etw_bound()
        ):
            try:
                if resolver.by_name:
                    enabled = resolver.method_slot(method_name, logger, event_dict).word[0]
                else:  # Resolver.method_slot's answer without the call
                    enabled = resolver.by_method[method_name].word[0]
            except Exception:
                return event_dict  # cannot tell: let the chain run
        else:
            enabled = resolver.listening(level_from_method(method_name), logger, event_dict)
        if enabled or in_processor_formatter(event_dict, 1):
            # inside a ProcessorFormatter DropEvent would reach the application: let the chain run
            # (its EtwRenderer then writes nothing and returns "")
            return event_dict
        raise structlog.DropEvent

    def __repr__(self) -> str:
        return f"EtwEarlyDrop({self._resolver.provider!r})"
