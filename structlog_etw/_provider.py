"""Providers: a backend, an encoder and counters, shared process-wide by name.

A :class:`Provider` is what a renderer or handler writes to.  It picks the OS backend
(Linux user_events with EventHeader, Windows ETW with TraceLogging, else nothing), keeps one
cached :class:`~structlog_etw.backends.base.Slot` per (level, keyword), and never raises from
:meth:`Provider.write`: what cannot be written is counted in :meth:`Provider.stats`.

This module knows nothing about structlog.
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import errno as _errno
import itertools
import os
import sys
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

from ._levels import LEVEL_NAMES, check_keyword
from .backends.base import UNKNOWN_WORD, UNWRITABLE_WORD, Backend, BackendUnavailable, Slot
from .backends.null import DISABLED_WORD, NullBackend
from .eventheader.spec import error_name as eventheader_error_name
from .eventheader.spec import validate_provider_name as validate_eventheader_name
from .fields import Field
from .tracelogging.spec import TraceLoggingEvent
from .tracelogging.spec import error_name as tracelogging_error_name
from .tracelogging.spec import validate_provider_name as validate_tracelogging_name

if TYPE_CHECKING:
    from .eventheader.encoder import EventHeaderEncoder
    from .tracelogging.encoder import TraceLoggingEncoder

__all__ = [
    "DEFAULT_MAX_SLOTS",
    "BackendFactory",
    "EtwUnavailableWarning",
    "Provider",
    "ProviderStatus",
    "StatusReason",
    "close_all",
    "get_provider",
    "set_backend_factory",
]

#: ``f(provider_name, group, provider_id) -> backend``: how :func:`set_backend_factory` builds
#: backends (``provider_id``: the GUID EventRegister would receive, for TraceLogging backends).
BackendFactory = Callable[[str, "str | None", uuid.UUID], "Backend[Any]"]

E = TypeVar("E")
E_co = TypeVar("E_co", covariant=True)


class _Encoder(Protocol[E_co]):
    """What both encoders offer (EventHeader: ``E_co`` is ``bytes``; TraceLogging:
    :data:`~structlog_etw.tracelogging.spec.TraceLoggingEvent`).

    ``encode`` returns ``None`` when the event cannot fit the format's size budget even with
    its values cut (the size policy); ``truncated`` counts events written with values cut.
    """

    truncated: int

    def encode(
        self,
        name: str,
        fields: list[Field],
        level: int,
        opcode: int,
        tag: int,
        activity_id: bytes | None,
        related_id: bytes | None,
    ) -> E_co | None: ...

    def encode_dict(
        self,
        name: str,
        event: Mapping[Any, Any],
        skip: str | None,
        level: int,
        opcode: int,
        tag: int,
        activity_id: bytes | None,
        related_id: bytes | None,
    ) -> E_co | None: ...


#: Results of :meth:`_WritePath.write` that are not backend codes (those are >= 0).
_TOO_LARGE: Final = -1
_ENCODE_ERROR: Final = -2


class _WritePath(Generic[E]):
    """An encoder and a backend of one format: the provider's only way to write an event.

    ``encode_dict`` and ``backend_write`` are the bound methods :meth:`Provider.write_dict` calls
    (read once per event from the path, the encoder and the backend installed together).
    """

    __slots__ = ("backend", "backend_write", "encode_dict", "encoder", "error_name", "format")

    def __init__(
        self, fmt: str, encoder: _Encoder[E], backend: Backend[E], error_name: Callable[[int], str]
    ) -> None:
        self.format = fmt
        self.encoder = encoder
        self.backend = backend
        self.encode_dict = encoder.encode_dict
        self.backend_write = backend.write
        #: The name a backend error code is counted under (errno names, Win32 names).
        self.error_name = error_name

    def write(
        self,
        slot: Slot,
        name: str,
        fields: list[Field],
        opcode: int,
        tag: int,
        activity_id: bytes | None,
        related_id: bytes | None,
    ) -> int:
        """0 written; else the backend's error code, :data:`_TOO_LARGE` or :data:`_ENCODE_ERROR`."""
        try:
            event = self.encoder.encode(name, fields, slot.level, opcode, tag, activity_id, related_id)
        except Exception:
            return _ENCODE_ERROR
        if event is None:
            return _TOO_LARGE
        return self.backend.write(slot, event, opcode, activity_id, related_id)


#: Levels registered up front for the default keyword (critical .. verbose).
DEFAULT_LEVELS: Final = tuple(LEVEL_NAMES)

#: How many (level, keyword) slots a provider registers at most, unless told otherwise
#: (``max_slots``).  On Linux every slot is a kernel tracepoint (about 700 bytes of kernel
#: memory, and one of the ``kernel.user_events_max`` tracepoints the whole system shares);
#: keywords and levels can come from logged data (``log.info("req", **request_json)``), so the
#: number a process registers must have a bound.  Events at a pair past the bound are counted
#: as ``dropped["slot_limit"]`` (docs/reliability.md).
DEFAULT_MAX_SLOTS: Final = 256

#: The platform whose OS backend providers use (internal: tests set "win32" together with
#: ``_ETW_LIBRARY`` to run the Windows path against the compiled fake ETW library).
_PLATFORM: str = sys.platform
#: Shared library the Windows backend loads instead of the Windows DLLs (internal, tests only).
_ETW_LIBRARY: str | None = None


class EtwUnavailableWarning(RuntimeWarning):
    """A provider runs disabled: this process cannot write trace events (no user_events, no ETW, ...).

    Warned once per reason, when the provider is created, pointing at the line of your code that
    created it (an ``EtwRenderer``, ``EtwHandler``, ``get_provider`` call); ``Provider.status``
    tells the same at any time.  Log calls still return normally; the events are dropped.  A
    subclass of ``RuntimeWarning``; filter it by class, e.g. in pytest's ini options:
    ``filterwarnings = ["ignore::structlog_etw.EtwUnavailableWarning"]``.
    """


class StatusReason(str, enum.Enum):
    """Why a provider writes where it writes, or why it cannot: :attr:`ProviderStatus.reason`."""

    #: The OS backend is open (Linux user_events, Windows ETW): a session may listen.
    OS = "os"
    #: Events go to a backend given by the program: ``Provider(backend=...)`` or a capture.
    CUSTOM_BACKEND = "custom_backend"
    #: :meth:`Provider.close` (or ``close_all`` at exit) was called.
    CLOSED = "closed"
    #: Neither Linux nor Windows.
    UNSUPPORTED_PLATFORM = "unsupported_platform"
    #: Linux older than 6.4 (user_events appeared in 6.4).
    KERNEL_TOO_OLD = "kernel_too_old"
    #: No tracefs with ``user_events_data`` (no ``CONFIG_USER_EVENTS``, or tracefs not mounted).
    NO_USER_EVENTS = "no_user_events"
    #: ``user_events_data`` exists but this process may not open it (docs/linux.md).
    PERMISSION_DENIED = "permission_denied"
    #: ``user_events_data`` could not be opened for another reason.
    OPEN_FAILED = "open_failed"
    #: Windows: the ETW library does not load, or EventRegister failed.
    ETW_UNAVAILABLE = "etw_unavailable"
    #: The provider name (or group) is not valid in the format of this OS's backend.
    INVALID_NAME = "invalid_name"
    #: The encoder of the backend's format could not be imported.
    ENCODER_UNAVAILABLE = "encoder_unavailable"
    #: A backend (e.g. one of yours) reported itself unavailable without a code.
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class ProviderStatus:
    """What :attr:`Provider.status` reports: can events leave this process, and if not, why."""

    #: True when the provider writes to a live backend (OS or yours): events are written
    #: whenever a session listens.  False when it runs disabled or is closed.
    available: bool
    #: The reason as a code: compare with :class:`StatusReason` members.
    reason: StatusReason
    #: The reason in words (the text of the one-time :class:`EtwUnavailableWarning`).
    detail: str
    #: ``repr`` of the backend events go to.
    backend: str


def _status_reason(code: str) -> StatusReason:
    try:
        return StatusReason(code)
    except ValueError:
        return StatusReason.UNAVAILABLE


_warned: set[str] = set()
_warn_lock = threading.Lock()
_PACKAGE_DIR: Final = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LOGGING_DIR: Final = os.path.dirname(os.path.abspath(warnings.__file__)) + os.sep + "logging" + os.sep


def _user_stacklevel() -> int:
    """The ``stacklevel`` of ``warnings.warn`` called by :func:`_warn_once` that points at the first
    frame outside structlog-etw, structlog and ``logging`` (``dictConfig``): the user's line."""
    skip = [_PACKAGE_DIR, _LOGGING_DIR]
    structlog_module = sys.modules.get("structlog")
    structlog_file = getattr(structlog_module, "__file__", None)
    if structlog_file:
        skip.append(os.path.dirname(os.path.abspath(structlog_file)) + os.sep)
    prefixes = tuple(skip)
    level = 2  # 1: _warn_once's own warnings.warn line; 2: its caller
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if "importlib" in filename and "_bootstrap" in filename:
            frame = frame.f_back  # type: ignore[assignment]
            continue  # warnings.warn does not count these frames either
        if not filename.startswith(prefixes):
            return level
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return 2


def _warn_once(provider: str, reason: str) -> None:
    with _warn_lock:
        if reason in _warned:
            return
        _warned.add(reason)
    warnings.warn(
        f"structlog-etw: provider {provider!r} runs disabled (events are dropped): {reason}",
        EtwUnavailableWarning,
        stacklevel=_user_stacklevel(),
    )


def _os_format() -> str:
    """The event format of this platform's OS backend."""
    return "tracelogging" if _PLATFORM == "win32" else "eventheader"


def _default_backend(name: str, group: str | None, guid: uuid.UUID | None = None) -> Backend[Any]:
    """The OS backend for this platform; raises BackendUnavailable when there is none.

    ``guid`` is an explicit ETW provider GUID (Windows only; default: the name hash).
    """
    if _PLATFORM.startswith("linux"):
        try:
            from .backends.user_events import UserEventsBackend  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
        except ImportError as exc:
            raise BackendUnavailable(f"user_events backend not importable: {exc}", "unavailable") from exc
        return UserEventsBackend(name, group)
    if _PLATFORM == "win32":
        try:
            from .backends.etw import EtwBackend  # noqa: PLC0415
            from .tracelogging.spec import group_guid, provider_id, provider_traits  # noqa: PLC0415
        except ImportError as exc:
            raise BackendUnavailable(f"ETW backend not importable: {exc}") from exc
        # The traits must equal TraceLoggingEncoder(name, group).traits (group: GUID or name hash).
        return EtwBackend(
            name,
            provider_id(name) if guid is None else guid,
            provider_traits(name, group_guid(group)),
            library=_ETW_LIBRARY,
        )
    raise BackendUnavailable(f"no trace facility on platform {_PLATFORM!r}", "unsupported_platform")


def _write_path(
    fmt: str, backend: Backend[Any], name: str, group: str | None
) -> _WritePath[bytes] | _WritePath[TraceLoggingEvent]:
    """The encoder for ``fmt`` paired with ``backend`` (encoders load on first use)."""
    if fmt == "eventheader":
        from .eventheader.encoder import EventHeaderEncoder  # noqa: PLC0415

        return _WritePath[bytes](fmt, EventHeaderEncoder(), backend, eventheader_error_name)
    if fmt == "tracelogging":
        from .tracelogging.encoder import TraceLoggingEncoder  # noqa: PLC0415

        return _WritePath[TraceLoggingEvent](
            fmt, TraceLoggingEncoder(name, group), backend, tracelogging_error_name
        )
    raise ValueError(f"backend format {fmt!r} is neither 'eventheader' nor 'tracelogging'")


class Provider:
    """One trace provider (e.g. ``MyCompany_MyService``): slots, an encoder, a backend, stats.

    Use :func:`get_provider` rather than the constructor so that every renderer and handler
    with the same name shares one registration.  At construction the default keyword is
    registered at levels 1-5, plus every keyword in ``keywords``, so that trace tools can name
    the tracepoints before the first event; other (level, keyword) pairs are registered on
    first use.

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
        self._lock = threading.Lock()  # counters and slot table; never held across a write
        self._slots: dict[tuple[int, int], Slot] = {}
        # The provider word's holder (level 0, keyword 0): re-pointed, never replaced.
        self._any = Slot(0, 0, UNKNOWN_WORD)
        # Events written: counted without the lock (see _count_written); read by stats().
        self._written = itertools.count()
        self._count_written = self._written.__next__
        self._written_reads = 0  # values stats() took from _written (under the lock)
        self._dropped: dict[str, int] = {}
        self._errors: dict[str, int] = {}
        self._invalid: dict[str, int] = {}
        self._closed = False
        self._base_backend: Backend[Any] | None = None  # the OS backend (or null), created lazily
        self._path: _WritePath[bytes] | _WritePath[TraceLoggingEvent]
        self.format = "eventheader"
        if backend is None and _factory is None:
            _validate_name(name, group, _os_format())  # before anything is registered with the OS
            backend = self._os_backend()
        elif backend is None:
            backend = self._backend_from(_factory, strict=True)
        else:
            _validate_name(name, group, backend.format)
        self._install(backend)
        for level in DEFAULT_LEVELS:
            self.slot(level, default_keyword)
        for kw in keywords:
            for level in DEFAULT_LEVELS:
                self.slot(level, kw)

    # -- backend ---------------------------------------------------------------------------
    @property
    def provider_id(self) -> uuid.UUID:
        """The ETW provider GUID: the explicit ``provider_id``, else the hash of the name."""
        if self._explicit_id is not None:
            return self._explicit_id
        from .tracelogging.spec import provider_id  # noqa: PLC0415

        return provider_id(self.name)

    def _os_backend(self, warn: bool = True) -> Backend[Any]:
        """The OS backend (created once), or a null backend saying why there is none.

        ``warn=False`` (a capture handing its providers back): no :class:`EtwUnavailableWarning`;
        :attr:`status` tells the reason all the same.
        """
        if self._base_backend is None:
            fmt = _os_format()
            problem = _name_problem(self.name, self.group, fmt)
            if problem is not None:  # e.g. back from a TraceLogging capture with a dotted name
                reason = f"the {fmt} format cannot use this provider: {problem}"
                if warn:
                    _warn_once(self.name, reason)
                self._base_backend = NullBackend(reason, fmt, StatusReason.INVALID_NAME.value)
                return self._base_backend
            try:
                self._base_backend = _default_backend(self.name, self.group, self._explicit_id)
            except BackendUnavailable as exc:
                reason = str(exc) or type(exc).__name__
                code = getattr(exc, "reason", "unavailable")
                if code == "unavailable" and _PLATFORM == "win32":
                    code = StatusReason.ETW_UNAVAILABLE.value
                if warn:
                    _warn_once(self.name, reason)
                self._base_backend = NullBackend(reason, fmt, code)
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
                _warn_once(self.name, reason)
            return NullBackend(reason, code=getattr(exc, "reason", "unavailable"))
        fmt = backend.format
        problem = _name_problem(self.name, self.group, fmt)
        if problem is None:
            return backend
        with contextlib.suppress(Exception):
            backend.close()
        if strict:
            raise ValueError(problem)
        reason = f"the {fmt} format cannot use this provider: {problem}"
        if warn:
            _warn_once(self.name, reason)
        return NullBackend(reason, fmt, StatusReason.INVALID_NAME.value)

    def _install(self, backend: Backend[Any]) -> None:
        """Use ``backend`` from now on; existing Slot objects are re-pointed in place."""
        fmt = backend.format
        try:
            path = _write_path(fmt, backend, self.name, self.group)
        except ImportError as exc:
            reason = f"{fmt} encoder not importable: {exc}"
            _warn_once(self.name, reason)
            backend = NullBackend(reason, "eventheader", StatusReason.ENCODER_UNAVAILABLE.value)
            path = _write_path("eventheader", backend, self.name, self.group)
        with self._lock:
            self._path = path
            self.format = path.format
            slots = list(self._slots.values())
        for slot in slots:  # the provider's own Slot objects: re-pointed, never the backend's
            try:
                fresh = backend.open_slot(slot.level, slot.keyword)
            except Exception as exc:
                self._count_register_error(exc)
                slot.word, slot.handle = DISABLED_WORD, None
            else:
                slot.word, slot.handle = fresh.word, fresh.handle
        self._refresh_any()

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
        if self._closed:
            return
        old = self._path.backend
        # No warning here: a capture (or other factory) switching backends is not the program's
        # set-up; the provider's status says why it runs disabled.
        new = self._backend_from(factory, warn=False)
        self._install(new)
        if old is not self._base_backend and old is not new:
            old.close()

    @property
    def backend(self) -> Backend[Any]:
        """The backend events currently go to (OS, capture or null)."""
        return self._path.backend

    @property
    def status(self) -> ProviderStatus:
        """Whether events can leave this process, and if not why (a :class:`StatusReason` code).

        ``provider.status.reason is StatusReason.NO_USER_EVENTS``, rather than parsing
        ``stats()["backend"]``.  Reading it never raises and registers nothing.
        """
        with self._lock:
            backend = self._path.backend
            closed = self._closed
        text = repr(backend)
        if closed:
            return ProviderStatus(False, StatusReason.CLOSED, "the provider was closed", text)
        if isinstance(backend, NullBackend):
            return ProviderStatus(False, _status_reason(backend.code), backend.reason, text)
        if backend is self._base_backend:
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
        :meth:`write`, which counts them (``dropped["closed"]``, ``dropped["slot_limit"]``).
        """
        slot = self._slots.get((level, keyword))
        if slot is not None:
            return slot
        if self._closed or len(self._slots) >= self.max_slots:  # slots are never removed
            return Slot(level, keyword, UNWRITABLE_WORD, None)
        with self._lock:
            slot = self._slots.get((level, keyword))
            if slot is not None:
                return slot
            if self._closed or len(self._slots) >= self.max_slots:
                return Slot(level, keyword, UNWRITABLE_WORD, None)
            try:
                fresh = self._path.backend.open_slot(level, keyword)
            except Exception as exc:  # registration failed: this pair stays disabled
                self._count_register_error(exc, locked=True)
                slot = Slot(level, keyword, DISABLED_WORD, None)
            else:
                # Our own Slot (sharing the backend's word and handle): switching backends
                # re-points it without touching the objects a backend keeps.
                slot = Slot(level, keyword, fresh.word, fresh.handle)
            self._slots[(level, keyword)] = slot
            self._refresh_any()  # the backend may have replaced its provider word; or now full
            return slot

    def _count_register_error(self, exc: Exception, locked: bool = False) -> None:
        code = getattr(exc, "errno", None)
        name = _errno.errorcode.get(code, type(exc).__name__) if type(code) is int else type(exc).__name__
        key = "register:" + name
        if locked:
            self._errors[key] = self._errors.get(key, 0) + 1
            return
        with self._lock:
            self._errors[key] = self._errors.get(key, 0) + 1

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
        ``closed``, ``slot_limit`` (a pair past :attr:`max_slots`), ``too_large`` (cannot fit
        even truncated), ``encode_error``; a backend
        error code is counted in ``errors`` by name (``EBADF``, ``ERROR_MORE_DATA``, ...).
        ``related_id`` is written only on a Start event (opcode 1); other events carry the
        activity id alone (EventHeader: 16-byte ActivityId extension; ETW: no related id).
        """
        if opcode != 1:
            related_id = None
        word = slot.word
        if not word[0] or word is UNWRITABLE_WORD:
            self._count_unwritten(word)
            return False
        try:
            rc = self._path.write(slot, name, fields, opcode, tag, activity_id, related_id)
        except Exception:
            self.count_dropped("internal_error")
            return False
        if rc == 0:  # the common case: counted without the lock
            self._count_written()
            return True
        self._count_failure(rc)
        return False

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
        per shape.  Level and keyword are the slot's.  True if written; never raises; counted
        like :meth:`write`.

        The hot path takes no lock: the written counter is an :func:`itertools.count`, whose
        ``next()`` is one C call, atomic under the GIL (and a compare-and-swap on free-threaded
        builds since CPython 3.13); :meth:`stats` reads it with ``next()`` too, under the lock,
        and subtracts the values earlier reads took.  One call to the encoder, one to the backend.
        """
        word = slot.word
        if not word[0] or word is UNWRITABLE_WORD:
            self._count_unwritten(word)
            return False
        if opcode != 1:
            related_id = None
        path: _WritePath[Any] = self._path
        try:
            out = path.encode_dict(name, event, skip, slot.level, opcode, tag, activity_id, related_id)
        except Exception:
            self._count_failure(_ENCODE_ERROR)
            return False
        if out is None:
            self._count_failure(_TOO_LARGE)
            return False
        try:
            rc = path.backend_write(slot, out, opcode, activity_id, related_id)
        except Exception:
            self.count_dropped("internal_error")
            return False
        if rc == 0:
            self._count_written()
            return True
        self._count_failure(rc)
        return False

    def _count_failure(self, rc: int) -> None:
        """Count a write that failed with ``rc`` (a backend code, ``_TOO_LARGE``, ``_ENCODE_ERROR``)."""
        with self._lock:
            if rc == _TOO_LARGE:
                self._dropped["too_large"] = self._dropped.get("too_large", 0) + 1
            elif rc == _ENCODE_ERROR:
                self._dropped["encode_error"] = self._dropped.get("encode_error", 0) + 1
            elif self._closed:  # a write that raced close(): the backend refused it as closed
                self._dropped["closed"] = self._dropped.get("closed", 0) + 1
            else:
                key = self._path.error_name(rc)
                self._errors[key] = self._errors.get(key, 0) + 1

    def _count_unwritten(self, word: object) -> None:
        """Count an event at a slot that is not written: closed, past the bound, nobody listens."""
        if self._closed:
            self.count_dropped("closed")
        else:
            self.count_dropped("slot_limit" if word is UNWRITABLE_WORD else "not_enabled")

    def count_dropped(self, reason: str) -> None:
        """Count one event dropped before reaching the backend, under ``reason``."""
        with self._lock:
            self._dropped[reason] = self._dropped.get(reason, 0) + 1

    def count_invalid(self, key: str) -> None:
        """Count one invalid control value (e.g. ``etw_keyword``) that fell back to its default."""
        with self._lock:
            self._invalid[key] = self._invalid.get(key, 0) + 1

    # -- state -----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """A snapshot: ``written``, ``dropped`` {reason: n}, ``errors`` {code name: n},
        ``invalid`` {control key: n}, ``truncated``, ``format``, ``backend``, ``closed``,
        ``slots`` (registered (level, keyword) pairs) and ``max_slots``.
        """
        with self._lock:
            # next() hands out the writes so far plus the values earlier snapshots took.
            written = next(self._written) - self._written_reads
            self._written_reads += 1
            return {
                "provider": self.name,
                "written": written,
                "dropped": dict(self._dropped),
                "errors": dict(self._errors),
                "invalid": dict(self._invalid),
                "truncated": self._path.encoder.truncated,
                "format": self.format,
                "backend": repr(self._path.backend),
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
        counted too.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            backends = {id(b): b for b in (self._path.backend, self._base_backend) if b is not None}
            for slot in self._slots.values():
                slot.word = UNWRITABLE_WORD
            self._any.word = UNKNOWN_WORD
        for backend in backends.values():
            try:
                backend.close()
            except Exception:
                self.count_dropped("close_error")

    def __repr__(self) -> str:
        return f"Provider({self.name!r}, group={self.group!r}, format={self.format!r})"


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


def _name_problem(name: str, group: str | None, fmt: str) -> str | None:
    """Why ``name``/``group`` cannot be used with format ``fmt`` (None when they can).

    Each format owns its rule: :func:`structlog_etw.eventheader.spec.validate_provider_name`
    (tracepoint names: ``[A-Za-z0-9_]``, no dots) and
    :func:`structlog_etw.tracelogging.spec.validate_provider_name` (any text without NUL whose
    traits leave room for events).
    """
    try:
        if fmt == "tracelogging":
            validate_tracelogging_name(name, group)
        else:
            validate_eventheader_name(name, group)
    except ValueError as exc:
        if fmt == "tracelogging":
            return str(exc)
        return str(exc) + " (EventHeader/user_events provider names have no dots; see docs/linux.md)"
    return None


def _validate_name(name: str, group: str | None, fmt: str) -> None:
    """Raise ValueError unless ``fmt`` (``eventheader`` or ``tracelogging``) can carry the name."""
    problem = _name_problem(name, group, fmt)
    if problem is not None:
        raise ValueError(problem)


# --- process-wide registry ----------------------------------------------------------------------

_registry: dict[str, Provider] = {}
_registry_lock = threading.Lock()
_factory: BackendFactory | None = None
_UNSET: Any = object()
#: Set by :func:`close_all`, for good: providers looked up afterwards are closed from the start.
_closed_all = False


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

    The same name always gives the same :class:`Provider`.  Asking for it again with a
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
    with _registry_lock:
        prov = _registry.get(name)
        if prov is not None and prov.closed and not _closed_all:
            prov = None
        if prov is None:
            options: dict[str, Any] = {
                "group": None if group is _UNSET else group,
                "provider_id": guid,
                "default_keyword": 1 if default_keyword is _UNSET else default_keyword,
                "keywords": keywords,
            }
            if max_slots is not _UNSET:
                options["max_slots"] = max_slots
            prov = _closed_provider(name, options) if _closed_all else Provider(name, **options)
            _registry[name] = prov
            return prov
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
    return prov


def _closed_provider(name: str, options: dict[str, Any]) -> Provider:
    """A provider made after :func:`close_all`: the same set-up checks, nothing registered, closed."""
    fmt = _os_format()
    other = "eventheader" if fmt == "tracelogging" else "tracelogging"
    if _name_problem(name, options["group"], fmt) is not None and _factory is not None:
        fmt = other  # e.g. a dotted name a TraceLogging capture could carry: checked by that rule
    prov = Provider(name, backend=NullBackend("closed: structlog_etw.close_all() ran", fmt), **options)
    prov.close()
    return prov


def providers() -> list[Provider]:
    """Every open provider of the process registry."""
    with _registry_lock:
        return [p for p in _registry.values() if not p.closed]


def set_backend_factory(factory: BackendFactory | None) -> BackendFactory | None:
    """Route every provider, existing and future, to ``factory(name, group)``'s backend.

    ``None`` restores the OS backends.  Returns the previous factory (so callers can nest).
    Used by ``structlog_etw.testing`` to capture events.
    """
    global _factory
    with _registry_lock:
        previous, _factory = _factory, factory
        current = list(_registry.values())
    for prov in current:
        prov._use_factory(factory)
    return previous


def close_all() -> None:
    """Close every provider (registered with :mod:`atexit`); later log calls return normally.

    Final for the process: events logged afterwards, through existing loggers or loggers made
    later, are counted as ``dropped["closed"]`` and nothing new is registered with the OS.
    """
    global _closed_all
    with _registry_lock:
        _closed_all = True
        current = list(_registry.values())
    for prov in current:
        prov.close()


atexit.register(close_all)


def _after_fork_in_child() -> None:
    """A fork while another thread held a lock would leave it held forever in the child."""
    global _registry_lock, _warn_lock
    _registry_lock = threading.Lock()
    _warn_lock = threading.Lock()
    for prov in list(_registry.values()):
        prov._lock = threading.Lock()
        for part in (prov._path.encoder, prov._path.backend, prov._base_backend):
            if part is not None and hasattr(part, "_lock"):
                part._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
