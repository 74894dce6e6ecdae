"""Events read live, whatever the source: what a live reader yields and the read loop they share.

The Linux listener (:class:`structlog_etw.perf.Listener`: per-CPU perf rings) and the ETW
consumer (:class:`structlog_etw.etw.EtwListener`: a real-time session) both yield
:class:`ListenedEvent` items (and :class:`LostEvents` reports), and both are read by
:func:`pump`, so ``structlog-etw listen`` prints Linux and Windows events alike.  This module
belongs to neither source: it needs only :mod:`structlog_etw.read.decoded` and the standard library,
so the ETW consumer imports it without the perf package (and no reader loads an encoder).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .decoded import DecodedEvent

__all__ = ["ListenedEvent", "LostEvents", "pump"]


@dataclass(frozen=True)
class ListenedEvent:
    """One event read live: the decoded event plus where and when the source recorded it.

    ``tracepoint`` is the user_events tracepoint (perf rings) or the provider (an ETW session).
    ``time_ns`` is the kernel's CLOCK_MONOTONIC stamp (perf rings; None from ETW);
    ``realtime_ns`` the same moment as nanoseconds since the Unix epoch (perf rings: moved by
    the offset between the two clocks measured when listening started).  ``decoded`` is None
    when the bytes could not be decoded (``error`` says why; ``raw`` holds them).
    """

    tracepoint: str
    time_ns: int | None
    realtime_ns: int | None
    cpu: int | None
    pid: int | None
    tid: int | None
    decoded: DecodedEvent | None
    error: str | None = None
    raw: bytes = b""


@dataclass(frozen=True)
class LostEvents:
    """The source dropped ``count`` events on ``cpu``: its buffer was full."""

    cpu: int
    count: int


def pump(
    poll: Callable[[float], list[Any]],
    drain: Callable[[], list[Any]],
    emit: Callable[[ListenedEvent], None],
    lost: Callable[[LostEvents], None],
    *,
    count: int | None = None,
    duration: float | None = None,
    stop: Callable[[], bool] = lambda: False,
    running: Callable[[], bool] = lambda: True,
) -> int:
    """The read loop of every live source (perf rings in :func:`structlog_etw.perf.listener.run`,
    an ETW session in :func:`structlog_etw.etw.consumer.run`): ``poll(timeout)`` until ``count`` events,
    ``duration`` seconds, ``stop()`` or not ``running()``; then, unless ``count`` was reached,
    what ``drain()`` still holds, also when interrupted.  Returns the number of events emitted.
    """
    deadline = None if duration is None else time.monotonic() + duration
    seen = 0

    def feed(items: list[ListenedEvent | LostEvents]) -> bool:
        nonlocal seen
        for item in items:
            if isinstance(item, LostEvents):
                lost(item)
                continue
            emit(item)
            seen += 1
            if count is not None and seen >= count:
                return True
        return False

    try:
        while not stop() and running():
            timeout = 0.2
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                timeout = min(timeout, left)
            if feed(poll(timeout)):
                return seen
    finally:
        if count is None or seen < count:
            feed(drain())
    return seen
