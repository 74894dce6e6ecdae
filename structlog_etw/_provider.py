"""Providers: a backend, an encoder and counters, shared process-wide by name.

A :class:`Provider` is what a renderer or handler writes to.  It picks the OS backend
(Linux user_events with EventHeader, Windows ETW with TraceLogging, else nothing), keeps one
cached :class:`~structlog_etw._slot.Slot` per (level, keyword), and never raises from
:meth:`Provider.write`: what cannot be written is counted in :meth:`Provider.stats`.

This module knows nothing about structlog.
"""

from __future__ import annotations

import atexit
import errno as _errno
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Final

from ._backend_base import BackendUnavailable
from ._backend_null import DISABLED_WORD, NullBackend
from ._eventheader import validate_provider_name
from ._fields import Field
from ._slot import Slot

__all__ = [
    "BackendFactory",
    "Provider",
    "close_all",
    "get_provider",
    "set_backend_factory",
]

#: ``f(provider_name, group) -> backend``: how :func:`set_backend_factory` builds backends.
BackendFactory = Callable[[str, "str | None"], Any]

#: Levels registered up front for the default keyword (critical .. verbose).
DEFAULT_LEVELS: Final = (1, 2, 3, 4, 5)
_KEYWORD_MAX: Final = (1 << 64) - 1

_WIN32_ERRORS: Final[dict[int, str]] = {
    6: "ERROR_INVALID_HANDLE",
    8: "ERROR_NOT_ENOUGH_MEMORY",
    87: "ERROR_INVALID_PARAMETER",
    234: "ERROR_MORE_DATA",
    534: "ERROR_ARITHMETIC_OVERFLOW",
}

_warned: set[str] = set()
_warn_lock = threading.Lock()


def _warn_once(provider: str, reason: str) -> None:
    with _warn_lock:
        if reason in _warned:
            return
        _warned.add(reason)
    warnings.warn(
        f"structlog-etw: provider {provider!r} runs disabled (events are dropped): {reason}",
        RuntimeWarning,
        stacklevel=4,
    )


def _error_name(fmt: str, code: int) -> str:
    if fmt == "eventheader":
        return _errno.errorcode.get(code, f"errno {code}")
    return _WIN32_ERRORS.get(code, f"WIN32_{code}")


def _default_backend(name: str, group: str | None) -> Any:
    """The OS backend for this platform; raises BackendUnavailable when there is none."""
    if sys.platform.startswith("linux"):
        try:
            from ._backend_linux import UserEventsBackend  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
        except ImportError as exc:
            raise BackendUnavailable(f"user_events backend not importable: {exc}") from exc
        return UserEventsBackend(name, group)
    if sys.platform == "win32":
        try:
            from ._backend_windows import EtwBackend  # noqa: PLC0415
            from ._tracelogging import (  # noqa: PLC0415
                group_guid,
                provider_id,
                provider_traits,
            )
        except ImportError as exc:
            raise BackendUnavailable(f"ETW backend not importable: {exc}") from exc
        # The traits must equal TraceLoggingEncoder(name, group).traits (group: GUID or name hash).
        return EtwBackend(name, provider_id(name), provider_traits(name, group_guid(group)))
    raise BackendUnavailable(f"no trace facility on platform {sys.platform!r}")


def _make_encoder(fmt: str, name: str, group: str | None) -> Any:
    if fmt == "eventheader":
        from ._eventheader import EventHeaderEncoder  # noqa: PLC0415

        return EventHeaderEncoder()
    if fmt == "tracelogging":
        from ._tracelogging import TraceLoggingEncoder  # noqa: PLC0415

        return TraceLoggingEncoder(name, group)
    raise ValueError(f"backend format {fmt!r} is neither 'eventheader' nor 'tracelogging'")


class Provider:
    """One trace provider (e.g. ``MyCompany_MyService``): slots, an encoder, a backend, stats.

    Use :func:`get_provider` rather than the constructor so that every renderer and handler
    with the same name shares one registration.  At construction the default keyword is
    registered at levels 1-5, plus every keyword in ``keywords``, so that trace tools can name
    the tracepoints before the first event; other (level, keyword) pairs are registered on
    first use.
    """

    def __init__(
        self,
        name: str,
        *,
        group: str | None = None,
        default_keyword: int = 1,
        keywords: Iterable[int] = (),
        backend: Any = None,
    ) -> None:
        _validate_name(name, group)
        keywords = tuple(keywords)
        for kw in (default_keyword, *keywords):
            _check_keyword(kw)
        self.name = name
        self.group = group
        self.default_keyword = default_keyword
        self._lock = threading.Lock()  # counters and slot table; never held across a write
        self._slots: dict[tuple[int, int], Slot] = {}
        self._written = 0
        self._dropped: dict[str, int] = {}
        self._errors: dict[str, int] = {}
        self._invalid: dict[str, int] = {}
        self._closed = False
        self._base_backend: Any = None  # the OS backend (or null), created lazily
        self._backend: Any = None
        self._encoder: Any = None
        self.format = "eventheader"
        self._write: Callable[..., bool] = self._write_eventheader
        if backend is None:
            backend = self._backend_from(_factory)
        self._install(backend)
        for level in DEFAULT_LEVELS:
            self.slot(level, default_keyword)
        for kw in keywords:
            for level in DEFAULT_LEVELS:
                self.slot(level, kw)

    # -- backend ---------------------------------------------------------------------------
    def _os_backend(self) -> Any:
        if self._base_backend is None:
            try:
                self._base_backend = _default_backend(self.name, self.group)
            except BackendUnavailable as exc:
                reason = str(exc) or type(exc).__name__
                _warn_once(self.name, reason)
                fmt = "tracelogging" if sys.platform == "win32" else "eventheader"
                self._base_backend = NullBackend(reason, fmt)
        return self._base_backend

    def _backend_from(self, factory: BackendFactory | None) -> Any:
        if factory is None:
            return self._os_backend()
        try:
            return factory(self.name, self.group)
        except BackendUnavailable as exc:
            reason = str(exc) or type(exc).__name__
            _warn_once(self.name, reason)
            return NullBackend(reason)

    def _install(self, backend: Any) -> None:
        """Use ``backend`` from now on; existing Slot objects are re-pointed in place."""
        fmt = getattr(backend, "format", "eventheader")
        try:
            encoder = _make_encoder(fmt, self.name, self.group)
        except ImportError as exc:
            reason = f"{fmt} encoder not importable: {exc}"
            _warn_once(self.name, reason)
            backend, fmt = NullBackend(reason, fmt), "eventheader"
            encoder = _make_encoder(fmt, self.name, self.group)
        if fmt == "tracelogging" and getattr(backend, "traits", b"") is None:
            backend.traits = encoder.traits
        with self._lock:
            self._backend = backend
            self._encoder = encoder
            self.format = fmt
            self._write = self._write_eventheader if fmt == "eventheader" else self._write_tracelogging
            slots = list(self._slots.values())
        for slot in slots:  # the provider's own Slot objects: re-pointed, never the backend's
            try:
                fresh = backend.open_slot(slot.level, slot.keyword)
            except Exception as exc:
                self._count_register_error(exc)
                slot.word, slot.handle = DISABLED_WORD, None
            else:
                slot.word, slot.handle = fresh.word, fresh.handle

    def _use_factory(self, factory: BackendFactory | None) -> None:
        if self._closed:
            return
        old = self._backend
        new = self._backend_from(factory)
        self._install(new)
        if old is not None and old is not self._base_backend and old is not new:
            old.close()

    @property
    def backend(self) -> Any:
        """The backend events currently go to (OS, capture or null)."""
        return self._backend

    @property
    def encoder(self) -> Any:
        """The encoder for the current backend's format."""
        return self._encoder

    # -- slots -----------------------------------------------------------------------------
    def slot(self, level: int, keyword: int) -> Slot:
        """The cached slot for (level, keyword), registered with the backend on first use."""
        slot = self._slots.get((level, keyword))
        if slot is not None:
            return slot
        with self._lock:
            slot = self._slots.get((level, keyword))
            if slot is not None:
                return slot
            if self._closed:
                slot = Slot(level, keyword, DISABLED_WORD, None)
            else:
                try:
                    fresh = self._backend.open_slot(level, keyword)
                except Exception as exc:  # registration failed: this pair stays disabled
                    self._count_register_error(exc, locked=True)
                    slot = Slot(level, keyword, DISABLED_WORD, None)
                else:
                    # Our own Slot (sharing the backend's word and handle): switching backends
                    # re-points it without touching the objects a backend keeps.
                    slot = Slot(level, keyword, fresh.word, fresh.handle)
            self._slots[(level, keyword)] = slot
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
        return bool(self.slot(level, keyword).word[0])

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
        ``closed``, ``too_large`` (cannot fit even truncated), ``encode_error``; a backend
        error code is counted in ``errors`` by name (``EBADF``, ``ERROR_MORE_DATA``, ...).
        ``related_id`` is written only on a Start event (opcode 1); other events carry the
        activity id alone (EventHeader: 16-byte ActivityId extension; ETW: no related id).
        """
        if opcode != 1:
            related_id = None
        try:
            return self._write(slot, name, fields, opcode, tag, activity_id, related_id)
        except Exception:
            self.count_dropped("internal_error")
            return False

    def _write_eventheader(
        self,
        slot: Slot,
        name: str,
        fields: list[Field],
        opcode: int,
        tag: int,
        activity_id: bytes | None,
        related_id: bytes | None,
    ) -> bool:
        if not slot.word[0]:
            self.count_dropped("closed" if self._closed else "not_enabled")
            return False
        try:
            event = self._encoder.encode(name, fields, slot.level, opcode, tag, activity_id, related_id)
        except Exception:
            self.count_dropped("encode_error")
            return False
        if event is None:
            self.count_dropped("too_large")
            return False
        rc = self._backend.write(slot, event)
        return self._count_result(rc)

    def _write_tracelogging(
        self,
        slot: Slot,
        name: str,
        fields: list[Field],
        opcode: int,
        tag: int,
        activity_id: bytes | None,
        related_id: bytes | None,
    ) -> bool:
        if not slot.word[0]:
            self.count_dropped("closed" if self._closed else "not_enabled")
            return False
        try:
            encoded = self._encoder.encode(name, fields, tag)
        except Exception:
            self.count_dropped("encode_error")
            return False
        if encoded is None:
            self.count_dropped("too_large")
            return False
        metadata, data = encoded
        rc = self._backend.write(slot, opcode, metadata, data, activity_id, related_id)
        return self._count_result(rc)

    def _count_result(self, rc: int) -> bool:
        if rc == 0:
            with self._lock:
                self._written += 1
            return True
        with self._lock:
            if self._closed:  # a write that raced close(): the backend refused it as closed
                self._dropped["closed"] = self._dropped.get("closed", 0) + 1
                return False
            key = _error_name(self.format, rc)
            self._errors[key] = self._errors.get(key, 0) + 1
        return False

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
        ``invalid`` {control key: n}, ``truncated``, ``format``, ``backend``, ``closed``.
        """
        with self._lock:
            return {
                "provider": self.name,
                "written": self._written,
                "dropped": dict(self._dropped),
                "errors": dict(self._errors),
                "invalid": dict(self._invalid),
                "truncated": int(getattr(self._encoder, "truncated", 0)),
                "format": self.format,
                "backend": repr(self._backend),
                "closed": self._closed,
            }

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Unregister; later writes are counted as ``dropped["closed"]``, never raised."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            backends = {id(b): b for b in (self._backend, self._base_backend) if b is not None}
            for slot in self._slots.values():
                slot.word = DISABLED_WORD
        for backend in backends.values():
            try:
                backend.close()
            except Exception:
                self.count_dropped("close_error")

    def __repr__(self) -> str:
        return f"Provider({self.name!r}, group={self.group!r}, format={self.format!r})"


def _validate_name(name: str, group: str | None) -> None:
    """Linux rules everywhere but Windows, where ETW accepts any non-empty name without NUL."""
    if sys.platform == "win32":
        if not isinstance(name, str) or not name or "\0" in name:
            raise ValueError(f"provider name must be a non-empty str without NUL, got {name!r}")
        if group is not None and (not isinstance(group, str) or not group):
            raise ValueError(f"provider group must be a non-empty str (GUID text or a name), got {group!r}")
        return
    validate_provider_name(name, group)


def _check_keyword(kw: object) -> None:
    if type(kw) is not int or not 0 <= kw <= _KEYWORD_MAX:
        raise ValueError(f"keyword must be an int in 0..2**64-1, got {kw!r}")


# --- process-wide registry ----------------------------------------------------------------------

_registry: dict[str, Provider] = {}
_registry_lock = threading.Lock()
_factory: BackendFactory | None = None
_UNSET: Any = object()


def get_provider(
    name: str,
    *,
    group: str | None = _UNSET,
    default_keyword: int = _UNSET,
    keywords: Iterable[int] = (),
) -> Provider:
    """The process-wide provider called ``name``, created on first use.

    The same name always gives the same :class:`Provider`.  Asking for it again with a
    different ``group`` raises :class:`ValueError` (a group is part of the provider's identity;
    ``group=None`` means "whatever it already has").  ``default_keyword`` and ``keywords`` of
    later calls are registered too (the first caller's ``default_keyword`` stays the provider's
    default).
    """
    with _registry_lock:
        prov = _registry.get(name)
        if prov is not None and prov.closed:
            prov = None
        if prov is None:
            prov = Provider(
                name,
                group=None if group is _UNSET else group,
                default_keyword=1 if default_keyword is _UNSET else default_keyword,
                keywords=keywords,
            )
            _registry[name] = prov
            return prov
    if group is not _UNSET and group is not None and group != prov.group:
        raise ValueError(
            f"provider {name!r} already exists with group {prov.group!r}; cannot also use group {group!r}"
        )
    extra = tuple(keywords)
    if default_keyword is not _UNSET:
        extra = (default_keyword, *extra)
    for kw in extra:
        _check_keyword(kw)
        for level in DEFAULT_LEVELS:
            prov.slot(level, kw)
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
    """Close every provider (registered with :mod:`atexit`); later log calls return normally."""
    with _registry_lock:
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
        for part in (prov._encoder, prov._backend):
            if hasattr(part, "_lock"):
                part._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
