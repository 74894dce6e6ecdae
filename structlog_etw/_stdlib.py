"""``EtwHandler``: stdlib ``logging`` records become the same trace events as structlog's.

Two kinds of records arrive at a handler:

* **structlog records** - sent through ``structlog.stdlib`` with
  ``ProcessorFormatter.wrap_for_formatter`` as the last processor: ``record.msg`` is the event
  dict.  It is written as it is (its ``event`` is the event name, every other key a field),
  exactly as ``EtwRenderer`` would have written it.
* **foreign records** - from any other library.  Event name: the unformatted message
  template (``record.msg``, stable across calls, like structlog's ``event``); fields:
  ``message`` (the formatted message: the handler's formatter's output when it has one, else
  ``record.getMessage()``), ``logger`` (the logger name), ``pathname``, ``module``, ``lineno``
  and ``funcName`` (where the call is, named as on the record), every ``extra=`` attribute (not
  overriding those), ``exception`` (the formatted traceback) with ``exc_info``, ``stack`` with
  ``stack_info``.  Then the ``foreign_pre_chain`` processors run on that event dict (default:
  ``structlog.contextvars.merge_contextvars``, so ``bind_contextvars(request_id=...)`` reaches
  stdlib records too), with ``_record`` in it as ``ProcessorFormatter`` gives its chain.  Time,
  process and thread ids are not fields: every trace event carries them already.

  A record that cannot be formatted (``%`` arguments that do not match, an unprintable
  ``msg``, a malformed ``exc_info``) is still written with what can be rendered: the template
  text as ``message``, the arguments one by one as ``args``, the error as ``message_error``
  (``exception`` holds the ``exc_info`` as text).
* **a ``ProcessorFormatter``** set on the handler whose processors include an ``EtwRenderer``
  decides everything itself: the handler runs ``format(record)`` and the renderer writes the
  event (structlog's usual stdlib recipe, docs/stdlib.md).

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
from collections.abc import Iterable, Mapping
from typing import Any, Final

import structlog
from structlog.contextvars import merge_contextvars
from structlog.stdlib import ProcessorFormatter
from structlog.typing import Processor

from ._levels import LEVEL_NAMES, level_from_stdlib
from ._provider import Provider
from ._renderer import FORMATTER_KEYS, EtwRenderer, resolver_for
from .fields import safe_str

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
#: The default ``foreign_pre_chain``: structlog's contextvars reach stdlib records too.
DEFAULT_FOREIGN_PRE_CHAIN: Final[tuple[Processor, ...]] = (merge_contextvars,)


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
        foreign_pre_chain: structlog processors run on a foreign record's event dict before
            it is written, as ``ProcessorFormatter``'s argument of that name (default:
            ``(structlog.contextvars.merge_contextvars,)``; ``()`` for none).  A processor
            raising ``DropEvent`` drops the record.
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
        foreign_pre_chain: Iterable[Processor] | None = None,
    ) -> None:
        super().__init__(level)
        #: Processors run on foreign records' event dicts (see the class docstring).
        self.foreign_pre_chain: tuple[Processor, ...] = (
            DEFAULT_FOREIGN_PRE_CHAIN if foreign_pre_chain is None else tuple(foreign_pre_chain)
        )
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

    def _formatter_renders(self) -> bool:
        """Whether the handler's formatter is a ``ProcessorFormatter`` that writes the event itself."""
        formatter = self.formatter
        if not isinstance(formatter, ProcessorFormatter):
            return False
        return any(isinstance(p, EtwRenderer) for p in formatter.processors)

    def _emit(self, record: logging.LogRecord) -> None:
        if self._formatter_renders():
            # structlog's stdlib recipe: the formatter's chain ends in an EtwRenderer, which writes
            # the event and returns "" (DropEvent too, from a processor of the formatter's).
            try:
                with contextlib.suppress(structlog.DropEvent):
                    self.format(record)
                return
            except Exception:  # e.g. getMessage() of a record whose % arguments do not match:
                pass  # written below, with what can be rendered
        levelno = record.levelno
        level = level_from_stdlib(levelno) if type(levelno) is int else 5
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
        with contextlib.suppress(structlog.DropEvent):
            event_dict = dict(msg) if structlog_dict else self._foreign_event_dict(record, level)
            event_dict.setdefault("etw_level", level)
            self._renderer(record, LEVEL_NAMES[level], event_dict)

    def _message(self, record: logging.LogRecord) -> tuple[str, str | None]:
        """The ``message`` field, and the error when the record cannot be formatted."""
        try:
            if self.formatter is not None:
                return self.format(record), None
            return record.getMessage(), None
        except Exception as exc:
            return safe_str(record.msg), f"{type(exc).__name__}: {safe_str(exc)}"

    def _exception(self, record: logging.LogRecord) -> str | None:
        exc_info: Any = record.exc_info
        if exc_info:
            if isinstance(exc_info, tuple) and len(exc_info) == 3 and exc_info[0] is None:
                return record.exc_text or None  # logging's "no exception" triple
            text = record.exc_text
            if text and isinstance(text, str):
                return text
            try:
                return (self.formatter or _FALLBACK_FORMATTER).formatException(exc_info)
            except Exception:  # not an exc_info triple: what it is, as text
                return safe_str(exc_info)
        if record.exc_text:
            return safe_str(record.exc_text)
        return None

    def _foreign_event_dict(self, record: logging.LogRecord, level: int) -> dict[str, Any]:
        msg = record.msg
        message, error = self._message(record)
        event_dict: dict[str, Any] = {
            "event": msg if isinstance(msg, str) else message,
            "message": message,
            "logger": record.name,
            "pathname": record.pathname,
            "module": record.module,
            "lineno": record.lineno,
            "funcName": record.funcName,
        }
        if error is not None:
            args = record.args
            event_dict["args"] = [safe_str(a) for a in args] if isinstance(args, tuple) else safe_str(args)
            event_dict["message_error"] = error
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and key not in event_dict:
                event_dict[key] = value
        exception = self._exception(record)
        if exception is not None:
            event_dict.setdefault("exception", exception)
        if record.stack_info:
            event_dict.setdefault("stack", record.stack_info)
        event_dict.setdefault("etw_level", level)  # the record's level, over a contextvar's
        chain = self.foreign_pre_chain
        if chain:
            event_dict["_record"] = record
            event_dict["_from_structlog"] = False
            method = LEVEL_NAMES[level]
            levelname = record.levelname
            if isinstance(levelname, str):
                method = levelname.lower()
            for processor in chain:
                event_dict = processor(None, method, event_dict)  # type: ignore[assignment]
            for key in FORMATTER_KEYS:
                event_dict.pop(key, None)
        return event_dict

    def handleError(self, record: logging.LogRecord) -> None:
        """Count the failure (``errors``, provider ``dropped["handler_error"]``); print nothing."""
        self.errors += 1
        with contextlib.suppress(Exception):
            self._resolver.provider.count_dropped("handler_error")

    def __repr__(self) -> str:
        return f"<EtwHandler {self._resolver.provider.name} ({logging.getLevelName(self.level)})>"
