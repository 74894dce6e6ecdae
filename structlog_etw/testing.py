"""Test your own instrumentation: capture what would be handed to the kernel, and decode it.

Works on any OS and needs no kernel, no root and no trace session::

    import structlog
    from structlog_etw import EtwRenderer
    from structlog_etw.testing import capture_etw_events

    with capture_etw_events() as capture:
        log = structlog.wrap_logger(None, processors=[EtwRenderer("MyCompany_MyService")])
        log.info("user_login", user="ann")
    (event,) = capture.events
    assert event.name == "user_login" and event.fields == {"user": "ann"}

While the context manager is active every provider of the process (existing and new) writes
to an in-memory capture backend instead of the OS; on exit the previous backends come back.
Each :class:`CapturedEvent` holds the exact bytes the OS would have received (EventHeader:
the event after the write index; TraceLogging: the EVENT_DESCRIPTOR fields, metadata and data
blobs and activity ids) and their decoding by the project's own decoders.  The pytest fixture
``etw_capture`` (plugin ``structlog_etw.pytest_plugin``) gives the same for one test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from .backends.base import Slot
from .backends.capture import CaptureBackend, CaptureRecord
from .provider._provider import get_provider, set_backend_factory
from .provider._registry import REGISTRY
from .read.decoded import DecodedEvent

__all__ = ["CapturedEvent", "EtwCapture", "capture_etw_events", "decode_record", "isolated_providers"]

Format = Literal["eventheader", "tracelogging"]


@dataclass(frozen=True)
class CapturedEvent:
    """One event as the OS would have received it, and decoded.

    ``raw`` is the EventHeader event (EventHeader format) or TraceLogging ``metadata + data``;
    ``record`` holds every captured piece (tracepoint name, descriptor, traits, metadata, data).
    ``fields`` maps field names to decoded Python values (structs as ``dict``, arrays as
    ``list``); ``decoded`` is the full :class:`~structlog_etw.read.decoded.DecodedEvent` with wire
    types.  ``tags`` is the EventHeader tag or the TraceLogging event tags.  ``provider_id`` is
    the TraceLogging provider GUID EventRegister would receive (the ``provider_id`` given to
    the renderer or provider, else the hash of the name); None for EventHeader.
    """

    format: str
    provider: str
    name: str
    level: int
    keyword: int
    opcode: int
    tags: int
    activity_id: uuid.UUID | None
    related_id: uuid.UUID | None
    fields: dict[str, Any] = field(repr=True)
    raw: bytes = field(repr=False)
    tracepoint: str = ""
    record: CaptureRecord | None = field(default=None, repr=False, compare=False)
    decoded: DecodedEvent | None = field(default=None, repr=False, compare=False)
    provider_id: uuid.UUID | None = None


def _uuid(raw: bytes | None) -> uuid.UUID | None:
    return None if raw is None else uuid.UUID(bytes=bytes(raw))


def decode_record(record: CaptureRecord) -> CapturedEvent:
    """Decode one capture record with the project's EventHeader or TraceLogging decoder."""
    if record.format == "eventheader":
        from .read.decode.eventheader import decode_event  # noqa: PLC0415 - decoders load on first use

        decoded = decode_event(record.tracepoint, record.event)
        raw = record.event
    else:
        from .read.decode.tracelogging import decode  # noqa: PLC0415

        decoded = decode(
            record.metadata,
            record.data,
            provider=record.provider,
            level=record.level,
            keyword=record.keyword,
            opcode=record.opcode,
            activity_id=_uuid(record.activity_id),
            related_id=_uuid(record.related_id),
        )
        raw = record.metadata + record.data
    return CapturedEvent(
        format=record.format,
        provider=record.provider,
        name=decoded.name,
        level=decoded.level,
        keyword=decoded.keyword,
        opcode=decoded.opcode,
        tags=decoded.tag,
        activity_id=decoded.activity_id,
        related_id=decoded.related_id,
        fields=dict(decoded.fields),
        raw=raw,
        tracepoint=record.tracepoint,
        record=record,
        decoded=decoded,
        provider_id=record.provider_id,
    )


@dataclass
class _Journal:
    """What a capture shares with its backends: every provider's records in write order, and the
    tracepoints each provider registered.

    No lock: a record is built before it is appended, and ``list.append``, ``list.copy`` and
    ``dict.setdefault`` are single C calls, so a log call in a signal handler or a ``__del__``
    (or in a fork child of a process whose other thread was writing) never waits here.
    """

    records: list[CaptureRecord] = field(default_factory=list)
    registered: dict[str, dict[tuple[int, int], str]] = field(default_factory=dict)


class _SharedCaptureBackend(CaptureBackend):
    """A capture backend whose records go to its capture's process-wide, ordered journal."""

    def __init__(
        self,
        journal: _Journal,
        provider_name: str,
        group: str | None,
        format: Format,
        enabled: bool,
        rules: dict[tuple[int | None, int | None], bool],
        provider_id: uuid.UUID,
    ) -> None:
        super().__init__(provider_name, group, format, enabled=enabled, provider_id=provider_id)
        self._journal = journal
        self._records = journal.records  # write() appends to the journal: one order for every provider
        for (level, keyword), state in rules.items():
            self.set_enabled(state, level, keyword)

    def open_slot(self, level: int, keyword: int) -> Slot:
        slot = super().open_slot(level, keyword)
        self._journal.registered.setdefault(self.provider_name, {})[(level, keyword)] = str(slot.handle)
        return slot


class EtwCapture:
    """What :func:`capture_etw_events` yields: the captured events of every provider, in order."""

    def __init__(self, format: Format = "eventheader", *, enabled: bool = True) -> None:
        if format not in ("eventheader", "tracelogging"):
            raise ValueError(f"format must be 'eventheader' or 'tracelogging', got {format!r}")
        self.format: Format = format
        self._enabled = enabled
        self._rules: dict[tuple[int | None, int | None], bool] = {}
        self._journal = _Journal()
        self._backends: dict[str, _SharedCaptureBackend] = {}

    def backend_factory(self, name: str, group: str | None, provider_id: uuid.UUID) -> CaptureBackend:
        """The backend factory that routes a provider to this capture (``set_backend_factory``)."""
        backend = _SharedCaptureBackend(
            self._journal, name, group, self.format, self._enabled, self._rules, provider_id
        )
        self._backends[name] = backend
        return backend

    @property
    def records(self) -> list[CaptureRecord]:
        """The raw capture records so far (what the OS would have received), in write order."""
        return self._journal.records.copy()

    @property
    def events(self) -> list[CapturedEvent]:
        """Every event so far, decoded, in write order."""
        return [decode_record(r) for r in self.records]

    def named(self, name: str) -> list[CapturedEvent]:
        """The events called *name*."""
        return [e for e in self.events if e.name == name]

    def clear(self) -> None:
        """Forget the events captured so far and free them (the capture holds the only list of them)."""
        records = self._journal.records
        del records[: len(records)]

    def set_enabled(self, enabled: bool, level: int | None = None, keyword: int | None = None) -> None:
        """Pretend a session does (not) listen at (level, keyword) (``None``: any), for every provider.

        Lets tests check that nothing is written - and nothing is even built, with
        ``make_etw_bound_logger`` - while nobody listens.
        """
        self._rules[(level, keyword)] = enabled
        for backend in list(self._backends.values()):
            backend.set_enabled(enabled, level, keyword)

    def registered(self, provider_name: str) -> list[str]:
        """The tracepoint names (``<Provider>_L<level>K<keyword>``) *provider_name* has registered.

        Registered means what a Linux ``perf record`` could name up front: the provider's
        default keyword and its declared keywords at levels 1-5, then every pair used since.
        """
        return sorted(self._journal.registered.get(provider_name, {}).copy().values())

    def stats(self, provider_name: str) -> dict[str, Any]:
        """``stats()`` of the provider called *provider_name* (written, dropped, errors, ...)."""
        return get_provider(provider_name).stats()

    def __len__(self) -> int:
        return len(self._journal.records)

    def __iter__(self) -> Iterator[CapturedEvent]:
        return iter(self.events)

    def __repr__(self) -> str:
        return f"<EtwCapture format={self.format!r} events={len(self)}>"


@contextmanager
def capture_etw_events(format: Format = "eventheader", *, enabled: bool = True) -> Iterator[EtwCapture]:
    """Route every provider to an in-memory capture in *format* for the ``with`` block.

    Args:
        format: ``"eventheader"`` (what Linux user_events receives) or ``"tracelogging"``
            (what Windows ETW receives), whatever the OS running the test.
        enabled: whether every (level, keyword) starts enabled, as if a session listened to
            everything; use :meth:`EtwCapture.set_enabled` to change single ones.

    Yields:
        An :class:`EtwCapture` whose ``events`` are the decoded events, in write order.
    """
    capture = EtwCapture(format, enabled=enabled)
    previous = set_backend_factory(capture.backend_factory)
    try:
        yield capture
    finally:
        set_backend_factory(previous)


@contextmanager
def isolated_providers() -> Iterator[None]:
    """Give the ``with`` block a provider registry of its own, empty at the start.

    The process's providers are set aside for the block: :func:`~structlog_etw.get_provider`
    (and every ``EtwRenderer``/``EtwHandler`` by name) makes a new provider for a name used
    before, :func:`capture_etw_events` routes only the providers made in the block, and
    :func:`~structlog_etw.close_all` closes only them.  On exit every provider made in the block
    is closed, and the registry holds again what it held: the process's providers (each with
    the backend it had), the backend factory, and whether ``close_all()`` had been called.

    For tests of code that looks providers up by name, calls ``close_all()``, or must not see
    providers (and their options) that earlier tests made::

        with isolated_providers(), capture_etw_events() as capture:
            get_provider("MyCompany_MyService", default_keyword=0x2)  # a fresh one
            ...
    """
    held = REGISTRY.set_aside()
    try:
        yield
    finally:
        REGISTRY.put_back(held)
