"""structlog -> EtwRenderer -> Provider -> EtwBackend (real ctypes calls) -> the compiled fake ETW library.

What the library received is decoded with our TraceLogging decoder.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import structlog

from structlog_etw import _provider
from structlog_etw._backend_windows import EtwBackend
from structlog_etw._provider import set_backend_factory
from structlog_etw._renderer import EtwRenderer
from structlog_etw._tracelogging import provider_id
from structlog_etw._tracelogging_decode import decode_traits

from .test_windows_backend import Fake, fake, fake_library

__all__ = ["fake", "fake_library"]  # fixtures re-used from the backend tests

NAME = "MyCompany_Service"


@pytest.fixture
def etw(fake: Fake) -> Iterator[Fake]:
    """Every provider created in the test is an EtwBackend on the fake library."""
    saved = dict(_provider._registry)
    _provider._registry.clear()
    previous = set_backend_factory(lambda name, group: EtwBackend(name, group, library=fake.path))
    try:
        yield fake
    finally:
        for p in _provider._registry.values():
            p.close()
        set_backend_factory(previous)
        _provider._registry.clear()
        _provider._registry.update(saved)


def _logger(renderer: EtwRenderer) -> structlog.typing.FilteringBoundLogger:
    return structlog.wrap_logger(  # type: ignore[no-any-return]
        structlog.PrintLogger(), processors=[renderer], wrapper_class=structlog.BoundLogger
    )


def test_structlog_event_arrives_as_a_decodable_etw_event(etw: Fake) -> None:
    etw.enable(5, 0xFF)
    renderer = EtwRenderer(NAME, group="mygroup")
    log = _logger(renderer).bind(etw_keyword=0x4)
    log.info("user_login", user="ann", attempts=3, tags=["a", "b"], ctx={"ip": "10.0.0.1"})
    (rec,) = etw.records()
    ev = rec.decoded()
    assert ev.provider == NAME
    assert decode_traits(rec.data[0].data) == (NAME, provider_id("mygroup"))
    assert etw.provider_guid(rec.handle) == provider_id(NAME)
    assert (ev.name, ev.level, ev.keyword) == ("user_login", 4, 0x4)
    assert ev.fields == {"user": "ann", "attempts": 3, "tags": ["a", "b"], "ctx": {"ip": "10.0.0.1"}}
    assert renderer.provider.stats()["written"] == 1


def test_nothing_is_written_while_no_session_listens(etw: Fake) -> None:
    renderer = EtwRenderer(NAME)
    log = _logger(renderer)
    log.info("quiet", x=1)
    assert etw.records() == []
    etw.enable(4, 0)  # a session at level 4, all keywords
    log.debug("too_verbose", x=1)
    log.warning("loud", x=2)
    assert [r.decoded().name for r in etw.records()] == ["loud"]


@pytest.mark.parametrize(
    ("code", "reason"),
    [(8, "ERROR_NOT_ENOUGH_MEMORY"), (234, "ERROR_MORE_DATA"), (534, "ERROR_ARITHMETIC_OVERFLOW")],
)
def test_etw_write_errors_are_counted_by_reason(etw: Fake, code: int, reason: str) -> None:
    etw.enable(5)
    renderer = EtwRenderer(NAME)
    log = _logger(renderer)
    etw.lib.fake_set_write_result(code)
    log.error("failed_write", n=1)  # returns normally
    log.error("failed_write", n=2)
    etw.lib.fake_set_write_result(0)
    log.error("written", n=3)
    stats = renderer.provider.stats()
    assert stats["written"] == 1
    assert stats["errors"] == {reason: 2}
    assert [r.result for r in etw.records()] == [code, code, 0]


def test_oversized_event_arrives_truncated_and_counted(etw: Fake) -> None:
    etw.enable(5)
    renderer = EtwRenderer(NAME)
    _logger(renderer).info("big", blob="x" * 100_000, n=1)
    (rec,) = etw.records()
    assert sum(len(d.data) for d in rec.data) <= 64_000
    ev = rec.decoded()
    assert ev.fields["n"] == 1
    assert ev.fields["blob"].endswith("...[truncated]")
    assert ev.fields["_truncated"] is True
    assert renderer.provider.stats()["truncated"] == 1


def test_activity_ids_reach_eventwritetransfer(etw: Fake) -> None:
    etw.enable(5)
    renderer = EtwRenderer(NAME)
    act, rel = uuid.uuid4(), uuid.uuid4()
    renderer.provider.write(
        renderer.provider.slot(4, 1), "step", [], opcode=1, activity_id=act.bytes, related_id=rel.bytes
    )
    (rec,) = etw.records()
    ev = rec.decoded()
    assert (ev.activity_id, ev.related_id, ev.opcode) == (act, rel, 1)
