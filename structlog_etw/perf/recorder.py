"""Recording a provider's user_events into perf.data, with no perf binary (``structlog-etw record``).

A :class:`Recorder` finds the provider's tracepoints in tracefs, registers the ones missing
(levels 1..``level`` for each keyword: the ``-k`` keywords, else those the provider has
registered plus the default keyword 1) and holds them while it records, so recording can start
before the application.  It opens every tracepoint on every online CPU with
``perf_event_open`` (one ring buffer per CPU, :mod:`~structlog_etw.perf.perf_event_open`),
copies the kernel's records out of the rings as they are into a
:class:`~structlog_etw.perf.datawriter.PerfDataWriter`, and ends every pass over the CPUs that
wrote something with a FINISHED_ROUND, so readers can sort by time in bounded memory.

Samples carry identifier, tid, time (CLOCK_MONOTONIC), cpu and the raw tracepoint data, and
the kernel's LOST records carry the same id fields (``sample_id_all``).  Losses the kernel has
counted but not yet written as a LOST record (it writes one when an event fits again) are
written as one more LOST record per CPU when recording stops, so the file's LOST records add up
to ``Recorder.lost``.

Tracepoints of the provider registered while recording are picked up every ``rescan``
seconds when writing a file; a pipe's events are fixed when it starts (its readers read the
descriptions before the first sample), so there the tracepoints are those present at the start
(the recorder registers the default ones itself).

Linux only (the system calls are imported when recording starts); root, or CAP_PERFMON with
access to tracefs (``structlog-etw doctor`` says what is missing).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import select
import struct
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ._tracepoints import close_rings, open_on_rings, open_rings, unopened_tracepoints, user_event_names
from .abi import CLOCK_MONOTONIC, RecordType
from .datawriter import EventDescription, MachineInfo, PerfDataWriter, TracingHeaders
from .listener import DEFAULT_PAGES, SAMPLE_TYPE, match_tracepoint
from .records import parse_lost

if TYPE_CHECKING:
    from ..backends.user_events import UserEventsBackend
    from .perf_event_open import CpuRing

__all__ = ["DEFAULT_PAGES", "SAMPLE_TYPE", "RecordError", "Recorder"]

_R_SAMPLE: Final = int(RecordType.SAMPLE)
_R_LOST: Final = int(RecordType.LOST)
#: SAMPLE_TYPE's fixed fields: identifier, pid/tid, time (where a sample's time is).
_SAMPLE_TIME: Final = struct.Struct("=8x8xQ")
#: A LOST record written at the end: id, count, then the sample_id fields of SAMPLE_TYPE
#: (pid, tid, time, cpu, reserved, identifier; the kernel's order).
_LOST_BODY: Final = struct.Struct("=QQIIQIIQ")


class RecordError(Exception):
    """Recording cannot start (or go on); the message says why and what to do."""


class Recorder:
    """One provider's tracepoints recorded into ``writer`` (see the module docstring).

    ``keywords``: record exactly these keywords' tracepoints (None: every keyword).  ``level``:
    levels 1..``level`` (None: 1..5).  Opening registers and opens everything or raises
    :class:`RecordError`; :meth:`poll` copies what arrived; :meth:`stop` drains, writes the
    remaining losses and finalizes the file; :meth:`close` releases everything (idempotent).
    """

    def __init__(
        self,
        provider: str,
        writer: PerfDataWriter,
        *,
        keywords: list[int] | None = None,
        level: int | None = None,
        group: str | None = None,
        pages: int = DEFAULT_PAGES,
        register: bool = True,
        rescan: float = 1.0,
        tracefs: str | None = None,
        cmdline: list[str] | None = None,
    ) -> None:
        self.provider = provider
        self.writer = writer
        self.keywords = sorted(set(keywords)) if keywords else None
        self.level = level or 5
        self.group = group
        self.rescan_interval = rescan
        self.events = 0
        self.lost = 0
        self.registered: list[str] = []
        self.warnings: list[str] = []
        self._rings: list[CpuRing] = []
        self._names: dict[str, EventDescription] = {}
        self._known_ids: set[int] = set()
        self._lost_records: dict[int, int] = {}
        self._backend: UserEventsBackend | None = None
        self._poll = select.poll()
        self._closed = False
        if pages < 1 or pages & (pages - 1):
            raise RecordError(f"--pages must be a power of two (got {pages})")
        self._pages = pages
        self.tracefs = tracefs or _require_tracefs()
        try:
            found = self._scan()
            if register:
                self._register(found)
                found = self._scan()
            self._open_rings()
            self._describe_machine(cmdline or [])
            self._add(found)
            writer.start()
        except BaseException:
            self.close()
            raise
        self._next_scan = time.monotonic() + rescan

    # -- set-up -------------------------------------------------------------------

    def _matches(self, name: str) -> tuple[int, int] | None:
        lk = match_tracepoint(self.provider, name, self.level, None, self.group)
        if lk is None or (self.group is None and not _no_options(name, self.provider)):
            return None
        if self.keywords is not None and lk[1] not in self.keywords:
            return None
        return lk

    def _scan(self) -> dict[str, tuple[int, int]]:
        out = {}
        for name in user_event_names(self.tracefs, _denied):
            lk = self._matches(name)
            if lk is not None:
                out[name] = lk
        return out

    def _register(self, found: dict[str, tuple[int, int]]) -> None:
        """Register what is missing of levels 1..level x the keywords (see the class docstring)."""
        keywords = (
            self.keywords if self.keywords is not None else sorted({1, *(k for _, k in found.values())})
        )
        wanted = [(lv, kw) for kw in keywords for lv in range(1, self.level + 1)]
        from ..backends.base import BackendUnavailable  # noqa: PLC0415
        from ..backends.user_events import UserEventsBackend  # noqa: PLC0415

        backend = None
        for lv, kw in wanted:
            if backend is None:
                try:
                    backend = self._backend = UserEventsBackend(self.provider, self.group)
                except BackendUnavailable as e:
                    raise RecordError(f"cannot register {self.provider}'s tracepoints: {e}") from e
            name = backend.tracepoint_name(lv, kw)
            try:
                backend.open_slot(lv, kw)
            except OSError as e:
                if name in found:
                    continue
                raise RecordError(f"cannot register {name}: {e.strerror or e}") from e
            if name not in found:
                self.registered.append(name)

    def _open_rings(self) -> None:
        open_rings(
            self._rings,
            self._poll,
            self._pages,
            _fail,
            clockid=CLOCK_MONOTONIC,
            sample_type=SAMPLE_TYPE,
            sample_id_all=True,
        )

    def _describe_machine(self, cmdline: list[str]) -> None:
        w = self.writer
        events = os.path.join(self.tracefs, "events")
        try:
            with open(os.path.join(events, "header_page"), "rb") as f:
                page = f.read(1 << 16)
            with open(os.path.join(events, "header_event"), "rb") as f:
                event = f.read(1 << 16)
        except OSError as e:
            raise RecordError(f"cannot read {events}/header_page: {e.strerror or e}") from e
        w.tracing = TracingHeaders(page, event, mmap.PAGESIZE, struct.calcsize("l"))
        uts = os.uname()
        wall, mono = _clock_pair()
        w.machine = MachineInfo(
            hostname=uts.nodename,
            osrelease=uts.release,
            version=uts.version,
            arch=uts.machine,
            cpus_online=len(self._rings),
            cpus_available=os.cpu_count() or len(self._rings),
            cmdline=cmdline,
            clockid=CLOCK_MONOTONIC,
            wall_ns=wall,
            clock_ns=mono,
        )

    def _add(self, names: dict[str, tuple[int, int]]) -> list[str]:
        added: list[str] = []
        if not self._rings:
            return added
        for name, tp_id, fmt in unopened_tracepoints(self.tracefs, names, self._names):
            ids, everywhere = open_on_rings(self._rings, tp_id, _fail)
            if everywhere:
                attr = bytes(self._rings[0].tracepoint_attr(tp_id))
                ev = EventDescription(f"user_events:{name}", attr, ids, fmt)
                self._names[name] = ev
                self._known_ids.update(ids)
                self.writer.add_event(ev)
                added.append(name)
        return added

    # -- recording ----------------------------------------------------------------

    @property
    def tracepoints(self) -> list[str]:
        """The tracepoints being recorded (sorted)."""
        return sorted(self._names)

    def rescan(self) -> list[str]:
        """Open the provider's tracepoints registered since the last scan (a file only); the new ones."""
        self._next_scan = time.monotonic() + self.rescan_interval
        if self.writer.pipe:
            return []
        return self._add(self._scan())

    def poll(self, timeout: float = 0.2) -> int:
        """Wait up to ``timeout`` seconds for records, copy every CPU's into the file; the number copied."""
        if time.monotonic() >= self._next_scan:
            self.rescan()
        wait = max(0.0, min(timeout, self._next_scan - time.monotonic()))
        self._poll.poll(int(wait * 1000))
        return self.drain()

    def drain(self) -> int:
        """Copy what every CPU's ring holds now, then a FINISHED_ROUND if anything was copied."""
        writer = self.writer
        copied = 0
        for ring in self._rings:
            for rtype, misc, body in ring.ring.read():
                writer.write_record(rtype, misc, body)
                copied += 1
                if rtype == _R_SAMPLE:
                    self.events += 1
                    if len(body) >= _SAMPLE_TIME.size:
                        writer.note_time(_SAMPLE_TIME.unpack_from(body)[0])
                elif rtype == _R_LOST:
                    with contextlib.suppress(ValueError):
                        count = parse_lost(body)[1]
                        self._lost_records[ring.cpu] = self._lost_records.get(ring.cpu, 0) + count
                        self.lost += count
        if copied:
            writer.finished_round()
        return copied

    def _write_counted_losses(self) -> None:
        """LOST records for what the kernel counted but has not written (see the module docstring)."""
        pid_tid = 0xFFFFFFFF
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        wrote = False
        for ring in self._rings:
            missing = ring.lost_samples() - self._lost_records.get(ring.cpu, 0)
            if missing <= 0 or not ring.fds:
                continue
            ident = next((i for i in self._names_ids(ring)), 0)
            body = _LOST_BODY.pack(ident, missing, pid_tid, pid_tid, now, ring.cpu, 0, ident)
            self.writer.write_record(_R_LOST, 0, body)
            self._lost_records[ring.cpu] = self._lost_records.get(ring.cpu, 0) + missing
            self.lost += missing
            wrote = True
        if wrote:
            self.writer.finished_round()

    def _names_ids(self, ring: CpuRing) -> list[int]:
        index = self._rings.index(ring)
        return [ev.ids[index] for ev in self._names.values() if index < len(ev.ids)]

    def stop(self) -> None:
        """Drain the rings, write the losses still unwritten, finalize the file, release everything."""
        if self._closed:
            return
        try:
            self.drain()
            self._write_counted_losses()
            self.writer.close()
        finally:
            self.close()

    def close(self) -> None:
        """Close every perf fd, unmap the rings, drop our registrations (idempotent; a file that
        was not finalized by :meth:`stop` is removed)."""
        self._closed = True
        rings, self._rings = self._rings, []
        close_rings(rings, self._poll)
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()
        if not self.writer.closed:
            self.writer.abort()

    def run(
        self,
        *,
        stop: Callable[[], bool] = lambda: False,
        duration: float | None = None,
        progress: Callable[[Recorder], None] | None = None,
    ) -> None:
        """Record until ``stop()`` or ``duration`` seconds, then :meth:`stop`.

        ``progress(self)`` runs after each poll (the counters are ``events``, ``lost``
        and the writer's ``data_bytes``).
        """
        end = None if duration is None else time.monotonic() + duration
        try:
            while not stop():
                left = 0.2 if end is None else min(0.2, end - time.monotonic())
                if left <= 0:
                    break
                self.poll(left)
                if progress is not None:
                    progress(self)
        finally:
            self.stop()


def _no_options(name: str, provider: str) -> bool:
    """A tracepoint of the provider without a G<group> option (``Provider_L4K1``)."""
    tail = name[len(provider) + 1 :]
    return "G" not in tail


def _clock_pair() -> tuple[int, int]:
    """The wall clock and CLOCK_MONOTONIC at (nearly) the same instant: the narrowest of three tries."""
    best = None
    for _ in range(3):
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        wall = time.time_ns()
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or after - before < best[0]:
            best = (after - before, wall, (before + after) // 2)
    assert best is not None
    return best[1], best[2]


def _require_tracefs() -> str:
    if not sys.platform.startswith("linux"):
        raise RecordError(f"record needs Linux with user_events (this is {sys.platform})")
    from ..backends.user_events import find_tracefs  # noqa: PLC0415

    found = find_tracefs()
    if found is None:
        raise RecordError(
            "no user_events on this kernel (no tracefs with user_events_data): run structlog-etw doctor"
        )
    return found


def _denied(directory: str) -> RecordError:
    return RecordError(
        f"permission denied reading {directory}: record needs root or access to tracefs "
        "(structlog-etw doctor says what is missing)"
    )


def _fail(e: OSError) -> RecordError:
    return RecordError(_perf_error_message(e))


def _perf_error_message(e: OSError) -> str:
    if e.errno in (errno.EACCES, errno.EPERM):
        return (
            f"permission denied opening perf events ({os.strerror(e.errno)}): record needs root or "
            "CAP_PERFMON with kernel.perf_event_paranoid low enough (structlog-etw doctor names the fix)"
        )
    return f"perf_event_open failed: {e}"
