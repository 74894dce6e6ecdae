"""What every backend offers the provider, and the error a backend raises when it cannot open."""

from __future__ import annotations

from typing import Protocol

from ._slot import Slot

__all__ = ["BackendUnavailable", "EventHeaderBackend", "TraceLoggingBackend"]


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
