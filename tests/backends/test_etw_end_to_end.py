"""structlog -> EtwRenderer -> Provider -> EtwBackend (real ctypes calls) -> the compiled fake ETW library.

What the library received is decoded with our TraceLogging decoder.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import structlog

from structlog_etw import EtwEarlyDrop, EtwHandler, EtwRenderer, make_etw_bound_logger
from structlog_etw.backends.etw import EtwBackend
from structlog_etw.formats.tracelogging import provider_id
from structlog_etw.provider import _platform, _provider
from structlog_etw.provider._provider import set_backend_factory
from structlog_etw.read.decode.tracelogging import decode_traits
from structlog_etw.testing import isolated_providers
from tests.helpers.fake_etw import Fake

NAME = "MyCompany_Service"


@pytest.fixture
def etw(fake: Fake) -> Iterator[Fake]:
    """Every provider created in the test is an EtwBackend on the fake library."""
    with isolated_providers():  # providers of earlier tests (of this name too): set aside
        set_backend_factory(lambda name, group, _id: EtwBackend(name, group, library=fake.path))
        yield fake


def _logger(renderer: EtwRenderer) -> structlog.typing.FilteringBoundLogger:
    return structlog.wrap_logger(  # type: ignore[no-any-return]
        structlog.PrintLogger(), processors=[renderer], wrapper_class=structlog.BoundLogger
    )


def test_structlog_event_arrives_as_a_decodable_etw_event(etw: Fake) -> None:
    """A structlog event reaches the ETW library under the name's GUID with group, level, keyword, fields."""
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
    """Nothing reaches EventWrite until a session listens, then only events at its level or below."""
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
    """Every EventWrite error code is counted under its ERROR_* name, and the log call returns normally."""
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
    """An event over 64,000 bytes arrives truncated, marked _truncated, and is counted."""
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
    """Activity and related ids and the opcode reach EventWriteTransfer."""
    etw.enable(5)
    renderer = EtwRenderer(NAME)
    act, rel = uuid.uuid4(), uuid.uuid4()
    renderer.provider.write(
        renderer.provider.slot(4, 1), "step", [], opcode=1, activity_id=act.bytes, related_id=rel.bytes
    )
    (rec,) = etw.records()
    ev = rec.decoded()
    assert (ev.activity_id, ev.related_id, ev.opcode) == (act, rel, 1)


# ---------------------------------------------------------------------------------------------
# The Windows OS path of the provider (no backend factory), run against the fake library

CUSTOM_ID = uuid.UUID("1fd9a3b4-5c6e-4f70-8a9b-0c1d2e3f4a5b")
DOTTED = "MyCompany.MyService"


@pytest.fixture
def windows(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    """Providers take the Windows default path (name rules, EtwBackend) with the fake library."""
    monkeypatch.setattr(_platform, "PLATFORM", "win32")
    monkeypatch.setattr(_platform, "ETW_LIBRARY", fake.path)
    with isolated_providers():  # providers of earlier tests (of this name too): set aside
        set_backend_factory(None)
        yield fake
    monkeypatch.undo()


def test_explicit_provider_id_is_the_guid_eventregister_receives(windows: Fake) -> None:
    """An explicit provider_id is the GUID EventRegister receives, not the name hash."""
    assert provider_id(DOTTED) != CUSTOM_ID
    windows.enable(5, 0xFF)
    renderer = EtwRenderer(DOTTED, provider_id=CUSTOM_ID)
    _logger(renderer).info("started", port=8080)
    (rec,) = windows.records()
    assert windows.provider_guid(rec.handle) == CUSTOM_ID
    assert renderer.provider.provider_id == CUSTOM_ID
    assert decode_traits(rec.data[0].data) == (DOTTED, None)
    assert rec.decoded().fields == {"port": 8080}


def test_provider_id_given_as_guid_text_is_the_guid_eventregister_receives(windows: Fake) -> None:
    """A provider_id given as upper-case GUID text is the GUID EventRegister receives."""
    windows.enable(5, 0xFF)
    renderer = EtwRenderer(DOTTED, provider_id=str(CUSTOM_ID).upper(), group="mygroup")
    _logger(renderer).warning("low_disk")
    (rec,) = windows.records()
    assert windows.provider_guid(rec.handle) == CUSTOM_ID
    assert decode_traits(rec.data[0].data) == (DOTTED, provider_id("mygroup"))


def test_without_provider_id_eventregister_receives_the_name_hash(windows: Fake) -> None:
    """Without provider_id EventRegister receives the GUID hashed from the provider name."""
    windows.enable(5, 0xFF)
    renderer = EtwRenderer(DOTTED)
    _logger(renderer).info("started")
    (rec,) = windows.records()
    assert windows.provider_guid(rec.handle) == provider_id(DOTTED) == renderer.provider.provider_id


def test_make_etw_bound_logger_and_handler_pass_provider_id_to_eventregister(windows: Fake) -> None:
    """make_etw_bound_logger, EtwHandler and EtwEarlyDrop pass their provider_id to EventRegister."""
    other = uuid.UUID("0b7e8d6c-1a2b-4c3d-9e8f-7a6b5c4d3e2f")
    make_etw_bound_logger("MyCompany.Wrapped", provider_id=CUSTOM_ID)
    EtwHandler("MyCompany.Handled", provider_id=str(other))
    EtwEarlyDrop("MyCompany.Dropped", provider_id=CUSTOM_ID)
    guids = {_provider.get_provider(n).provider_id for n in ("MyCompany.Wrapped", "MyCompany.Dropped")}
    assert guids == {CUSTOM_ID}
    assert _provider.get_provider("MyCompany.Handled").provider_id == other
    windows.enable(5, 0xFF)
    _logger(EtwRenderer("MyCompany.Handled")).info("x")
    (rec,) = windows.records()
    assert windows.provider_guid(rec.handle) == other


def test_same_name_with_a_conflicting_provider_id_raises_at_setup(windows: Fake) -> None:
    """The same name with a different provider_id raises ValueError from every set-up entry point."""
    EtwRenderer(DOTTED, provider_id=CUSTOM_ID)
    EtwRenderer(DOTTED, provider_id=str(CUSTOM_ID))  # the same GUID as text: same provider
    EtwRenderer(DOTTED)  # no provider_id: whatever the provider has
    with pytest.raises(ValueError, match="already exists with provider_id"):
        EtwRenderer(DOTTED, provider_id=provider_id(DOTTED))
    with pytest.raises(ValueError, match="already exists with provider_id"):
        make_etw_bound_logger(DOTTED, provider_id=uuid.uuid4())
    with pytest.raises(ValueError, match="already exists with provider_id"):
        EtwHandler(_provider.get_provider(DOTTED), provider_id=uuid.uuid4())


def test_a_provider_without_explicit_id_conflicts_with_a_different_one(windows: Fake) -> None:
    """A provider with the name hash GUID accepts that GUID but refuses a different one."""
    EtwRenderer(DOTTED)
    EtwRenderer(DOTTED, provider_id=provider_id(DOTTED))  # equal to the name hash: fine
    with pytest.raises(ValueError, match="already exists with provider_id"):
        _provider.get_provider(DOTTED, provider_id=CUSTOM_ID)


@pytest.mark.parametrize(
    ("value", "error"),
    [("not-a-guid", ValueError), ("", ValueError), (12345, TypeError), (b"\x00" * 16, TypeError)],
)
def test_invalid_provider_id_raises_at_setup(windows: Fake, value: object, error: type[Exception]) -> None:
    """Every malformed provider_id raises ValueError/TypeError naming it, before any registration."""
    with pytest.raises(error, match="provider_id"):
        EtwRenderer(DOTTED, provider_id=value)  # type: ignore[arg-type]
    assert windows.lib.fake_live_providers() == 0


@pytest.mark.parametrize("name", ["MyCompany.MyService", "My Company/Service-1", "Ünïcode.Prövider"])
def test_windows_names_register_on_the_windows_path(windows: Fake, name: str) -> None:
    """Every dotted, spaced or non-ASCII name registers on Windows, its GUID its name hash."""
    windows.enable(5, 0xFF)
    _logger(EtwRenderer(name)).info("hello")
    (rec,) = windows.records()
    assert decode_traits(rec.data[0].data) == (name, None)
    assert windows.provider_guid(rec.handle) == provider_id(name)


@pytest.mark.parametrize("name", ["", "My\0Service", "bad\ud800name", "N" * (64000 - 256 - 2), "N" * 65533])
def test_names_tracelogging_cannot_carry_raise_before_eventregister(windows: Fake, name: str) -> None:
    """Every empty, NUL, surrogate or too-long name raises ValueError before EventRegister."""
    with pytest.raises(ValueError, match="provider name"):
        EtwRenderer(name)
    assert windows.lib.fake_live_providers() == 0
