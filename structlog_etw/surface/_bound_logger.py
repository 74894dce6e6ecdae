"""``make_etw_bound_logger``: the classes it builds, their cache, and how they pickle.

``make_etw_bound_logger`` is to structlog-etw what structlog's ``make_filtering_bound_logger``
is to structlog.  One class per configuration (provider, minimum level, default keyword, keyword
map), cached while alive; below it, one class per chain plan (:mod:`structlog_etw.surface._chain`),
whose log methods :mod:`structlog_etw.surface._methods` specialises when the class is built,
never per call.  A logger's class follows its chain's plan (chosen in ``__new__``).  Classes and
loggers pickle as their ``make_etw_bound_logger`` arguments (names and values, never a provider
or renderer object).
"""

from __future__ import annotations

import copyreg
import logging
import operator
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

import structlog
from structlog.typing import FilteringBoundLogger, WrappedLogger

from .._util.bounded import BoundedCache
from ..backends.base import Slot
from ..context._resolve import Resolver
from ..formats._levels import STDLIB_LEVELS, level_from_method, method_for_stdlib, stdlib_level
from ..provider._provider import Provider
from ._chain import ALL_RUN, Plan, plan_for
from ._methods import EtwLogger, alog_exception, log_exception, method_table
from ._renderer import EtwRenderer, resolver_for

__all__ = ["make_etw_bound_logger"]


class _Config:
    """One ``make_etw_bound_logger`` configuration: its resolver and minimum level (what it is
    pickled as), and its classes (one per chain plan, built once, at most :data:`_CLASSES_MAX`)."""

    __slots__ = ("_classes", "classes", "last", "min_level", "name", "resolver", "root")

    def __init__(self, resolver: Resolver, min_level: int, name: str) -> None:
        self.resolver = resolver
        self.min_level = min_level
        self.name = name
        # (a plan's key holds the configuration's names, never logged data: the count bounds it)
        self._classes: BoundedCache[tuple[Any, ...], type[Any]] = BoundedCache(_CLASSES_MAX, _CLASSES_MAX)
        self.classes = self._classes.entries
        #: The last chain seen and its plan: (the chain's class, its members then, plan).
        self.last: tuple[type[Any], tuple[Any, ...], Plan] | None = None
        self.root: type[Any] = object

    def plan(self, processors: Any) -> Plan:
        """:func:`~structlog_etw.surface._chain.plan_for`, cached for the last chain seen (loggers of
        a configuration share it).

        The cached plan is the chain's while the chain is a list or tuple of the same members, in
        the same order, each the same object (one pass over the chain, by identity): a member
        replaced anywhere, added or removed - in that list or another - makes a new plan."""
        entry = self.last
        try:
            if (
                entry is not None
                and type(processors) is entry[0]
                and len(processors) == len(entry[1])
                and all(map(operator.is_, processors, entry[1]))
            ):
                return entry[2]
            plan = plan_for(self.resolver, processors)
            if type(processors) in (list, tuple):
                self.last = (type(processors), tuple(processors), plan)
        except Exception:
            return Plan(ALL_RUN, self.resolver)
        return plan

    def class_for(self, plan: Plan) -> type[Any]:
        """The class of loggers with *plan* (built on first use; a subclass of the root class)."""
        cls = self.classes.get(plan.key)
        if cls is not None:
            return cls
        # No lock waited for (nothing may wait on one in a fork child): two threads may build the
        # class; a full cache starts over (loggers keep their classes; new ones rebuild them).
        built = _build(self.name, self.root, method_table(self.min_level, plan))
        self._classes.store(plan.key, built)
        return self.classes.get(plan.key, built)


#: Classes per configuration (chains with their renderer at another index, other pass-through levels).
_CLASSES_MAX: Final = 64


class _EtwLoggerType(type):
    """The metaclass of the classes ``make_etw_bound_logger`` builds: pickled as its arguments."""


def _class_from_spec(spec: dict[str, Any]) -> type[Any]:
    """The class a pickled class stands for: its configuration, rebuilt from names and values."""
    resolver = resolver_for(
        spec["provider"], spec["default_keyword"], None, spec["group"], spec["provider_id"]
    )
    if spec["names"] is not None:
        resolver.set_names(spec["names"])
    return _configured(resolver, spec["min_level"])


def _reduce_class(cls: type[Any]) -> tuple[Any, ...]:
    """A class pickles as its configuration's names and values (a provider by its name, group
    and GUID; the keyword map): never a provider or renderer object, so that it pickles whether
    or not they do."""
    config: _Config = cls._etw_config
    resolver = config.resolver
    provider = resolver.provider
    spec = {
        "provider": provider.name,
        "group": provider.group,
        "provider_id": provider.provider_id if provider.format == "tracelogging" else None,
        "default_keyword": resolver.default_keyword,
        "names": resolver.names if resolver.by_name else None,
        "min_level": config.min_level,
    }
    return (_class_from_spec, (spec,))


copyreg.pickle(_EtwLoggerType, _reduce_class)


def _restore(root: type[Any], logger: Any, processors: Any, context: Any) -> Any:
    """A pickled or copied logger: its configuration's class for its chain, its state."""
    return root(logger, processors, context)


class _EtwBoundLoggerBase(structlog.BoundLoggerBase, metaclass=_EtwLoggerType):
    """Base of the classes ``make_etw_bound_logger`` builds; the class of a logger follows its
    chain's plan (chosen in ``__new__``)."""

    _etw_config: _Config
    _etw_plan: Plan
    _etw_methods: dict[str, tuple[Callable[..., Any], Callable[..., Any]]]
    #: The logger's slots per ETW level (bound ``etw_*`` keys and logger name resolved at bind
    #: time), the resolver they come from, and whether both keys are bound (contextvars cannot
    #: change the slot then).
    _etw_slots: tuple[Slot, ...]
    _etw_chain: Any
    _etw_resolver: Resolver | None = None
    _etw_fixed: bool = False

    def __new__(
        cls, logger: WrappedLogger = None, processors: Iterable[Any] = (), context: Any = None
    ) -> Any:
        """A logger of the class its chain calls for (one per chain plan of the configuration).

        Chosen here rather than by assigning ``__class__`` later: an object whose class was
        reassigned loses CPython's inline attribute values, and every call would pay for it.
        """
        config = cls._etw_config
        kind = config.class_for(config.plan(processors))
        self = object.__new__(kind)
        if not issubclass(kind, cls):  # Python runs __init__ only for instances of the class called
            self.__init__(logger, processors, context)
        return self

    def __init__(self, logger: WrappedLogger, processors: Iterable[Any], context: Any) -> None:
        super().__init__(logger, processors, context)
        self._etw_chain = processors  # the list structlog runs (capture_logs changes its contents)
        self._etw_bind_slots(self._etw_plan.resolver)

    def _etw_bind_slots(self, resolver: Resolver) -> None:
        """Resolve this logger's slots with *resolver* (at bind time, or after the map changed)."""
        context = self._context
        try:
            self._etw_slots = resolver.bound_slots(self._logger, context)
            self._etw_fixed = context.get("etw_keyword") is not None and context.get("etw_level") is not None
        except Exception:  # a context without .get(): every call takes the full resolution
            self._etw_slots = resolver.level_slots(resolver.default_keyword, 0)
            self._etw_fixed = False
        self._etw_resolver = resolver

    def unbind(self, *keys: str) -> Any:
        """Return a new logger with *keys* removed from the context (``KeyError`` if missing)."""
        logger = super().unbind(*keys)
        logger._etw_bind_slots(logger._etw_plan.resolver)  # structlog removes them after bind()
        return logger

    def try_unbind(self, *keys: str) -> Any:
        """Like :meth:`unbind`, but missing keys are ignored."""
        logger = super().try_unbind(*keys)
        logger._etw_bind_slots(logger._etw_plan.resolver)
        return logger

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled and copied as the configuration's class (its ``make_etw_bound_logger``
        arguments) with this logger's wrapped logger, chain and context."""
        return (_restore, (self._etw_config.root, self._logger, self._etw_chain, self._context))

    def log(self, level: int, event: Any = None, *args: Any, **kw: Any) -> Any:
        """Log at stdlib level number *level* (custom numbers map to the standard level below)."""
        if level < self._etw_config.min_level:
            return None
        return self._etw_methods[method_for_stdlib(level)][0](self, event, *args, **kw)

    async def alog(self, level: int, event: Any = None, *args: Any, **kw: Any) -> Any:
        """Async :meth:`log`."""
        if level < self._etw_config.min_level:
            return None
        return await self._etw_methods[method_for_stdlib(level)][1](self, event, *args, **kw)

    def is_enabled_for(self, level: int) -> bool:
        """Whether *level* passes the minimum level (listeners are checked per call)."""
        return level >= self._etw_config.min_level

    def get_effective_level(self) -> int:
        """The minimum level this class was built with."""
        return self._etw_config.min_level

    def is_etw_enabled(self, method_name: str = "info") -> bool:
        """Whether a session listens for this logger's events at *method_name*'s level right now."""
        if STDLIB_LEVELS.get(method_name, 20) < self._etw_config.min_level:
            return False
        resolver = self._etw_plan.current()
        return resolver.listening(level_from_method(method_name), self._logger, self._context)


if TYPE_CHECKING:  # the methods read a logger through this view: the base class must provide it
    _PROVIDES: type[EtwLogger] = _EtwBoundLoggerBase


def _build(name: str, base: type[Any], namespace: dict[str, Any]) -> type[_EtwBoundLoggerBase]:
    return cast("type[_EtwBoundLoggerBase]", _EtwLoggerType(name, (base,), namespace))


#: make_etw_bound_logger's classes by configuration: the same configuration, the same class.
#: Weak values: the cache keeps no class (and so no provider) alive; the key's provider is
#: checked by identity (an ``id`` may be reused once a provider is gone).
_CLASSES: weakref.WeakValueDictionary[tuple[Any, ...], type[Any]] = weakref.WeakValueDictionary()


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
    provider word (:attr:`~structlog_etw.Provider.any_slot`: non-zero while a session listens to
    anything of the provider) and checks that the chain's renderer is still in place; when
    nobody listens it returns ``None`` there, before any event dict is built.  Otherwise the
    call's slot decides, by the renderer's rule: the keyword is the call's ``etw_keyword``, else
    the bound one (resolved once at bind time), else one bound with
    ``structlog.contextvars.bind_contextvars``, else the one the renderer's *current*
    ``keywords_by_logger`` gives the logger's name, else *default_keyword*; ``etw_level``
    overrides the level the same way (an invalid value means the default, as in the renderer).
    When someone listens, the call behaves exactly like structlog's bound logger (processors run,
    ``exception`` adds ``exc_info``); a chain that is exactly ``[merge_contextvars, renderer]``
    or ``[renderer]`` is written without running it, with the same events.

    Calls are skipped only when the logger's chain (read when the logger is created, checked per
    call) holds exactly one ``EtwRenderer`` of this provider, that renderer passes nothing on
    below the call's level (``passthrough``) and every processor before it is one of structlog's
    (or structlog-etw's) known side-effect-free processors (``merge_contextvars``,
    ``add_log_level``, ``TimeStamper``, ``format_exc_info``, ... : docs/usage.md lists
    them).  A chain with another processor before the renderer (OpenTelemetry's structlog
    instrumentation, a metrics counter) runs for every call, so that processor sees every
    event, and the renderer writes nothing when nobody listens; any other chain -
    ``structlog.testing.capture_logs()``, a ``LogCapture``, a reconfigured application - runs
    for every call at or above *min_level*, as with ``make_filtering_bound_logger``.
    ``%``-arguments that do not fit the event text are written as a ``format_args`` field and
    counted (``stats()["invalid"]["format_args"]``) instead of raising.
    The methods take the event positional-only (keywords are then bound without
    comparing their names with parameters': most of a disabled call's cost); ``event=`` as a
    keyword still names the event, and a call passing both writes the positional one and counts
    the keyword (``stats()["invalid"]["event"]``) where structlog's signature raises ``TypeError``.

    The same arguments give the same class; it pickles (and its loggers pickle and copy) as
    these arguments, so a logger can go to a ``ProcessPoolExecutor`` worker when its wrapped
    logger and processors pickle.

    Args:
        provider_or_name: a provider name (shared with renderers of that name), a
            ``Provider``, or an ``EtwRenderer`` whose provider, default keyword and
            keywords by logger name are then used.
        min_level: stdlib level number or name (``"info"``); calls below it are dropped.
        default_keyword: keyword of events without ``etw_keyword`` (default: the provider's, 1).
        keywords_by_logger: logger name (or dotted prefix, or ``"prefix*"``) -> keyword;
            its keywords are registered up front.  A call is skipped by the map of the chain's
            renderer (the one it writes with).
        group: provider group (only with a provider name).
        provider_id: ETW provider GUID (``uuid.UUID`` or GUID text) instead of the name hash;
            with a ``Provider`` or ``EtwRenderer`` it must equal theirs.

    Raises:
        ValueError, TypeError: on an invalid set-up (never at log time).
    """
    min_level = stdlib_level(min_level)
    resolver = resolver_for(provider_or_name, default_keyword, keywords_by_logger, group, provider_id)
    return cast("type[FilteringBoundLogger]", _configured(resolver, min_level))


def _configured(resolver: Resolver, min_level: int) -> type[Any]:
    """The class of a configuration (provider, minimum level, default keyword, keyword map):
    built once, then the same class for the same configuration while that class is alive."""
    key = (id(resolver.provider), min_level, resolver.default_keyword, repr(resolver.names))
    cached = _CLASSES.get(key)
    if cached is not None and cached._etw_config.resolver.provider is resolver.provider:
        return cached
    level_name = logging.getLevelName(min_level).capitalize().replace(" ", "")
    cls_name = f"EtwBoundLoggerAt{level_name}"
    config = _Config(resolver, min_level, cls_name)
    root = _build(
        cls_name,
        _EtwBoundLoggerBase,
        {
            **method_table(min_level, Plan(ALL_RUN, resolver)),
            "_etw_config": config,
            "exception": log_exception,
            "aexception": alog_exception,
        },
    )
    config.root = root
    _CLASSES[key] = root
    return root
