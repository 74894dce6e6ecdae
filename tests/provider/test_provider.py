"""Provider: registry, slots, backend switching, stats by reason, never raising, thread safety."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from structlog_etw import Provider, close_all, get_provider
from structlog_etw.backends.base import BackendUnavailable
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.backends.null import NullBackend
from structlog_etw.provider import _platform, _provider
from structlog_etw.provider._provider import set_backend_factory
from structlog_etw.provider._registry import REGISTRY
from structlog_etw.testing import isolated_providers
from structlog_etw.write.fields import I64, STR, Field
from tests.helpers.eventheader_reader import parse
from tests.helpers.forking import fork_child, wait_child


class _Capture(CaptureBackend):
    """A capture backend that also lists every (level, keyword) it was asked to register."""

    def __init__(self, name: str, group: str | None) -> None:
        super().__init__(name, group)
        self.opened: set[tuple[int, int]] = set()

    def open_slot(self, level: int, keyword: int) -> Any:
        self.opened.add((level, keyword))
        return super().open_slot(level, keyword)


@pytest.fixture
def captures() -> Iterator[dict[str, _Capture]]:
    """Every provider created in the test writes to a CaptureBackend, keyed by provider name."""
    made: dict[str, _Capture] = {}

    def factory(name: str, group: str | None, provider_id: uuid.UUID) -> _Capture:
        made[name] = _Capture(name, group)
        return made[name]

    with isolated_providers():  # a test's close_all() closes only the test's providers
        set_backend_factory(factory)
        yield made


FIELDS: list[Field] = [("user", STR, "ann"), ("n", I64, 3)]


def test_same_name_gives_the_same_provider(captures: dict[str, _Capture]) -> None:
    """get_provider returns the same object for the same name, whatever keywords, and another for another."""
    a = get_provider("Co_Svc")
    b = get_provider("Co_Svc", keywords=(0x8,))
    assert a is b
    assert get_provider("Co_Other") is not a


def test_conflicting_group_is_a_clear_value_error(captures: dict[str, _Capture]) -> None:
    """Asking a provider for a different group raises ValueError; group=None accepts the one it has."""
    get_provider("Co_Svc", group="g1")
    with pytest.raises(ValueError, match="group"):
        get_provider("Co_Svc", group="g2")
    assert get_provider("Co_Svc").group == "g1"
    assert get_provider("Co_Svc", group=None).group == "g1"  # None: whatever it has
    get_provider("Co_Plain")
    with pytest.raises(ValueError, match="group"):
        get_provider("Co_Plain", group="g1")


def test_invalid_provider_name_raises_at_setup(captures: dict[str, _Capture]) -> None:
    """A name outside A-Za-z0-9_ or a negative keyword raises ValueError when the provider is made."""
    with pytest.raises(ValueError, match="A-Za-z0-9_"):
        get_provider("bad name")
    with pytest.raises(ValueError, match="keyword"):
        get_provider("Co_Svc", keywords=(-1,))


def test_default_and_declared_keywords_are_registered_at_levels_1_to_5(
    captures: dict[str, _Capture],
) -> None:
    """Default and declared keywords are registered at levels 1-5 up front, also when declared later."""
    get_provider("Co_Svc", default_keyword=0x1, keywords=(0x2, 0x4))
    opened = set(captures["Co_Svc"]._words)
    assert opened == {(lv, kw) for lv in range(1, 6) for kw in (0x1, 0x2, 0x4)}
    get_provider("Co_Svc", keywords=(0x10,))
    assert {(lv, 0x10) for lv in range(1, 6)} <= set(captures["Co_Svc"]._words)


def test_write_hands_encoded_bytes_to_the_backend_and_counts_written(
    captures: dict[str, _Capture],
) -> None:
    """write() hands the backend the encoded event on its level/keyword tracepoint and counts it written."""
    p = get_provider("Co_Svc")
    assert p.write(p.slot(4, 1), "login", FIELDS) is True
    (rec,) = captures["Co_Svc"].records
    assert rec.tracepoint == "Co_Svc_L4K1"
    assert parse(rec.event).values() == {"user": "ann", "n": 3}
    assert p.stats()["written"] == 1


def test_disabled_slot_is_not_written_and_counted_not_enabled(captures: dict[str, _Capture]) -> None:
    """A write to a disabled level returns False, reaches no backend and is counted not_enabled."""
    p = get_provider("Co_Svc")
    captures["Co_Svc"].set_enabled(False, level=5)
    assert p.enabled(5, 1) is False
    assert p.write(p.slot(5, 1), "dbg", FIELDS) is False
    assert p.write(p.slot(4, 1), "inf", FIELDS) is True
    assert p.stats()["dropped"] == {"not_enabled": 1}
    assert [r.tracepoint for r in captures["Co_Svc"].records] == ["Co_Svc_L4K1"]


def test_enablement_change_is_seen_through_the_cached_slot(captures: dict[str, _Capture]) -> None:
    """A slot taken once sees the backend's later enable and disable through its word."""
    p = get_provider("Co_Svc")
    slot = p.slot(3, 0x40)
    assert slot.word[0]
    captures["Co_Svc"].set_enabled(False, keyword=0x40)
    assert not slot.word[0]
    captures["Co_Svc"].set_enabled(True, level=3, keyword=0x40)
    assert slot.word[0]


def test_too_large_and_encode_errors_are_counted_not_raised(
    captures: dict[str, _Capture], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An oversized event and an encoder exception each return False and are counted, never raised."""
    p = get_provider("Co_Svc")
    many: list[Field] = [(f"f{i:06d}_padding_padding", I64, i) for i in range(600)]
    assert p.write(p.slot(4, 1), "big", many) is False
    assert p.stats()["dropped"] == {"too_large": 1}

    def broken(*args: Any) -> bytes:
        raise RuntimeError("an encoder bug")

    # the write path binds the encoder's methods when it is installed: patch the one in use
    monkeypatch.setattr(p._path, "encode_fields", broken)
    assert p.write(p.slot(4, 1), "bug", FIELDS) is False
    assert p.stats()["dropped"] == {"too_large": 1, "encode_error": 1}
    assert captures["Co_Svc"].records == []


def test_a_value_that_does_not_fit_its_kind_is_written_as_its_text(
    captures: dict[str, _Capture],
) -> None:
    """A value that does not fit its field kind is written as its text, not counted as a drop."""
    # The encoders' error contract (docs/limits.md): not an encode_error, the value's text.
    p = get_provider("Co_Svc")
    assert p.write(p.slot(4, 1), "bad", [("x", I64, "not an int"), ("n", I64, 3)]) is True
    assert p.stats()["dropped"] == {}
    (record,) = captures["Co_Svc"].records
    assert parse(record.event).values() == {"x": "not an int", "n": 3}


def test_truncated_events_are_counted(captures: dict[str, _Capture]) -> None:
    """A string too long for the event is written truncated and counted in stats()["truncated"]."""
    p = get_provider("Co_Svc")
    assert p.write(p.slot(4, 1), "long", [("s", STR, "x" * 20000)]) is True
    assert p.stats()["truncated"] == 1


def test_backend_error_codes_are_counted_by_name(captures: dict[str, _Capture]) -> None:
    """A write the backend fails with an OS error returns False and is counted under the errno name."""
    p = get_provider("Co_Svc")
    slot = p.slot(4, 1)
    captures["Co_Svc"].close()  # the session went away after the enable check...
    slot.word = [1]  # ...as if the word was read just before
    assert p.write(slot, "late", FIELDS) is False
    assert p.stats()["errors"] == {"EBADF": 1}


def test_closed_provider_counts_writes_as_closed_and_disables_slots(
    captures: dict[str, _Capture],
) -> None:
    """close() disables slots, counts later writes closed, and the next lookup makes a new provider."""
    p = get_provider("Co_Svc")
    slot = p.slot(4, 1)
    p.close()
    assert not slot.enabled
    assert p.write(slot, "after", FIELDS) is False
    assert p.stats()["dropped"] == {"closed": 1}
    assert p.stats()["closed"] is True
    assert get_provider("Co_Svc") is not p  # a closed provider is replaced on the next lookup


def test_close_all_closes_every_provider(captures: dict[str, _Capture]) -> None:
    """close_all() closes every registered provider, whose writes then return False."""
    a, b = get_provider("Co_A"), get_provider("Co_B")
    close_all()
    assert a.closed and b.closed
    assert a.write(a.slot(4, 1), "x", FIELDS) is False


def test_backend_factory_switch_keeps_slot_objects_valid() -> None:
    """Switching the backend factory keeps the same slot objects, now following the new backend only."""
    first: list[CaptureBackend] = []

    def factory(name: str, group: str | None, provider_id: uuid.UUID) -> CaptureBackend:
        first.append(CaptureBackend(name, group, enabled=False))
        return first[-1]

    with isolated_providers():
        set_backend_factory(factory)
        p = get_provider("Co_Switch")
        slot = p.slot(4, 1)
        assert not slot.word[0]
        second = CaptureBackend("Co_Switch")
        set_backend_factory(lambda n, g, i: second)
        assert p.slot(4, 1) is slot
        assert slot.word[0]
        assert p.write(slot, "e", FIELDS) is True
        assert len(second.records) == 1
        assert first[0].records == []


def test_unavailable_backend_warns_once_and_runs_disabled() -> None:
    """An unavailable backend warns once per reason, and the provider runs disabled on a NullBackend."""

    def factory(name: str, group: str | None, provider_id: uuid.UUID) -> CaptureBackend:
        raise BackendUnavailable("no tracefs here (test)")

    _platform.warned.discard("no tracefs here (test)")
    with isolated_providers():
        set_backend_factory(factory)
        with pytest.warns(RuntimeWarning, match="no tracefs here"):
            p = Provider("Co_Unavail")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            q = Provider("Co_Unavail2")  # same reason: no second warning
        assert isinstance(p.backend, NullBackend)
        assert not p.enabled(4, 1)
        assert p.write(p.slot(4, 1), "e", FIELDS) is False
        assert p.stats()["dropped"] == {"not_enabled": 1}
        q.close()
        p.close()


def test_concurrent_writes_are_all_counted_and_recorded(captures: dict[str, _Capture]) -> None:
    """Writes from 8 threads are all counted and recorded, each thread's events in its own order."""
    p = get_provider("Co_Svc")
    slot = p.slot(4, 1)
    per_thread = 1000

    def work(t: int) -> None:
        for i in range(per_thread):
            p.write(slot, "e", [("t", I64, t), ("i", I64, i)])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert p.stats()["written"] == 8 * per_thread
    recs = captures["Co_Svc"].records
    assert len(recs) == 8 * per_thread
    seen: dict[int, list[int]] = {}
    for r in recs:
        v = parse(r.event).values()
        seen.setdefault(v["t"], []).append(v["i"])
    assert all(order == list(range(per_thread)) for order in seen.values())


def test_stats_is_a_snapshot(captures: dict[str, _Capture]) -> None:
    """stats() returns a snapshot with all its keys that later writes do not change."""
    p = get_provider("Co_Svc")
    snap = p.stats()
    p.write(p.slot(4, 1), "e", FIELDS)
    assert snap["written"] == 0
    assert p.stats()["written"] == 1
    assert set(snap) >= {"written", "dropped", "errors", "invalid", "truncated", "format", "backend"}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
def test_child_after_fork_logs_even_if_a_lock_was_held_at_fork(captures: dict[str, _Capture]) -> None:
    """A fork while another thread holds the provider's guard and the backend's lock: the child
    registers a new slot, writes and reads its stats without waiting for them."""
    p = get_provider("Co_Svc")
    slot = p.slot(4, 1)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        assert p._guard.enter()
        with captures["Co_Svc"]._lock:
            held.set()
            release.wait(30)
        p._guard.leave()

    def child() -> bool:  # must not deadlock
        ok = p.write(slot, "child", FIELDS) and p.write(p.slot(3, 0x40), "new", FIELDS)
        return ok and p.stats()["written"] == 2 and len(captures["Co_Svc"].records) == 2

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30), "the holder thread never took the locks"
        pid = fork_child(child)
    finally:
        release.set()
        holder.join(30)
    code = wait_child(pid)
    assert code is not None, "child deadlocked on a lock held at fork time"
    assert code == 0
    assert p.stats()["written"] == 0  # the parent wrote nothing


def test_registration_failure_disables_the_pair_and_is_counted_by_errno(
    captures: dict[str, _Capture],
) -> None:
    """A pair the backend refuses to register stays disabled and is counted as register:<errno>."""
    p = get_provider("Co_Svc")
    backend = captures["Co_Svc"]
    original = backend.open_slot

    def refuse(level: int, keyword: int) -> Any:
        if keyword == 0x80:
            raise PermissionError(1, "Operation not permitted")
        return original(level, keyword)

    backend.open_slot = refuse  # type: ignore[method-assign]
    slot = p.slot(4, 0x80)
    assert not slot.word[0]
    assert p.write(slot, "e", FIELDS) is False
    assert p.stats()["errors"] == {"register:EPERM": 1}


def test_switching_back_to_a_backend_finds_its_own_slots_untouched(
    captures: dict[str, _Capture],
) -> None:
    """Reinstalling a backend after another makes the slot follow its word and write to it alone."""
    first = captures.setdefault("direct", CaptureBackend("Co_Direct"))
    p = Provider("Co_Direct", backend=first)
    slot = p.slot(4, 1)
    second = CaptureBackend("Co_Direct")
    p._install(second)
    p._install(first)  # e.g. the OS backend again after a capture
    first.set_enabled(False, level=4)
    assert not slot.word[0]  # the provider's slot follows the first backend's word again
    first.set_enabled(True, level=4)
    assert p.write(slot, "back", FIELDS) is True
    assert len(first.records) == 1 and second.records == []
    p.close()


class _ClosesMidWrite(str):
    """A string value whose encoding closes every provider: ``close_all`` (e.g. at interpreter
    exit) running between the provider's enable check and the backend's write."""

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        close_all()
        return str(self).encode(encoding, errors)


def test_write_racing_close_all_is_counted_closed_not_as_an_error(
    captures: dict[str, _Capture],
) -> None:
    """close_all() running mid-write makes the event count closed, not as a backend error."""
    p = get_provider("Co_Race")
    slot = p.slot(4, 1)
    assert slot.word[0]  # enabled: the write passes the check, then close_all runs mid-encode
    assert p.write(slot, "racing", [("msg", STR, _ClosesMidWrite("bye"))]) is False
    assert p.closed
    assert captures["Co_Race"].records == []  # the closed capture backend refused it (EBADF)
    stats = p.stats()
    assert stats["dropped"] == {"closed": 1}
    assert stats["errors"] == {}


def _slot_logger(provider: Provider, *, fast_path: bool) -> Any:
    """A structlog logger writing to *provider*: through ``make_etw_bound_logger``'s fast path,
    or a plain bound logger whose renderer decides."""
    import structlog  # noqa: PLC0415

    from structlog_etw import EtwRenderer, make_etw_bound_logger  # noqa: PLC0415

    renderer = EtwRenderer(provider.name, provider=provider)
    wrapper = make_etw_bound_logger(renderer) if fast_path else structlog.make_filtering_bound_logger(0)
    return structlog.wrap_logger(None, processors=[renderer], wrapper_class=wrapper)


class TestSlotLimit:
    """Keywords and levels that come from logged data register at most ``max_slots`` slots (kernel
    tracepoints on Linux) per provider; events at a pair past the bound are counted
    ``dropped["slot_limit"]`` on every log path, and set-up errors are ValueErrors."""

    @pytest.mark.parametrize("fast_path", [False, True], ids=["renderer", "make_etw_bound_logger"])
    def test_data_driven_keywords_register_at_most_max_slots_and_the_rest_is_counted(
        self, captures: dict[str, _Capture], fast_path: bool
    ) -> None:
        """On both log paths 2,000 data keywords register only max_slots slots; the rest count slot_limit."""
        provider = get_provider("Co_Limit", max_slots=20)
        log = _slot_logger(provider, fast_path=fast_path)
        for i in range(2, 2002):  # 2,000 distinct keywords, as if from request data
            log.info("req", **{"etw_keyword": i, "n": i})
        backend = captures["Co_Limit"]
        stats = provider.stats()
        assert stats["slots"] == 20 == len(provider.slots)
        assert len(backend.opened) == 20  # what the backend (the kernel on Linux) was asked for
        # 5 up front (default keyword), 15 data keywords registered at level 4: written
        assert stats["written"] == 15
        assert stats["dropped"] == {"slot_limit": 2000 - 15}
        assert len(backend.records) == 15

    def test_the_default_bound_holds_against_fifty_thousand_keywords(
        self, captures: dict[str, _Capture]
    ) -> None:
        """50,000 keywords register the default 256 slots; later pairs drop, earlier ones keep writing."""
        provider = get_provider("Co_Fifty")
        assert provider.max_slots == _provider.DEFAULT_MAX_SLOTS == 256
        refused = [provider.slot(4, kw) for kw in range(2, 50_002)]
        assert len(captures["Co_Fifty"].opened) == 256 == len(provider.slots)
        assert not any(slot.enabled for slot in refused[-1000:])
        assert not provider.enabled(4, 49_999)
        assert provider.write(refused[-1], "e", FIELDS) is False
        assert provider.stats()["dropped"] == {"slot_limit": 1}
        assert provider.enabled(4, 1)  # pairs registered before the bound keep working
        assert provider.write(provider.slot(4, 1), "ok", FIELDS) is True

    def test_a_refused_pair_after_close_counts_as_closed(self, captures: dict[str, _Capture]) -> None:
        """A write to a slot refused by the bound counts as closed once the provider is closed."""
        provider = get_provider("Co_Limit", max_slots=5)
        refused = provider.slot(4, 0x40)
        provider.close()
        assert provider.write(refused, "late", FIELDS) is False
        assert provider.stats()["dropped"] == {"closed": 1}

    def test_set_up_errors_raise_value_error(self, captures: dict[str, _Capture]) -> None:
        """Too small, bool or conflicting max_slots raise ValueError naming max_slots."""
        with pytest.raises(ValueError, match="max_slots"):
            Provider("Co_Small", backend=CaptureBackend("Co_Small"), keywords=(2, 4), max_slots=10)
        with pytest.raises(ValueError, match="max_slots"):
            Provider("Co_Small", backend=CaptureBackend("Co_Small"), max_slots=True)
        get_provider("Co_Limit", max_slots=50)
        with pytest.raises(ValueError, match="max_slots"):
            get_provider("Co_Limit", max_slots=60)
        assert get_provider("Co_Limit", max_slots=50).max_slots == 50


class TestAfterCloseAll:
    """``close_all`` is final: a logger or provider made afterwards registers nothing with the OS and
    its events are counted ``dropped["closed"]`` (docs/reliability.md), on every log path."""

    @pytest.mark.parametrize("fast_path", [False, True], ids=["renderer", "make_etw_bound_logger"])
    def test_a_logger_made_after_close_all_registers_nothing_and_counts_closed(
        self, captures: dict[str, _Capture], fast_path: bool
    ) -> None:
        """On both log paths a provider made after close_all registers nothing and counts events closed."""
        get_provider("Co_Early")
        close_all()
        provider = get_provider("Co_Late")
        log = _slot_logger(provider, fast_path=fast_path)
        log.info("late", n=1)
        log.warning("late", etw_keyword=0x8)
        assert "Co_Late" not in captures  # no backend was made: nothing registered
        assert provider.closed
        assert provider.stats()["dropped"] == {"closed": 2}
        assert get_provider("Co_Late") is provider  # the same closed provider, not a fresh one

    def test_existing_loggers_count_closed_on_the_fast_path_too(self, captures: dict[str, _Capture]) -> None:
        """A fast-path logger made before close_all counts its later events closed."""
        provider = get_provider("Co_Early")
        log = _slot_logger(provider, fast_path=True)
        log.info("before")
        close_all()
        log.info("after")
        assert provider.stats()["written"] == 1
        assert provider.stats()["dropped"] == {"closed": 1}

    def test_bad_names_still_raise_after_close_all(self, captures: dict[str, _Capture]) -> None:
        """An invalid provider name still raises ValueError after close_all."""
        close_all()
        with pytest.raises(ValueError):
            get_provider("nul\0in name")  # no format can carry it


def _locks_in(obj: object) -> dict[str, Any]:
    lock_types = (type(threading.Lock()), type(threading.RLock()))
    found = {}
    for name in dir(obj):  # instance dicts and __slots__ alike
        if not name.startswith("__"):
            value = getattr(obj, name, None)
            if isinstance(value, lock_types):
                found[name] = value
    return found


class TestForkResetsLocks:
    """Every lock of the package (module-level ones, and those of providers, encoders and backends)
    is usable in a fork child even when it was held at the moment of the fork."""

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
    def test_every_lock_held_at_fork_is_free_in_the_child(self, captures: dict[str, _Capture]) -> None:
        """Every package lock held at a fork is free in the child, which can then write an event."""
        import importlib  # noqa: PLC0415
        import pkgutil  # noqa: PLC0415

        import structlog_etw  # noqa: PLC0415

        for info in pkgutil.walk_packages(structlog_etw.__path__, "structlog_etw."):
            if not info.name.startswith(("structlog_etw.cli", "structlog_etw.__main__")):
                with contextlib.suppress(ImportError):
                    importlib.import_module(info.name)
        modules = {n: m for n, m in sys.modules.items() if n.startswith("structlog_etw") and m is not None}
        p = get_provider("Co_Fork")
        owners: dict[str, object] = {
            **modules,
            "provider": p,
            "encoder": p.encoder,
            "backend": p.backend,
            "registry guard": REGISTRY.guard,
            "provider guard": p._guard,
        }
        held = [(where, name, lock) for where, obj in owners.items() for name, lock in _locks_in(obj).items()]
        assert {where for where, _, _ in held} >= {"registry guard", "provider guard", "backend"}

        def child() -> bool:  # every lock, looked up again, must be free
            stuck = []
            for where, name, _ in held:
                lock = getattr(owners[where], name)
                if lock.acquire(blocking=False):
                    lock.release()
                else:
                    stuck.append(f"{where}.{name}")
            fresh = get_provider("Co_Fork_Child")
            return not stuck and fresh.write(fresh.slot(4, 1), "child", FIELDS)

        for _, _, lock in held:
            lock.acquire()  # as if other threads held them all at the fork
        try:
            pid = fork_child(child)
        finally:
            for _, _, lock in held:
                lock.release()
        code = wait_child(pid)
        assert code is not None, "child deadlocked on a lock held at fork time"
        assert code == 0
