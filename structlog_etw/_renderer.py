"""``EtwRenderer``: the final structlog processor that writes each event to a trace provider.

Control keys (taken from the call, else the bound context, else structlog's contextvars; never
written as fields): ``etw_keyword``, ``etw_level``, ``etw_opcode``, ``etw_tags``, ``etw_name``.
An invalid control value falls back to its default and is counted in
``provider.stats()["invalid"]``; a log call never raises (other than structlog's own
``DropEvent``).  See docs/usage-renderer.md.
"""

from __future__ import annotations

import sys
import traceback
import uuid
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, Final

import structlog

from ._activity import CURRENT_ACTIVITY
from ._common_schema import write_common
from ._contextvars import ctx_has_etw as _ctx_has_etw
from ._contextvars import watch as _watch
from ._provider import Provider, check_provider_id, get_provider
from ._resolve import METHOD_LEVELS, KeywordsByLogger
from .fields import STR, dict_fields, safe_str

__all__ = ["LEVELS", "MAX_EVENT_NAME", "EtwRenderer", "event_name"]

#: structlog method name -> trace level (1 critical .. 5 verbose); unknown names -> 5.
LEVELS: Final = METHOD_LEVELS
#: Event names are cut to this many characters.
MAX_EVENT_NAME: Final = 200
_CONTROL_KEYS: Final = ("etw_keyword", "etw_level", "etw_opcode", "etw_tags", "etw_name")
_KEYWORD_MAX: Final = (1 << 64) - 1
_TAG_MAX: Final[dict[str, int]] = {"eventheader": 0xFFFF, "tracelogging": 0x0FFFFFFF}


def event_name(event: object) -> str:
    """Make structlog's ``event`` value a valid event name.

    ``str(event)`` (never raising); NUL characters removed; ``;`` replaced by ``_`` (EventHeader
    names may not contain it); cut to :data:`MAX_EVENT_NAME` characters; empty -> ``"event"``.
    """
    name = event if type(event) is str else safe_str(event)
    if "\0" in name:
        name = name.replace("\0", "")
    if ";" in name:
        name = name.replace(";", "_")
    if len(name) > MAX_EVENT_NAME:
        name = name[:MAX_EVENT_NAME]
    return name or "event"


_NAMES: dict[str, str] = {}  # event text -> valid event name (bounded; cleared when full)
_NAMES_LIMIT: Final = 1024


def _valid_name(event: object) -> str:
    """:func:`event_name`, remembered for ``str`` events (repeated names skip the checks)."""
    if type(event) is not str or len(event) > MAX_EVENT_NAME:  # only short texts are kept
        return event_name(event)
    name = _NAMES.get(event)
    if name is None:
        name = event_name(event)
        if len(_NAMES) >= _NAMES_LIMIT:
            _NAMES.clear()
        _NAMES[event] = name
    return name


def _contextvar_lookup() -> Any:
    """A cheap ``key -> value | None`` view of structlog's contextvars (without copying them)."""
    try:
        registry: dict[str, Any] = structlog.contextvars._CONTEXT_VARS
        prefix: str = structlog.contextvars.STRUCTLOG_KEY_PREFIX
    except AttributeError:  # pragma: no cover - older/newer structlog: fall back to the public API

        def lookup_public(key: str) -> Any:
            return structlog.contextvars.get_contextvars().get(key)

        return lookup_public

    def lookup(key: str) -> Any:
        var = registry.get(prefix + key)
        if var is None:
            return None
        value = var.get(Ellipsis)
        return None if value is Ellipsis else value

    return lookup


_ctx_get = _contextvar_lookup()


def _format_exc_info(exc_info: object) -> str | None:
    if exc_info is True:
        exc_info = sys.exc_info()
    elif isinstance(exc_info, BaseException):
        exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
    if not isinstance(exc_info, tuple) or len(exc_info) != 3 or exc_info[0] is None:
        return None
    try:
        return "".join(traceback.format_exception(*exc_info))
    except Exception:
        return safe_str(exc_info[1])


class EtwRenderer:
    """Write every event to the trace provider ``provider_name``; the last processor of a chain.

    Level from structlog's method name (critical/fatal 1, error/exception 2, warning/warn 3,
    info/msg 4, debug 5, anything else 5; ``etw_level`` overrides).  Keyword ``etw_keyword``,
    else the one ``keywords_by_logger`` gives the logger's name (the event's ``logger`` key, the
    stdlib record's or the wrapped logger's ``name``; see ``_keywords.KeywordsByLogger``), else
    ``default_keyword``.  Event name ``etw_name``, else the ``event`` string made valid
    (:func:`event_name`; with ``etw_name`` the ``event`` value stays a field called
    ``event``).  Every other key becomes a typed field; ``exc_info`` becomes an ``exception``
    field holding the formatted traceback unless ``exception`` is already there.

    After writing it raises :class:`structlog.DropEvent` (nothing else renders the event), or
    with ``passthrough=True`` returns the event dict (control keys removed) for later
    processors such as ``ConsoleRenderer`` or ``JSONRenderer``.

    ``schema="common"`` writes Common Schema 4.0 events instead (``__csver__``, PartA, PartB,
    PartC with the ``event`` text as ``Body``; activities as Span events at their Stop): see
    ``structlog_etw._common_schema`` and docs/common-schema.md.

    ``provider_id`` (a :class:`uuid.UUID` or GUID text) is the ETW provider GUID to register
    instead of the hash of the name (Windows; recorded by the TraceLogging capture); another
    renderer of the same name with a different ``provider_id`` raises :class:`ValueError`.
    Names follow the rules of the format written: ``MyCompany_MyService`` everywhere,
    ``MyCompany.MyService`` only with TraceLogging (Windows, or the TraceLogging capture).
    """

    def __init__(
        self,
        provider_name: str,
        *,
        default_keyword: int = 1,
        group: str | None = None,
        schema: str = "etw",
        keywords: Iterable[int] = (),
        passthrough: bool = False,
        provider: Provider | None = None,
        keywords_by_logger: Mapping[str, int] | None = None,
        provider_id: uuid.UUID | str | None = None,
    ) -> None:
        if type(default_keyword) is not int or not 0 <= default_keyword <= _KEYWORD_MAX:
            raise ValueError(f"default_keyword must be an int in 0..2**64-1, got {default_keyword!r}")
        self.keywords_by_logger = by_logger = KeywordsByLogger(keywords_by_logger)
        keywords = (*keywords, *by_logger.keywords())
        if provider is None:
            provider = get_provider(
                provider_name,
                group=group,
                provider_id=provider_id,
                default_keyword=default_keyword,
                keywords=keywords,
            )
        else:
            if provider_id is not None:
                check_provider_id(provider, provider_id)
            for kw in keywords:
                for level in range(1, 6):
                    provider.slot(level, kw)
        self.provider = provider
        self.default_keyword = default_keyword
        self.passthrough = passthrough
        if schema not in ("etw", "common"):
            raise ValueError(f"schema must be 'etw' or 'common', got {schema!r}")
        self.schema = schema
        self._common = schema == "common"
        self._slot = provider.slot
        self._slots = provider._slots  # the provider's slot cache: read directly on the hot path
        self._tag_max = _TAG_MAX.get(provider.format, 0xFFFF)

    @property
    def keywords_by_logger(self) -> KeywordsByLogger:
        """Logger name -> keyword (``_keywords.KeywordsByLogger``); may be replaced."""
        return self._keywords_by_logger

    @keywords_by_logger.setter
    def keywords_by_logger(self, value: KeywordsByLogger) -> None:
        self._keywords_by_logger = value
        self._by_logger = bool(value)  # decided here, not per event

    def __call__(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
        """Write ``event_dict``; raise ``DropEvent`` (or return the dict with ``passthrough``)."""
        try:
            self._render(logger, method_name, event_dict)
        except Exception:
            self.provider.count_dropped("render_error")
        if self.passthrough:
            return event_dict
        raise structlog.DropEvent

    def _control(self, event_dict: MutableMapping[str, Any], key: str) -> Any:
        value = event_dict.pop(key, None)
        if value is None:
            value = _ctx_get(key)
        return value

    def _default_keyword(self, logger: Any, event_dict: MutableMapping[str, Any]) -> int:
        """The keyword the logger's name selects (``keywords_by_logger``), else ``default_keyword``.

        The name is the event's ``logger`` key (structlog's ``add_logger_name``, or bound with
        ``get_logger(logger="db")``), else the stdlib record's name, else the wrapped logger's
        ``name`` attribute (stdlib loggers).
        """
        names = self._keywords_by_logger
        if names:
            name = event_dict.get("logger")
            if type(name) is not str:
                record = event_dict.get("_record")
                name = getattr(record, "name", None) if record is not None else getattr(logger, "name", None)
            keyword = names.lookup(name)
            if keyword is not None:
                return keyword
        return self.default_keyword

    def _render(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> None:
        provider = self.provider
        if not _CONTROL_SET.isdisjoint(event_dict) or (_watch.bound and _ctx_has_etw()):
            ctl = self._control
            level = ctl(event_dict, "etw_level")
            keyword = ctl(event_dict, "etw_keyword")
            opcode = ctl(event_dict, "etw_opcode")
            tags = ctl(event_dict, "etw_tags")
            name = ctl(event_dict, "etw_name")
        else:  # the common case: no control key anywhere, nothing to look up
            level = keyword = opcode = tags = name = None

        if level is None:
            level = LEVELS.get(method_name, 5)
        elif type(level) is not int or not 1 <= level <= 255:
            provider.count_invalid("etw_level")
            level = LEVELS.get(method_name, 5)
        if keyword is None:
            keyword = self._default_keyword(logger, event_dict) if self._by_logger else self.default_keyword
        elif type(keyword) is not int or not 0 <= keyword <= _KEYWORD_MAX:
            provider.count_invalid("etw_keyword")
            keyword = self._default_keyword(logger, event_dict)

        slot = self._slots.get((level, keyword)) or self._slot(level, keyword)
        if not slot.word[0]:
            if provider._closed:  # logged after close (e.g. at interpreter exit): counted
                provider.count_dropped("closed")
            return  # nobody listens: not counted (the normal state of a provider)

        if opcode is None:
            opcode = 0
        elif type(opcode) is not int or not 0 <= opcode <= 255:
            provider.count_invalid("etw_opcode")
            opcode = 0
        if tags is None:
            tags = 0
        elif type(tags) is not int or not 0 <= tags <= self._tag_max:
            provider.count_invalid("etw_tags")
            tags = 0
        skip_event = True
        if name is not None:
            if type(name) is str and name:
                name = event_name(name)
                skip_event = False
            else:
                provider.count_invalid("etw_name")
                name = None
        if name is None:
            event = event_dict.get("event", "")
            name = (_NAMES.get(event) if type(event) is str else None) or _valid_name(event)

        fields = dict_fields(event_dict.items(), "event" if skip_event else None)
        exc_info = event_dict.get("exc_info")
        if exc_info and "exception" not in event_dict:
            text = _format_exc_info(exc_info)
            if text is not None:
                fields.append(("exception", STR, text))

        if self._common:
            event = event_dict.get("event")
            if not skip_event:  # with etw_name the event text goes to Body, not PartC
                fields = [f for f in fields if f[0] != "event"]
            body = event if type(event) is str else None
            write_common(provider, slot, name, fields, opcode=opcode, tags=tags, body=body)
            return

        current = CURRENT_ACTIVITY.get()
        if current is None:
            provider.write(slot, name, fields, opcode, tags)
        else:
            provider.write(slot, name, fields, opcode, tags, current[0], current[1])


_CONTROL_SET: Final = frozenset(_CONTROL_KEYS)
