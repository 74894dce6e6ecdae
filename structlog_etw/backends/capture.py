"""A backend that records exactly what would be handed to the kernel, for tests and demos.

For ``format="eventheader"`` a record holds the tracepoint name and the event bytes that would
follow the write index in the kernel write; for ``format="tracelogging"`` it holds the
EVENT_DESCRIPTOR fields, the provider traits, the event metadata and data blobs and the
activity ids that would go to ``EventWriteTransfer``.  Slots are enabled unless a test says
otherwise (:meth:`CaptureBackend.set_enabled`).

``write`` takes no lock: the record is built first and appended to the list in one C call
(``list.append`` is atomic), so a signal handler or ``__del__`` that logs in the middle of a
write records its event too, in order, instead of waiting for the interrupted one.
"""

from __future__ import annotations

import errno
import uuid
from dataclasses import dataclass

from ..formats.eventheader import tracepoint_name
from ..formats.tracelogging import CHANNEL_TRACELOGGING, TraceLoggingEvent, Win32Error
from ..formats.tracelogging import provider_id as tracelogging_provider_id
from .base import Slot, fork_safe_lock

__all__ = ["CaptureBackend", "CaptureRecord"]


@dataclass(frozen=True)
class CaptureRecord:
    """One event as the OS would have received it.

    EventHeader: ``tracepoint`` and ``event``.  TraceLogging: ``descriptor`` (Id, Version,
    Channel, Level, Opcode, Task, Keyword), ``traits``, ``metadata``, ``data``,
    ``activity_id``/``related_id`` (16 raw bytes, RFC 4122 order) and ``provider_id``, the
    provider GUID EventRegister would have received (explicit ``provider_id`` or the name hash).
    """

    format: str
    provider: str
    level: int
    keyword: int
    tracepoint: str = ""
    event: bytes = b""
    opcode: int = 0
    descriptor: tuple[int, int, int, int, int, int, int] | None = None
    traits: bytes = b""
    metadata: bytes = b""
    data: bytes = b""
    activity_id: bytes | None = None
    related_id: bytes | None = None
    provider_id: uuid.UUID | None = None


class CaptureBackend:
    """Record events in memory (thread-safe, lock-free writes); never raises from ``write``.

    ``enabled`` is the initial state of every slot; :meth:`set_enabled` changes one
    (level, keyword) or, with ``level=None``/``keyword=None``, all matching slots, now and
    for slots opened later.
    """

    def __init__(
        self,
        provider_name: str,
        group: str | None = None,
        format: str = "eventheader",
        *,
        enabled: bool = True,
        provider_id: uuid.UUID | None = None,
    ) -> None:
        if format not in ("eventheader", "tracelogging"):
            raise ValueError(f"format must be 'eventheader' or 'tracelogging', got {format!r}")
        self.provider_name = provider_name
        self.group = group
        self.format = format
        #: TraceLogging: the provider GUID EventRegister would receive (default: the name hash).
        self.provider_id = (
            (provider_id or tracelogging_provider_id(provider_name)) if format == "tracelogging" else None
        )
        self._default = 1 if enabled else 0
        self._rules: dict[tuple[int | None, int | None], int] = {}
        self._words: dict[tuple[int, int], list[int]] = {}
        #: The provider word: ``any_word[0]`` is 1 while some (level, keyword) pair is enabled
        #: (the initial state or a :meth:`set_enabled` rule enables one), 0 while none is.
        self.any_word = [self._default]
        self._slots: dict[tuple[int, int], Slot] = {}
        #: Where records go (appended to, never replaced: a subclass may hand in a shared list).
        self._records: list[CaptureRecord] = []
        self._lock = fork_safe_lock(self)  # slots and rules only; never taken by write
        self._closed = False

    # -- slots -----------------------------------------------------------------------------
    def _state(self, level: int, keyword: int) -> int:
        rules = self._rules
        for key in ((level, keyword), (level, None), (None, keyword), (None, None)):
            if key in rules:
                return rules[key]
        return self._default

    def open_slot(self, level: int, keyword: int) -> Slot:
        """The slot for (level, keyword), cached like the OS backends do."""
        with self._lock:
            slot = self._slots.get((level, keyword))
            if slot is None:
                word = [0 if self._closed else self._state(level, keyword)]
                self._words[(level, keyword)] = word
                handle = tracepoint_name(self.provider_name, level, keyword, self.group)
                slot = self._slots[(level, keyword)] = Slot(level, keyword, word, handle)
            return slot

    def set_enabled(self, enabled: bool, level: int | None = None, keyword: int | None = None) -> None:
        """Enable or disable (level, keyword); ``None`` matches any level / any keyword."""
        with self._lock:
            self._rules[(level, keyword)] = 1 if enabled else 0
            for (lv, kw), word in self._words.items():
                if not self._closed:
                    word[0] = self._state(lv, kw)
            if not self._closed:
                self.any_word[0] = self._any_state()

    def _any_state(self) -> int:
        """1 if some (level, keyword) pair, opened or not, is enabled: a rule enables one, or the
        state of the pairs no specific rule names (the catch-all rule, else the initial state)."""
        rules = self._rules
        generic = rules.get((None, None), self._default)
        return 1 if generic or any(value for key, value in rules.items() if key != (None, None)) else 0

    # -- writing ---------------------------------------------------------------------------
    def write(
        self,
        slot: Slot,
        event: bytes | TraceLoggingEvent,
        opcode: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> int:
        """Record one event (the backend protocol's ``write``): 0, or an error code.  Never raises."""
        try:
            if self.format == "eventheader":
                rec = CaptureRecord(
                    "eventheader",
                    self.provider_name,
                    slot.level,
                    slot.keyword,
                    tracepoint=tracepoint_name(self.provider_name, slot.level, slot.keyword, self.group),
                    event=bytes(event),  # type: ignore[arg-type]
                )
            else:
                traits, metadata, data = event
                rec = CaptureRecord(
                    "tracelogging",
                    self.provider_name,
                    slot.level,
                    slot.keyword,
                    opcode=opcode,
                    descriptor=(0, 0, CHANNEL_TRACELOGGING, slot.level, opcode, 0, slot.keyword),
                    traits=bytes(traits),
                    metadata=bytes(metadata),
                    data=bytes(data),
                    activity_id=activity_id,
                    related_id=related_id,
                    provider_id=self.provider_id,
                )
        except Exception:
            return errno.EINVAL if self.format == "eventheader" else Win32Error.ERROR_INVALID_PARAMETER
        if self._closed:
            return errno.EBADF if self.format == "eventheader" else Win32Error.ERROR_INVALID_HANDLE
        self._records.append(rec)  # one C call: no lock to re-enter
        return 0

    # -- reading ---------------------------------------------------------------------------
    @property
    def records(self) -> list[CaptureRecord]:
        """A snapshot of the records so far, in write order."""
        return self._records.copy()

    def clear(self) -> list[CaptureRecord]:
        """Return the records so far and forget them (a record appended meanwhile stays)."""
        records = self._records
        out = records.copy()
        del records[: len(out)]
        return out

    def close(self) -> None:
        """Disable every slot; later writes fail with EBADF / ERROR_INVALID_HANDLE."""
        with self._lock:
            self._closed = True
            for word in self._words.values():
                word[0] = 0
            self.any_word[0] = 0

    def __repr__(self) -> str:
        return f"CaptureBackend({self.provider_name!r}, format={self.format!r}, records={len(self._records)})"
