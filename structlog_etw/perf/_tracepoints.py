"""A provider's user_events tracepoints found in tracefs and opened on every CPU's ring: the steps the
:class:`~structlog_etw.perf.listener.Listener` and the :class:`~structlog_etw.perf.recorder.Recorder`
share (one scan of ``events/user_events``, one way to read a tracepoint's id and format and open it).

Each caller keeps its own words: ``fail`` turns a ``perf_event_open`` error into the caller's
exception (:class:`~structlog_etw.perf.listener.ListenError`,
:class:`~structlog_etw.perf.recorder.RecordError`).
The module imports on every OS; :mod:`~structlog_etw.perf.perf_event_open` (Linux only) is
imported when a ring or a tracepoint is opened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterable, Iterator

    from .perf_event_open import CpuRing


#: At most this much of a tracepoint's ``format`` file is read (a real one is a few hundred bytes).
FORMAT_LIMIT = 1 << 20


def user_event_names(tracefs: str, denied: Callable[[str], Exception]) -> list[str]:
    """The names in tracefs ``events/user_events`` (none when it is absent); ``denied(directory)``
    is raised when it may not be read."""
    directory = os.path.join(tracefs, "events", "user_events")
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []
    except PermissionError as e:
        raise denied(directory) from e


def open_rings(
    rings: list[CpuRing],
    poll: select.poll,
    pages: int,
    fail: Callable[[OSError], Exception],
    *,
    clockid: int,
    sample_type: int,
    sample_id_all: bool = False,
) -> None:
    """A ring per online CPU appended to ``rings`` (so the caller closes those opened before a failure)
    and registered with ``poll``."""
    from .perf_event_open import CpuRing, PerfError, online_cpus  # noqa: PLC0415 - Linux only

    for cpu in online_cpus():
        try:
            ring = CpuRing(cpu, pages, clockid=clockid, sample_type=sample_type, sample_id_all=sample_id_all)
        except PerfError as e:
            raise fail(e) from e
        rings.append(ring)
        poll.register(ring.fd, select.POLLIN)


class TracepointFiles(NamedTuple):
    """A user_events tracepoint's name and its tracefs ``id`` and ``format``."""

    name: str
    id: int
    format: str


def unopened_tracepoints(
    tracefs: str, names: Iterable[str], opened: Container[str]
) -> Iterator[TracepointFiles]:
    """The tracepoints of ``names`` not in ``opened``, sorted, with their ``id`` and ``format``; one
    whose files cannot be read is passed over (deleted between listing and reading: the next scan
    decides)."""
    for name in sorted(names):
        if name in opened:
            continue
        base = os.path.join(tracefs, "events", "user_events", name)
        try:
            with open(os.path.join(base, "id")) as f:
                tp_id = int(f.read().strip())
            with open(os.path.join(base, "format")) as f:
                fmt = f.read(FORMAT_LIMIT)
        except (OSError, ValueError):
            continue
        yield TracepointFiles(name, tp_id, fmt)


def open_on_rings(
    rings: list[CpuRing], tp_id: int, fail: Callable[[OSError], Exception]
) -> tuple[list[int], bool]:
    """Tracepoint ``tp_id`` opened on each ring: the sample identifiers, and whether every ring has it
    (False: the tracepoint went away meanwhile; the identifiers are those opened before)."""
    from .perf_event_open import PerfError  # noqa: PLC0415 - Linux only

    ids = []
    for ring in rings:
        try:
            ids.append(ring.add_tracepoint(tp_id))
        except PerfError as e:
            if e.errno == errno.ENOENT:
                return ids, False
            raise fail(e) from e
    return ids, True


def close_rings(rings: list[CpuRing], poll: select.poll) -> None:
    """Each ring unregistered from ``poll`` and closed (its tracepoint descriptors, its mapping)."""
    for ring in rings:
        with contextlib.suppress(KeyError, ValueError):
            poll.unregister(ring.fd)
        ring.close()
