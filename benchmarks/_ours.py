"""structlog-etw set up for the benchmarks: loggers, encoders and a sink backend.

The sink backend does what a kernel hand-off does from Python's point of view and nothing more:
it accepts the encoded bytes and returns 0.  (The capture backend would also build a record and
keep it, which is test machinery, not cost the library has.)  The real Linux backend with the real
``writev`` is measured in the guest by ``benchmarks/guest.py``.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import structlog
from _baselines import FIVE_FIELDS

from structlog_etw._provider import Provider
from structlog_etw._renderer import EtwRenderer
from structlog_etw.backends.base import Slot
from structlog_etw.eventheader.spec import tracepoint_name
from structlog_etw.fields import to_fields

__all__ = ["SinkBackend", "early_drop_logger", "encoder_namespace", "fast_path_logger", "provider"]

_ids = itertools.count()


class SinkBackend:
    """Accepts every event and returns 0; slots are enabled or not, forever."""

    def __init__(self, name: str, fmt: str, enabled: bool) -> None:
        self.format = fmt
        self.name = name
        self._word = [1 if enabled else 0]

    def open_slot(self, level: int, keyword: int) -> Slot:
        return Slot(level, keyword, self._word, tracepoint_name(self.name, level, keyword))

    def write(
        self,
        slot: Slot,
        event: object,
        opcode: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> int:
        return 0

    def close(self) -> None:
        self._word[0] = 0


def provider(enabled: bool, fmt: str = "eventheader") -> Provider:
    """A fresh provider (unique name) whose backend is a :class:`SinkBackend`."""
    name = f"Bench{next(_ids)}"
    return Provider(name, backend=SinkBackend(name, fmt, enabled))


def fast_path_logger(enabled: bool, fmt: str = "eventheader") -> Any:
    """A held logger of ``make_etw_bound_logger`` ending in ``EtwRenderer``."""
    from structlog_etw._wrapper import make_etw_bound_logger  # noqa: PLC0415 (lands separately)

    prov = provider(enabled, fmt)
    wrapper = make_etw_bound_logger(prov, min_level=logging.DEBUG)
    return structlog.wrap_logger(
        None,
        wrapper_class=wrapper,
        processors=[structlog.contextvars.merge_contextvars, EtwRenderer(prov.name, provider=prov)],
    ).bind()


def early_drop_logger(enabled: bool, fmt: str = "eventheader") -> Any:
    """A plain structlog BoundLogger whose first processor drops events nobody listens to."""
    from structlog_etw._wrapper import EtwEarlyDrop  # noqa: PLC0415 (lands separately)

    prov = provider(enabled, fmt)
    return structlog.wrap_logger(
        None,
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        processors=[
            EtwEarlyDrop(prov),
            structlog.contextvars.merge_contextvars,
            EtwRenderer(prov.name, provider=prov),
        ],
    ).bind()


def renderer_logger(enabled: bool, fmt: str = "eventheader") -> Any:
    """structlog's filtering bound logger + merge_contextvars + EtwRenderer (no wrapper, no early drop)."""
    prov = provider(enabled, fmt)
    return structlog.wrap_logger(
        None,
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        processors=[structlog.contextvars.merge_contextvars, EtwRenderer(prov.name, provider=prov)],
    ).bind()


def encoder_namespace(fmt: str) -> dict[str, Any]:
    """An encoder of ``fmt`` and the 5 typical fields, typed (for encoding-only figures)."""
    if fmt == "tracelogging":
        from structlog_etw.tracelogging.encoder import TraceLoggingEncoder  # noqa: PLC0415

        enc: Any = TraceLoggingEncoder("BenchEncoder")
    else:
        from structlog_etw.eventheader.encoder import EventHeaderEncoder  # noqa: PLC0415

        enc = EventHeaderEncoder()
    return {
        "enc": enc,
        "fields": to_fields(FIVE_FIELDS.items()),
        "kw": dict(FIVE_FIELDS),
        "to_fields": to_fields,
    }
