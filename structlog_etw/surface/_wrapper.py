"""The zero-cost disabled path: a bound-logger class that returns before building an event dict.

``make_etw_bound_logger`` is to structlog-etw what structlog's ``make_filtering_bound_logger``
is to structlog: one method template (:func:`_method`), specialised per level by a named
decision made when the class is built (:data:`RUN` the chain, :data:`SKIP` when nobody listens,
:data:`DIRECT` write), and one :class:`_Plan` per chain holding what the methods' closures read.
A call nobody listens to costs one read of the provider word
(:attr:`~structlog_etw.Provider.any_slot`: non-zero while a session wants anything of the
provider) and one identity test (the chain's ``EtwRenderer`` still at its index); only past
that does it look at ``etw_*`` keys, the bound context, contextvars and the call's slot, by the
rule the renderer follows (:func:`_listening`, with the renderer's current keyword map).  An
enabled call of an ETW-only chain is written without running it (:func:`_write_direct`), and
``%``-arguments that do not fit the event text never raise (:func:`_format`).  Classes are
built once per configuration and chain plan, and pickle as their ``make_etw_bound_logger``
arguments.

``EtwEarlyDrop`` is the processor form for users who keep another wrapper class.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import copyreg
import logging
import operator
import sys
import uuid
import weakref
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, cast

import structlog
from structlog.contextvars import merge_contextvars
from structlog.typing import EventDict, FilteringBoundLogger, WrappedLogger

from ..backends.base import Slot
from ..context._activity import CURRENT_ACTIVITY
from ..context._correlation import add_otel_ids
from ..context._resolve import CONTROL_KEYS, EVENT_NAMES, Resolver, event_name
from ..formats._levels import (
    LEVEL_NAMES,
    STDLIB_LEVELS,
    STDLIB_NUMBERS,
    level_from_method,
    method_for_stdlib,
    stdlib_level,
)
from ..provider._provider import Provider
from ._contextvars import REGISTRY, WATCH, mark_async_caller, unmark_async_caller
from ._renderer import EtwRenderer, in_processor_formatter, plain_resolution, resolver_for

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
        self._etw_config.resolver.provider.count_invalid(FORMAT_ARGS_KEY)
        kw.setdefault(FORMAT_ARGS_KEY, args)
        return event


#: The field that holds the formatted text of a call whose ``%``-template names the trace event.
MESSAGE_KEY: Final = "message"


def _template(self: Any, event: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``%``-args of a call whose only output is the trace event: the template stays the event
    (the trace event's name: one name, one shape per call site, as ``EtwHandler`` names records)
    and the formatted text goes into the ``message`` field.  A call that passes ``message``
    itself gets structlog's formatted event; one whose args do not fit, :func:`_format`'s rule."""
    if MESSAGE_KEY in kw:
        return _format(self, event, args, kw)
    try:
        text = _maybe_interpolate(event, args)
    except Exception:
        return _format(self, event, args, kw)  # counted, the args kept as a field
    kw[MESSAGE_KEY] = text
    return event


#: The field a call may also pass its event as (``log.info(event="user_login")``).
EVENT_KEY: Final = "event"


def _keyword_event(self: Any, event: Any, kw: dict[str, Any]) -> Any:
    """The event of a call that passed ``event=`` as a keyword (the methods take ``self`` and
    ``event`` positional-only, see :func:`_method`): that value, unless the call passed an event
    positionally too (``log.info("a", event="b")``, which binds twice): then the positional one,
    the keyword counted (``stats()["invalid"]["event"]``) instead of raising ``TypeError``."""
    keyword = kw.pop(EVENT_KEY)
    if event is None:
        return keyword
    self._etw_config.resolver.provider.count_invalid(EVENT_KEY)
    return event


def _run_chain(self: Any, name: str, event: Any, kw: dict[str, Any]) -> Any:
    """What ``BoundLoggerBase._proxy_to_logger`` does, with the call's keys handed over as a dict:
    a key named ``self`` or ``method_name`` is then a field like any other, never a second value
    for a parameter (``TypeError`` from the log call)."""
    try:
        args, kwargs = self._process_event(name, event, kw)
        return getattr(self._logger, name)(*args, **kwargs)
    except structlog.DropEvent:
        return None


def _nop(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
    return None


async def _anop(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
    return None


async def _in_executor(self: Any, method_name: str, event: Any, kw: dict[str, Any]) -> Any:
    """Run the chain in the default executor with a copy of the caller's context (like structlog)."""
    caller = mark_async_caller(sys._getframe().f_back)
    ctx = contextvars.copy_context()
    try:
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: ctx.run(_run_chain, self, method_name, event, kw)
        )
    finally:
        unmark_async_caller(caller)


#: The event the async methods pass to :func:`_listening_call` to run only its "does anyone listen" check.
_CHECK_ONLY: Any = object()

# --- the decisions: what a chain lets a method do -----------------------------------------------

#: The chain wants every call of this level: run it, as structlog's filtering logger does.
RUN: Final = "run the chain"
#: The chain gives this level to its ``EtwRenderer`` alone: return when nobody listens, else run it.
SKIP: Final = "skip"
#: Like :data:`SKIP`, and the chain is ``[merge_contextvars?, renderer]``: write without running it.
DIRECT: Final = "direct write"


class _Plan:
    """What one chain lets the methods of its class do, decided when the class is made.

    ``decisions[level]`` (ETW levels 1..5; index 0 unused) is :data:`RUN`, :data:`SKIP` or
    :data:`DIRECT`.  ``renderer``/``at``: the chain's ``EtwRenderer`` and its index, which every
    skip checks is still there (``capture_logs()`` and reconfiguration replace the contents of a
    held logger's list; what comes after the renderer never sees a call it skips, what comes
    before only feeds it).  ``merge``/``length``: the direct-write chain (``merge_contextvars`` or
    ``None``, its length), re-checked on each direct write.  ``any``: the provider's
    :attr:`~structlog_etw.Provider.any_slot`, read first.  ``resolver``: the resolution of the
    renderer's *current* ``keywords_by_logger`` (:meth:`current`), so the wrapper never drops an
    event its renderer would write, also after that map is replaced.
    """

    __slots__ = ("any", "at", "decisions", "key", "length", "merge", "renderer", "resolver")

    def __init__(
        self,
        decisions: tuple[str, ...],
        resolver: Resolver,
        renderer: EtwRenderer | None = None,
        at: int = 0,
        merge: Callable[..., Any] | None = None,
        length: int = 0,
    ) -> None:
        self.decisions = decisions
        self.resolver = resolver
        self.renderer = renderer
        self.at = at
        self.merge = merge
        self.length = length
        self.any = resolver.provider.any_slot
        #: What makes two chains' classes the same (the closures hold these values).
        self.key = (id(renderer), at, decisions, merge, length)

    def current(self) -> Resolver:
        """The resolver of the renderer's ``keywords_by_logger`` now (replaced when it changed)."""
        resolver = self.resolver
        renderer = self.renderer
        if renderer is not None:
            names = renderer.keywords_by_logger
            if names is not resolver.names:
                resolver = Resolver(resolver.provider, resolver.default_keyword, names, WATCH.value)
                self.resolver = resolver  # one reference store: readers see the old or the new one
        return resolver


_ALL_RUN: Final = (RUN,) * (len(LEVEL_NAMES) + 1)


def _side_effect_free(processor: object) -> bool:
    """Whether *processor* is known to do nothing but read and change the event dict.

    The allow-list (docs/usage.md): structlog's ``merge_contextvars``, ``add_log_level``,
    ``add_log_level_number``, ``add_logger_name``, ``filter_by_level``, ``format_exc_info``,
    ``dict_tracebacks``, ``dev.set_exc_info`` and instances (of exactly these classes) of
    ``TimeStamper``, ``MaybeTimeStamper``, ``CallsiteParameterAdder``, ``EventRenamer``,
    ``StackInfoRenderer``, ``UnicodeDecoder``, ``UnicodeEncoder``, ``PositionalArgumentsFormatter``
    and ``ExtraAdder``; ours: ``add_otel_ids`` and ``EtwEarlyDrop``.  A subclass may do more in
    ``__call__``, and anything else (OpenTelemetry's structlog instrumentation, a metrics
    counter, a sink) is taken to want every event.
    """
    return id(processor) in _PURE_OBJECTS or type(processor) in _PURE_TYPES


def _plan(resolver: Resolver, processors: object) -> _Plan:
    """The :class:`_Plan` of a chain, for a wrapper of *resolver*.

    Calls may be skipped only when the chain holds exactly one ``EtwRenderer``, of this provider
    and default keyword: then a call whose level that renderer passes on to no later processor
    (``passthrough_level``) does nothing but a trace event, provided every processor before the
    renderer is known to be side-effect-free (:func:`_side_effect_free`); with any other one
    before it, every level runs.  Any other chain (``capture_logs``,
    ``LogCapture``, a reconfigured application) is run for every call above the minimum level,
    as with structlog's ``make_filtering_bound_logger``.  The keyword map is the renderer's.
    """
    if type(processors) not in (list, tuple) or not processors:
        return _Plan(_ALL_RUN, resolver)
    chain = cast("list[Any]", processors)
    found = [p for p in chain if isinstance(p, EtwRenderer)]
    if (
        len(found) != 1
        or found[0].provider is not resolver.provider
        or found[0].default_keyword != resolver.default_keyword
    ):
        return _Plan(_ALL_RUN, resolver)
    renderer = found[0]
    passed_on = renderer.passthrough_level
    direct = (
        type(renderer) is EtwRenderer  # a subclass may do more in __call__
        and passed_on is None
        and chain[-1] is renderer
        and (len(chain) == 1 or (len(chain) == 2 and chain[0] is merge_contextvars))
    )
    at = chain.index(renderer)
    # A processor before the renderer that is not known to be side-effect-free wants every call:
    # the chain runs (the renderer then writes nothing when nobody listens).
    skipped = (DIRECT if direct else SKIP) if all(map(_side_effect_free, chain[:at])) else RUN
    decisions = tuple(
        RUN if level == 0 or (passed_on is not None and STDLIB_NUMBERS[level] >= passed_on) else skipped
        for level in range(len(LEVEL_NAMES) + 1)
    )
    names = renderer.keywords_by_logger
    if names is not resolver.names:
        resolver = Resolver(resolver.provider, resolver.default_keyword, names, WATCH.value)
    merge = chain[0] if direct and len(chain) == 2 else None
    return _Plan(decisions, resolver, renderer, at, merge, len(chain) if direct else 0)


def _listening(self: Any, plan: _Plan, level: int, kw: dict[str, Any]) -> bool:
    """Whether a session listens for this call, by the renderer's rule (the provider word was
    non-zero): the logger's slot when no ``etw_*`` key can come from the call or contextvars,
    else the full resolution (call > bound context > contextvars)."""
    resolver = plan.current()
    if self._etw_resolver is not resolver:  # the renderer's keyword map was replaced
        self._etw_bind_slots(resolver)
    if (
        "etw_keyword" not in kw
        and "etw_level" not in kw
        and not (resolver.by_name and "logger" in kw)
        and (len(REGISTRY) == WATCH.clean_size or self._etw_fixed or not WATCH.etw_bound())
    ):
        return bool(self._etw_slots[level].word[0])
    return resolver.listening(level, self._logger, ChainMap(kw, self._context))


def _listening_call(
    self: Any, plan: _Plan, decision: str, level: int, name: str, event: Any, args: tuple[Any, ...], kw: Any
) -> Any:
    """The rest of a :data:`SKIP`/:data:`DIRECT` call once the provider word is non-zero (or the
    chain changed): return when nobody listens at the call's slot, else write or run the chain."""
    chain = self._etw_chain
    try:
        if chain[plan.at] is not plan.renderer:  # capture_logs(), a reconfigured chain: run it
            decision = RUN
        elif not _listening(self, plan, level, kw):
            return None
    except Exception:
        decision = RUN  # cannot tell (e.g. the chain was emptied): run it
    if event is _CHECK_ONLY:  # asked by the async method
        return True
    if EVENT_KEY in kw:
        event = _keyword_event(self, event, kw)
    if args:
        event = _format(self, event, args, kw) if decision is RUN else _template(self, event, args, kw)
    if decision is DIRECT:
        return _write_direct(self, plan, name, event, kw)
    return _run_chain(self, name, event, kw)


def _write_direct(self: Any, plan: _Plan, name: str, event: Any, kw: dict[str, Any]) -> Any:
    """The enabled call of an ETW-only chain: the event dict structlog would build, written
    without running the chain (no ``DropEvent`` raised and caught).  The chain is checked to be
    the same list contents first; otherwise it runs as usual."""
    chain = self._etw_chain
    renderer = cast("EtwRenderer", plan.renderer)
    merge = plan.merge
    if (
        len(chain) != plan.length
        or chain[-1] is not renderer
        or (merge is not None and chain[0] is not merge)
        or type(self._context) is not dict
    ):
        return _run_chain(self, name, event, kw)
    # What BoundLoggerBase._process_event builds: context, then the call's keys, then "event"
    # (with nothing bound: the call's own keyword dict, a new dict of this call).
    context = self._context
    event_dict = {**context, **kw} if context else kw
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


def _method(plan: _Plan, level: int, name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The sync and async log methods of one level: the one template, specialised by the decision.

    :data:`RUN`: the chain runs (structlog's filtering behaviour, ``%``-args that cannot be
    formatted kept as a field).  :data:`SKIP`/:data:`DIRECT`: first the provider word, then the
    chain check, both on values held by the closure: a call returns at once when no session
    listens to anything of the provider and the renderer is still at its index of the logger's
    chain.  Everything else - ``etw_*`` keys of the call, the bound context and contextvars, the
    slot, formatting, writing - happens only past that line (:func:`_listening_call`).
    """
    decision = plan.decisions[level]
    if decision is RUN:

        def meth(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
            if EVENT_KEY in kw:
                event = _keyword_event(self, event, kw)
            if args:
                event = _format(self, event, args, kw)
            return _run_chain(self, name, event, kw)

        async def ameth(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
            if EVENT_KEY in kw:
                event = _keyword_event(self, event, kw)
            if args:
                event = _format(self, event, args, kw)
            return await _in_executor(self, name, event, kw)

        return _named(meth, ameth, name)

    provider_word = plan.any
    at = plan.at
    renderer = plan.renderer
    resolution = plain_resolution(renderer) if decision is DIRECT and renderer is not None else None
    if resolution is not None:
        return _named(_direct_method(plan, level, name, resolution), _skip_amethod(plan, level, name), name)

    # The disabled path copies the closure's cells (one pointer each) and reads three of them.
    # ``self`` and ``event`` are positional-only: CPython then puts every keyword of the call
    # into ``kw`` without comparing its name with the parameters' (structlog's ``_nop`` pays
    # those comparisons, 0.2-0.4x of its own call with 5 fields; docs/performance.md).
    def skip_meth(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
        try:
            if not provider_word.word[0] and self._etw_chain[at] is renderer:
                return None
        except Exception:
            pass  # the chain is shorter now: the rest decides
        return _listening_call(self, plan, decision, level, name, event, args, kw)

    return _named(skip_meth, _skip_amethod(plan, level, name), name)


def _skip_amethod(plan: _Plan, level: int, name: str) -> Callable[..., Any]:
    """The async method of a :data:`SKIP`/:data:`DIRECT` level: the sync method's disabled path,
    then the chain in the executor (never the direct write: the chain runs off the event loop)."""
    provider_word = plan.any
    at = plan.at
    renderer = plan.renderer

    async def skip_ameth(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
        try:
            if not provider_word.word[0] and self._etw_chain[at] is renderer:
                return None
        except Exception:
            pass
        if _listening_call(self, plan, RUN, level, name, _CHECK_ONLY, (), kw) is None:
            return None
        if EVENT_KEY in kw:
            event = _keyword_event(self, event, kw)
        if args:
            event = _template(self, event, args, kw)
        return await _in_executor(self, name, event, kw)

    return skip_ameth


#: Keys that send a direct write the long way (:func:`_listening_call`): the control keys and
#: ``positional_args`` (the renderer's special keys), ``exc_info`` (a traceback field) and
#: ``event`` (a call's ``event=`` keyword, or one bound in the context).
_NOT_PLAIN: Final = frozenset((*CONTROL_KEYS, "positional_args", "exc_info", EVENT_KEY))
#: The same keys but ``event``: what ``merge_contextvars`` must not have added.
_NOT_PLAIN_MERGED: Final = _NOT_PLAIN - {EVENT_KEY}
_copy_context: Final = contextvars.copy_context


def _direct_method(plan: _Plan, level: int, name: str, resolution: Resolver) -> Callable[..., Any]:
    """The sync method of a :data:`DIRECT` level whose renderer writes plain events the plain way
    (:func:`~structlog_etw.surface._renderer.plain_resolution`): the disabled path of :func:`_method`,
    then, for a plain call, the renderer's plain write done in one more frame (``write``: its
    state stays out of the method's frame, so the disabled path costs what :func:`_method`'s does).

    A call is plain when it has no ``%``-args, the logger's chain is still the plan's (every
    member, by identity), its context is a ``dict``, the renderer's keyword map is empty, its
    ``event_key`` is ``event``, no ``etw_*`` key is bound through contextvars and the event dict
    holds none of :data:`_NOT_PLAIN`: then its slot is the renderer's for the method
    (``resolution.by_method``, the one ``_listening`` would read too) and, when a session listens
    there, the event dict the one :func:`_write_direct` builds is written with the slot's header
    (without its ``event`` key when ``merge_contextvars`` does not run: the encoders skip that
    key, the event text being the event's name; the same bytes).
    Any other call takes :func:`_listening_call`, which decides as before (also whether a call
    nobody listens to at its slot is dropped); the bytes are the same either way
    (tests/surface/test_wrapper_chains.py).  ``merge_contextvars`` runs unless the context holds no
    variable at all (it would find nothing).
    """
    provider_word = plan.any
    at = plan.at
    renderer = cast("EtwRenderer", plan.renderer)
    merge = plan.merge
    length = plan.length
    first = renderer if merge is None else merge  # the chain's first member
    slot = resolution.by_method[name]
    provider = renderer.provider
    write_with = provider.write_dict_with
    write_dict = provider.write_dict

    def write(self: Any, event: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        try:
            chain = self._etw_chain
            context = self._context
            if (
                args
                or len(chain) != length
                or chain[at] is not renderer
                or chain[0] is not first
                or type(context) is not dict
                or resolution.by_name
                or renderer.event_key != EVENT_KEY
                or (len(REGISTRY) != WATCH.clean_size and WATCH.etw_bound())
            ):
                plain = False
            else:
                event_dict = {**context, **kw} if context else kw
                plain = event_dict.keys().isdisjoint(_NOT_PLAIN)
        except Exception:
            plain = False
        if not plain or not slot.word[0]:  # not plain, or not listened: the rule decides
            return _listening_call(self, plan, DIRECT, level, name, event, args, kw)
        try:
            # The event text names the event and the encoders skip the key "event": with nothing
            # to merge, the dict is written without it (no insertion: a kwargs dict of 5 keys
            # fills its 8-slot table, and a sixth key makes it grow).
            if merge is not None and _copy_context():
                if event is not None:
                    event_dict[EVENT_KEY] = event
                event_dict = merge(self._logger, name, event_dict)
                if not event_dict.keys().isdisjoint(_NOT_PLAIN_MERGED):  # bound through contextvars
                    renderer.write_event(self._logger, name, event_dict)
                    return None
            text = event if event is not None else event_dict.get(EVENT_KEY, "")
            event_name_ = EVENT_NAMES[text] if type(text) is str else event_name(text)
            current = CURRENT_ACTIVITY.get()
            if current is None:
                write_with(slot, event_name_, event_dict, EVENT_KEY, slot.header)
            else:
                write_dict(slot, event_name_, event_dict, EVENT_KEY, 0, 0, current[0], current[1])
        except Exception:
            provider.count_dropped("render_error")
        return None

    # The disabled path is skip_meth's, in a frame as small (the write's state is this closure's).
    def direct_meth(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
        try:
            if not provider_word.word[0] and self._etw_chain[at] is renderer:
                return None
        except Exception:
            pass
        return write(self, event, args, kw)

    return direct_meth


def _named(
    meth: Callable[..., Any], ameth: Callable[..., Any], name: str
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    meth.__name__ = name
    ameth.__name__ = f"a{name}"
    meth.__doc__ = f"Log *event* at {name} level (returns at once when nobody wants the call)."
    ameth.__doc__ = f"Log *event* at {name} level from async code (chain runs in an executor)."
    return meth, ameth


def _method_table(min_level: int, plan: _Plan) -> dict[str, Any]:
    """The log methods of a class built with *min_level* for *plan*."""
    # log()/alog() take any level number >= min_level, also one that maps down to a
    # standard level below min_level (25 with min_level 25 -> info): they use "_etw_methods".
    full = {name: _method(plan, level, name) for level, name in LEVEL_NAMES.items()}
    meths: dict[str, Any] = {"_etw_methods": full, "_etw_plan": plan}
    for level, name in LEVEL_NAMES.items():
        meth, ameth = full[name] if STDLIB_NUMBERS[level] >= min_level else (_nop, _anop)
        meths[name], meths[f"a{name}"] = meth, ameth
    for alias, target in (("warn", "warning"), ("msg", "info"), ("fatal", "critical")):
        meths[alias], meths[f"a{alias}"] = meths[target], meths[f"a{target}"]
    return meths


def _exception(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
    """Log *event* at error level with the current exception (``exc_info=True`` unless given)."""
    kw.setdefault("exc_info", True)
    return self.error(event, *args, **kw)


async def _aexception(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
    """Async :meth:`exception`: the exception is captured before the chain leaves this thread."""
    if kw.get("exc_info", True) is True:
        kw["exc_info"] = sys.exc_info()
    return await self.aerror(event, *args, **kw)


# --- configurations: one class per chain, pickled as their make_etw_bound_logger arguments -------


class _Config:
    """One ``make_etw_bound_logger`` configuration: its resolver and minimum level (what it is
    pickled as), and its classes (one per chain plan, built once, at most :data:`_CLASSES_MAX`)."""

    __slots__ = ("classes", "last", "min_level", "name", "resolver", "root")

    def __init__(self, resolver: Resolver, min_level: int, name: str) -> None:
        self.resolver = resolver
        self.min_level = min_level
        self.name = name
        self.classes: dict[tuple[Any, ...], type[Any]] = {}
        #: The last chain seen and its plan: (the chain's class, its members then, plan).
        self.last: tuple[type[Any], tuple[Any, ...], _Plan] | None = None
        self.root: type[Any] = object

    def plan(self, processors: Any) -> _Plan:
        """:func:`_plan`, cached for the last chain seen (loggers of a configuration share it).

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
            plan = _plan(self.resolver, processors)
            if type(processors) in (list, tuple):
                self.last = (type(processors), tuple(processors), plan)
        except Exception:
            return _Plan(_ALL_RUN, self.resolver)
        return plan

    def class_for(self, plan: _Plan) -> type[Any]:
        """The class of loggers with *plan* (built on first use; a subclass of the root class)."""
        cls = self.classes.get(plan.key)
        if cls is not None:
            return cls
        # No lock (nothing may wait on one in a fork child): two threads may build the class,
        # setdefault keeps the first.
        if len(self.classes) >= _CLASSES_MAX:
            self.classes.clear()  # loggers keep their classes; new ones rebuild them
        built = _build(self.name, self.root, _method_table(self.min_level, plan))
        return self.classes.setdefault(plan.key, built)


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
    _etw_plan: _Plan
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
            **_method_table(min_level, _Plan(_ALL_RUN, resolver)),
            "_etw_config": config,
            "exception": _exception,
            "aexception": _aexception,
        },
    )
    config.root = root
    _CLASSES[key] = root
    return root


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


def _present(module: Any, *names: str) -> list[Any]:
    """The objects of *module* named *names* that this structlog version has."""
    return [getattr(module, name) for name in names if hasattr(module, name)]


#: :func:`_side_effect_free`'s allow-list: processors (by identity) and classes (exact type) that
#: only read and change the event dict: structlog's own (those of the installed version), and ours.
_PURE_OBJECTS: Final = frozenset(
    map(
        id,
        [
            merge_contextvars,
            add_otel_ids,
            *_present(structlog.processors, "add_log_level", "format_exc_info", "dict_tracebacks"),
            *_present(structlog.stdlib, "add_log_level", "add_log_level_number", "add_logger_name"),
            *_present(structlog.stdlib, "filter_by_level", "merge_contextvars"),
            *_present(structlog.dev, "set_exc_info"),
        ],
    )
)
_PURE_TYPES: Final = frozenset(
    [
        EtwEarlyDrop,
        *_present(structlog.processors, "TimeStamper", "MaybeTimeStamper", "CallsiteParameterAdder"),
        *_present(structlog.processors, "EventRenamer", "StackInfoRenderer"),
        *_present(structlog.processors, "UnicodeDecoder", "UnicodeEncoder"),
        *_present(structlog.stdlib, "PositionalArgumentsFormatter", "ExtraAdder", "StackInfoRenderer"),
    ]
)
