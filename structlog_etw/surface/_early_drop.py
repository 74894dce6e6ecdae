"""``EtwEarlyDrop``: the processor form of the wrapper's early return, for users who keep another
wrapper class.  It drops an event at the front of the chain by the renderer's rule (the same
:class:`~structlog_etw.context._resolve.Resolver`), before the rest of the chain runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import structlog
from structlog.typing import EventDict, WrappedLogger

from ..context._resolve import CONTROL_SET
from ..formats._levels import level_from_method
from ..provider._provider import Provider
from ._contextvars import etw_bound
from ._renderer import EtwRenderer, in_processor_formatter, resolver_for

__all__ = ["EtwEarlyDrop"]


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
    the same provider options as :func:`~structlog_etw.make_etw_bound_logger` (``group``,
    ``provider_id``, ...).
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
        if CONTROL_SET.isdisjoint(event_dict) and not etw_bound():
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
