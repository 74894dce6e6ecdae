"""structlog_etw.testing: capture exactly what the OS would receive, in either format, decoded."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, Provider, close_all, get_provider
from structlog_etw.context._activity import CURRENT_ACTIVITY
from structlog_etw.pytest_plugin import etw_capture, etw_capture_tracelogging  # noqa: F401 - fixtures
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.testing import EtwCapture, capture_etw_events, isolated_providers
from tests.helpers.surface import unique_provider

FORMATS = ["eventheader", "tracelogging"]
VALUES: dict[str, Any] = {
    "user": "ann",
    "attempts": 3,
    "big": 2**63 + 5,
    "ratio": 0.25,
    "ok": True,
    "blob": b"\x00\x01\xff",
    "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "ports": [80, 443],
    "where": {"city": "Oslo", "floor": 4},
}


def _log(provider: str) -> Any:
    return structlog.wrap_logger(structlog.ReturnLogger(), processors=[EtwRenderer(provider)])


@pytest.mark.parametrize("fmt", FORMATS)
def test_capture_decodes_name_level_keyword_and_typed_fields(fmt: Any) -> None:
    """In both formats the capture decodes provider, name, level, keyword and every typed field."""
    name = unique_provider()
    with capture_etw_events(fmt) as capture:
        _log(name).warning("user_login", etw_keyword=0x6, **VALUES)
    (event,) = capture.events
    assert event.format == fmt
    assert event.provider == name
    assert (event.name, event.level, event.keyword) == ("user_login", 3, 0x6)
    assert event.fields["user"] == "ann"
    assert event.fields["attempts"] == 3
    assert event.fields["big"] == 2**63 + 5
    assert event.fields["ratio"] == 0.25
    assert event.fields["ok"] is True
    assert event.fields["blob"] == b"\x00\x01\xff"
    assert event.fields["id"] == VALUES["id"]
    assert event.fields["ports"] == [80, 443]
    assert event.fields["where"] == {"city": "Oslo", "floor": 4}
    assert event.decoded is not None and event.decoded.name == "user_login"


def test_eventheader_raw_is_exactly_what_writev_gets() -> None:
    """An EventHeader capture's raw bytes are the record handed to writev, on its tracepoint."""
    name = unique_provider()
    with capture_etw_events("eventheader") as capture:
        _log(name).info("ev", n=1)
    (record,) = capture.records
    (event,) = capture.events
    assert record.tracepoint == f"{name}_L4K1"
    assert event.tracepoint == record.tracepoint
    assert event.raw == record.event
    assert decode_event(record.tracepoint, event.raw).fields == {"n": 1}


def test_tracelogging_record_has_descriptor_traits_metadata_and_data() -> None:
    """A TraceLogging record has the descriptor, traits, metadata and data EventWrite would get."""
    name = unique_provider()
    with capture_etw_events("tracelogging") as capture:
        _log(name).error("ev", n=1, etw_keyword=0x20, etw_opcode=1)
    (record,) = capture.records
    assert record.descriptor is not None
    _id, _version, channel, level, opcode, _task, keyword = record.descriptor
    assert (channel, level, opcode, keyword) == (11, 2, 1, 0x20)
    assert name.encode() in record.traits
    assert b"ev\x00" in record.metadata
    (event,) = capture.events
    assert event.raw == record.metadata + record.data
    assert event.opcode == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_activity_ids_tags_and_opcode_are_decoded(fmt: Any) -> None:
    """In both formats activity and related ids, tags and opcode are decoded (related on Start only)."""
    activity, related = uuid.uuid4(), uuid.uuid4()
    with capture_etw_events(fmt) as capture:
        token = CURRENT_ACTIVITY.set((activity.bytes, related.bytes))
        try:
            log = _log(unique_provider())
            log.info("begin", etw_opcode=1, etw_tags=0x5)  # a Start event carries the related id
            log.info("step", etw_opcode=0)
        finally:
            CURRENT_ACTIVITY.reset(token)
    begin, step = capture.events
    assert (begin.activity_id, begin.related_id) == (activity, related)
    assert (begin.opcode, begin.tags) == (1, 0x5)
    assert (step.activity_id, step.related_id, step.opcode, step.tags) == (activity, None, 0, 0)


def test_events_of_several_providers_keep_write_order() -> None:
    """Events of several providers keep write order; len, named() and clear() work on the capture."""
    a, b = unique_provider(), unique_provider()
    with capture_etw_events() as capture:
        log_a, log_b = _log(a), _log(b)
        log_a.info("a1")
        log_b.info("b1")
        log_a.info("a2")
    assert [(e.provider, e.name) for e in capture] == [(a, "a1"), (b, "b1"), (a, "a2")]
    assert len(capture) == 3
    assert [e.name for e in capture.named("a2")] == ["a2"]
    capture.clear()
    assert capture.events == []


def test_capture_ends_and_nests() -> None:
    """Nested captures each hold only their own events, and the OS backend is back after the outer one."""
    name = unique_provider()
    log = _log(name)
    with capture_etw_events() as outer:
        log.info("outer1")
        with capture_etw_events("tracelogging") as inner:
            log.info("inner")
        log.info("outer2")
    log.info("after")  # back to the OS backend (or the null one): not captured anywhere
    assert [e.name for e in outer.events] == ["outer1", "outer2"]
    assert [(e.name, e.format) for e in inner.events] == [("inner", "tracelogging")]
    assert "Capture" not in type(EtwRenderer(name).provider.backend).__name__


def test_start_disabled_and_enable_one_slot() -> None:
    """A capture started disabled captures only what set_enabled turns on later."""
    with capture_etw_events(enabled=False) as capture:
        log = _log(unique_provider())
        log.info("nobody")
        capture.set_enabled(True, level=2)
        log.info("still_nobody")
        log.error("listened")
    assert [e.name for e in capture.events] == ["listened"]


def test_bad_format_is_a_setup_error() -> None:
    """An unknown format raises ValueError naming the format."""
    with pytest.raises(ValueError, match="format"), capture_etw_events("etl"):  # type: ignore[arg-type]
        pass


def test_stats_of_a_provider() -> None:
    """capture.stats(name) returns that provider's counts."""
    name = unique_provider()
    with capture_etw_events() as capture:
        _log(name).info("one")
        assert capture.stats(name)["written"] == 1


def test_pytest_fixture_captures_eventheader(etw_capture: EtwCapture) -> None:  # noqa: F811
    """The etw_capture pytest fixture captures EventHeader events."""
    _log(unique_provider()).info("from_fixture")
    (event,) = etw_capture.events
    assert (event.format, event.name) == ("eventheader", "from_fixture")


def test_pytest_fixture_captures_tracelogging(etw_capture_tracelogging: EtwCapture) -> None:  # noqa: F811
    """The etw_capture_tracelogging pytest fixture captures TraceLogging events."""
    _log(unique_provider()).info("from_fixture")
    (event,) = etw_capture_tracelogging.events
    assert (event.format, event.name) == ("tracelogging", "from_fixture")


class TestClearFreesMemory:
    """``EtwCapture.clear()`` frees what was captured: a long test that clears between phases does
    not keep every event ever written (each capture backend hands its records to the capture's
    journal at once, so ``clear`` empties the only list that holds them)."""

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_clear_returns_the_memory(self, fmt: Any) -> None:
        """In both formats clear() frees the memory 5,000 captured events held, and capture goes on."""
        import gc  # noqa: PLC0415
        import tracemalloc  # noqa: PLC0415

        with capture_etw_events(fmt) as capture:
            log = _log(unique_provider())
            log.info("warm_up", payload="x" * 200)
            capture.clear()
            gc.collect()
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                for i in range(5_000):
                    log.info("bulk", i=i, payload="x" * 200)
                held = tracemalloc.get_traced_memory()[0] - base
                capture.clear()
                gc.collect()
                left = tracemalloc.get_traced_memory()[0] - base
            finally:
                tracemalloc.stop()
            assert len(capture) == 0 and capture.events == []
            assert held > 1_000_000  # 5,000 records of ~250 bytes were held ...
            assert left < 200_000  # ... and are gone after clear()
            log.info("after_clear")
            assert [e.name for e in capture.events] == ["after_clear"]


class TestIsolatedProviders:
    """``isolated_providers()`` gives a block a registry of its own and gives the process's back."""

    def test_a_name_used_before_gives_a_new_provider_in_the_block(self) -> None:
        """Inside, ``get_provider`` of a known name makes a new provider; after, the old one is back."""
        name = unique_provider()
        with capture_etw_events():
            outer = get_provider(name, default_keyword=0x2)
            with isolated_providers():
                inner = get_provider(name)  # no "already exists with default_keyword" clash
                assert inner is not outer
                assert inner.default_keyword == 1
            assert get_provider(name) is outer
            assert inner.closed and not outer.closed

    def test_every_provider_made_in_the_block_is_closed_at_its_end(self) -> None:
        """Named or not, what the block made is closed; what it found is left open."""
        with capture_etw_events():
            before = get_provider(unique_provider())
            with isolated_providers():
                named = get_provider(unique_provider())
                unnamed = Provider(unique_provider())
                assert not (named.closed or unnamed.closed)
            assert named.closed and unnamed.closed
            assert not before.closed

    def test_close_all_in_the_block_closes_only_its_providers(self) -> None:
        """``close_all()`` inside marks and closes the block's registry only."""
        with capture_etw_events():
            before = get_provider(unique_provider())
            with isolated_providers():
                inside = get_provider(unique_provider())
                close_all()
                assert inside.closed
                assert get_provider(unique_provider()).closed  # closed from the start, as after close_all
            assert not before.closed
            assert not get_provider(unique_provider()).closed

    def test_a_capture_in_the_block_routes_only_the_blocks_providers(self) -> None:
        """A provider made before keeps writing to its own backend while the block captures."""
        with capture_etw_events() as outer_capture:
            before = EtwRenderer(unique_provider())
            with isolated_providers(), capture_etw_events() as inner_capture:
                inside = EtwRenderer(unique_provider())
                structlog.wrap_logger(None, processors=[before]).info("to_outer")
                structlog.wrap_logger(None, processors=[inside]).info("to_inner")
            structlog.wrap_logger(None, processors=[before]).info("after")
        assert [e.name for e in inner_capture.events] == ["to_inner"]
        assert [e.name for e in outer_capture.events] == ["to_outer", "after"]

    def test_providers_of_the_block_go_where_the_process_sends_new_ones(self) -> None:
        """The backend factory is kept for the block: an enclosing capture sees its providers."""
        with capture_etw_events() as capture, isolated_providers():
            structlog.wrap_logger(None, processors=[EtwRenderer(unique_provider())]).info("seen")
        assert [e.name for e in capture.events] == ["seen"]
