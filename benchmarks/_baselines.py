"""The baselines every figure is divided by: what people use today, set up the way they use it."""

from __future__ import annotations

import logging
import os
from typing import Any

import structlog

__all__ = [
    "FIVE_FIELDS",
    "dropping_logger",
    "filtered_out_logger",
    "json_chain_logger",
    "stdlib_disabled_logger",
]

#: The "5 typical fields" of every figure: str, int, float, bool, str.
FIVE_FIELDS: dict[str, Any] = {
    "user": "ann",
    "attempts": 3,
    "latency_ms": 12.5,
    "ok": True,
    "region": "eu-west-1",
}


def _devnull_text() -> Any:
    return open(os.devnull, "w")


def filtered_out_logger() -> Any:
    """A held structlog bound logger whose level filter drops ``debug`` (structlog's own fast path)."""
    return structlog.wrap_logger(
        structlog.WriteLogger(_devnull_text()),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        processors=[structlog.processors.JSONRenderer()],
    ).bind()


def stdlib_disabled_logger() -> logging.Logger:
    """A stdlib logger with ``debug`` disabled by level."""
    logger = logging.getLogger("structlog_etw.bench.disabled")
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    logger.addHandler(logging.NullHandler())
    return logger


def _drop(_logger: object, _name: str, _event_dict: Any) -> Any:
    raise structlog.DropEvent


def dropping_logger() -> Any:
    """A held structlog bound logger whose first processor raises ``DropEvent``."""
    return structlog.wrap_logger(
        structlog.WriteLogger(_devnull_text()),
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        processors=[_drop, structlog.processors.JSONRenderer()],
    ).bind()


def json_chain_logger() -> Any:
    """structlog's typical JSON production chain, writing to /dev/null."""
    return structlog.wrap_logger(
        structlog.WriteLogger(_devnull_text()),
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
    ).bind()
