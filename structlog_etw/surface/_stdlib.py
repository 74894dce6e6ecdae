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

**Written once**: a structlog event dict that a pass-through ``EtwRenderer`` of the same
provider wrote already (``EtwRenderer(..., passthrough=True)`` before ``wrap_for_formatter``,
with this handler on the root logger for the other libraries) is not written again
(a ``WrittenEventDict``).

**Queues**: :class:`EtwQueueHandler` is the ``logging.handlers.QueueHandler`` whose records give
an ``EtwHandler`` behind the ``QueueListener`` the same events as the handler attached directly:
it keeps the template (formatting the text in the logging thread), the exception as text, and
the logging thread's context (structlog's contextvars, the current activity), in which the
handler writes the record.

The level comes from ``record.levelno`` (:func:`~structlog_etw.formats._levels.level_from_stdlib`);
``etw_keyword``, ``etw_level``, ``etw_name``, ``etw_tags``, ``etw_opcode`` given in
``extra=`` (or in a structlog event dict) are control keys, as with the renderer.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import logging
import logging.handlers
import threading
import uuid
from collections import ChainMap
from collections.abc import Iterable, Mapping
from typing import Any, Final

import structlog
from structlog.contextvars import bind_contextvars, get_contextvars, merge_contextvars
from structlog.stdlib import ProcessorFormatter
from structlog.typing import Processor

from ..context._resolve import KeywordsByLogger
from ..formats._levels import LEVEL_NAMES, level_from_stdlib
from ..provider._provider import Provider
from ..write.fields import safe_str
from ._renderer import (
    FORMATTER_KEYS,
    EtwRenderer,
    WrittenEventDict,
    exc_info_text,
    resolver_for,
    written_to,
)

__all__ = ["EtwHandler", "EtwQueueHandler"]

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
        # set by EtwQueueHandler.prepare
        "_etw_message",
        "_etw_message_error",
        "_etw_context",
        "_etw_contextvars",
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
        event_key: the key of the event name in structlog event dicts
            (``structlog.processors.EventRenamer("msg")`` in the structlog chain:
            ``event_key="msg"``); a foreign record's template goes under it too.
    """

    def __init__(
        self,
        provider_or_name: str | Provider | EtwRenderer,
        level: int | str = logging.NOTSET,
        *,
        default_keyword: int | None = None,
        keywords_by_logger: Mapping[str, int] | KeywordsByLogger | None = None,
        group: str | None = None,
        provider_id: uuid.UUID | str | None = None,
        foreign_pre_chain: Iterable[Processor] | None = None,
        event_key: str = "event",
    ) -> None:
        super().__init__(level)
        #: Processors run on foreign records' event dicts (see the class docstring).
        self.foreign_pre_chain: tuple[Processor, ...] = (
            DEFAULT_FOREIGN_PRE_CHAIN if foreign_pre_chain is None else tuple(foreign_pre_chain)
        )
        resolver = resolver_for(provider_or_name, default_keyword, keywords_by_logger, group, provider_id)
        self._resolver = resolver
        provider = resolver.provider
        renderer = EtwRenderer(
            provider.name, provider=provider, default_keyword=resolver.default_keyword, event_key=event_key
        )
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
            queued = record.__dict__
            context = queued.get("_etw_context")
            if context is None and "_etw_contextvars" in queued:  # came through a process queue
                context = _context_with(queued["_etw_contextvars"])
            if isinstance(context, contextvars.Context):  # EtwQueueHandler: the logging thread's context
                context.copy().run(self._emit, record)
            else:
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
        msg: Any = record.msg
        if written_to(msg, self._resolver.provider.name):
            return  # a pass-through EtwRenderer of this provider wrote it (wrap_for_formatter)
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
        queued = record.__dict__
        if "_etw_message" in queued:  # formatted in the logging thread (EtwQueueHandler.prepare)
            error = queued.get("_etw_message_error")
            if error is None and self.formatter is not None:
                with contextlib.suppress(Exception):
                    return self.format(record), None
            return safe_str(queued["_etw_message"]), None if error is None else safe_str(error)
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
            self._renderer.event_key: msg if isinstance(msg, str) else message,
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


def _context_with(values: object) -> contextvars.Context | None:
    """A new context holding *values* as structlog contextvars (a record from a process queue)."""
    if not isinstance(values, dict) or not values:
        return None
    context = contextvars.Context()
    context.run(bind_contextvars, **{str(k): v for k, v in values.items()})
    return context


class _QueuedRecord(logging.LogRecord):
    """A record :meth:`EtwQueueHandler.prepare` made: its message was formatted in the logging
    thread (``getMessage`` returns that text), it holds the logging thread's context; pickled
    (a process queue), the context becomes the structlog contextvars it held."""

    def getMessage(self) -> str:
        """The message text formatted in the logging thread."""
        message = self.__dict__.get("_etw_message")
        return message if isinstance(message, str) else super().getMessage()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        context = state.pop("_etw_context", None)
        if isinstance(context, contextvars.Context):
            try:
                state["_etw_contextvars"] = context.run(get_contextvars)
            except Exception:
                state["_etw_contextvars"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class EtwQueueHandler(logging.handlers.QueueHandler):
    """A ``logging.handlers.QueueHandler`` whose records an :class:`EtwHandler` behind the
    ``QueueListener`` writes exactly as if it were attached directly (docs/stdlib.md).

    ``QueueHandler.prepare`` makes each record a plain string (the formatted text as ``msg``, no
    ``args``, no ``exc_info``) so it can cross threads and processes; an ``EtwHandler`` would name
    the event after that text and lose the exception.  This ``prepare`` keeps the template as
    ``msg`` and formats the text in the logging thread (``getMessage()`` returns it, for every
    handler behind the listener), keeps the traceback as ``exc_text``, resolves a structlog event
    dict's ``exc_info`` into its ``exception`` field, and captures the logging thread's context
    (structlog's contextvars, the current activity), in which ``EtwHandler`` writes the record
    (through a ``multiprocessing`` queue: the structlog contextvars).  It never raises: a record
    it cannot prepare goes on as ``QueueHandler.prepare`` makes it.

    Python 3.12's ``dictConfig`` builds the listener too:
    ``{"class": "structlog_etw.EtwQueueHandler", "handlers": ["etw"]}``.
    """

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        """A copy of *record* that crosses a queue with everything ``EtwHandler`` writes."""
        try:
            return self._prepare(record)
        except Exception:
            plain: logging.LogRecord = super().prepare(record)
            return plain

    def _prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        prepared = copy.copy(record)  # other handlers of the logger still see the original
        prepared.__class__ = _QueuedRecord
        state = prepared.__dict__
        msg: Any = record.msg
        if isinstance(msg, dict):  # a structlog event dict (wrap_for_formatter)
            in_dict = msg.get("exc_info")
            if in_dict is not None and in_dict is not False:  # True means "now": resolve it here
                event = {k: v for k, v in msg.items() if k != "exc_info"}
                text = exc_info_text(in_dict)
                if text is not None:
                    event.setdefault("exception", text)
                prepared.msg = (
                    WrittenEventDict(event, msg.providers) if type(msg) is WrittenEventDict else event
                )
        else:
            try:
                message = self.format(record) if self.formatter is not None else record.getMessage()
                state["_etw_message"] = message
            except Exception as exc:
                state["_etw_message"] = safe_str(msg)
                state["_etw_message_error"] = f"{type(exc).__name__}: {safe_str(exc)}"
                args: Any = record.args
                prepared.args = (
                    tuple(safe_str(a) for a in args) if isinstance(args, tuple) else (safe_str(args),)
                )
            else:
                prepared.args = None
            if not isinstance(msg, str):  # an object as the message: its text (what EtwHandler names it)
                prepared.msg = state["_etw_message"]
        exc_info = record.exc_info
        if (
            exc_info
            and not record.exc_text
            and not (isinstance(exc_info, tuple) and len(exc_info) == 3 and exc_info[0] is None)
        ):
            try:
                prepared.exc_text = _FALLBACK_FORMATTER.formatException(exc_info)
            except Exception:
                prepared.exc_text = safe_str(exc_info)
        prepared.exc_info = None  # tracebacks hold frames: never queued
        state["_etw_context"] = contextvars.copy_context()
        return prepared
