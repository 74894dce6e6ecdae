"""What every backend offers the provider: slots with their enable words, the write protocols, and the
error a backend raises when it cannot open."""

from __future__ import annotations

import errno
import os
import threading
import weakref
from typing import Any, Final, Literal, Protocol, TypeVar

from ..formats.header import Header, plain_header
from ..formats.tracelogging import TraceLoggingEvent

__all__ = [
    "DESCRIPTOR_LOST",
    "TRANSIENT_ERRNOS",
    "UNKNOWN_WORD",
    "UNWRITABLE_WORD",
    "Backend",
    "BackendUnavailable",
    "EventHeaderBackend",
    "Format",
    "Slot",
    "TraceLoggingBackend",
    "TraceLoggingEvent",
    "fork_safe_lock",
]

#: The word of a slot whose events cannot be written but must be counted: a slot of a closed
#: provider, or a (level, keyword) past the provider's slot limit.  It reads *enabled*
#: (``word[0] == 1``) so that every fast path hands the event on to ``Provider.write``, which
#: counts it by reason (``dropped["closed"]``, ``dropped["slot_limit"]``) instead of writing it;
#: :attr:`Slot.enabled` says ``False`` for it.
UNWRITABLE_WORD: tuple[int] = (1,)

#: The *provider word* (``Backend.any_word``, ``Provider.any_slot``) of a backend that cannot say
#: whether any of its slots is enabled: a backend without ``any_word`` (one of yours), a
#: user_events provider with more tracepoints than its shared word has bits, a closed or full
#: provider.  It reads non-zero, so the fast paths always go on to the slot of the call.  (Built
#: with ``tuple()``: the compiler must not merge it with :data:`UNWRITABLE_WORD`.)
UNKNOWN_WORD: tuple[int, ...] = tuple([1])


#: What ``Backend.write`` returns when the OS handle it writes through is no longer its own (a
#: descriptor closed and reused by other code): nothing was written, the provider counts the
#: event as ``dropped["descriptor_lost"]``.  Negative: never an errno or a Win32 code.
DESCRIPTOR_LOST: Final = -16


#: The errnos of a failure to make a backend that may pass (out of descriptors or memory): the
#: provider runs disabled with ``StatusReason.RESOURCES_EXHAUSTED`` and tries again later.
TRANSIENT_ERRNOS: Final = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOMEM))


#: The objects whose ``_lock`` a fork child replaces (:func:`fork_safe_lock`), held weakly.
_FORK_RENEWED: weakref.WeakSet[Any] = weakref.WeakSet()


def fork_safe_lock(owner: object) -> threading.Lock:
    """A lock for ``owner._lock`` that a fork child replaces with a fresh one.

    The one home of that rule (every backend with a lock uses it, and so can a backend of your
    own): another thread of the parent may hold the lock at the moment of the fork, and the
    child, which has only the forking thread, would wait for it forever.  ``owner`` must take
    weak references (``__weakref__`` in its ``__slots__``).
    """
    _FORK_RENEWED.add(owner)
    return threading.Lock()


def _renew_locks() -> None:
    for owner in list(_FORK_RENEWED):
        owner._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # pragma: no branch (absent on Windows)
    os.register_at_fork(after_in_child=_renew_locks)


class Slot:
    """A provider's (level, keyword) pair as a backend sees it.

    ``word[0]`` is non-zero while at least one trace session wants events at this
    level and keyword.  On Linux ``word`` is memory the kernel updates (the
    user_events enable word); on Windows a one-element array the enable callback
    rewrites.  Reading ``word[0]`` is the whole per-call enabled check.
    """

    __slots__ = ("handle", "header", "keyword", "level", "word")

    def __init__(self, level: int, keyword: int, word: Any, handle: Any = None) -> None:
        self.level = level
        self.keyword = keyword
        self.word = word
        self.handle = handle
        #: The header of this slot's plain events (opcode 0, tag 0, no activity), built once.
        self.header: Header = plain_header(level)

    @property
    def enabled(self) -> bool:
        """Whether a session currently wants events at this level and keyword (never for a slot
        whose word is :data:`UNWRITABLE_WORD`)."""
        word = self.word
        return word is not UNWRITABLE_WORD and bool(word[0])

    def __repr__(self) -> str:
        return f"Slot(level={self.level}, keyword={self.keyword:#x}, enabled={self.enabled})"


class BackendUnavailable(Exception):
    """Raised by a backend's constructor when the OS facility is missing (the reason is the message).

    The provider catches it, warns once, and runs disabled: log calls stay cheap and never raise.
    ``reason`` is a short code for what is missing (``"no_user_events"``, ``"permission_denied"``,
    ...: the values of :class:`structlog_etw.StatusReason`), read by ``Provider.status``; a
    backend of your own may leave it at ``"unavailable"``.
    """

    def __init__(self, message: str = "", reason: str = "unavailable") -> None:
        super().__init__(message)
        #: What is missing, as a code (``Provider.status.reason``).
        self.reason = reason


#: The two event formats: EventHeader (Linux user_events) and TraceLogging (Windows ETW).
Format = Literal["eventheader", "tracelogging"]

EventT_contra = TypeVar("EventT_contra", contravariant=True)


class Backend(Protocol[EventT_contra]):
    """Where a provider's encoded events go: the OS (user_events, ETW), a capture, or your own sink.

    ``EventT_contra`` is what the backend's format produces: ``bytes`` (a whole EventHeader
    event, header and extensions included) for :data:`EventHeaderBackend`,
    :data:`TraceLoggingEvent` for :data:`TraceLoggingBackend`.  A provider picks its encoder
    from :attr:`format`; pass your backend as ``Provider(name, backend=...)`` (and the provider
    to ``EtwRenderer(name, provider=...)``) to receive every event the renderer writes.

    The provider calls ``open_slot`` once per (level, keyword) and checks ``slot.word[0]``
    before encoding; ``write`` is only called for an enabled slot.

    A backend may also offer ``any_word``, the *provider word*: ``any_word[0]`` is non-zero
    whenever a session wants events at any (level, keyword) of the provider (zero when none
    does), read before anything else by ``make_etw_bound_logger``'s methods.  The provider reads
    the attribute again after every ``open_slot`` (a backend may replace it, e.g. with
    :data:`UNKNOWN_WORD` once it cannot tell any more); a backend without it gets
    :data:`UNKNOWN_WORD` (correct, only the disabled path is slower).  ``write`` and ``close``
    must never raise: ``write`` returns 0, or an error code the provider counts by name
    (an errno for EventHeader backends, a Win32 code for TraceLogging ones).
    """

    @property
    def format(self) -> str:
        """``"eventheader"`` or ``"tracelogging"``: the encoding this backend takes."""
        ...

    def open_slot(self, level: int, keyword: int) -> Slot:
        """The slot for (level, keyword), registered with the OS if needed; may raise ``OSError``
        (the provider counts it and keeps that pair disabled)."""
        ...

    def write(
        self,
        slot: Slot,
        event: EventT_contra,
        opcode: int,
        activity_id: bytes | None,
        related_id: bytes | None,
    ) -> int:
        """Hand one encoded event to the OS: 0, or an error code.  Never raises.

        ``opcode`` and the 16-byte activity ids (RFC 4122 byte order) are also inside an
        EventHeader event; a TraceLogging backend passes them to EventWriteTransfer (the ids
        as GUIDs), with level and keyword from ``slot``.
        """
        ...

    def close(self) -> None:
        """Unregister everything; later writes return an error code."""
        ...


#: A backend fed EventHeader events (Linux user_events, the capture backend, your sink).
EventHeaderBackend = Backend[bytes]
#: A backend fed TraceLogging events (Windows ETW, the capture backend, your sink).
TraceLoggingBackend = Backend[TraceLoggingEvent]
