"""Provider.write_dict (the hot path of a log call) and its lock-free written counter."""

from __future__ import annotations

import datetime as dt
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, Provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.testing import decode_record
from structlog_etw.write import shapes as _shapes
from structlog_etw.write.fields import dict_fields, to_fields
from tests.helpers.eventheader_reader import parse

FORMATS = ("eventheader", "tracelogging")
FIVE = {"event": "login", "user": "ann", "attempts": 3, "latency_ms": 12.5, "ok": True, "region": "eu-west-1"}


def _provider(fmt: str = "eventheader", name: str = "Co_Dict") -> tuple[Provider, CaptureBackend]:
    backend = CaptureBackend(name, format=fmt)
    return Provider(name, backend=backend), backend


def _wire(backend: CaptureBackend) -> list[tuple[Any, ...]]:
    """What the OS would have received, per record."""
    return [
        (r.tracepoint, r.level, r.keyword, r.opcode, r.event, r.metadata, r.data) for r in backend.records
    ]


class _NoLock:
    """A provider guard that fails the test when taken (the hot path must not take it)."""

    def enter(self) -> bool:
        raise AssertionError("the write path took the provider guard")

    def leave(self) -> None:  # pragma: no cover - never entered
        return None


class TestWriteDictWritesWhatWriteWrites:
    """write_dict(slot, name, d, skip) hands the backend what write(slot, name, to_fields(...)) does."""

    @pytest.mark.parametrize("fmt", FORMATS)
    @pytest.mark.parametrize(
        "extra",
        [
            {},
            {"exc_info": None, "n": None, "b": b"x"},
            {"big": 2**64 - 1},
            {"nested": {"a": [1, 2]}},
            {1: "k"},
        ],
    )
    def test_same_event_as_write_with_typed_fields(self, fmt: str, extra: dict[Any, Any]) -> None:
        """In both formats, for every extra value and opcode, write_dict's bytes equal write()'s."""
        d = {**FIVE, **extra}
        p1, b1 = _provider(fmt)
        p2, b2 = _provider(fmt)
        ids = (bytes(range(16)), bytes(range(16, 32)))
        for opcode, act in ((0, None), (1, ids), (2, ids)):
            a = (act[0], act[1]) if act else (None, None)
            assert p1.write_dict(p1.slot(4, 1), "login", d, "event", opcode, 0, *a) is True
            fields = dict_fields(d.items(), "event")
            assert p2.write(p2.slot(4, 1), "login", fields, opcode, 0, *a) is True
        assert _wire(b1) == _wire(b2)
        assert p1.stats()["written"] == 3

    def test_skip_none_keeps_the_event_key_and_exc_info_is_never_a_field(self) -> None:
        """skip=None writes the "event" key as a field; exc_info is never written as a field."""
        p, backend = _provider()
        p.write_dict(p.slot(4, 1), "named", {"event": "text", "exc_info": False, "x": 1}, None)
        assert parse(backend.records[0].event).values() == {"event": "text", "x": 1}


class TestWriteDictCountsWhatItCannotWrite:
    """Disabled, closed, too large, encoder bugs and backend errors are counted, never raised."""

    def test_not_enabled_and_closed(self) -> None:
        """A disabled slot and a closed provider make write_dict return False, counted by reason."""
        p, backend = _provider()
        backend.set_enabled(False, level=5)
        assert p.write_dict(p.slot(5, 1), "e", FIVE) is False
        p.close()
        assert p.write_dict(p.slot(4, 1), "e", FIVE) is False
        assert p.stats()["dropped"] == {"not_enabled": 1, "closed": 1}

    def test_too_large(self) -> None:
        """An oversized dict makes write_dict return False, counted too_large."""
        p, _ = _provider()
        many = {f"f{i:06d}_padding_padding": i for i in range(600)}
        assert p.write_dict(p.slot(4, 1), "big", many) is False
        assert p.stats()["dropped"] == {"too_large": 1}

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_encoder_bug_is_an_encode_error(self, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """In both formats an exception in encode_dict returns False and is counted encode_error."""
        p, backend = _provider(fmt)

        def broken(*args: Any) -> bytes:
            raise RuntimeError("an encoder bug")

        monkeypatch.setattr(type(p.encoder), "encode_dict", broken)
        p._install(backend)  # the write path binds the encoder's method when installed
        assert p.write_dict(p.slot(4, 1), "bug", FIVE) is False
        assert p.stats()["dropped"] == {"encode_error": 1}

    def test_backend_error_code_by_name(self) -> None:
        """A backend write error makes write_dict return False, counted under its errno name."""
        p, backend = _provider()
        slot = p.slot(4, 1)
        backend.close()
        slot.word = [1]  # the word was read just before the session went away
        assert p.write_dict(slot, "late", FIVE) is False
        assert p.stats()["errors"] == {"EBADF": 1}


class TestWrittenCounterWithoutLock:
    """A successful write takes no lock; no count is lost across threads; reading stats doesn't count.

    (Under the GIL a racy ``+=`` rarely loses a count in a test, so the thread test is a guard, not
    the proof: the proof of "no lock" is the lock that fails when taken.)"""

    def test_a_successful_write_takes_no_lock(self) -> None:
        """Successful write_dict and write calls never take the provider guard, and are counted."""
        p, backend = _provider()
        slot = p.slot(4, 1)
        guard, p._guard = p._guard, _NoLock()  # type: ignore[assignment]
        assert p.write_dict(slot, "e", FIVE) is True
        assert p.write(slot, "e", to_fields({"x": 1}.items())) is True
        p._guard = guard
        assert p.stats()["written"] == 2
        assert len(backend.records) == 2

    def test_concurrent_writes_are_all_counted(self) -> None:
        """6 threads switching every microsecond lose no count of 18,000 write_dict calls."""
        p, _ = _provider()
        slot = p.slot(4, 1)
        per_thread = 3000
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads as often as possible: a racy += loses counts
        try:

            def work() -> None:
                for _ in range(per_thread):
                    p.write_dict(slot, "e", FIVE)

            threads = [threading.Thread(target=work) for _ in range(6)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        finally:
            sys.setswitchinterval(interval)
        assert p.stats()["written"] == 6 * per_thread

    def test_stats_reads_do_not_count_as_writes(self) -> None:
        """Reading stats() repeatedly does not change the written count."""
        p, _ = _provider()
        assert [p.stats()["written"] for _ in range(3)] == [0, 0, 0]
        p.write_dict(p.slot(4, 1), "e", FIVE)
        assert [p.stats()["written"] for _ in range(3)] == [1, 1, 1]


@pytest.fixture
def configured() -> Iterator[None]:
    """structlog's global configuration, reset before and after the test."""
    structlog.reset_defaults()
    try:
        yield
    finally:
        structlog.reset_defaults()


class _Offset30h(dt.tzinfo):
    """A tzinfo whose offset (30 h) no datetime accepts: ``isoformat`` raises."""

    def utcoffset(self, d: dt.datetime | None) -> dt.timedelta:
        return dt.timedelta(hours=30)

    def dst(self, d: dt.datetime | None) -> None:
        return None


class _RaisingOffset(dt.tzinfo):
    """A tzinfo whose ``utcoffset`` raises."""

    def utcoffset(self, d: dt.datetime | None) -> dt.timedelta:
        raise RuntimeError("no offset")


class TestRendererWritesThroughWriteDict:
    """EtwRenderer writes the event dict through write_dict: same events, datetimes that fail as text."""

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_renderer_event_equals_the_typed_field_route(
        self, fmt: str, configured: None, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The renderer's events, by the general route and then by the shape function, are the
        typed-field route's bytes."""
        monkeypatch.setattr(_shapes._caches, "SHAPE_HOT", 1)  # hot at once: the second event is the shape's
        monkeypatch.setattr(_shapes._caches, "LAYOUT_HOT", 1)
        monkeypatch.setattr(_shapes._caches, "COMPILE_COST", 0)
        p, backend = _provider(fmt, "Co_Rend")
        ref, ref_backend = _provider(fmt, "Co_Rend")
        structlog.configure(processors=[EtwRenderer("Co_Rend", provider=p)])
        for _ in range(2):
            structlog.get_logger().info("login", user="ann", attempts=3, latency_ms=12.5, ok=True)
            ref.write(
                ref.slot(4, 1),
                "login",
                to_fields({"user": "ann", "attempts": 3, "latency_ms": 12.5, "ok": True}.items()),
            )
        assert _wire(backend) == _wire(ref_backend)
        assert p.encoder._shapes.first  # written by a shape function

    @pytest.mark.parametrize("fmt", FORMATS)
    @pytest.mark.parametrize("tz", [_Offset30h(), _RaisingOffset()], ids=["offset-30h", "raising-utcoffset"])
    def test_a_datetime_whose_isoformat_fails_is_written_as_text(
        self, fmt: str, tz: dt.tzinfo, configured: None
    ) -> None:
        """In both formats a datetime whose isoformat raises is written as its repr, not dropped."""
        # Regression (issue 14): such a datetime must not drop the event as an encode_error.
        p, backend = _provider(fmt, "Co_Rend")
        structlog.configure(processors=[EtwRenderer("Co_Rend", provider=p)])
        when = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=tz)
        structlog.get_logger().info("tick", when=when, n=1)
        stats = p.stats()
        assert (stats["written"], stats["dropped"]) == (1, {})
        event = decode_record(backend.records[0])
        assert event.fields == {"when": repr(when), "n": 1}
