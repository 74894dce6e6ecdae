"""What a processor chain lets a wrapper class do, decided once when the class is built.

A :class:`Plan` holds, per ETW level, one named decision (:data:`RUN` the chain, :data:`SKIP`
when nobody listens, :data:`DIRECT` write) and what the log methods' closures read: the
provider word, the chain's ``EtwRenderer`` and its index, the direct-write chain, the resolver
of the renderer's current keyword map.  :func:`plan_for` makes it from a chain; the
side-effect-free allow-list (:func:`side_effect_free`) says which processors before the
renderer may be skipped with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

import structlog
from structlog.contextvars import merge_contextvars

from ..context._correlation import add_otel_ids
from ..context._resolve import Resolver
from ..formats._levels import LEVEL_NAMES, STDLIB_NUMBERS
from ._contextvars import WATCH
from ._early_drop import EtwEarlyDrop
from ._renderer import EtwRenderer

__all__ = ["ALL_RUN", "DIRECT", "RUN", "SKIP", "Plan", "plan_for", "side_effect_free"]

#: The chain wants every call of this level: run it, as structlog's filtering logger does.
RUN: Final = "run the chain"
#: The chain gives this level to its ``EtwRenderer`` alone: return when nobody listens, else run it.
SKIP: Final = "skip"
#: Like :data:`SKIP`, and the chain is ``[merge_contextvars?, renderer]``: write without running it.
DIRECT: Final = "direct write"


class Plan:
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


#: Every level runs the chain (no renderer of the configuration's provider, or an unknown chain).
ALL_RUN: Final = (RUN,) * (len(LEVEL_NAMES) + 1)


def side_effect_free(processor: object) -> bool:
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


def plan_for(resolver: Resolver, processors: object) -> Plan:
    """The :class:`Plan` of a chain, for a wrapper of *resolver*.

    Calls may be skipped only when the chain holds exactly one ``EtwRenderer``, of this provider
    and default keyword: then a call whose level that renderer passes on to no later processor
    (``passthrough_level``) does nothing but a trace event, provided every processor before the
    renderer is known to be side-effect-free (:func:`side_effect_free`); with any other one
    before it, every level runs.  Any other chain (``capture_logs``,
    ``LogCapture``, a reconfigured application) is run for every call above the minimum level,
    as with structlog's ``make_filtering_bound_logger``.  The keyword map is the renderer's.
    """
    if type(processors) not in (list, tuple) or not processors:
        return Plan(ALL_RUN, resolver)
    chain = cast("list[Any]", processors)
    found = [p for p in chain if isinstance(p, EtwRenderer)]
    if (
        len(found) != 1
        or found[0].provider is not resolver.provider
        or found[0].default_keyword != resolver.default_keyword
    ):
        return Plan(ALL_RUN, resolver)
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
    skipped = (DIRECT if direct else SKIP) if all(map(side_effect_free, chain[:at])) else RUN
    decisions = tuple(
        RUN if level == 0 or (passed_on is not None and STDLIB_NUMBERS[level] >= passed_on) else skipped
        for level in range(len(LEVEL_NAMES) + 1)
    )
    names = renderer.keywords_by_logger
    if names is not resolver.names:
        resolver = Resolver(resolver.provider, resolver.default_keyword, names, WATCH.value)
    merge = chain[0] if direct and len(chain) == 2 else None
    return Plan(decisions, resolver, renderer, at, merge, len(chain) if direct else 0)


def _present(module: Any, *names: str) -> list[Any]:
    """The objects of *module* named *names* that this structlog version has."""
    return [getattr(module, name) for name in names if hasattr(module, name)]


#: :func:`side_effect_free`'s allow-list: processors (by identity) and classes (exact type) that
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
