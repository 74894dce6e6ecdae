"""Which backend this OS gives a provider, and the status a provider reports about it.

* :func:`default_backend`: Linux user_events (EventHeader), Windows ETW (TraceLogging), else
  :class:`~structlog_etw.backends.base.BackendUnavailable`; :func:`os_format` its format.
* :class:`StatusReason`, :class:`ProviderStatus`: what ``Provider.status`` says;
  :class:`EtwUnavailableWarning` and :func:`warn_once`: the one-time warning of a provider that
  runs disabled, pointing at the user's line.
* :func:`name_problem`: whether a format can carry a provider name (each format owns its rule).

This module knows nothing about structlog and nothing about the provider itself.
"""

from __future__ import annotations

import enum
import os
import sys
import uuid
import warnings
from dataclasses import dataclass
from typing import Any, Final

from ..backends.base import TRANSIENT_ERRNOS, Backend, BackendUnavailable
from ..formats.eventheader import validate_provider_name as validate_eventheader_name
from ..formats.tracelogging import validate_provider_name as validate_tracelogging_name

__all__ = [
    "DOCTOR_HINT",
    "ETW_LIBRARY",
    "PLATFORM",
    "EtwUnavailableWarning",
    "ProviderStatus",
    "StatusReason",
    "default_backend",
    "name_problem",
    "os_format",
    "status_reason",
    "unavailable_code",
    "warn_once",
    "warned",
]

#: The platform whose OS backend providers use (tests set "win32" together with
#: ``ETW_LIBRARY`` to run the Windows path against the compiled fake ETW library).
PLATFORM: str = sys.platform
#: Shared library the Windows backend loads instead of the Windows DLLs (tests only).
ETW_LIBRARY: str | None = None


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
    #: The process was out of descriptors or memory (``EMFILE``, ``ENFILE``, ``ENOMEM``) when
    #: the backend was made, its module imported included: tried again when a later event
    #: registers a new (level, keyword) pair, a bounded number of times.
    RESOURCES_EXHAUSTED = "resources_exhausted"
    #: Linux: the ``user_events_data`` descriptor was closed behind the library's back (a
    #: daemonizer's close-all) and could not be opened again yet: nothing is written to the
    #: number (it may be the application's file now); events are ``dropped["descriptor_lost"]``.
    DESCRIPTOR_LOST = "descriptor_lost"
    #: Linux: writing to the OS backend through a new ``user_events_data`` descriptor, opened
    #: after the first was closed behind the library's back (the detail says how often).
    DESCRIPTOR_REOPENED = "descriptor_reopened"
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


def status_reason(code: str) -> StatusReason:
    """The :class:`StatusReason` of a backend's code (``UNAVAILABLE`` for a code of its own)."""
    try:
        return StatusReason(code)
    except ValueError:
        return StatusReason.UNAVAILABLE


#: What the one-time warning and a disabled provider's status add: the command that checks the
#: machine and names the fix.
DOCTOR_HINT: Final = " (run `structlog-etw doctor` to see what is missing and how to fix it)"

#: The reasons warned about so far (one warning per reason and process).
warned: set[str] = set()
_PACKAGE_DIR: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LOGGING_DIR: Final = os.path.dirname(os.path.abspath(warnings.__file__)) + os.sep + "logging" + os.sep


def _user_stacklevel() -> int:
    """The ``stacklevel`` of ``warnings.warn`` called by :func:`warn_once` that points at the first
    frame outside structlog-etw, structlog and ``logging`` (``dictConfig``): the user's line."""
    skip = [_PACKAGE_DIR, _LOGGING_DIR]
    structlog_module = sys.modules.get("structlog")
    structlog_file = getattr(structlog_module, "__file__", None)
    if structlog_file:
        skip.append(os.path.dirname(os.path.abspath(structlog_file)) + os.sep)
    prefixes = tuple(skip)
    level = 2  # 1: warn_once's own warnings.warn line; 2: its caller
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


def warn_once(provider: str, reason: str) -> None:
    """Warn :class:`EtwUnavailableWarning` for ``reason``, once per process (no lock: a set's
    ``add`` is atomic, and a race at worst warns twice)."""
    if reason in warned:
        return
    warned.add(reason)
    warnings.warn(
        f"structlog-etw: provider {provider!r} runs disabled (events are dropped): {reason}{DOCTOR_HINT}",
        EtwUnavailableWarning,
        stacklevel=_user_stacklevel(),
    )


def os_format() -> str:
    """The event format of this platform's OS backend."""
    return "tracelogging" if PLATFORM == "win32" else "eventheader"


def default_backend(name: str, group: str | None, guid: uuid.UUID | None = None) -> Backend[Any]:
    """The OS backend for this platform; raises BackendUnavailable when there is none.

    ``guid`` is an explicit ETW provider GUID (Windows only; default: the name hash).
    """
    if PLATFORM.startswith("linux"):
        try:
            from ..backends.user_events import UserEventsBackend  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
        except ImportError as exc:
            raise BackendUnavailable(f"user_events backend not importable: {exc}", "unavailable") from exc
        except OSError as exc:  # e.g. EMFILE: the import could not open the module's file
            reason = _os_error_code(exc)
            raise BackendUnavailable(f"user_events backend not importable: {exc}", reason) from exc
        try:
            return UserEventsBackend(name, group)
        except OSError as exc:  # anything the constructor did not sort out itself
            raise BackendUnavailable(f"user_events backend failed: {exc}", _os_error_code(exc)) from exc
    if PLATFORM == "win32":
        try:
            from ..backends.etw import EtwBackend  # noqa: PLC0415
            from ..formats.tracelogging import group_guid, provider_id, provider_traits  # noqa: PLC0415
        except ImportError as exc:
            reason = StatusReason.ETW_UNAVAILABLE.value
            raise BackendUnavailable(f"ETW backend not importable: {exc}", reason) from exc
        except OSError as exc:
            raise BackendUnavailable(f"ETW backend not importable: {exc}", _os_error_code(exc)) from exc
        # The traits must equal TraceLoggingEncoder(name, group).traits (group: GUID or name hash).
        return EtwBackend(
            name,
            provider_id(name) if guid is None else guid,
            provider_traits(name, group_guid(group)),
            library=ETW_LIBRARY,
        )
    raise BackendUnavailable(f"no trace facility on platform {PLATFORM!r}", "unsupported_platform")


def _os_error_code(exc: OSError) -> str:
    """The status code of an :class:`OSError` met while making a backend."""
    if exc.errno in TRANSIENT_ERRNOS:
        return StatusReason.RESOURCES_EXHAUSTED.value
    return StatusReason.OPEN_FAILED.value


def unavailable_code(exc: BackendUnavailable) -> str:
    """The status code of an OS backend that failed to open (Windows: ``etw_unavailable``)."""
    code = getattr(exc, "reason", "unavailable")
    if code == "unavailable" and PLATFORM == "win32":
        return StatusReason.ETW_UNAVAILABLE.value
    return str(code)


def name_problem(name: str, group: str | None, fmt: str) -> str | None:
    """Why ``name``/``group`` cannot be used with format ``fmt`` (None when they can).

    Each format owns its rule: :func:`structlog_etw.formats.eventheader.validate_provider_name`
    (tracepoint names: ``[A-Za-z0-9_]``, no dots) and
    :func:`structlog_etw.formats.tracelogging.validate_provider_name` (any text without NUL whose
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
