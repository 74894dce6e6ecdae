"""What every backend offers the provider: slots with their enable words, the write protocols, and the
error a backend raises when it cannot open."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["BackendUnavailable", "EventHeaderBackend", "Slot", "TraceLoggingBackend"]


class Slot:
    """A provider's (level, keyword) pair as a backend sees it.

    ``word[0]`` is non-zero while at least one trace session wants events at this
    level and keyword.  On Linux ``word`` is memory the kernel updates (the
    user_events enable word); on Windows a one-element array the enable callback
    rewrites.  Reading ``word[0]`` is the whole per-call enabled check.
    """

    __slots__ = ("handle", "keyword", "level", "word")

    def __init__(self, level: int, keyword: int, word: Any, handle: Any = None) -> None:
        self.level = level
        self.keyword = keyword
        self.word = word
        self.handle = handle

    @property
    def enabled(self) -> bool:
        """Whether a session currently wants events at this level and keyword."""
        return bool(self.word[0])

    def __repr__(self) -> str:
        return f"Slot(level={self.level}, keyword={self.keyword:#x}, enabled={self.enabled})"


class BackendUnavailable(Exception):
    """Raised by a backend's constructor when the OS facility is missing (the reason is the message).

    The provider catches it, warns once, and runs disabled: log calls stay cheap and never raise.
    """


class EventHeaderBackend(Protocol):
    """A backend fed EventHeader bytes (Linux user_events, capture)."""

    format: str  # "eventheader"

    def open_slot(self, level: int, keyword: int) -> Slot:
        """Return the slot for (level, keyword), registering it with the OS if needed."""

    def write(self, slot: Slot, event: bytes) -> int:
        """Hand one encoded event to the OS: 0, or an errno. Never raises."""

    def close(self) -> None:
        """Unregister everything; later writes return an error code."""


class TraceLoggingBackend(Protocol):
    """A backend fed TraceLogging metadata and data (Windows ETW, capture)."""

    format: str  # "tracelogging"

    def open_slot(self, level: int, keyword: int) -> Slot:
        """Return the slot for (level, keyword)."""

    def write(
        self,
        slot: Slot,
        opcode: int,
        metadata: bytes,
        data: bytes,
        activity_id: bytes | None,
        related_id: bytes | None,
    ) -> int:
        """Hand one event to ETW: 0, or a Win32 error code. Never raises."""

    def close(self) -> None:
        """Unregister the provider."""
