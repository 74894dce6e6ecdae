"""``EtwRenderer``: the final structlog processor that writes each event to a trace provider.

Control keys (taken from the call, else the bound context, else structlog's contextvars; never
written as fields): ``etw_keyword``, ``etw_level``, ``etw_opcode``, ``etw_tags``, ``etw_name``.
An invalid control value falls back to its default and is counted in
``provider.stats()["invalid"]``; a log call never raises (other than structlog's own
``DropEvent``, which structlog's loggers catch).  See docs/usage-renderer.md.

Inside ``structlog.stdlib.ProcessorFormatter`` (whose ``format`` does not catch ``DropEvent``,
so the exception would reach the application through ``logging``), the renderer writes the
record's event and returns ``""`` instead: see docs/stdlib.md.
"""

from __future__ import annotations

import sys
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, Final

import structlog
from structlog.stdlib import ProcessorFormatter

from ..backends.base import Slot
from ..context._activity import CURRENT_ACTIVITY
from ..context._resolve import (
    CONTROL_KEYS,
    CONTROL_SET,
    EVENT_NAMES,
    MAX_EVENT_NAME,
    POSITIONAL_ARGS,
    RENDERER_NOT_PLAIN,
    KeywordsByLogger,
    Resolver,
    as_keywords_by_logger,
    event_header,
    event_name,
)
from ..formats._levels import METHOD_LEVELS, STDLIB_NUMBERS, check_keyword, level_from_stdlib, stdlib_level
from ..otel._common_schema import write_common
from ..provider._provider import Provider, check_provider_id, get_provider
from ..write.fields import STR, dict_fields, safe_str
from ._contextvars import WATCH, etw_bound

__all__ = [
    "FORMATTER_KEYS",
    "LEVELS",
    "MAX_EVENT_NAME",
    "EtwRenderer",
    "WrittenEventDict",
    "event_name",
    "exc_info_text",
    "in_processor_formatter",
    "plain_writer",
    "positional_message",
    "resolver_for",
    "restore_renderer",
    "written_to",
]

#: structlog method name -> trace level (1 critical .. 5 verbose); unknown names -> 5.
LEVELS: Final = METHOD_LEVELS
#: The keys ``ProcessorFormatter`` adds to an event dict for its processors (never fields).
FORMATTER_KEYS: Final = ("_record", "_from_structlog")
_FORMATTER_CODE: Final = ProcessorFormatter.format.__code__


def in_processor_formatter(event_dict: Mapping[str, Any], depth: int = 1) -> bool:
    """Whether the processor *depth* frames up (1: the caller of this function) runs inside
    ``structlog.stdlib.ProcessorFormatter.format``, where ``DropEvent`` would reach the application.

    True when the event dict still holds the formatter's ``_record``, or when the processor's
    caller is ``ProcessorFormatter.format`` itself (after ``remove_processors_meta``).
    """
    if "_record" in event_dict or "_from_structlog" in event_dict:
        return True
    try:
        return sys._getframe(depth + 1).f_code is _FORMATTER_CODE
    except ValueError:  # fewer frames than that
        return False


#: The values of ``EtwRenderer(schema=...)``.
SCHEMAS: Final = ("etw", "common", "tracing-etw")
_STR_ONLY: Final = frozenset((str,))


class WrittenEventDict(dict[str, Any]):
    """An event dict a pass-through :class:`EtwRenderer` returned after writing it.

    The later processors see an ordinary ``dict`` (it is one); what it adds is
    :attr:`providers`, so that an :class:`~structlog_etw.EtwHandler` of one of those providers,
    reached through ``ProcessorFormatter.wrap_for_formatter`` (which hands this very object to
    ``logging`` as ``record.msg``), knows the event is written already and does not write it a
    second time.  It survives pickling (a ``QueueHandler`` in front of a process queue) and
    ``copy.copy``; ``dict(d)`` and ``d.copy()`` are plain dicts again.
    """

    __slots__ = ("providers",)

    def __init__(self, items: Mapping[str, Any], providers: tuple[str, ...]) -> None:
        super().__init__(items)
        #: The names of the providers whose renderers wrote the event.
        self.providers = providers

    def __reduce__(self) -> tuple[Any, ...]:
        return (WrittenEventDict, (dict(self), self.providers))


def written_to(msg: object, provider_name: str) -> bool:
    """Whether *msg* (a record's ``msg``) is an event dict a pass-through renderer of the provider
    *provider_name* returned after writing it (:class:`WrittenEventDict`).  Never raises."""
    if type(msg) is not WrittenEventDict:
        return False
    providers = msg.providers
    return type(providers) is tuple and provider_name in providers


def positional_message(event: str, args: object) -> tuple[str, str | None]:
    """``event % args`` as ``structlog.stdlib.PositionalArgumentsFormatter`` formats it (one
    non-empty ``dict`` argument: named placeholders), and the error text when that fails (the
    message is then *event* itself).  Never raises."""
    try:
        if type(args) is tuple and len(args) == 1 and isinstance(args[0], dict) and args[0]:
            args = args[0]
        return event % args, None
    except Exception as exc:
        return event, f"{type(exc).__name__}: {safe_str(exc)}"


class _NotStrKeyed(Exception):
    """An event with control keys and a key that is not a ``str``: rendered from :func:`_str_keyed`."""


#: structlog method name -> stdlib level number (what a pass-through level is compared with).
_METHOD_STDLIB: Final = {name: STDLIB_NUMBERS[level] for name, level in METHOD_LEVELS.items()}
_UNKNOWN_METHOD_STDLIB: Final = STDLIB_NUMBERS[5]


def _passthrough_level(passthrough: bool | int | str) -> int | None:
    """``passthrough`` -> the lowest stdlib level passed on (``None``: none, ``0``: all)."""
    if passthrough is True:
        return 0
    if passthrough is False:
        return None
    try:
        return stdlib_level(passthrough)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"passthrough must be a bool, a level number or a level name: {exc}") from None


def resolver_for(
    target: str | Provider | EtwRenderer,
    default_keyword: int | None = None,
    keywords_by_logger: Mapping[str, int] | KeywordsByLogger | None = None,
    group: str | None = None,
    provider_id: uuid.UUID | str | None = None,
    keywords: Iterable[int] = (),
) -> Resolver:
    """The :class:`~structlog_etw.context._resolve.Resolver` the set-up arguments of a renderer, wrapper,
    ``EtwEarlyDrop`` or ``EtwHandler`` describe; raises ``ValueError``/``TypeError`` on a bad set-up.

    *target*: a provider name (the process-wide provider of that name, created with these
    options), a ``Provider``, or an ``EtwRenderer`` (its provider, default keyword and
    ``keywords_by_logger`` unless given here).  ``default_keyword=None``: the target's.  The
    default keyword, *keywords* and every keyword of the name map are registered at levels 1-5.
    """
    if default_keyword is not None:
        check_keyword(default_keyword, "default_keyword")
    keywords = tuple(keywords)
    if isinstance(target, EtwRenderer):
        provider = target.provider
        names = (
            target.keywords_by_logger
            if keywords_by_logger is None
            else as_keywords_by_logger(keywords_by_logger)
        )
        keyword = target.default_keyword if default_keyword is None else default_keyword
    elif isinstance(target, (Provider, str)):
        names = as_keywords_by_logger(keywords_by_logger)
        if isinstance(target, Provider):
            provider = target
        else:
            options: dict[str, Any] = {"keywords": (*keywords, *names.keywords())}
            if group is not None:
                options["group"] = group
            if provider_id is not None:
                options["provider_id"] = provider_id
            if default_keyword is not None:
                options["default_keyword"] = default_keyword
            provider = get_provider(target, **options)
        keyword = provider.default_keyword if default_keyword is None else default_keyword
    else:
        raise TypeError(f"expected a provider name, a Provider or an EtwRenderer, got {target!r}")
    if provider_id is not None and not isinstance(target, str):
        check_provider_id(provider, provider_id)
    resolver = Resolver(provider, keyword, names, WATCH.value)
    resolver.register(keywords)
    return resolver


def exc_info_text(exc_info: object) -> str | None:
    """The traceback text ``exc_info`` stands for (``True``, an exception, a 3-tuple), else ``None``.

    Never raises and never asks the value for its truth (``__bool__`` may raise): any other
    value, falsy ones included, gives ``None``.
    """
    try:
        if exc_info is True:
            exc_info = sys.exc_info()
        elif isinstance(exc_info, BaseException):
            exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
        if type(exc_info) is not tuple or len(exc_info) != 3 or exc_info[0] is None:
            return None
    except Exception:
        return None
    try:
        return "".join(traceback.format_exception(*exc_info))
    except Exception:
        return safe_str(exc_info[1])


def _str_keyed(event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """``event_dict`` with every key an exact ``str``: what the renderer writes when a key of the
    event broke it (a key whose ``__eq__`` or ``__hash__`` raises, met by a dict look-up).

    Exact ``str`` keys stay; any other key becomes its text (``fields.safe_str``), with ``_``
    appended while that text is taken (by another key, or by a control key: a key that is not a
    ``str`` is a field, never a control).  Nothing here compares or hashes the original keys.
    """
    items = list(event_dict.items())
    out: dict[str, Any] = {k: v for k, v in items if type(k) is str}
    for k, v in items:
        if type(k) is not str:
            name = safe_str(k)
            while name in out or name in CONTROL_SET:
                name += "_"
            out[name] = v
    return out


class EtwRenderer:
    """Write every event to the trace provider ``provider_name``; the last processor of a chain.

    Level from structlog's method name (critical/fatal 1, error/exception 2, warning/warn 3,
    info/msg 4, debug 5, anything else 5; ``etw_level`` overrides).  Keyword ``etw_keyword``,
    else the one ``keywords_by_logger`` gives the logger's name (the event's ``logger`` key, the
    stdlib record's or the wrapped logger's ``name``; see :class:`~structlog_etw.KeywordsByLogger`),
    else ``default_keyword``.  Control keys come from the call, the bound context or structlog's
    contextvars; an invalid one is counted and replaced by its default (see docs/usage-renderer.md).
    Event name ``etw_name``, else the ``event`` string made valid
    (:func:`event_name`; with ``etw_name`` the ``event`` value stays a field called
    ``event``).  Every other key becomes a typed field; ``exc_info`` becomes an ``exception``
    field holding the formatted traceback unless ``exception`` is already there.

    Configure it with a logger factory that needs no stream,
    ``structlog.configure(processors=[..., EtwRenderer(name)],
    logger_factory=structlog.ReturnLoggerFactory())`` (or ``structlog.wrap_logger(structlog.ReturnLogger(),
    ...)``): the chain ends here, so the logger is never called, but structlog makes it all the
    same, and its default ``PrintLogger`` fails on every call where ``sys.stdout`` is None
    (``pythonw.exe``, Windows services, a service started with fd 1 closed; newer structlog raises
    ``TypeError``).  Only a chain that prints (``passthrough``) needs a stream.

    After writing it raises :class:`structlog.DropEvent` (nothing else renders the event), or
    with ``passthrough=True`` returns the event dict (control keys removed) for later
    processors such as ``ConsoleRenderer`` or ``JSONRenderer``.  ``passthrough`` may also be a
    level (stdlib number or name, ``"warning"``): events of a log method at that level or above
    go on to the later processors, lower ones stop here (after being written when a session
    listens).  That is the console-beside-tracing composition (docs/console-and-tracing.md):
    trace events at every level while someone listens, console output at the level and above
    always; ``make_etw_bound_logger`` then skips, before any event dict exists, the calls below
    the level that nobody listens to.  As the last processor of a
    ``structlog.stdlib.ProcessorFormatter`` it returns ``""`` instead of raising (``logging``
    would let ``DropEvent`` reach the application); the record's level is its stdlib level;
    there a pass-through level passes every record on (the stdlib handler's level decides).
    Put such a formatter on an :class:`~structlog_etw.EtwHandler`, which writes nothing else
    (docs/stdlib.md); the formatter's ``_record``/``_from_structlog`` keys are never fields.

    ``schema="common"`` writes Common Schema 4.0 events instead, laid out as OpenTelemetry's
    user_events / ETW exporters write them (events named ``Log``, the ``event`` text as
    ``PartB.body``, ``etw_name`` as ``PartB.name``, severity from the level; activities as one
    ``Span`` event at their Stop); ``cloud_role`` / ``cloud_role_instance`` fill PartA's
    ``ext_cloud_role`` / ``ext_cloud_roleInstance`` (OpenTelemetry's ``service.name`` /
    ``service.instance.id``).  ``schema="tracing-etw"`` keeps the Common Schema layout of the
    tracing-etw crate (``__csver__`` 0x0401).  See docs/common-schema.md.

    ``event_key`` is the key the event name is read from (default ``"event"``), as structlog's
    renderers take it: with ``structlog.processors.EventRenamer("msg")`` earlier in the chain,
    ``EtwRenderer(..., event_key="msg")`` names each trace event by its ``msg`` (not a field
    then).  ``%`` arguments that ``structlog.stdlib.BoundLogger`` keeps in ``positional_args``
    (no ``PositionalArgumentsFormatter`` before the renderer) give the event its template as the
    name and the formatted text as a ``message`` field, as ``EtwHandler`` names stdlib records.

    A pass-through renderer hands the later processors a ``WrittenEventDict`` (a ``dict``
    that remembers the provider): an ``EtwHandler`` of the same provider behind
    ``ProcessorFormatter.wrap_for_formatter`` then does not write the event a second time.

    A renderer pickles, copies and deep-copies as its provider name and options (a copy shares
    the provider; an unpickled one uses the process's provider of that name), so a logger
    holding one can be sent to a ``ProcessPoolExecutor`` worker (docs/usage.md).

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
        passthrough: bool | int | str = False,
        provider: Provider | None = None,
        keywords_by_logger: Mapping[str, int] | KeywordsByLogger | None = None,
        provider_id: uuid.UUID | str | None = None,
        cloud_role: str | None = None,
        cloud_role_instance: str | None = None,
        event_key: str = "event",
    ) -> None:
        if schema not in SCHEMAS:
            raise ValueError(f"schema must be one of {', '.join(map(repr, SCHEMAS))}, got {schema!r}")
        level = _passthrough_level(passthrough)  # before the provider: a bad argument registers nothing
        if type(event_key) is not str or not event_key:
            raise TypeError(f"event_key must be a non-empty str, got {event_key!r}")
        keywords = tuple(keywords)
        resolver = resolver_for(
            provider_name if provider is None else provider,
            default_keyword=check_keyword(default_keyword, "default_keyword"),
            keywords_by_logger=keywords_by_logger,
            group=group,
            provider_id=provider_id,
            keywords=keywords,
        )
        self._resolver = resolver
        #: The provider events are written to.
        self.provider: Provider = resolver.provider
        #: Keyword of events without ``etw_keyword`` and without a ``keywords_by_logger`` match.
        self.default_keyword: int = resolver.default_keyword
        #: The lowest stdlib level whose events are returned (control keys removed) for the later
        #: processors instead of ``DropEvent``: ``None`` none (the default), ``0`` every event.
        self.passthrough_level: int | None = level
        #: Whether any event is returned for later processors (``passthrough_level`` is not ``None``).
        self.passthrough = level is not None
        #: ``"etw"``, ``"common"`` (Common Schema 4.0 as OpenTelemetry's exporters write it) or
        #: ``"tracing-etw"`` (Common Schema as the tracing-etw crate writes it).
        self.schema = schema
        self._common = schema != "etw"
        self._cloud = (cloud_role or None, cloud_role_instance or None)
        #: The key the event name is read from (``"event"``; ``"msg"`` after ``EventRenamer("msg")``).
        self.event_key: str = event_key
        self._count_invalid = resolver.provider.count_invalid
        self._passed_on = (resolver.provider.name,)
        # what a pickle needs besides the provider name and the current keywords_by_logger
        self._options: dict[str, Any] = {
            "default_keyword": self.default_keyword,
            "schema": schema,
            "keywords": keywords,
            "passthrough": False if level is None else (True if level == 0 else level),
            "cloud_role": cloud_role,
            "cloud_role_instance": cloud_role_instance,
            "event_key": event_key,
        }
        self._created: dict[str, Any] = (
            {} if provider is not None else {"group": group, "provider_id": provider_id}
        )

    def _copy(self, provider: Provider | None) -> EtwRenderer:
        names = self._resolver.names
        return type(self)(
            self.provider.name,
            provider=provider,
            keywords_by_logger=names if names else None,
            **self._options,
            **({} if provider is not None else self._created),
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the provider name and the options (an unpickled renderer uses the provider of
        that name in its process)."""
        names = self._resolver.names
        options = {**self._options, **self._created, "keywords_by_logger": names if names else None}
        return (restore_renderer, (self.provider.name, options, type(self)))

    def __copy__(self) -> EtwRenderer:
        """A renderer of the same options writing to the same provider."""
        return self._copy(self.provider)

    def __deepcopy__(self, memo: dict[int, Any]) -> EtwRenderer:
        """A renderer of the same options writing to the same provider (providers are never copied)."""
        return self._copy(self.provider)

    @property
    def keywords_by_logger(self) -> KeywordsByLogger:
        """Logger name -> keyword (:class:`~structlog_etw.KeywordsByLogger`); may be replaced."""
        return self._resolver.names

    @keywords_by_logger.setter
    def keywords_by_logger(self, value: KeywordsByLogger | Mapping[str, int]) -> None:
        self._resolver.set_names(as_keywords_by_logger(value))

    def __call__(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
        """Write ``event_dict``; raise ``DropEvent`` (or return the dict with ``passthrough``;
        ``""`` inside a ``ProcessorFormatter``).

        An event whose keys break the renderer (a key whose ``__eq__``/``__hash__`` raises) is
        written from a copy with plain ``str`` keys (:func:`_str_keyed`), and that copy is what
        ``passthrough`` returns; ``dropped["render_error"]`` counts only what even that cannot
        write.
        """
        try:
            from_formatter = "_record" in event_dict or "_from_structlog" in event_dict
        except Exception:  # a key whose __eq__ raises: a plain copy decides
            event_dict = _str_keyed(event_dict)
            from_formatter = "_record" in event_dict or "_from_structlog" in event_dict
        if from_formatter:
            return self._from_formatter(logger, method_name, event_dict)
        try:
            self._render(logger, method_name, event_dict)
        except Exception:
            try:
                plain = _str_keyed(event_dict)
                self._render(logger, method_name, plain)
            except Exception:
                self.provider.count_dropped("render_error")
            else:
                event_dict = plain
        if self._passes_on(method_name):
            if type(event_dict) is dict:
                return WrittenEventDict(event_dict, self._passed_on)
            if type(event_dict) is WrittenEventDict and self._passed_on[0] not in event_dict.providers:
                return WrittenEventDict(event_dict, (*event_dict.providers, *self._passed_on))
            return event_dict
        if sys._getframe(1).f_code is _FORMATTER_CODE:  # after ProcessorFormatter.remove_processors_meta
            return ""
        raise structlog.DropEvent

    def _passes_on(self, method_name: str) -> bool:
        """Whether an event of ``method_name`` goes on to later processors (``passthrough``)."""
        level = self.passthrough_level
        return level is not None and (
            not level or _METHOD_STDLIB.get(method_name, _UNKNOWN_METHOD_STDLIB) >= level
        )

    def write_event(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> None:
        """Write ``event_dict`` as calling the renderer does, without ``DropEvent`` or pass-through.

        ``make_etw_bound_logger``'s direct write calls this for an event dict that is not plain
        (it builds the dict structlog would build instead of running the chain); a plain one it
        hands to the renderer's one plain write (:func:`plain_writer`).  Never raises: what cannot
        be written is counted (``dropped["render_error"]`` for a failure here).
        """
        try:
            self._render(logger, method_name, event_dict)
        except Exception:
            self.provider.count_dropped("render_error")

    def _from_formatter(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
        """A ``ProcessorFormatter`` event: its meta keys are not fields; a foreign record's custom
        level number decides the level (its method name is only ``levelname.lower()``)."""
        try:
            view = {k: v for k, v in event_dict.items() if k not in FORMATTER_KEYS}
            record = event_dict.get("_record")
            levelno = getattr(record, "levelno", None)
            if (
                event_dict.get("_from_structlog") is False
                and method_name not in METHOD_LEVELS
                and type(levelno) is int
                and "etw_level" not in view
            ):
                view["etw_level"] = level_from_stdlib(levelno)
            self._render(logger, method_name, view)
        except Exception:
            self.provider.count_dropped("render_error")
        # Inside a formatter every pass-through level passes every record on: returning "" here
        # would hand later processors a string, and raising would escape Handler.emit; a stdlib
        # handler's own level decides what it prints (docs/console-and-tracing.md).
        if self.passthrough:
            for key in CONTROL_KEYS:
                event_dict.pop(key, None)
            return event_dict
        return ""

    def _with_message(self, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
        """What is written for an event with ``positional_args``: the template stays the name, the
        formatted text is the ``message`` field (unless there is one), the arguments are no field;
        arguments that do not fit the template are written one by one as text (``args``) with the
        error (``message_error``).  The event dict itself is left as it is (for later processors)."""
        out = dict(event_dict)
        args = out.pop(POSITIONAL_ARGS)
        event = out.get(self.event_key)
        if type(event) is str and args:
            message, error = positional_message(event, args)
            out.setdefault("message", message)
            if error is not None:
                out.setdefault("args", [safe_str(a) for a in args] if type(args) is tuple else safe_str(args))
                out.setdefault("message_error", error)
        return out

    def _write_plain(self, slot: Slot, text: object, event_dict: Mapping[str, Any]) -> None:
        """The one plain-event write: an event without control keys, ``positional_args`` or
        ``exc_info`` whose slot someone listens to, named by its event text *text*, its items
        (but ``event_key``) the fields, with the slot's own header (inside an activity: the
        activity's ids).  The renderer's plain events and ``make_etw_bound_logger``'s direct
        write (:func:`plain_writer`, bound once per class) both end here."""
        name = EVENT_NAMES[text] if type(text) is str else event_name(text)
        current = CURRENT_ACTIVITY.get()
        if current is None:
            self.provider.write_dict_with(slot, name, event_dict, self.event_key, slot.header)
        else:
            self.provider.write_dict(slot, name, event_dict, self.event_key, 0, 0, current[0], current[1])

    def _render(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> None:
        resolver = self._resolver
        # A dict's keys view looks the few control keys up in the dict (it iterates the smaller
        # side when the other is a set): a cost per control key, not per field.
        if (
            event_dict.keys().isdisjoint(RENDERER_NOT_PLAIN)
            if type(event_dict) is dict
            else RENDERER_NOT_PLAIN.isdisjoint(event_dict)
        ) and not etw_bound():
            # the common case: no control key anywhere, nothing to look up
            if resolver.by_name:
                slot = resolver.method_slot(method_name, logger, event_dict)
            else:  # Resolver.method_slot's answer without the call
                slot = resolver.by_method[method_name]
            header = None
        else:
            if not _STR_ONLY.issuperset(map(type, event_dict)):  # a key might break the look-ups
                raise _NotStrKeyed  # after the takes, control values would be lost: render _str_keyed()
            take = resolver.take
            level = take(event_dict, "etw_level")
            keyword = take(event_dict, "etw_keyword")
            header = (
                take(event_dict, "etw_opcode"),
                take(event_dict, "etw_tags"),
                take(event_dict, "etw_name"),
            )
            slot = resolver.control_slot(
                level, keyword, METHOD_LEVELS.get(method_name, 5), logger, event_dict, self._count_invalid
            )

        provider = self.provider
        if not slot.word[0]:
            if provider.closed:  # logged after close (e.g. at interpreter exit): counted
                provider.count_dropped("closed")
            return  # nobody listens: not counted (the normal state of a provider)
        exc_info = event_dict.get("exc_info")
        plain_fields = not self._common and (exc_info is None or exc_info is False)  # never asks its truth
        if header is None:
            if plain_fields:  # a plain event: the one plain write
                self._write_plain(slot, event_dict.get(self.event_key, ""), event_dict)
                return
            opcode = tags = 0
            name = None
        else:
            if POSITIONAL_ARGS in event_dict:  # a stdlib BoundLogger's % arguments
                event_dict = self._with_message(event_dict)
            opcode, tags, name = event_header(*header, provider.format, self._count_invalid)
        named = name is not None  # by etw_name: the event text then stays a field (event_key)
        event_key = self.event_key
        if name is None:
            event = event_dict.get(event_key, "")
            name = EVENT_NAMES[event] if type(event) is str else event_name(event)
        if plain_fields:  # the event dict's items are the fields (Provider.write_dict)
            current = CURRENT_ACTIVITY.get()
            if current is None:
                provider.write_dict(slot, name, event_dict, None if named else event_key, opcode, tags)
            else:
                provider.write_dict(
                    slot, name, event_dict, None if named else event_key, opcode, tags, current[0], current[1]
                )
            return
        fields = dict_fields(event_dict.items(), None if named else event_key)
        if exc_info is not None and exc_info is not False and "exception" not in event_dict:
            text = exc_info_text(exc_info)
            if text is not None:
                fields.append(("exception", STR, text))

        if self._common:
            event = event_dict.get(event_key)
            if named:  # the event text goes to Body, not PartC
                fields = [f for f in fields if f[0] != event_key]
            body = event if type(event) is str else None
            write_common(
                provider,
                slot,
                name,
                fields,
                opcode=opcode,
                tags=tags,
                body=body,
                event_name=name if named else None,
                layout=self.schema,
                cloud=self._cloud,
            )
            return

        current = CURRENT_ACTIVITY.get()
        if current is None:
            provider.write(slot, name, fields, opcode, tags)
        else:
            provider.write(slot, name, fields, opcode, tags, current[0], current[1])


def plain_writer(renderer: EtwRenderer) -> tuple[Resolver, Callable[[Slot, object, Any], None]] | None:
    """What *renderer* writes its plain events by (an event without control keys,
    ``positional_args`` or ``exc_info``), for ``make_etw_bound_logger``'s direct write: its
    resolution (the slot is ``resolution.by_method[method_name]`` while ``resolution.by_name`` is
    false) and its one plain write (``write(slot, event_text, event_dict)``, the renderer's bound
    method: the wrapper binds it when it builds a class); ``None`` when it writes no event that way
    (a Common Schema renderer)."""
    return None if renderer._common else (renderer._resolver, renderer._write_plain)


def restore_renderer(
    provider_name: str, options: dict[str, Any], cls: type[EtwRenderer] = EtwRenderer
) -> EtwRenderer:
    """An unpickled :class:`EtwRenderer` (or subclass *cls*, built with the same arguments): the
    process's provider *provider_name*, these options."""
    return cls(provider_name, **options)
