"""Providers: a backend, an encoder and counters; the process registry's members.

A :class:`Provider` is what a renderer or handler writes to.  It pairs the backend (the OS's,
chosen by :mod:`structlog_etw.provider._platform`, a capture's, or one the program gives) with the
encoder of that backend's format, keeps one cached :class:`~structlog_etw.backends.base.Slot`
per (level, keyword), and never raises from :meth:`Provider.write`: what cannot be written is
counted in :meth:`Provider.stats`.  Every provider is a member of the process registry
(:mod:`structlog_etw.provider._registry`), however it was made.

Nothing a signal handler or a ``__del__`` can re-enter waits on a lock: the counts are
:class:`~structlog_etw._util.counters.Tally` counts, ``stats()`` reads snapshots, and slot
registration holds a :class:`~structlog_etw._util.counters.Guard` that tells a re-entry (the event is
then counted as ``dropped["reentrant"]``) instead of waiting for it.

This module knows nothing about structlog.
"""

from __future__ import annotations

import atexit
import contextlib
import errno as _errno
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

from .._util.counters import Count, Guard, Tally
from ..backends.base import (
    DESCRIPTOR_LOST,
    TRANSIENT_ERRNOS,
    UNKNOWN_WORD,
    UNWRITABLE_WORD,
    Backend,
    BackendUnavailable,
    Slot,
)
from ..backends.null import DISABLED_WORD, NullBackend
from ..formats._levels import LEVEL_NAMES, Opcode, check_keyword
from ..formats.eventheader import error_name as eventheader_error_name
from ..formats.header import HeaderValue
from ..formats.tracelogging import TraceLoggingEvent
from ..formats.tracelogging import error_name as tracelogging_error_name
from ..write.fields import Field
from . import _platform
from ._platform import (
    DOCTOR_HINT,
    EtwUnavailableWarning,
    ProviderStatus,
    StatusReason,
    name_problem,
    os_format,
    status_reason,
    unavailable_code,
    warn_once,
)
from ._registry import REGISTRY, BackendFactory

if TYPE_CHECKING:
    from ..write.eventheader._encoder import EventHeaderEncoder
    from ..write.tracelogging._encoder import TraceLoggingEncoder

__all__ = [
    "DEFAULT_MAX_SLOTS",
    "BackendFactory",
    "EtwUnavailableWarning",
    "Provider",
    "ProviderStatus",
    "StatusReason",
    "close_all",
    "get_provider",
    "open_descriptors",
    "providers",
    "set_backend_factory",
]

E = TypeVar("E")
E_co = TypeVar("E_co", covariant=True)


class _Encoder(Protocol[E_co]):
    """What both encoders offer (EventHeader: ``E_co`` is ``bytes``; TraceLogging:
    :data:`~structlog_etw.formats.tracelogging.TraceLoggingEvent`).

    ``encode_fields`` returns ``None`` when the event cannot fit the format's size budget even
    with its values cut (the size policy); ``truncated`` counts events written with values cut.
    The event's level, opcode, tag and activity ids come as one header value
    (:data:`~structlog_etw.formats.header.HeaderValue`).
    """

    @property
    def truncated(self) -> int: ...

    def encode_fields(self, name: str, fields: list[Field], header: HeaderValue) -> E_co | None: ...

    def encode_dict(
        self, name: str, event: Mapping[Any, Any], skip: str | None, header: HeaderValue
    ) -> E_co | None: ...


#: The opcode of the only event that carries a related activity id (a plain int: the hot path's).
_START: Final = int(Opcode.ACTIVITY_START)

#: Results of a write that are not backend codes (those are >= 0, or ``DESCRIPTOR_LOST``).
_TOO_LARGE: Final = -1
_ENCODE_ERROR: Final = -2
_INTERNAL_ERROR: Final = -3
#: ``skip`` of :meth:`Provider.write_dict_with` when the event comes as a list of fields
#: (:meth:`Provider.write`): the one write sequence encodes it with ``encode_fields``.
_FIELDS: Final[Any] = object()
#: How often a provider that could not make its OS backend for a transient reason (out of
#: descriptors or memory) tries again, at the registration of a new (level, keyword) pair.
MAX_BACKEND_RETRIES: Final = 8
#: The handle of a slot asked for by a signal handler or ``__del__`` while this thread was
#: registering a slot of the same provider: never cached, its events counted as ``reentrant``.
_REENTERED: Final[Any] = object()


class _WritePath(Generic[E]):
    """An encoder and a backend of one format, installed together.

    ``encode_dict``, ``encode_fields`` and ``backend_write`` are the bound methods the provider's
    one write sequence (:meth:`Provider.write_dict_with`) calls, read once per event from the path.
    """

    __slots__ = (
        "backend",
        "backend_write",
        "encode_dict",
        "encode_fields",
        "encoder",
        "error_name",
        "format",
    )

    def __init__(
        self, fmt: str, encoder: _Encoder[E], backend: Backend[E], error_name: Callable[[int], str]
    ) -> None:
        self.format = fmt
        self.encoder = encoder
        self.backend = backend
        self.encode_dict = encoder.encode_dict
        self.encode_fields = encoder.encode_fields
        self.backend_write = backend.write
        #: The name a backend error code is counted under (errno names, Win32 names).
        self.error_name = error_name


class _NoEncoder:
    """The encoder of a provider whose encoder module cannot even be imported (out of
    descriptors): its backend is a :class:`NullBackend`, whose slots are never enabled, so
    nothing is ever encoded; were it asked, the event is counted as ``dropped["too_large"]``."""

    truncated = 0

    def encode_fields(self, name: str, fields: list[Field], header: HeaderValue) -> None:
        return None

    def encode_dict(self, name: str, event: Mapping[Any, Any], skip: str | None, header: HeaderValue) -> None:
        return None


#: Levels registered up front for the default keyword (critical .. verbose).
DEFAULT_LEVELS: Final = tuple(LEVEL_NAMES)

#: How many (level, keyword) slots a provider registers at most, unless told otherwise
#: (``max_slots``).  On Linux every slot is a kernel tracepoint (about 700 bytes of kernel
#: memory, and one of the ``kernel.user_events_max`` tracepoints the whole system shares);
#: keywords and levels can come from logged data (``log.info("req", **request_json)``), so the
#: number a process registers must have a bound.  Events at a pair past the bound are counted
#: as ``dropped["slot_limit"]`` (docs/reliability.md).
DEFAULT_MAX_SLOTS: Final = 256


def _write_path(
    fmt: str, backend: Backend[Any], name: str, group: str | None
) -> _WritePath[bytes] | _WritePath[TraceLoggingEvent]:
    """The encoder for ``fmt`` paired with ``backend`` (each encoder loads on first use, so a
    provider of one format never imports the other format's encoder)."""
    if fmt == "eventheader":
        from ..write.eventheader._encoder import EventHeaderEncoder  # noqa: PLC0415

        return _WritePath[bytes](fmt, EventHeaderEncoder(), backend, eventheader_error_name)
    if fmt == "tracelogging":
        from ..write.tracelogging._encoder import TraceLoggingEncoder  # noqa: PLC0415

        return _WritePath[TraceLoggingEvent](
            fmt, TraceLoggingEncoder(name, group), backend, tracelogging_error_name
        )
    raise ValueError(f"backend format {fmt!r} is neither 'eventheader' nor 'tracelogging'")


def _validate_name(name: str, group: str | None, fmt: str) -> None:
    """Raise ValueError unless ``fmt`` (``eventheader`` or ``tracelogging``) can carry the name."""
    problem = name_problem(name, group, fmt)
    if problem is not None:
        raise ValueError(problem)


class Provider:
    """One trace provider (e.g. ``MyCompany_MyService``): slots, an encoder, a backend, stats.

    Use :func:`get_provider` rather than the constructor so that every renderer and handler
    with the same name shares one registration.  At construction the default keyword is
    registered at levels 1-5, plus every keyword in ``keywords``, so that trace tools can name
    the tracepoints before the first event; other (level, keyword) pairs are registered on
    first use.  A provider made with the constructor is a member of the process registry all
    the same: :func:`close_all` closes it, a capture (``capture_etw_events()``) routes it unless
    it was given a ``backend`` of its own, and :func:`get_provider` of its name gives it while it
    is open.

    ``max_slots`` bounds the (level, keyword) pairs the provider registers, the ones registered
    up front included (default 256, ``DEFAULT_MAX_SLOTS``; on Linux each is a kernel tracepoint).
    A pair first used once the bound is reached is never registered: its events are counted as
    ``dropped["slot_limit"]``, never written; pairs registered before keep working.  Up-front
    pairs that exceed ``max_slots`` raise :class:`ValueError` here.

    ``provider_id`` (a :class:`uuid.UUID` or GUID text) is the ETW provider GUID given to
    EventRegister instead of the one derived from the name (:attr:`provider_id`); the EventHeader
    format (Linux) has no provider GUID and ignores it.  The name is checked against the rules of
    the format the provider's backend uses (see :func:`get_provider`): a name that format cannot
    carry raises :class:`ValueError` here.
    """

    def __init__(
        self,
        name: str,
        *,
        group: str | None = None,
        provider_id: uuid.UUID | str | None = None,
        default_keyword: int = 1,
        keywords: Iterable[int] = (),
        backend: Backend[Any] | None = None,
        max_slots: int = DEFAULT_MAX_SLOTS,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"provider name must be a non-empty str, got {name!r}")
        explicit_id = _parse_provider_id(provider_id)
        keywords = tuple(keywords)
        for kw in (default_keyword, *keywords):
            check_keyword(kw)
        up_front = len({default_keyword, *keywords}) * len(DEFAULT_LEVELS)
        if type(max_slots) is not int or max_slots < up_front:
            raise ValueError(
                f"max_slots must be an int >= {up_front} (the default keyword and the keywords given, "
                f"at {len(DEFAULT_LEVELS)} levels each), got {max_slots!r}"
            )
        #: The most (level, keyword) slots this provider registers (see the class docstring).
        self.max_slots = max_slots
        self.name = name
        self.group = group
        self._explicit_id = explicit_id
        self.default_keyword = default_keyword
        # Slot registration and backend switches; never held across a write, and a re-entry
        # (a signal handler, a __del__) is told, not waited for.
        self._guard = Guard()
        self._slots: dict[tuple[int, int], Slot] = {}
        # The provider word's holder (level 0, keyword 0): re-pointed, never replaced.
        self._any = Slot(0, 0, UNKNOWN_WORD)
        # The counts: lock-free (see _util.counters).  Written: one C call per event.
        self._written = Count()
        self._count_written = self._written.add
        self._dropped = Tally()
        self._errors = Tally()
        self._invalid = Tally()
        self._closed = False
        self._close_pending = False  # close() re-entered a registration: the holder closes
        self._base_backend: Backend[Any] | None = None  # the OS backend (or null), created lazily
        self._path: _WritePath[bytes] | _WritePath[TraceLoggingEvent]
        # Events the encoders of earlier write paths cut (each backend switch brings a new
        # encoder): stats()["truncated"] counts across switches, as every other count does.
        self._truncated_before = 0
        self.format = "eventheader"
        factory = REGISTRY.factory
        routed = backend is None
        self._routed = routed  # writes where the OS (or a capture) says: may retry the OS backend
        self._retries = 0
        if backend is None and factory is None:
            _validate_name(name, group, os_format())  # before anything is registered with the OS
            backend = self._os_backend()
        elif backend is None:
            backend = self._backend_from(factory, strict=True)
        else:
            _validate_name(name, group, backend.format)
        self._install(backend)
        for level in DEFAULT_LEVELS:
            self.slot(level, default_keyword)
        for kw in keywords:
            for level in DEFAULT_LEVELS:
                self.slot(level, kw)
        REGISTRY.add(self, self.close, self._after_fork, self._use_factory if routed else None)
        if routed and REGISTRY.factory is not factory:  # the factory changed while we were made
            self._use_factory(REGISTRY.factory)

    # -- backend ---------------------------------------------------------------------------
    @property
    def provider_id(self) -> uuid.UUID:
        """The ETW provider GUID: the explicit ``provider_id``, else the hash of the name."""
        if self._explicit_id is not None:
            return self._explicit_id
        from ..formats.tracelogging import provider_id  # noqa: PLC0415

        return provider_id(self.name)

    def _os_backend(self, warn: bool = True) -> Backend[Any]:
        """The OS backend (created once), or a null backend saying why there is none.

        ``warn=False`` (a capture handing its providers back): no :class:`EtwUnavailableWarning`;
        :attr:`status` tells the reason all the same.
        """
        if self._base_backend is None:
            fmt = os_format()
            problem = name_problem(self.name, self.group, fmt)
            if problem is not None:  # e.g. back from a TraceLogging capture with a dotted name
                reason = f"the {fmt} format cannot use this provider: {problem}"
                if warn:
                    warn_once(self.name, reason)
                self._base_backend = NullBackend(reason, fmt, StatusReason.INVALID_NAME.value)
                return self._base_backend
            try:
                self._base_backend = _platform.default_backend(self.name, self.group, self._explicit_id)
            except BackendUnavailable as exc:
                reason = str(exc) or type(exc).__name__
                if warn:
                    warn_once(self.name, reason)
                self._base_backend = NullBackend(reason, fmt, unavailable_code(exc))
            except Exception as exc:  # never an exception from a constructor (MemoryError, ...)
                reason = f"the OS backend failed: {type(exc).__name__}: {exc}"
                if warn:
                    warn_once(self.name, reason)
                self._base_backend = NullBackend(reason, fmt, _failure_code(exc))
        return self._base_backend

    def _backend_from(
        self, factory: BackendFactory | None, strict: bool = False, warn: bool = True
    ) -> Backend[Any]:
        """The backend ``factory`` builds (None: the OS backend).

        A backend whose format cannot carry the provider's name is closed; ``strict`` (at
        construction) raises the ValueError, otherwise the provider runs disabled with a warning
        (none with ``warn=False``).
        """
        if factory is None:
            return self._os_backend(warn)
        try:
            backend = factory(self.name, self.group, self.provider_id)
        except BackendUnavailable as exc:
            reason = str(exc) or type(exc).__name__
            if warn:
                warn_once(self.name, reason)
            return NullBackend(reason, code=getattr(exc, "reason", "unavailable"))
        fmt = backend.format
        problem = name_problem(self.name, self.group, fmt)
        if problem is None:
            return backend
        with contextlib.suppress(Exception):
            backend.close()
        if strict:
            raise ValueError(problem)
        reason = f"the {fmt} format cannot use this provider: {problem}"
        if warn:
            warn_once(self.name, reason)
        return NullBackend(reason, fmt, StatusReason.INVALID_NAME.value)

    def _install(self, backend: Backend[Any]) -> None:
        """Use ``backend`` from now on; existing Slot objects are re-pointed in place."""
        fmt = backend.format
        try:
            path = _write_path(fmt, backend, self.name, self.group)
        except (ImportError, OSError) as exc:  # OSError: e.g. EMFILE opening the module's file
            reason = f"{fmt} encoder not importable: {exc}"
            warn_once(self.name, reason)
            code = StatusReason.ENCODER_UNAVAILABLE.value
            if isinstance(exc, OSError):
                code = _failure_code(exc)
            backend = NullBackend(reason, "eventheader", code)
            try:
                path = _write_path("eventheader", backend, self.name, self.group)
            except (ImportError, OSError):  # no encoder loads: a null backend never encodes
                path = _WritePath[bytes]("eventheader", _NoEncoder(), backend, eventheader_error_name)
        owned = self._guard.enter()
        try:
            previous = getattr(self, "_path", None)
            if previous is not None:
                self._truncated_before += previous.encoder.truncated
            self._path = path
            self.format = path.format
            for slot in list(self._slots.values()):  # our own Slot objects: re-pointed in place
                try:
                    fresh = backend.open_slot(slot.level, slot.keyword)
                except Exception as exc:
                    self._count_register_error(exc)
                    slot.word, slot.handle = DISABLED_WORD, None
                else:
                    slot.word, slot.handle = fresh.word, fresh.handle
            self._refresh_any()
        finally:
            if owned:
                self._leave()

    def _refresh_any(self) -> None:
        """Point :attr:`any_slot` at the backend's provider word (``UNKNOWN_WORD`` when the
        backend has none, or when the provider is closed or full: then calls must reach a slot)."""
        word = getattr(self._path.backend, "any_word", UNKNOWN_WORD)
        if self._closed or len(self._slots) >= self.max_slots:
            word = UNKNOWN_WORD
        self._any.word = word

    @property
    def any_slot(self) -> Slot:
        """The provider word's holder: ``any_slot.word[0]`` is non-zero whenever a session wants
        events at any (level, keyword) of this provider, zero when the backend knows none does.

        The same object for the provider's lifetime (its ``word`` is re-pointed when the backend
        changes), so a hot path may hold it; read ``any_slot.word[0]``, nothing else.  It reads
        non-zero (``UNKNOWN_WORD``) for a backend without ``any_word``, and once the provider is
        closed or holds :attr:`max_slots` slots (their events must reach :meth:`write` to be
        counted).  A pair this process never used has no tracepoint of its own on Linux: a
        session recording another process's tracepoint of that name is not seen until the first
        event of the pair here registers it (see docs/performance.md).
        """
        return self._any

    def _use_factory(self, factory: BackendFactory | None) -> None:
        """Write to ``factory``'s backend from now on (None: the OS backend); the registry calls it."""
        if self._closed:
            return
        old = self._path.backend
        # No warning here: a capture (or other factory) switching backends is not the program's
        # set-up; the provider's status says why it runs disabled.
        new = self._backend_from(factory, warn=False)
        self._install(new)
        if old is not self._base_backend and old is not new:
            with contextlib.suppress(Exception):
                old.close()

    def _after_fork(self) -> None:
        """In a fork child: a fresh guard (the backends' locks are renewed where they are made,
        :func:`~structlog_etw.backends.base.fork_safe_lock`; the encoders hold none)."""
        self._guard.renew()

    @property
    def backend(self) -> Backend[Any]:
        """The backend events currently go to (OS, capture or null)."""
        return self._path.backend

    @property
    def status(self) -> ProviderStatus:
        """Whether events can leave this process, and if not why (a :class:`StatusReason` code).

        ``provider.status.reason is StatusReason.NO_USER_EVENTS``, rather than parsing
        ``stats()["backend"]``.  Reading it never raises, registers nothing and takes no lock.
        """
        backend = self._path.backend
        closed = self._closed
        text = repr(backend)
        if closed:
            return ProviderStatus(False, StatusReason.CLOSED, "the provider was closed", text)
        if isinstance(backend, NullBackend):
            return ProviderStatus(False, status_reason(backend.code), backend.reason + DOCTOR_HINT, text)
        if backend is self._base_backend:
            lost = getattr(backend, "lost", None)
            if lost is not None:
                return ProviderStatus(False, StatusReason.DESCRIPTOR_LOST, str(lost), text)
            reopened = getattr(backend, "reopened", 0)
            if reopened:
                return ProviderStatus(
                    True,
                    StatusReason.DESCRIPTOR_REOPENED,
                    f"writing to the OS backend through a new descriptor: the previous one was closed "
                    f"by other code ({reopened} time(s)); see dropped['descriptor_lost']",
                    text,
                )
            return ProviderStatus(True, StatusReason.OS, "writing to the OS backend", text)
        return ProviderStatus(True, StatusReason.CUSTOM_BACKEND, "writing to a backend of the program", text)

    @property
    def encoder(self) -> EventHeaderEncoder | TraceLoggingEncoder:
        """The encoder for the current backend's format."""
        return self._path.encoder  # type: ignore[return-value]  # always one of the two

    @property
    def slots(self) -> dict[tuple[int, int], Slot]:
        """The slot cache, ``(level, keyword) -> Slot``: read it, never change it.

        The same dict for the provider's lifetime (slots are added, never replaced), so a hot
        path may keep a reference and try ``slots.get((level, keyword))`` before :meth:`slot`.
        """
        return self._slots

    # -- slots -----------------------------------------------------------------------------
    def slot(self, level: int, keyword: int) -> Slot:
        """The cached slot for (level, keyword), registered with the backend on first use.

        Once the provider is closed, or holds :attr:`max_slots` slots, a new pair gets a fresh
        slot that is neither registered nor cached, whose word is
        :data:`~structlog_etw.backends.base.UNWRITABLE_WORD`: the log paths hand its events to
        :meth:`write`, which counts them (``dropped["closed"]``, ``dropped["slot_limit"]``).  So
        does a pair asked for by a signal handler or ``__del__`` that interrupted this thread
        while it registered a slot of this provider (``dropped["reentrant"]``): it never waits.
        """
        slot = self._slots.get((level, keyword))
        if slot is not None:
            return slot
        if self._closed or len(self._slots) >= self.max_slots:  # slots are never removed
            return Slot(level, keyword, UNWRITABLE_WORD, None)
        if not self._guard.enter():  # re-entered: the registration in progress holds the backend
            return Slot(level, keyword, UNWRITABLE_WORD, _REENTERED)
        try:
            slot = self._slots.get((level, keyword))
            if slot is not None:
                return slot
            if self._closed or len(self._slots) >= self.max_slots:
                return Slot(level, keyword, UNWRITABLE_WORD, None)
            self._retry_backend()
            try:
                fresh = self._path.backend.open_slot(level, keyword)
            except Exception as exc:  # registration failed: this pair stays disabled
                self._count_register_error(exc)
                slot = Slot(level, keyword, DISABLED_WORD, None)
            else:
                # Our own Slot (sharing the backend's word and handle): switching backends
                # re-points it without touching the objects a backend keeps.
                slot = Slot(level, keyword, fresh.word, fresh.handle)
            self._slots[(level, keyword)] = slot
            self._refresh_any()  # the backend may have replaced its provider word; or now full
            return slot
        finally:
            self._leave()

    def _retry_backend(self) -> None:
        """Try the OS backend again if it failed for a transient reason (out of descriptors or
        memory), at most :data:`MAX_BACKEND_RETRIES` times (the guard is held)."""
        backend = self._path.backend
        if (
            not self._routed
            or self._retries >= MAX_BACKEND_RETRIES
            or not isinstance(backend, NullBackend)
            or backend.code != StatusReason.RESOURCES_EXHAUSTED.value
        ):
            return
        self._retries += 1
        if self._base_backend is backend or isinstance(self._base_backend, NullBackend):
            self._base_backend = None
        self._install(self._backend_from(REGISTRY.factory, warn=False))

    def _leave(self) -> None:
        """Release the guard; finish a :meth:`close` that re-entered while it was held."""
        self._guard.leave()
        if self._close_pending:
            self._close_pending = False
            self._close_backends()

    def _count_register_error(self, exc: Exception) -> None:
        code = getattr(exc, "errno", None)
        name = _errno.errorcode.get(code, type(exc).__name__) if type(code) is int else type(exc).__name__
        self._errors.add("register:" + name)

    def enabled(self, level: int, keyword: int) -> bool:
        """Whether a session wants events at (level, keyword) right now."""
        return self.slot(level, keyword).enabled

    # -- writing ---------------------------------------------------------------------------
    def write(
        self,
        slot: Slot,
        name: str,
        fields: list[Field],
        opcode: int = 0,
        tag: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> bool:
        """Encode and hand one event to the backend.  True if written; never raises.

        Dropped events are counted by reason: ``not_enabled`` (nobody listens at the slot),
        ``closed``, ``slot_limit`` (a pair past :attr:`max_slots`), ``reentrant`` (a pair first
        asked for by a signal handler that interrupted its registration), ``too_large`` (cannot
        fit even truncated), ``encode_error``, ``internal_error`` (a backend that raised); a
        backend error code is counted in ``errors`` by name (``EBADF``, ``ERROR_MORE_DATA``, ...).
        ``related_id`` is written only on a Start event (opcode 1); other events carry the
        activity id alone (EventHeader: 16-byte ActivityId extension; ETW: no related id).
        """
        word = slot.word
        if not word[0] or word is UNWRITABLE_WORD:
            self._count_unwritten(slot)
            return False
        try:
            header = _header(slot, opcode, tag, activity_id, related_id)
        except Exception:
            self._count_failure(_ENCODE_ERROR)
            return False
        return self.write_dict_with(slot, name, fields, _FIELDS, header)  # type: ignore[arg-type]

    def write_dict(
        self,
        slot: Slot,
        name: str,
        event: Mapping[Any, Any],
        skip: str | None = "event",
        opcode: int = 0,
        tag: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> bool:
        """Write the items of ``event`` as one event's fields: the hot path of a log call.

        The fields are ``event``'s items except ``exc_info`` and the key ``skip`` (the event
        text, which is the event's name; ``None``: none skipped), typed by the type table: the
        same event as ``write(slot, name, to_fields(items))``, byte for byte.  The encoder writes
        the common shapes (``str`` keys; ``str``, ``int``, ``float``, ``bool``, ``None``,
        ``bytes``, UUID and datetime values) straight from the dict with a function built once
        per shape's layout, once the layout is seen often.  Level and keyword are the slot's.
        True if written; never raises; counted like :meth:`write`.  The header is the one
        :func:`_header` builds (:meth:`write_dict_with` writes with a header given).

        No lock is taken, whatever happens: the written count and every failure count are
        :class:`~structlog_etw._util.counters.Count` and :class:`~structlog_etw._util.counters.Tally`
        (one C call per count with the GIL; per-thread counts summed on read on a free-threaded
        build).  One call to the encoder, one to the backend.
        """
        try:
            header = _header(slot, opcode, tag, activity_id, related_id)
        except Exception:
            self._count_failure(_ENCODE_ERROR)
            return False
        return self.write_dict_with(slot, name, event, skip, header)

    def write_dict_with(
        self, slot: Slot, name: str, event: Mapping[Any, Any], skip: str | None, header: HeaderValue
    ) -> bool:
        """:meth:`write_dict` with the event's header given: ``slot.header`` for a plain event (the
        log call's hot path: no header to build), else one :func:`_header` built.  The backend is
        handed the header's opcode and activity ids.  True if written; never raises.

        The provider's one encode -> backend -> count sequence: :meth:`write` ends here too, its
        list of fields passed as ``event`` with the private ``skip`` marker that says so.
        """
        word = slot.word
        if not word[0] or word is UNWRITABLE_WORD:
            self._count_unwritten(slot)
            return False
        path: _WritePath[Any] = self._path
        try:
            if skip is not _FIELDS:
                out = path.encode_dict(name, event, skip, header)
            else:
                out = path.encode_fields(name, event, header)  # type: ignore[arg-type]
        except Exception:
            self._count_failure(_ENCODE_ERROR)
            return False
        if out is None:
            self._count_failure(_TOO_LARGE)
            return False
        try:
            rc = path.backend_write(slot, out, header[1], header[3], header[4])
        except Exception:
            rc = _INTERNAL_ERROR
        if rc == 0:
            self._count_written()
            return True
        self._count_failure(rc)
        return False

    # -- counting: the one contract of what is not written ---------------------------------
    def _count_failure(self, rc: int) -> None:
        """Count a write that failed with ``rc``: a backend code, or one of the path's own codes."""
        if rc == _TOO_LARGE:
            self._dropped.add("too_large")
        elif rc == _ENCODE_ERROR:
            self._dropped.add("encode_error")
        elif rc == _INTERNAL_ERROR:
            self._dropped.add("internal_error")
        elif rc == DESCRIPTOR_LOST:  # the backend's descriptor is not its own any more
            self._dropped.add("descriptor_lost")
        elif self._closed:  # a write that raced close(): the backend refused it as closed
            self._dropped.add("closed")
        else:
            self._errors.add(self._path.error_name(rc))

    def _count_unwritten(self, slot: Slot) -> None:
        """Count an event at a slot that is not written: closed, past the bound, re-entered, or
        nobody listens."""
        if self._closed:
            self._dropped.add("closed")
        elif slot.word is not UNWRITABLE_WORD:
            self._dropped.add("not_enabled")
        else:
            self._dropped.add("reentrant" if slot.handle is _REENTERED else "slot_limit")

    def count_dropped(self, reason: str) -> None:
        """Count one event dropped before reaching the backend, under ``reason``."""
        self._dropped.add(reason)

    def count_invalid(self, key: str) -> None:
        """Count one invalid control value (e.g. ``etw_keyword``) that fell back to its default."""
        self._invalid.add(key)

    # -- state -----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """A snapshot: ``written``, ``dropped`` {reason: n}, ``errors`` {code name: n},
        ``invalid`` {control key: n}, ``truncated``, ``format``, ``backend``, ``closed``,
        ``slots`` (registered (level, keyword) pairs) and ``max_slots``.  Takes no lock (each
        count is read as it stands; a signal handler may call it).  The counts cover the
        provider's lifetime, across backend switches (a capture and back) too.
        """
        before = self._truncated_before  # before the path: a switch in between never counts twice
        path = self._path
        return {
            "provider": self.name,
            "written": self._written.value(),
            "dropped": self._dropped.snapshot(),
            "errors": self._errors.snapshot(),
            "invalid": self._invalid.snapshot(),
            "truncated": before + path.encoder.truncated,
            "format": self.format,
            "backend": repr(path.backend),
            "closed": self._closed,
            "slots": len(self._slots),
            "max_slots": self.max_slots,
        }

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Unregister; later writes are counted as ``dropped["closed"]``, never raised.

        Every slot's word becomes :data:`~structlog_etw.backends.base.UNWRITABLE_WORD`, so the
        fast paths (``make_etw_bound_logger``, ``EtwEarlyDrop``) hand later events on to be
        counted too.  Called from a signal handler that interrupted a slot registration of this
        provider, the backends are closed when that registration ends (it holds them).
        """
        owned = self._guard.enter()
        try:
            if self._closed:
                return
            self._closed = True
            for slot in list(self._slots.values()):
                slot.word = UNWRITABLE_WORD
            self._any.word = UNKNOWN_WORD
            if not owned:
                self._close_pending = True
                return
        finally:
            if owned:
                self._guard.leave()
        self._close_backends()

    def _close_backends(self) -> None:
        backends = {id(b): b for b in (self._path.backend, self._base_backend) if b is not None}
        for backend in backends.values():
            try:
                backend.close()
            except Exception:
                self._dropped.add("close_error")

    def __repr__(self) -> str:
        return f"Provider({self.name!r}, group={self.group!r}, format={self.format!r})"


def _failure_code(exc: BaseException) -> str:
    """The status code of an unexpected failure to make a backend or load an encoder."""
    if isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS:
        return StatusReason.RESOURCES_EXHAUSTED.value
    if isinstance(exc, MemoryError):
        return StatusReason.RESOURCES_EXHAUSTED.value
    return StatusReason.UNAVAILABLE.value


def _header(
    slot: Slot, opcode: int, tag: int, activity_id: bytes | None, related_id: bytes | None
) -> HeaderValue:
    """The header of an event at ``slot``: the slot's own for a plain event, else a new one
    (``related_id`` kept only on a Start event)."""
    if activity_id is None and not opcode and not tag:
        return slot.header
    return (slot.level, opcode, tag, activity_id, related_id if opcode == _START else None)


def _parse_provider_id(value: object) -> uuid.UUID | None:
    """``uuid.UUID``, GUID text or None -> ``uuid.UUID`` or None; anything else raises."""
    if value is None or isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            raise ValueError(
                f"provider_id must be GUID text such as '1fd9a3b4-5c6e-4f70-8a9b-0c1d2e3f4a5b', got {value!r}"
            ) from None
    raise TypeError(f"provider_id must be a uuid.UUID, GUID text or None, got {type(value).__name__}")


def check_provider_id(provider: Provider, provider_id: uuid.UUID | str) -> None:
    """Raise ValueError unless ``provider_id`` (UUID or GUID text) is ``provider``'s GUID."""
    guid = _parse_provider_id(provider_id)
    if guid is not None and guid != provider.provider_id:
        raise ValueError(
            f"provider {provider.name!r} already exists with provider_id {provider.provider_id}; "
            f"cannot also use provider_id {guid}"
        )


# --- the process registry's functions ------------------------------------------------------------

_UNSET: Any = object()


def get_provider(
    name: str,
    *,
    group: str | None = _UNSET,
    provider_id: uuid.UUID | str | None = None,
    default_keyword: int = _UNSET,
    keywords: Iterable[int] = (),
    max_slots: int = _UNSET,
) -> Provider:
    """The process-wide provider called ``name``, created on first use.

    The same name always gives the same :class:`Provider` (an open one made with the
    constructor counts: it is given, and kept by name from then on).  Asking for it again with a
    different ``group`` raises :class:`ValueError` (a group is part of the provider's identity;
    ``group=None`` means "whatever it already has").  ``default_keyword`` and ``keywords`` of
    later calls are registered too (the first caller's ``default_keyword`` stays the provider's
    default).

    ``provider_id`` (a :class:`uuid.UUID` or GUID text) overrides the ETW provider GUID derived
    from the name (``*Name`` in the Windows tools); asking for an existing provider with a
    different ``provider_id`` raises :class:`ValueError` (``None``: whatever it already has).

    The name must suit the format the provider writes: EventHeader (Linux user_events, and
    the default capture format) takes ``[A-Za-z0-9_]`` names such as ``MyCompany_MyService``;
    TraceLogging (Windows ETW, ``capture_etw_events("tracelogging")``) also takes the Windows
    convention ``MyCompany.MyService``.  A name the format cannot carry raises ValueError here.

    ``max_slots`` (default 256, ``DEFAULT_MAX_SLOTS``) bounds the (level, keyword) pairs the
    provider registers (see :class:`Provider`); asking for an existing provider with another
    ``max_slots`` raises :class:`ValueError`.

    After :func:`close_all` (at interpreter exit, or called by the application) the registry
    stays closed: a provider looked up afterwards, new names included, is closed from the start
    and registers nothing with the OS; its events are counted as ``dropped["closed"]``.
    """
    guid = _parse_provider_id(provider_id)
    guard = REGISTRY.guard
    owned = guard.enter()  # a re-entry (a signal handler) looks up without waiting
    try:
        prov = REGISTRY.open_named(name)
        if prov is None:
            options: dict[str, Any] = {
                "group": None if group is _UNSET else group,
                "provider_id": guid,
                "default_keyword": 1 if default_keyword is _UNSET else default_keyword,
                "keywords": keywords,
            }
            if max_slots is not _UNSET:
                options["max_slots"] = max_slots
            prov = _closed_provider(name, options) if REGISTRY.closed_all else Provider(name, **options)
            REGISTRY.named[name] = prov
            return prov
    finally:
        if owned:
            guard.leave()
    if max_slots is not _UNSET and max_slots != prov.max_slots:
        raise ValueError(
            f"provider {name!r} already exists with max_slots {prov.max_slots}; cannot also use {max_slots!r}"
        )
    if group is not _UNSET and group is not None and group != prov.group:
        raise ValueError(
            f"provider {name!r} already exists with group {prov.group!r}; cannot also use group {group!r}"
        )
    if guid is not None:
        check_provider_id(prov, guid)
    extra = tuple(keywords)
    if default_keyword is not _UNSET:
        extra = (default_keyword, *extra)
    for kw in extra:
        check_keyword(kw)
        for level in DEFAULT_LEVELS:
            prov.slot(level, kw)
    return prov  # type: ignore[no-any-return]


def _closed_provider(name: str, options: dict[str, Any]) -> Provider:
    """A provider made after :func:`close_all`: the same set-up checks, nothing registered, closed."""
    fmt = os_format()
    other = "eventheader" if fmt == "tracelogging" else "tracelogging"
    if name_problem(name, options["group"], fmt) is not None and REGISTRY.factory is not None:
        fmt = other  # e.g. a dotted name a TraceLogging capture could carry: checked by that rule
    prov = Provider(name, backend=NullBackend("closed: structlog_etw.close_all() ran", fmt), **options)
    prov.close()
    return prov


def providers() -> list[Provider]:
    """Every open provider of the process, however it was made, in the order they were made."""
    return [p for p in REGISTRY.members() if not p.closed]


def set_backend_factory(factory: BackendFactory | None) -> BackendFactory | None:
    """Route every provider, existing and future, to ``factory(name, group, provider_id)``'s backend.

    A provider given a backend of the program's own (``Provider(name, backend=...)``) keeps it.
    ``None`` restores the OS backends.  Returns the previous factory (so callers can nest).
    Used by ``structlog_etw.testing`` to capture events.
    """
    return REGISTRY.set_factory(factory)


def open_descriptors() -> list[int]:
    """The descriptors structlog-etw holds open (Linux: each OS provider's ``user_events_data``
    and its private duplicate), sorted; ``[]`` where it holds none (Windows, no user_events).

    For daemonizers that close every descriptor they are not told to keep::

        daemon.DaemonContext(files_preserve=structlog_etw.open_descriptors())

    Call it right before daemonizing (after the providers are made).  A descriptor closed
    anyway is never written again: the provider opens a new one (docs/linux.md).
    """
    try:
        from ..backends.user_events import open_descriptors as user_events_descriptors  # noqa: PLC0415
    except (ImportError, OSError):
        return []
    return user_events_descriptors()


def close_all() -> None:
    """Close every provider of the process, however it was made (registered with :mod:`atexit`);
    later log calls return normally.

    Final for the process: events logged afterwards, through existing loggers or loggers made
    later, are counted as ``dropped["closed"]`` and nothing new is registered with the OS.
    Safe in a signal handler (a SIGTERM handler that shuts down): it waits on no lock the
    interrupted code may hold.
    """
    REGISTRY.close_all()


atexit.register(close_all)
