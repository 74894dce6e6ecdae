"""The log methods of ``make_etw_bound_logger``'s classes: one template, specialised per level.

The deliberate inlining lives here only.  :func:`method_for` gives a level's sync and async
method, specialised by the named decision of its chain's :class:`~structlog_etw.surface._chain.Plan`
(:data:`~structlog_etw.surface._chain.RUN` the chain, ``SKIP`` when nobody listens, ``DIRECT``
write): a call nobody listens to costs one read of the provider word
(:attr:`~structlog_etw.Provider.any_slot`) and one identity test (the chain's ``EtwRenderer``
still at its index), both on values the closure holds; only past that does it look at ``etw_*``
keys, the bound context, contextvars and the call's slot, by the rule the renderer follows
(:func:`listening`, with the renderer's current keyword map).  An enabled call of an ETW-only
chain is written without running it (:func:`_direct_method`: the renderer's one plain write,
bound when the class is built), and ``%``-arguments that do not fit the event text never raise
(:func:`_format`).  :func:`method_table` is a class's whole set of methods.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import sys
from collections import ChainMap
from collections.abc import Callable
from typing import Any, Final, Protocol, cast

import structlog

from ..backends.base import Slot
from ..context._resolve import DIRECT_NOT_PLAIN, DIRECT_NOT_PLAIN_MERGED, Resolver
from ..formats._levels import LEVEL_NAMES, STDLIB_NUMBERS
from ._chain import DIRECT, RUN, Plan
from ._contextvars import etw_bound, mark_async_caller, unmark_async_caller
from ._renderer import EtwRenderer, plain_writer

__all__ = [
    "EVENT_KEY",
    "FORMAT_ARGS_KEY",
    "MESSAGE_KEY",
    "EtwLogger",
    "alog_exception",
    "listening",
    "log_exception",
    "method_for",
    "method_table",
]


class EtwLogger(Protocol):
    """What the methods read of a logger of a ``make_etw_bound_logger`` class (the class built in
    :mod:`structlog_etw.surface._bound_logger` provides it): besides structlog's ``_context``,
    ``_logger`` and ``_process_event``, its configuration, the chain structlog runs, and its slots
    per ETW level resolved at bind time (with the resolver they come from and whether both
    ``etw_keyword`` and ``etw_level`` are bound: contextvars cannot change the slot then)."""

    _logger: Any
    _context: Any
    _etw_config: Any
    _etw_chain: Any
    _etw_slots: tuple[Slot, ...]
    _etw_resolver: Resolver | None
    _etw_fixed: bool

    def _process_event(self, method_name: str, event: Any, event_kw: dict[str, Any]) -> Any: ...

    def _etw_bind_slots(self, resolver: Resolver) -> None: ...


def _maybe_interpolate(event: Any, args: tuple[Any, ...]) -> Any:
    """``event % args`` like structlog's filtering loggers (a lone mapping: dict interpolation)."""
    if not args:
        return event
    if len(args) == 1 and isinstance(args[0], collections.abc.Mapping) and args[0]:
        return event % args[0]
    return event % args


#: The field that holds the positional arguments of a call whose ``event % args`` failed.
FORMAT_ARGS_KEY: Final = "format_args"


def _format(self: EtwLogger, event: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
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


def _template(self: EtwLogger, event: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
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


def _keyword_event(self: EtwLogger, event: Any, kw: dict[str, Any]) -> Any:
    """The event of a call that passed ``event=`` as a keyword (the methods take ``self`` and
    ``event`` positional-only, see :func:`method_for`): that value, unless the call passed an event
    positionally too (``log.info("a", event="b")``, which binds twice): then the positional one,
    the keyword counted (``stats()["invalid"]["event"]``) instead of raising ``TypeError``."""
    keyword = kw.pop(EVENT_KEY)
    if event is None:
        return keyword
    self._etw_config.resolver.provider.count_invalid(EVENT_KEY)
    return event


def _run_chain(self: EtwLogger, name: str, event: Any, kw: dict[str, Any]) -> Any:
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


async def _in_executor(self: EtwLogger, method_name: str, event: Any, kw: dict[str, Any]) -> Any:
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


def listening(self: EtwLogger, plan: Plan, level: int, kw: dict[str, Any]) -> bool:
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
        and (self._etw_fixed or not etw_bound())
    ):
        return bool(self._etw_slots[level].word[0])
    return resolver.listening(level, self._logger, ChainMap(kw, self._context))


def _listening_call(
    self: EtwLogger,
    plan: Plan,
    decision: str,
    level: int,
    name: str,
    event: Any,
    args: tuple[Any, ...],
    kw: Any,
) -> Any:
    """The rest of a :data:`SKIP`/:data:`DIRECT` call once the provider word is non-zero (or the
    chain changed): return when nobody listens at the call's slot, else write or run the chain."""
    chain = self._etw_chain
    try:
        if chain[plan.at] is not plan.renderer:  # capture_logs(), a reconfigured chain: run it
            decision = RUN
        elif not listening(self, plan, level, kw):
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


def _write_direct(self: EtwLogger, plan: Plan, name: str, event: Any, kw: dict[str, Any]) -> Any:
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


def method_for(plan: Plan, level: int, name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
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
    plain = plain_writer(renderer) if decision is DIRECT and renderer is not None else None
    if plain is not None:
        return _named(_direct_method(plan, level, name, *plain), _skip_amethod(plan, level, name), name)

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


def _skip_amethod(plan: Plan, level: int, name: str) -> Callable[..., Any]:
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


_copy_context: Final = contextvars.copy_context


class _Direct:
    """What a direct method's enabled path reads, in one closure cell: the method's frame copies
    its cells on every call, the disabled one too, so the method keeps the four it had when its
    enabled path was a closure of its own (the skip method copies seven)."""

    __slots__ = (
        "first",
        "length",
        "level",
        "merge",
        "name",
        "plan",
        "provider",
        "resolution",
        "slot",
        "write_plain",
    )

    def __init__(
        self,
        plan: Plan,
        level: int,
        name: str,
        resolution: Resolver,
        write_plain: Callable[[Slot, object, Any], None],
    ) -> None:
        renderer = cast("EtwRenderer", plan.renderer)
        self.plan = plan
        self.level = level
        self.name = name
        self.merge = plan.merge
        self.length = plan.length
        self.first = renderer if plan.merge is None else plan.merge  # the chain's first member
        self.resolution = resolution
        self.slot = resolution.by_method[name]
        self.provider = renderer.provider
        self.write_plain = write_plain


def _direct_method(
    plan: Plan, level: int, name: str, resolution: Resolver, write_plain: Callable[[Slot, object, Any], None]
) -> Callable[..., Any]:
    """The sync method of a :data:`DIRECT` level whose renderer writes plain events the plain way
    (:func:`~structlog_etw.surface._renderer.plain_writer`: its resolution and its one plain
    write, *write_plain*, bound here once): the disabled path of :func:`method_for`, then, in the
    same frame, the checks below and the renderer's plain write (their state is one
    :class:`_Direct` in one closure cell, so the disabled path copies no more cells than the skip
    method's does).

    A call is plain when it has no ``%``-args, the logger's chain is still the plan's (every
    member, by identity), its context is a ``dict``, the renderer's keyword map is empty, its
    ``event_key`` is ``event``, no ``etw_*`` key is bound through contextvars (asked only of a chain
    without ``merge_contextvars``: with it, such a key is merged into the event dict and found
    there, below, before the plain write) and the event dict
    holds none of ``DIRECT_NOT_PLAIN`` (the control keys and the renderer's and the direct write's
    additions, :mod:`structlog_etw.context._resolve`): then its slot is the renderer's for the method
    (``resolution.by_method``, the one :func:`listening` would read too) and, when a session listens
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
    d = _Direct(plan, level, name, resolution, write_plain)

    def direct_meth(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
        try:  # the disabled path: skip_meth's (the enabled path's state is d's: one cell)
            if not provider_word.word[0] and self._etw_chain[at] is renderer:
                return None
        except Exception:
            pass
        try:
            chain = self._etw_chain
            context = self._context
            if (
                args
                or len(chain) != d.length
                or chain[at] is not renderer
                or chain[0] is not d.first
                or type(context) is not dict
                or d.resolution.by_name
                or renderer.event_key != EVENT_KEY
                or (d.merge is None and etw_bound())  # merge_contextvars brings such a key in itself
            ):
                plain = False
            else:
                event_dict = {**context, **kw} if context else kw
                plain = event_dict.keys().isdisjoint(DIRECT_NOT_PLAIN)
        except Exception:
            plain = False
        if not plain or not d.slot.word[0]:  # not plain, or not listened: the rule decides
            return _listening_call(self, d.plan, DIRECT, d.level, d.name, event, args, kw)
        try:
            # The event text names the event and the encoders skip the key "event": with nothing
            # to merge, the dict is written without it (no insertion: a kwargs dict of 5 keys
            # fills its 8-slot table, and a sixth key makes it grow).
            if d.merge is not None and _copy_context():
                if event is not None:
                    event_dict[EVENT_KEY] = event
                event_dict = d.merge(self._logger, d.name, event_dict)
                if not event_dict.keys().isdisjoint(DIRECT_NOT_PLAIN_MERGED):  # bound through contextvars
                    renderer.write_event(self._logger, d.name, event_dict)
                    return None
            d.write_plain(d.slot, event if event is not None else event_dict.get(EVENT_KEY, ""), event_dict)
        except Exception:
            d.provider.count_dropped("render_error")
        return None

    return direct_meth


def _named(
    meth: Callable[..., Any], ameth: Callable[..., Any], name: str
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    meth.__name__ = name
    ameth.__name__ = f"a{name}"
    meth.__doc__ = f"Log *event* at {name} level (returns at once when nobody wants the call)."
    ameth.__doc__ = f"Log *event* at {name} level from async code (chain runs in an executor)."
    return meth, ameth


def method_table(min_level: int, plan: Plan) -> dict[str, Any]:
    """The log methods of a class built with *min_level* for *plan*."""
    # log()/alog() take any level number >= min_level, also one that maps down to a
    # standard level below min_level (25 with min_level 25 -> info): they use "_etw_methods".
    full = {name: method_for(plan, level, name) for level, name in LEVEL_NAMES.items()}
    meths: dict[str, Any] = {"_etw_methods": full, "_etw_plan": plan}
    for level, name in LEVEL_NAMES.items():
        meth, ameth = full[name] if STDLIB_NUMBERS[level] >= min_level else (_nop, _anop)
        meths[name], meths[f"a{name}"] = meth, ameth
    for alias, target in (("warn", "warning"), ("msg", "info"), ("fatal", "critical")):
        meths[alias], meths[f"a{alias}"] = meths[target], meths[f"a{target}"]
    return meths


def log_exception(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
    """Log *event* at error level with the current exception (``exc_info=True`` unless given)."""
    kw.setdefault("exc_info", True)
    return self.error(event, *args, **kw)


async def alog_exception(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
    """Async :meth:`exception`: the exception is captured before the chain leaves this thread."""
    if kw.get("exc_info", True) is True:
        kw["exc_info"] = sys.exc_info()
    return await self.aerror(event, *args, **kw)
