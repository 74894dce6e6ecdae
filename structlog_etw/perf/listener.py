"""A provider's user_events decoded live, with no perf binary (the reader behind ``structlog-etw listen``).

A :class:`Listener` finds the provider's tracepoints in tracefs
(``events/user_events/<Provider>_L<level>K<keyword>[G<group>]``), opens each on every
online CPU with ``perf_event_open`` (:mod:`~structlog_etw.perf.perf_event_open`), reads the
per-CPU ring buffers (:mod:`~structlog_etw.perf.ring`), parses the samples
(:mod:`~structlog_etw.perf.records`), strips the tracepoint's common fields (size from its
``format``) and decodes the EventHeader event.  When no tracepoint of the provider exists yet it
registers them itself (through the user_events backend) and keeps them registered
while it listens, so the application's later registration shares them.  It rescans
tracefs every ``rescan`` seconds to pick up tracepoints the application registers later.

Linux only; needs root (tracefs is root-only and system-wide tracepoint sampling
needs CAP_PERFMON or ``perf_event_paranoid`` <= -1).  Every failure to start is a
:class:`ListenError` with a message meant for a person.  The module imports on every OS
(the Linux-only :mod:`~structlog_etw.perf.perf_event_open` is loaded when listening starts).
Nothing here prints: :func:`run` hands events and loss reports to the caller's functions.
"""

from __future__ import annotations

import errno
import os
import select
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ..formats.eventheader import parse_tracepoint_name
from ..read.decoded import DecodedEvent, DecodeError
from ..read.live import (  # re-exported here; their home is structlog_etw.read.live
    ListenedEvent,
    LostEvents,
    pump,
)
from ._tracepoints import close_rings, open_on_rings, open_rings, unopened_tracepoints, user_event_names
from .abi import CLOCK_MONOTONIC, RecordType, SampleFormat
from .records import parse_lost, parse_sample
from .tracefs_format import eventheader_offset

if TYPE_CHECKING:
    from ..backends.user_events import UserEventsBackend
    from .perf_event_open import CpuRing

__all__ = [
    "DEFAULT_PAGES",
    "REORDER_WINDOW_NS",
    "SAMPLE_TYPE",
    "ListenError",
    "ListenedEvent",
    "Listener",
    "LostEvents",
    "decode",
    "match_tracepoint",
    "pump",
    "run",
]

#: Default data pages per CPU ring (a power of two).
DEFAULT_PAGES: Final = 64
#: Events younger than this (ns) wait one more round for earlier events from other CPUs' rings.
REORDER_WINDOW_NS: Final = 50_000_000
#: What the listener asks the kernel to put in every sample (the order is the kernel's).
SAMPLE_TYPE: Final = int(
    SampleFormat.IDENTIFIER | SampleFormat.TID | SampleFormat.TIME | SampleFormat.CPU | SampleFormat.RAW
)
_R_SAMPLE: Final = int(RecordType.SAMPLE)
_R_LOST: Final = int(RecordType.LOST)


class ListenError(Exception):
    """Listening cannot start (or go on); the message says why and what to do."""


def match_tracepoint(
    provider: str, name: str, level: int | None = None, keyword: int | None = None, group: str | None = None
) -> tuple[int, int] | None:
    """``(level, keyword)`` if ``name`` is one of ``provider``'s tracepoints passing the filters, else None.

    The name is read by :func:`~structlog_etw.formats.eventheader.parse_tracepoint_name` (the one
    parser of tracepoint names).  ``level``: only tracepoints at that level or more severe (lower
    numbers).  ``keyword``: only tracepoints whose keyword shares a bit with it, and keyword 0
    (as in ETW, an event without keywords passes every keyword filter).  ``group``: only that
    provider group (None: any group).
    """
    try:
        tp_provider, tp_level, tp_keyword, options = parse_tracepoint_name(name)
    except DecodeError:
        return None
    if tp_provider != provider:
        return None
    if group is not None and options != f"G{group}":
        return None
    if level is not None and tp_level > level:
        return None
    if keyword is not None and tp_keyword and not (tp_keyword & keyword):
        return None
    return tp_level, tp_keyword


@dataclass
class _Tracepoint:
    name: str
    id: int
    offset: int


def decode(raw: bytes, tracepoint: str) -> DecodedEvent:
    """Decode one EventHeader event of ``tracepoint`` with the project's decoder."""
    from ..read.decode.eventheader import decode_event  # noqa: PLC0415 - loaded with the first event

    result: DecodedEvent = decode_event(tracepoint, raw)
    return result


class Listener:
    """Live reader of one provider's user_events tracepoints.

    ``Listener("MyCompany_MyService", level=4)`` opens everything or raises
    :class:`ListenError`; :meth:`poll` returns what arrived; :meth:`close` (idempotent)
    closes every fd, unmaps the rings and drops the registrations it made.
    """

    def __init__(
        self,
        provider: str,
        *,
        level: int | None = None,
        keyword: int | None = None,
        group: str | None = None,
        pages: int = DEFAULT_PAGES,
        register: bool = True,
        rescan: float = 1.0,
        tracefs: str | None = None,
    ) -> None:
        self.provider = provider
        self.level = level
        self.keyword = keyword
        self.group = group
        self.rescan_interval = rescan
        self.events = 0
        self.lost = 0
        self.registered: list[str] = []
        self._rings: list[CpuRing] = []
        self._by_id: dict[int, _Tracepoint] = {}
        self._names: set[str] = set()
        self._backend: UserEventsBackend | None = None
        self._pending: list[ListenedEvent] = []
        # Per CPU: lost events seen in PERF_RECORD_LOST records, and already reported.
        self._lost_records: dict[int, int] = {}
        self._lost_reported: dict[int, int] = {}
        # Samples are stamped with CLOCK_MONOTONIC (CLOCK_REALTIME is refused for tracepoints:
        # not NMI-safe); this offset turns them into wall-clock time.
        self._wall_offset = time.time_ns() - time.monotonic_ns()
        self._next_scan = 0.0
        self._check_counters = False
        if pages < 1 or pages & (pages - 1):
            raise ListenError(f"--pages must be a power of two (got {pages})")
        self._pages = pages
        self.tracefs = tracefs or _require_tracefs()
        self._poll = select.poll()
        try:
            found = self._scan()
            if not found and register:
                self._register()
            self._open_rings()
            self._add(self._scan() if register else found)
        except BaseException:
            self.close()
            raise
        self._next_scan = time.monotonic() + rescan

    # -- set-up -------------------------------------------------------------------

    def _scan(self) -> dict[str, tuple[int, int]]:
        out = {}
        for name in user_event_names(self.tracefs, _denied):
            lk = match_tracepoint(self.provider, name, self.level, self.keyword, self.group)
            if lk is not None:
                out[name] = lk
        return out

    def _register(self) -> None:
        from ..backends.base import BackendUnavailable  # noqa: PLC0415
        from ..backends.user_events import UserEventsBackend  # noqa: PLC0415

        try:
            backend = self._backend = UserEventsBackend(self.provider, self.group)
        except BackendUnavailable as e:
            raise ListenError(f"cannot register {self.provider}'s tracepoints: {e}") from e
        keyword = self.keyword or 1
        for level in range(1, min(self.level or 5, 5) + 1):
            try:
                backend.open_slot(level, keyword)
            except OSError as e:
                raise ListenError(f"cannot register {self.provider} level {level}: {e}") from e
            self.registered.append(backend.tracepoint_name(level, keyword))

    def _open_rings(self) -> None:
        open_rings(
            self._rings, self._poll, self._pages, _fail, clockid=CLOCK_MONOTONIC, sample_type=SAMPLE_TYPE
        )

    def _add(self, names: dict[str, tuple[int, int]]) -> list[str]:
        added = []
        for name, tp_id, fmt in unopened_tracepoints(self.tracefs, names, self._names):
            try:
                offset = eventheader_offset(fmt)
            except ValueError:
                continue
            ids, everywhere = open_on_rings(self._rings, tp_id, _fail)
            for ident in ids:
                self._by_id[ident] = _Tracepoint(name, tp_id, offset)
            if everywhere:
                self._names.add(name)
                added.append(name)
        return added

    # -- reading ------------------------------------------------------------------

    @property
    def tracepoints(self) -> list[str]:
        """The tracepoints being listened to (sorted)."""
        return sorted(self._names)

    def rescan(self) -> list[str]:
        """Look for the provider's tracepoints registered since the last scan; return the new ones."""
        self._next_scan = time.monotonic() + self.rescan_interval
        self._check_counters = True
        return self._add(self._scan())

    def _new_lost(self, cpu: int, counted: int) -> LostEvents | None:
        total = max(self._lost_records.get(cpu, 0), counted)
        new = total - self._lost_reported.get(cpu, 0)
        if new <= 0:
            return None
        self._lost_reported[cpu] = total
        self.lost += new
        return LostEvents(cpu, new)

    def poll(self, timeout: float | None = 0.2) -> list[ListenedEvent | LostEvents]:
        """Wait up to ``timeout`` seconds for events; return those ready (maybe none).

        Also rescans tracefs when it is time to.  See :meth:`drain` for "ready".
        """
        if time.monotonic() >= self._next_scan:
            self.rescan()
        wait = self._next_scan - time.monotonic()
        if timeout is not None:
            wait = min(wait, timeout)
        if self._pending:
            wait = min(wait, 2 * REORDER_WINDOW_NS / 1e9)
        self._poll.poll(max(0, int(wait * 1000)))
        return self.drain()

    def drain(self, flush: bool = False) -> list[ListenedEvent | LostEvents]:
        """What is in the rings now, without waiting: lost-event reports, then events in time order.

        Each CPU has its own ring, and a thread moving between CPUs writes into several, so
        events are merged by timestamp.  An event stamped less than :data:`REORDER_WINDOW_NS`
        before this call started may still have an earlier companion on its way into another
        ring: it is held back until the next call (``flush=True``: everything now).
        """
        cutoff = time.monotonic_ns() - REORDER_WINDOW_NS
        lost: list[ListenedEvent | LostEvents] = []
        pending = self._pending
        counters = flush or self._check_counters
        self._check_counters = False
        for ring in self._rings:
            got_lost = False
            for rtype, _misc, body in ring.ring.read():
                if rtype == _R_SAMPLE:
                    item = self._sample(body)
                    if item is not None:
                        pending.append(item)
                elif rtype == _R_LOST:
                    try:
                        _ident, count = parse_lost(body)
                    except ValueError:
                        continue
                    self._lost_records[ring.cpu] = self._lost_records.get(ring.cpu, 0) + count
                    got_lost = True
            if got_lost or counters:
                # The kernel's per-event counters also hold losses not yet written as records.
                report = self._new_lost(ring.cpu, ring.lost_samples() if counters else 0)
                if report is not None:
                    lost.append(report)
        if not pending:
            return lost
        pending.sort(key=_time_key)
        if flush:
            ready, self._pending = pending, []
        else:
            n = 0
            while n < len(pending) and _time_key(pending[n]) < cutoff:
                n += 1
            ready, self._pending = pending[:n], pending[n:]
        self.events += len(ready)
        return [*lost, *ready]

    def _sample(self, body: bytes) -> ListenedEvent | None:
        try:
            sample = parse_sample(body, SAMPLE_TYPE)
        except ValueError:
            return None
        tp = self._by_id.get(sample.id) if sample.id is not None else None
        if tp is None:
            return None
        raw = sample.raw[tp.offset :]
        wall = None if sample.time is None else sample.time + self._wall_offset
        where = (tp.name, sample.time, wall, sample.cpu, sample.pid, sample.tid)
        try:
            decoded = decode(raw, tp.name)
        except Exception as e:
            return ListenedEvent(*where, None, str(e), raw)
        return ListenedEvent(*where, decoded, None, raw)

    def close(self) -> None:
        """Close every perf fd, unmap the rings, drop our registrations (idempotent)."""
        rings, self._rings = self._rings, []
        close_rings(rings, self._poll)
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _time_key(ev: ListenedEvent) -> int:
    return ev.time_ns if ev.time_ns is not None else 0


def _require_tracefs() -> str:
    """:func:`~structlog_etw.backends.user_events.find_tracefs`'s answer, or a ListenError saying why none."""
    if not sys.platform.startswith("linux"):
        raise ListenError(f"listen needs Linux with user_events (this is {sys.platform})")
    from ..backends.user_events import find_tracefs  # noqa: PLC0415

    found = find_tracefs()
    if found is not None:
        return found
    default = "/sys/kernel/tracing"
    if os.geteuid() != 0 and os.path.isdir(default) and not os.access(default, os.R_OK | os.X_OK):
        raise ListenError(f"permission denied: {default} is readable by root only; run listen as root")
    release = os.uname().release
    raise ListenError(
        f"no user_events on this kernel ({release}): no tracefs with user_events_data "
        "(needs Linux 6.4+ with CONFIG_USER_EVENTS=y and tracefs mounted at /sys/kernel/tracing)"
    )


def _denied(directory: str) -> ListenError:
    return ListenError(f"permission denied reading {directory}: listen needs root")


def _fail(e: OSError) -> ListenError:
    return ListenError(_perf_error_message(e))


def _perf_error_message(e: OSError) -> str:
    if e.errno in (errno.EACCES, errno.EPERM):
        try:
            with open("/proc/sys/kernel/perf_event_paranoid") as f:
                paranoid = f.read().strip()
        except OSError:
            paranoid = "?"
        return (
            f"permission denied opening perf events ({os.strerror(e.errno)}): listen needs root or "
            f"CAP_PERFMON (kernel.perf_event_paranoid is {paranoid})"
        )
    if e.errno == errno.ENOSYS:
        return f"perf events are not available: {e}"
    return f"perf_event_open failed: {e}"


def run(
    listener: Listener,
    emit: Callable[[ListenedEvent], None],
    lost: Callable[[LostEvents], None],
    *,
    count: int | None = None,
    duration: float | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """Feed ``listener``'s events to ``emit`` until ``count`` events, ``duration`` seconds, or ``stop()``.

    Also when interrupted (KeyboardInterrupt, or an exception a signal handler raises), what
    is already in the rings is shown before the exception goes on.  Returns the number of
    events emitted.
    """
    return pump(  # the read loop every live source shares (structlog_etw.read.live)
        listener.poll,
        lambda: listener.drain(flush=True),
        emit,
        lost,
        count=count,
        duration=duration,
        stop=stop,
    )
