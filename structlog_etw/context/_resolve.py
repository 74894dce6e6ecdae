"""How the structlog surface turns a log call into (level, keyword, name, opcode, tags): one rule, one home.

Everything here is decided once per configuration (renderer, wrapper class, ``EtwEarlyDrop``,
``EtwHandler``) and shared by all of them, so that a wrapper never drops an event its renderer
would have written.  No structlog import: the structlog surface passes the contextvar look-up in.

What lives here: the control keys and the checks of their values (:data:`CONTROL_KEYS`,
:func:`level_or`, :func:`keyword_or`, :func:`valid_opcode`, :func:`valid_tags`,
:func:`event_header`), event names (:func:`event_name`, the bounded :data:`EVENT_NAMES` cache),
the logger-name rule (:func:`logger_name`), :class:`KeywordsByLogger`, and :class:`Resolver`
(what one configuration decided: its slot tables).  The level tables and the keyword range are
not here: they live in :mod:`structlog_etw.formats._levels`, below the provider, which needs them too.
Activities written straight to a provider check their control keys with the same functions
(no :class:`Resolver`: a provider has no configuration to resolve against).

**The control-key rule** (:data:`CONTROL_KEYS`): a control value is taken from the call, else the
bound context, else structlog's contextvars; ``None`` counts as absent.  The first place that
has one decides: a present but invalid value is counted (``stats()["invalid"]``, by the
renderer) and replaced by the default - the method's level, the keyword ``keywords_by_logger``
gives the logger's name, else the default keyword; opcode 0, tags 0, the ``event`` text as the
name.  An invalid value never falls through to a later place (the renderer only sees the
merged event dict, so it could not tell which place a value came from).

**The logger-name rule**: the event's ``logger`` key (structlog's ``add_logger_name``,
``bind(logger=...)`` or a call's ``logger=``), else the stdlib record's name (``_record``,
``EtwHandler``), else the wrapped logger's ``name`` attribute.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from .._util.bounded import BoundedCache
from ..formats._levels import LEVEL_NAMES, METHOD_LEVELS, check_keyword, valid_keyword, valid_level
from ..formats.eventheader import TAG_MAX as EVENTHEADER_TAG_MAX
from ..formats.tracelogging import TAG_MAX as TRACELOGGING_TAG_MAX
from ..write.fields import clean_name, safe_str

if TYPE_CHECKING:
    from ..backends.base import Slot
    from ..provider._provider import Provider

__all__ = [
    "CONTROL_KEYS",
    "CONTROL_SET",
    "DIRECT_NOT_PLAIN",
    "DIRECT_NOT_PLAIN_MERGED",
    "DIRECT_WRITE_ADDITIONS",
    "EVENT_NAMES",
    "MAX_EVENT_NAME",
    "POSITIONAL_ARGS",
    "RENDERER_ADDITIONS",
    "RENDERER_NOT_PLAIN",
    "Invalid",
    "KeywordsByLogger",
    "Resolver",
    "as_keywords_by_logger",
    "event_header",
    "event_name",
    "keyword_or",
    "level_or",
    "logger_name",
    "no_contextvars",
    "valid_opcode",
    "valid_tags",
]

# --- control keys and their checks -------------------------------------------------------------

#: The control keys: taken from the call, the bound context or contextvars; never fields.
CONTROL_KEYS: Final = ("etw_keyword", "etw_level", "etw_opcode", "etw_tags", "etw_name")
#: :data:`CONTROL_KEYS` as a set: the one definition every "has it a control key?" test derives from.
CONTROL_SET: Final = frozenset(CONTROL_KEYS)

#: The key ``structlog.stdlib.BoundLogger`` puts a call's ``%`` arguments under.
POSITIONAL_ARGS: Final = "positional_args"

# The keys that keep an event off a plain write (no control key to resolve: the slot of the method,
# the event text as the name, the items as the fields).  Each path's set is the control keys plus
# the named additions that path needs; a key added to CONTROL_KEYS reaches every path.

#: What else the renderer does not write the plain way: a stdlib ``BoundLogger``'s ``%`` arguments
#: (the template names the event, the formatted text is a ``message`` field).
RENDERER_ADDITIONS: Final = (POSITIONAL_ARGS,)
#: What else the wrapper's direct write leaves to the renderer's rule: ``exc_info`` (a traceback
#: field; the renderer checks it after its plain test) and ``event`` (a call's ``event=`` keyword,
#: or an ``event`` bound in the context).
DIRECT_WRITE_ADDITIONS: Final = ("exc_info", "event")
#: The renderer's keys that send an event off its plain write.
RENDERER_NOT_PLAIN: Final = CONTROL_SET.union(RENDERER_ADDITIONS)
#: The direct write's keys that send a call the long way (the renderer's, and its additions).
DIRECT_NOT_PLAIN: Final = RENDERER_NOT_PLAIN.union(DIRECT_WRITE_ADDITIONS)
#: :data:`DIRECT_NOT_PLAIN` but ``event``: what ``merge_contextvars`` must not have added.
DIRECT_NOT_PLAIN_MERGED: Final = DIRECT_NOT_PLAIN - {"event"}
#: Event names are cut to this many characters.
MAX_EVENT_NAME: Final = 200

#: Largest ``etw_tags`` per event format: EventHeader's u16 tag, TraceLogging's 28-bit event tags.
_TAG_MAX: Final[Mapping[str, int]] = {
    "eventheader": EVENTHEADER_TAG_MAX,
    "tracelogging": TRACELOGGING_TAG_MAX,
}

#: Counts one invalid control value by key (``Provider.count_invalid``), or ``None``: don't count.
Invalid: TypeAlias = "Callable[[str], None] | None"


def valid_opcode(value: object) -> bool:
    """Whether *value* can be an event opcode: an ``int`` (not ``bool``) in 0..255."""
    return type(value) is int and 0 <= value <= 255


def valid_tags(value: object, event_format: str) -> bool:
    """Whether *value* fits the tags of *event_format* (EventHeader 0..0xFFFF, TraceLogging 28 bits)."""
    return type(value) is int and 0 <= value <= _TAG_MAX.get(event_format, EVENTHEADER_TAG_MAX)


def _usable(value: object, valid: bool, key: str, invalid: Invalid) -> bool:
    """Whether a control value is to be used: given and valid; a given invalid one is counted."""
    if valid:
        return True
    if value is not None and invalid is not None:
        invalid(key)
    return False


def level_or(value: object, default: int, invalid: Invalid = None) -> int:
    """``etw_level`` *value* if valid, else *default*; a given invalid value is counted."""
    return value if _usable(value, valid_level(value), "etw_level", invalid) else default  # type: ignore[return-value]


def keyword_or(value: object, default: int, invalid: Invalid = None) -> int:
    """``etw_keyword`` *value* if valid, else *default*; a given invalid value is counted."""
    return value if _usable(value, valid_keyword(value), "etw_keyword", invalid) else default  # type: ignore[return-value]


def event_header(
    opcode: object, tags: object, name: object, event_format: str, invalid: Invalid = None
) -> tuple[int, int, str | None]:
    """``etw_opcode``, ``etw_tags`` and ``etw_name`` values -> opcode, tags and event name.

    Invalid or absent: opcode 0, tags 0, name ``None`` (the caller's default name); a given
    invalid value is counted.  A name is made valid with :func:`event_name`.
    """
    if not _usable(opcode, valid_opcode(opcode), "etw_opcode", invalid):
        opcode = 0
    if not _usable(tags, valid_tags(tags, event_format), "etw_tags", invalid):
        tags = 0
    if _usable(name, type(name) is str and name != "", "etw_name", invalid):
        return opcode, tags, event_name(name)  # type: ignore[return-value]  # checked: ints
    return opcode, tags, None  # type: ignore[return-value]


def event_name(event: object) -> str:
    """Make structlog's ``event`` value a valid event name.

    ``str(event)`` (never raising); NUL and ``;`` replaced by ``_`` (NUL by the rule of every
    name, :func:`~structlog_etw.write.fields.clean_name`; EventHeader names may not contain ``;``); cut
    to :data:`MAX_EVENT_NAME` characters; empty -> ``"event"``.
    """
    name = clean_name(event if type(event) is str else safe_str(event))
    if ";" in name:
        name = name.replace(";", "_")
    if len(name) > MAX_EVENT_NAME:
        name = name[:MAX_EVENT_NAME]
    return name or "event"


class _EventNames(dict[str, str]):
    """Event text -> valid event name (:func:`event_name`), made on first use; texts longer than
    :data:`MAX_EVENT_NAME` are not kept, and a full cache (1024 names, or 128 K characters of
    texts and names) starts over."""

    __slots__ = ("_books",)

    def __init__(self) -> None:
        super().__init__()
        self._books: BoundedCache[str, str] = BoundedCache(1024, 128 * 1024, entries=self)

    def __missing__(self, event: str) -> str:
        name = event_name(event)
        if len(event) <= MAX_EVENT_NAME:
            self._books.store(event, name, len(event) + len(name))
        return name


#: ``EVENT_NAMES[text]`` is the event name of a ``str`` event text (repeated texts skip the checks);
#: read it, never write it.
EVENT_NAMES: Final = _EventNames()


def no_contextvars(key: str) -> object:
    """A contextvar look-up that finds nothing (for code outside structlog, e.g. a bare provider)."""
    return None


# --- logger names -> keywords ------------------------------------------------------------------


def logger_name(logger: object, event: Mapping[str, Any]) -> object:
    """The logger name *event* belongs to (see the module docstring); ``None`` when there is none."""
    name = event.get("logger")
    if type(name) is str:
        return name
    record = event.get("_record")
    return getattr(record if record is not None else logger, "name", None)


class KeywordsByLogger(Mapping[str, int]):
    """Map logger names to keywords: ``{"db": 0x2, "http": 0x4}``.

    It is itself a read-only mapping of the keys it was given (``dict(names)``, ``names["db"]``,
    ``==`` with a ``dict``), so it goes wherever a ``keywords_by_logger`` mapping goes; resolving a
    logger name is :meth:`lookup`.

    A key matches the logger of that exact name and every logger below it in the dotted
    hierarchy (``"db"`` matches ``db`` and ``db.pool`` but not ``dbx``), the way stdlib
    logging names nest; the longest matching key wins.  A key ending in ``"*"`` matches any
    name starting with what precedes the star (``"app_*"`` matches ``app_web``).

    Invalid mappings raise ``TypeError``/``ValueError`` at construction (set-up time).
    Lookups never raise and cost time linear in the name's length; results are cached, the
    cache bounded by the characters of the names it holds (logger names can come from data).
    """

    __slots__ = ("_cache", "_exact", "_kept", "_lengths", "_prefixes")

    #: Names longer than this are never cached (a look-up of one is linear in its length anyway).
    _CACHED_NAME_MAX: Final = 512
    #: The cache holds names of at most this many characters in all (then it starts over).
    _CACHE_CHARS_MAX: Final = 256 * 1024

    def __init__(self, mapping: Mapping[str, int] | None = None) -> None:
        exact: dict[str, int] = {}
        prefixes: list[tuple[str, int]] = []
        for name, keyword in (mapping or {}).items():
            if not isinstance(name, str) or not name.rstrip("*"):
                raise TypeError(f"keywords_by_logger: logger names must be non-empty str, got {name!r}")
            check_keyword(keyword, f"keywords_by_logger[{name!r}]: keyword")
            if name.endswith("*"):
                prefixes.append((name[:-1], keyword))
            else:
                exact[name] = keyword
        prefixes.sort(key=lambda item: len(item[0]), reverse=True)
        self._exact = exact
        # The lengths of the exact keys, longest first: a name is matched by trying only these
        # (a slice and a look-up each), so a look-up is linear in the name, whatever its dots.
        self._lengths = tuple(sorted({len(k) for k in exact}, reverse=True))
        self._prefixes = tuple(prefixes)
        # Bounded by the names' characters (a look-up that finds its books taken by another
        # thread does not store: the next one resolves the name again).
        chars = self._CACHE_CHARS_MAX
        self._kept: BoundedCache[str, int | None] = BoundedCache(chars, chars)
        self._cache = self._kept.entries

    def __bool__(self) -> bool:
        return bool(self._exact or self._prefixes)

    def keywords(self) -> tuple[int, ...]:
        """Every keyword the mapping can produce (for registering them up front), sorted."""
        return tuple(sorted({*self._exact.values(), *(kw for _, kw in self._prefixes)}))

    def lookup(self, name: object) -> int | None:
        """The keyword for logger *name*, or ``None`` when no key matches (or *name* is no ``str``).

        Linear in the length of *name*; names up to 512 characters are cached, 256 K characters
        of names at most (then the cache starts over).
        """
        if type(name) is not str:
            return None
        try:
            return self._cache[name]
        except KeyError:
            pass
        result = self._resolve(name)
        if len(name) <= self._CACHED_NAME_MAX:
            self._kept.store(name, result, len(name) or 1)
        return result

    def _resolve(self, name: str) -> int | None:
        best: int | None = None
        best_len = -1
        size = len(name)
        exact = self._exact
        for length in self._lengths:  # longest first: the first hit is the longest match
            if length > size or (length < size and name[length] != "."):
                continue
            keyword = exact.get(name if length == size else name[:length])
            if keyword is not None:
                best, best_len = keyword, length
                break
        for prefix, keyword in self._prefixes:
            if len(prefix) > best_len and name.startswith(prefix):
                return keyword
        return best

    def _items(self) -> dict[str, int]:
        return {**self._exact, **{p + "*": k for p, k in self._prefixes}}

    def __getitem__(self, name: str) -> int:
        """The keyword given for exactly the key *name* (``"db"``, ``"app_*"``)."""
        return self._items()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._exact) + len(self._prefixes)

    def __reduce__(self) -> tuple[Any, ...]:
        return (KeywordsByLogger, (self._items(),))  # the mapping, not the cache

    def __repr__(self) -> str:
        return f"KeywordsByLogger({self._items()!r})"


def as_keywords_by_logger(value: object) -> KeywordsByLogger:
    """A ``keywords_by_logger`` argument as a :class:`KeywordsByLogger`: ``None`` (none), a
    ``KeywordsByLogger`` (itself) or a mapping of logger names to keywords; anything else raises
    ``TypeError`` (a bad name or keyword in a mapping: ``TypeError``/``ValueError``)."""
    if value is None:
        return KeywordsByLogger()
    if isinstance(value, KeywordsByLogger):
        return value
    if isinstance(value, Mapping):
        return KeywordsByLogger(value)
    raise TypeError(
        "keywords_by_logger must be a mapping of logger names to keywords or a KeywordsByLogger, "
        f"got {type(value).__name__}: {safe_str(value)[:80]}"
    )


# --- one configuration's resolution ------------------------------------------------------------


class _MethodSlots(dict[str, "Slot"]):
    """Method name -> slot; an unknown method name gets :attr:`unknown` (level 5, like the table)."""

    __slots__ = ("unknown",)

    unknown: Slot

    def __missing__(self, method_name: str) -> Slot:
        return self.unknown


class Resolver:
    """The resolution one renderer, wrapper class, ``EtwEarlyDrop`` or ``EtwHandler`` decided at set-up.

    ``provider`` and ``default_keyword`` are fixed; ``names`` (the ``keywords_by_logger`` map)
    may be replaced with :meth:`set_names`.  ``contextvar`` looks a control key up in
    structlog's contextvars (``None`` when unset).  Slots come from the provider's own cache
    (``Provider.slots``), so resolving one is a dict look-up once its pair was registered.

    :attr:`by_method` (method name -> slot at the default keyword; unknown names: level 5) is
    the whole resolution of an event without control keys when :attr:`by_name` is false.
    """

    __slots__ = (
        "_slots",
        "_tables",
        "by_method",
        "by_name",
        "contextvar",
        "default_keyword",
        "names",
        "provider",
    )

    _TABLES_MAX: Final = 1024

    def __init__(
        self,
        provider: Provider,
        default_keyword: int,
        names: KeywordsByLogger,
        contextvar: Callable[[str], object] = no_contextvars,
    ) -> None:
        self.provider = provider
        self.default_keyword = default_keyword
        self.contextvar = contextvar
        self._slots = provider.slots  # the provider's cache: never replaced, read on the hot path
        # (keyword, fixed level or 0) -> slot per ETW level, index 0 unused
        self._tables: dict[tuple[int, int], tuple[Slot, ...]] = {}
        self.names = names
        self.by_name = bool(names)  # KeywordsByLogger.__bool__ is a Python call: once here
        self.register((default_keyword, *names.keywords()))
        defaults = self.level_slots(default_keyword, 0)
        self.by_method = _MethodSlots({name: defaults[lvl] for name, lvl in METHOD_LEVELS.items()})
        self.by_method.unknown = defaults[5]

    def set_names(self, names: KeywordsByLogger) -> None:
        """Use *names* (a new ``keywords_by_logger`` map) from now on; its keywords are registered."""
        self.register(names.keywords())
        self.names = names
        self.by_name = bool(names)

    def register(self, keywords: Iterable[int]) -> None:
        """Register *keywords* at levels 1-5 now, so that perf can name their tracepoints up front."""
        for keyword in keywords:
            for level in LEVEL_NAMES:
                self.provider.slot(level, keyword)

    # -- slots ----------------------------------------------------------------------------------

    def slot(self, level: int, keyword: int) -> Slot:
        """The provider's slot for (level, keyword) (a dict look-up once registered)."""
        return self._slots.get((level, keyword)) or self.provider.slot(level, keyword)

    def level_slots(self, keyword: int, fixed_level: int) -> tuple[Slot, ...]:
        """Slots of *keyword* per ETW level 1..5 (index 0 unused), all at *fixed_level* unless 0."""
        key = (keyword, fixed_level)
        try:
            return self._tables[key]
        except KeyError:
            pass
        if fixed_level:
            one = self.slot(fixed_level, keyword)
            slots: tuple[Slot, ...] = (one, one, one, one, one, one)
        else:
            first = self.slot(1, keyword)
            slots = (first, first, *(self.slot(level, keyword) for level in range(2, 6)))
        # Only tables of the provider's cached slots are kept: a slot handed out uncached (closed,
        # past max_slots, asked for by a signal handler mid-registration) is asked for again.
        cached = self._slots
        if len(self._tables) < self._TABLES_MAX and all(cached.get((s.level, s.keyword)) is s for s in slots):
            self._tables[key] = slots
        return slots

    def name_keyword(self, logger: object, event: Mapping[str, Any]) -> int:
        """The keyword the logger's name selects (``keywords_by_logger``), else the default keyword."""
        if self.by_name:
            keyword = self.names.lookup(logger_name(logger, event))
            if keyword is not None:
                return keyword
        return self.default_keyword

    def method_slot(self, method_name: str, logger: object, event: Mapping[str, Any]) -> Slot:
        """The slot of an event without control keys."""
        if self.by_name:
            return self.level_slots(self.name_keyword(logger, event), 0)[METHOD_LEVELS.get(method_name, 5)]
        return self.by_method[method_name]

    def bound_slots(self, logger: object, context: Mapping[str, Any]) -> tuple[Slot, ...]:
        """Slots per method level for a bound context's ``etw_level``/``etw_keyword`` (bind time)."""
        keyword = keyword_or(context.get("etw_keyword"), -1)
        return self.level_slots(
            self.name_keyword(logger, context) if keyword < 0 else keyword,
            level_or(context.get("etw_level"), 0),
        )

    def control_slot(
        self,
        level: object,
        keyword: object,
        method_level: int,
        logger: object,
        event: Mapping[str, Any],
        invalid: Invalid = None,
    ) -> Slot:
        """The slot for the ``etw_level``/``etw_keyword`` values found (``None``: none) by the rule."""
        chosen = keyword_or(keyword, -1, invalid)
        return self.slot(
            level_or(level, method_level, invalid),
            self.name_keyword(logger, event) if chosen < 0 else chosen,
        )

    # -- control values -------------------------------------------------------------------------

    def control(self, event: Mapping[str, Any], key: str) -> object:
        """The control value *key* of *event*, else of structlog's contextvars, else ``None``."""
        value = event.get(key)
        return self.contextvar(key) if value is None else value

    def take(self, event: MutableMapping[str, Any], key: str) -> object:
        """Like :meth:`control`, but removes *key* from *event* (control keys are never fields)."""
        value = event.pop(key, None)
        return self.contextvar(key) if value is None else value

    def listening(self, method_level: int, logger: object, event: Mapping[str, Any]) -> bool:
        """Whether a session listens for an event of *event*'s controls (call > bound > contextvars).

        Never raises: when it cannot tell it says ``True`` (the renderer then decides and counts).
        """
        try:
            slot = self.control_slot(
                self.control(event, "etw_level"),
                self.control(event, "etw_keyword"),
                method_level,
                logger,
                event,
            )
            return bool(slot.word[0])
        except Exception:
            return True

    def __repr__(self) -> str:
        return f"Resolver({self.provider!r}, default_keyword={self.default_keyword:#x}, names={self.names!r})"
