"""``EtwHandler``: stdlib ``logging`` records become the same trace events as structlog's.

Two kinds of records arrive at a handler:

* **structlog records** - sent through ``structlog.stdlib`` with
  ``ProcessorFormatter.wrap_for_formatter`` as the last processor: ``record.msg`` is the event
  dict.  It is written as it is (its ``event`` is the event name, every other key a field),
  exactly as ``EtwRenderer`` would have written it.
* **foreign records** - from any other library.  Event name: the unformatted message
  template (``record.msg``, stable across calls, like structlog's ``event``); fields:
  ``message`` (the formatted message), ``logger`` (the logger name), ``func`` and ``lineno``
  (where the call is), every ``extra=`` attribute (not overriding those four), ``exception``
  (the formatted traceback) with ``exc_info``, ``stack`` with ``stack_info``.  Time, process
  and thread ids are not fields: every trace event carries them already.

The level comes from ``record.levelno`` (:func:`~structlog_etw._levels.level_from_stdlib`);
``etw_keyword``, ``etw_level``, ``etw_name``, ``etw_tags``, ``etw_opcode`` given in
``extra=`` (or in a structlog event dict) are control keys, as with the renderer.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections import ChainMap
from collections.abc import Mapping
from typing import Any, Final

import structlog

from ._levels import LEVEL_NAMES, level_from_stdlib
from ._provider import Provider
from ._renderer import EtwRenderer, resolver_for

__all__ = ["EtwHandler"]

#: Attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_ATTRS: Final = frozenset(
    {
        *logging.LogRecord("", 0, "", 0, "", (), None).__dict__,
        "message",
        "asctime",
        "taskName",
        # set by structlog.stdlib.ProcessorFormatter.wrap_for_formatter
        "_logger",
        "_name",
        "_from_structlog",
    }
)
_FALLBACK_FORMATTER: Final = logging.Formatter()


class EtwHandler(logging.Handler):
    """A ``logging.Handler`` that writes every record it handles as a trace event.

    ``EtwHandler("MyCompany_MyService")`` shares the provider (and its registration) with
    every ``EtwRenderer`` of that name.  ``keywords_by_logger`` maps stdlib logger names to
    keywords (``{"sqlalchemy": 0x2}``; a name matches its dotted children too).

    It never raises and never prints: a record that cannot be written is counted in
    :attr:`errors` and in the provider's ``stats()["dropped"]["handler_error"]``.  ``emit``
    takes no handler lock (the provider is thread-safe).  A record logged while this handler
    is already writing on the same thread (e.g. a warning from inside the write) is dropped and
    counted as ``dropped["reentrant"]`` rather than recursing.

    Args:
        provider_or_name: provider name, ``Provider`` or ``EtwRenderer`` to write through.
        level: the handler's minimum stdlib level.
        default_keyword: keyword of records without ``etw_keyword`` and without a
            ``keywords_by_logger`` match (default: the provider's).
        keywords_by_logger: logger name (dotted prefix, or ``"prefix*"``) -> keyword.
        group: provider group (only with a provider name).
        provider_id: ETW provider GUID (``uuid.UUID`` or GUID text) instead of the name hash.
    """

    def __init__(
        self,
        provider_or_name: str | Provider | EtwRenderer,
        level: int | str = logging.NOTSET,
        *,
        default_keyword: int | None = None,
        keywords_by_logger: Mapping[str, int] | None = None,
        group: str | None = None,
        provider_id: uuid.UUID | str | None = None,
    ) -> None:
        super().__init__(level)
        resolver = resolver_for(provider_or_name, default_keyword, keywords_by_logger, group, provider_id)
        self._resolver = resolver
        provider = resolver.provider
        renderer = EtwRenderer(provider.name, provider=provider, default_keyword=resolver.default_keyword)
        renderer.keywords_by_logger = resolver.names
        self._renderer = renderer
        self._local = threading.local()
        #: Records that could not be written because of an error in this handler.
        self.errors = 0

    @property
    def provider(self) -> Provider:
        """The provider records are written to."""
        return self._resolver.provider

    def handle(self, record: logging.LogRecord) -> Any:
        """Filter and emit *record* without taking the handler lock (emit is thread-safe)."""
        rv = self.filter(record)
        if isinstance(rv, logging.LogRecord):  # Python 3.12+: a filter may return a new record
            record = rv
        if rv:
            self.emit(record)
        return rv

    def emit(self, record: logging.LogRecord) -> None:
        """Write *record* as a trace event when a session listens for it; never raises."""
        local = self._local
        if getattr(local, "active", False):
            self._resolver.provider.count_dropped("reentrant")
            return
        local.active = True
        try:
            self._emit(record)
        except Exception:
            self.handleError(record)
        finally:
            local.active = False

    def _emit(self, record: logging.LogRecord) -> None:
        level = level_from_stdlib(record.levelno)
        msg: Any = record.msg
        structlog_dict = isinstance(msg, dict)
        # What the renderer will see: a structlog event dict as it is (logger name: its "logger"
        # key, else the record's), or a foreign record's extras under the record's name; and
        # the record's level as etw_level unless the event has one (see setdefault below).
        default = {"etw_level": level}
        seen = (
            ChainMap(msg, default)
            if structlog_dict
            else ChainMap({"logger": record.name}, record.__dict__, default)
        )
        if not self._resolver.listening(level, record, seen):
            return
        event_dict = dict(msg) if structlog_dict else self._foreign_event_dict(record)
        event_dict.setdefault("etw_level", level)
        with contextlib.suppress(structlog.DropEvent):
            self._renderer(record, LEVEL_NAMES[level], event_dict)

    def _foreign_event_dict(self, record: logging.LogRecord) -> dict[str, Any]:
        msg = record.msg
        message = record.getMessage()
        event_dict: dict[str, Any] = {
            "event": msg if isinstance(msg, str) else message,
            "message": message,
            "logger": record.name,
            "func": record.funcName,
            "lineno": record.lineno,
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and key not in event_dict:
                event_dict[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            text = record.exc_text
            if not text:
                formatter = self.formatter or _FALLBACK_FORMATTER
                text = formatter.formatException(record.exc_info)
            event_dict.setdefault("exception", text)
        elif record.exc_text:
            event_dict.setdefault("exception", record.exc_text)
        if record.stack_info:
            event_dict.setdefault("stack", record.stack_info)
        return event_dict

    def handleError(self, record: logging.LogRecord) -> None:
        """Count the failure (``errors``, provider ``dropped["handler_error"]``); print nothing."""
        self.errors += 1
        with contextlib.suppress(Exception):
            self._resolver.provider.count_dropped("handler_error")

    def __repr__(self) -> str:
        return f"<EtwHandler {self._resolver.provider.name} ({logging.getLevelName(self.level)})>"
