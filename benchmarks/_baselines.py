"""The baselines every figure is divided by: what people use today, set up the way they use it.

Every enabled baseline writes each event to ``/dev/null`` with a system call of its own (structlog's
``WriteLogger``/``BytesLogger`` flush per event, stdlib's ``StreamHandler`` too), as our enabled rows
do with one ``writev`` per event.  ``orjson`` and ``python-json-logger`` are benchmark-only
dependencies (``nox -s bench`` installs them).
"""

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
    "json_chain_unflushed_logger",
    "orjson_chain_logger",
    "stdlib_disabled_logger",
    "stdlib_json_logger",
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
    """A stdlib logger with ``debug`` disabled by level (called with the fields in ``extra=``)."""
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


def _json_chain(logger: Any, **renderer_kw: Any) -> Any:
    """structlog's typical JSON production chain over *logger* (a held bound logger)."""
    return structlog.wrap_logger(
        logger,
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(**renderer_kw),
        ],
    ).bind()


def json_chain_logger() -> Any:
    """structlog's typical JSON production chain, writing to /dev/null."""
    return _json_chain(structlog.WriteLogger(_devnull_text()))


class _UnflushedWriter:
    """A structlog logger that writes each line to a buffered file and never flushes it (the
    JSON chain "without a per-line flush": the file's buffer reaches /dev/null every 8 KiB)."""

    def __init__(self, file: Any) -> None:
        self._write = file.write

    def msg(self, message: str) -> None:
        self._write(message + "\n")

    log = debug = info = warn = warning = error = err = critical = exception = fatal = failure = msg


def json_chain_unflushed_logger() -> Any:
    """The JSON chain of :func:`json_chain_logger` writing without a flush per line."""
    return _json_chain(_UnflushedWriter(_devnull_text()))


def orjson_chain_logger() -> Any:
    """The JSON chain with orjson as serializer and ``BytesLogger`` (structlog's fastest JSON set-up)."""
    import orjson  # noqa: PLC0415 - benchmark-only dependency

    return _json_chain(structlog.BytesLogger(open(os.devnull, "wb")), serializer=orjson.dumps)


def stdlib_json_logger() -> logging.Logger:
    """stdlib logging with python-json-logger's ``JsonFormatter`` to /dev/null (fields in ``extra=``)."""
    try:
        from pythonjsonlogger.json import JsonFormatter  # noqa: PLC0415 - benchmark-only dependency
    except ImportError:  # python-json-logger < 3
        from pythonjsonlogger.jsonlogger import JsonFormatter  # type: ignore[no-redef]  # noqa: PLC0415

    logger = logging.getLogger("structlog_etw.bench.json")
    logger.handlers.clear()
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = logging.StreamHandler(_devnull_text())
    handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    return logger
