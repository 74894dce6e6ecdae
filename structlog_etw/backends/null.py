"""The backend used when nothing can ever listen: no user_events, no ETW, unsupported OS."""

from __future__ import annotations

import errno

from .base import Slot

__all__ = ["DISABLED_WORD", "NullBackend"]

#: The enable word of every null slot: never set.
DISABLED_WORD: tuple[int] = (0,)


class NullBackend:
    """Slots that are never enabled; ``write`` hands nothing to anyone.

    ``reason`` says why the provider runs disabled (shown in the one-time warning and in
    ``Provider.stats()["backend"]``).  ``format`` is the encoding the provider would have used.
    ``code`` is the reason as a code (``Provider.status.reason``; see ``BackendUnavailable``).
    """

    __slots__ = ("code", "format", "reason")

    #: The provider word: nothing ever listens.
    any_word: tuple[int] = DISABLED_WORD

    def __init__(self, reason: str, format: str = "eventheader", code: str = "unavailable") -> None:
        self.reason = reason
        self.format = format
        self.code = code

    def open_slot(self, level: int, keyword: int) -> Slot:
        """A slot whose enable word is always 0."""
        return Slot(level, keyword, DISABLED_WORD, None)

    def write(
        self,
        slot: Slot,
        event: object,
        opcode: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> int:
        """Nothing listens: returns ``ENODEV`` (the provider never calls this for a disabled slot)."""
        return errno.ENODEV

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return f"NullBackend(reason={self.reason!r})"
