"""Threads hammering one provider: every count exact, every cache within its bounds, on every
interpreter (the GIL's, and free-threaded 3.14t in the release workflow, where nothing
serialises the threads).  docs/reliability.md lists what relied on the GIL and how each place is
safe without it; these tests hold each of them."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from structlog_etw import get_provider
from structlog_etw._util.counters import FREE_THREADED, Count, Tally, TryLock
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.provider._provider import set_backend_factory
from structlog_etw.testing import isolated_providers
from structlog_etw.write import shapes as _shapes
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.eventheader._codec import CODEC

THREADS = 8


def _run(threads: int, work: Callable[[int], None]) -> None:
    """``work(i)`` in ``threads`` threads started together; re-raises the first failure."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        start.wait()
        try:
            work(i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # with a GIL: switch threads as often as the interpreter can
    try:
        pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        sys.setswitchinterval(old)
    if errors:
        raise errors[0]


class _Full(CaptureBackend):
    """Records events, but refuses (ENOSPC, as a full buffer does) those named ``full``."""

    def write(self, slot: Any, event: Any, *args: Any) -> int:
        if isinstance(event, bytes) and b"full\0" in event:
            return errno.ENOSPC
        return super().write(slot, event, *args)


@pytest.fixture
def captures() -> Iterator[dict[str, CaptureBackend]]:
    """Providers made in the test write to a :class:`_Full` each, by name."""
    made: dict[str, CaptureBackend] = {}

    def factory(name: str, group: str | None, provider_id: uuid.UUID) -> CaptureBackend:
        made[name] = _Full(name, group)
        return made[name]

    with isolated_providers():
        set_backend_factory(factory)
        yield made


@pytest.mark.parametrize("per_thread", [True, False], ids=["per-thread", "shared"])
def test_a_count_loses_nothing_under_threads(per_thread: bool) -> None:
    """Both kinds of :class:`Count` (per-thread summed on read: a free-threaded build's; one shared
    :func:`itertools.count`: a GIL build's) count every add of 8 threads exactly."""
    count = Count(per_thread)
    _run(THREADS, lambda i: [count.add() for _ in range(20000)] and None)
    assert count.value() == THREADS * 20000


def test_the_count_is_per_thread_where_the_gil_is_off() -> None:
    """A count made with no choice is per-thread on a free-threaded build, shared with the GIL."""
    assert (Count()._tables is not None) is FREE_THREADED


def test_the_build_check_is_the_build_variable() -> None:
    """:data:`FREE_THREADED` (read from the ABI flags without importing ``sysconfig``) is the
    build's ``Py_GIL_DISABLED``; where the ABI flags say it, importing the counters loads no
    ``sysconfig``."""
    import sysconfig  # noqa: PLC0415

    assert FREE_THREADED is bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    code = (
        "import sys; before = 'sysconfig' in sys.modules; import structlog_etw._util.counters; "
        "print(not before and 'sysconfig' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    if isinstance(getattr(sys, "abiflags", None), str):
        assert out.strip() == "False"  # the import loaded no sysconfig of its own


def test_a_tally_counts_each_thread_in_a_table_of_its_own() -> None:
    """Each thread adds to its own table (no counter is shared by two threads, so none is fought
    over), and the snapshot sums them: exact for every reason."""
    tally = Tally()

    def work(i: int) -> None:
        for n in range(5000):
            tally.add("all")
            tally.add(f"t{i}")
            if n % 2:
                tally.add("odd")

    _run(THREADS, work)
    assert len(tally._tables) == THREADS
    counters = [id(c) for table in tally._tables.values() for c in table.values()]
    assert len(counters) == len(set(counters))
    want = {"all": THREADS * 5000, "odd": THREADS * 2500, **{f"t{i}": 5000 for i in range(THREADS)}}
    assert tally.snapshot() == want and tally.total() == sum(want.values())


def test_threads_hammering_one_provider_count_exactly(captures: dict[str, CaptureBackend]) -> None:
    """8 threads write through one provider at once: hot shapes (compiled packer or generated
    function), new shapes (the shape cache and the compile budget), events the backend refuses
    (an error count) and drops counted by the application: ``written`` is the number written and
    recorded, ``errors`` the number refused, ``dropped`` the number dropped, exactly."""
    provider = get_provider("Co_Threads")
    slot = provider.slot(4, 1)
    per_thread = 1500

    def work(t: int) -> None:
        for i in range(per_thread):
            if i % 50 == 49:
                assert provider.write_dict(slot, "full", {"t": t}, None) is False
            elif i % 50 == 48:
                provider.count_dropped("sampled_out")
            elif i % 7 == 0:
                assert provider.write_dict(slot, f"new{t}_{i}", {f"k{i % 13}": i, "t": t}, None)
            else:
                assert provider.write_dict(slot, "hot", {"t": t, "i": i, "f": 0.5, "s": "é"}, None)

    _run(THREADS, work)
    stats = provider.stats()
    refused = dropped = THREADS * (per_thread // 50)
    assert stats["written"] == THREADS * per_thread - refused - dropped
    assert sum(stats["errors"].values()) == refused and len(stats["errors"]) == 1, stats["errors"]
    assert stats["dropped"] == {"sampled_out": dropped}
    assert len(captures["Co_Threads"].records) == stats["written"]


def test_shared_encoder_caches_stay_bounded_under_threads() -> None:
    """One encoder's shape cache and compiled-layout table, hit by 8 threads with more shapes than
    they may hold: within their count and byte bounds afterwards, and every event still encodes
    to the general route's bytes."""
    encoder = EventHeaderEncoder(cache_limit=16, cache_bytes=16 << 10)
    reference = EventHeaderEncoder()
    from structlog_etw.write.fields import dict_fields  # noqa: PLC0415

    def work(t: int) -> None:
        for i in range(3000):
            event: dict[str, Any] = {f"k{(i + t) % 40}": i, "s": "v"}
            got = encoder.encode_dict(f"e{i % 50}", event, None)
            want = reference.encode_fields(f"e{i % 50}", dict_fields(event.items(), None))
            assert got == want

    _run(THREADS, work)
    for cache in (encoder._shapes, encoder._plans):
        assert cache.bytes <= cache.max_bytes
        assert len(cache.first) <= cache.max_entries and len(cache.by_class) <= cache.max_entries
    functions: _shapes.LayoutFunctions = CODEC.functions
    assert functions.compiled() <= functions.max_entries
    assert functions.held_bytes <= functions.max_bytes
    assert 0 <= functions._credit <= _shapes.CREDIT_CAP


def test_a_try_lock_never_waits_and_is_free_in_a_fork_child() -> None:
    """The caches' bookkeeping lock: taken, a second ``acquire()`` (another thread, or a handler
    of the holder's own thread) returns False at once; in a fork child it is free again."""
    lock = TryLock()
    assert lock.acquire()
    got: list[bool] = []
    other = threading.Thread(target=lambda: got.append(lock.acquire()))
    other.start()
    other.join(30)
    assert got == [False] and lock.acquire() is False
    if hasattr(os, "fork"):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0 if lock.acquire() else 1)
        assert os.waitpid(pid, 0)[1] == 0
    lock.release()
    assert lock.acquire()
    lock.release()
