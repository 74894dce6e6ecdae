"""Shared helpers of the structlog-surface tests (wrapper, stdlib, async, testing helpers)."""

from __future__ import annotations

import uuid
from collections.abc import MutableMapping
from typing import Any

import structlog

from structlog_etw import EtwRenderer


def unique_provider(prefix: str = "SurfaceTest") -> str:
    """A provider name no other test uses (providers are process-wide)."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


class Spy:
    """A processor that records every event dict it sees (a copy) and passes it on."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
        self.calls.append((method_name, dict(event_dict)))
        return event_dict


class SpyRenderer(EtwRenderer):
    """An ``EtwRenderer`` that records every event dict it is given (a copy), as :class:`Spy`
    does: it sees what reaches the renderer without being a processor before it (which the
    wrapper would run for every call, listening or not)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
        self.calls.append((method_name, dict(event_dict)))
        return super().__call__(logger, method_name, event_dict)


class Exploding:
    """An argument whose formatting is observable: it counts ``str()``/``%s`` calls."""

    def __init__(self) -> None:
        self.formatted = 0

    def __str__(self) -> str:
        self.formatted += 1
        return "exploding"


def bound(wrapper_class: Any, processors: list[Any], **context: Any) -> Any:
    """A real bound logger of *wrapper_class* (not a lazy proxy) with *context* bound."""
    return structlog.wrap_logger(
        structlog.ReturnLogger(), wrapper_class=wrapper_class, processors=processors
    ).bind(**context)
