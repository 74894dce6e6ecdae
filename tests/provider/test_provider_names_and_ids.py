"""Provider names follow the format written; the explicit provider GUID is kept and recorded.

EventHeader (Linux user_events, the default capture) takes ``[A-Za-z0-9_]`` names; TraceLogging
(Windows ETW, ``capture_etw_events("tracelogging")``) takes Windows names such as
``MyCompany.MyService`` within the limits of the provider traits blob.  The Windows OS path
itself is tested against the compiled fake ETW library in test_windows_end_to_end.py.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, Provider, StatusReason, get_provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.formats.tracelogging import DEFAULT_MAX_SIZE, provider_id
from structlog_etw.provider import _platform
from structlog_etw.provider._provider import set_backend_factory
from structlog_etw.provider._registry import REGISTRY
from structlog_etw.read.decode.tracelogging import decode_traits
from structlog_etw.testing import capture_etw_events, isolated_providers

CUSTOM_ID = uuid.UUID("1fd9a3b4-5c6e-4f70-8a9b-0c1d2e3f4a5b")
#: The encoder's event budget less the 256 bytes it keeps for the event: traits may take the rest.
TRAITS_MAX = DEFAULT_MAX_SIZE - 256


@pytest.fixture
def linux(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty provider registry, no backend factory, and the Linux OS path."""
    monkeypatch.setattr(_platform, "PLATFORM", "linux")
    with isolated_providers():
        set_backend_factory(None)
        yield


def _dotted() -> str:
    """A fresh Windows-style name (the one-time warning is per reason, which names the provider)."""
    return f"MyCompany.MyService{uuid.uuid4().hex[:8]}"


def _log(renderer: EtwRenderer) -> Any:
    return structlog.wrap_logger(None, processors=[renderer], wrapper_class=structlog.BoundLogger)


def test_dotted_name_works_with_the_tracelogging_capture(linux: None) -> None:
    """A dotted Windows name writes under the TraceLogging capture, its traits carrying the name."""
    name = _dotted()
    with capture_etw_events("tracelogging") as capture:
        _log(EtwRenderer(name)).info("user_login", user="ann")
    (event,) = capture.events
    assert (event.provider, event.name, event.fields) == (name, "user_login", {"user": "ann"})
    assert event.record is not None
    assert decode_traits(event.record.traits) == (name, None)


def test_tracelogging_capture_records_the_explicit_provider_id(linux: None) -> None:
    """The TraceLogging capture records an explicit provider_id, given as a UUID or as its text."""
    with capture_etw_events("tracelogging") as capture:
        _log(EtwRenderer(_dotted(), provider_id=CUSTOM_ID)).info("a")
        _log(EtwRenderer("MyCompany_Other", provider_id=str(CUSTOM_ID))).info("b")
    assert [e.provider_id for e in capture.events] == [CUSTOM_ID, CUSTOM_ID]
    assert all(e.record is not None and e.record.provider_id == CUSTOM_ID for e in capture.events)


def test_tracelogging_capture_records_the_name_hash_without_provider_id(linux: None) -> None:
    """Without provider_id the TraceLogging capture records the GUID hashed from the name."""
    name = _dotted()
    with capture_etw_events("tracelogging") as capture:
        renderer = EtwRenderer(name)
        _log(renderer).info("a")
    (event,) = capture.events
    assert event.provider_id == provider_id(name) == renderer.provider.provider_id


def test_eventheader_capture_has_no_provider_guid(linux: None) -> None:
    """EventHeader events carry no provider GUID: the capture's provider_id is None."""
    with capture_etw_events("eventheader") as capture:
        _log(EtwRenderer("MyCompany_MyService", provider_id=CUSTOM_ID)).info("a")
    (event,) = capture.events
    assert event.provider_id is None


def test_conflicting_provider_id_under_the_capture_raises_at_setup(linux: None) -> None:
    """Under the capture a second provider_id for the same name raises ValueError at set-up."""
    with capture_etw_events("tracelogging"):
        EtwRenderer("MyCompany.Conflict", provider_id=CUSTOM_ID)
        with pytest.raises(ValueError, match="already exists with provider_id"):
            EtwRenderer("MyCompany.Conflict", provider_id=uuid.uuid4())


@pytest.mark.parametrize("name", ["MyCompany.MyService", "My Service", "svc-1", "Ünïcode"])
def test_linux_os_path_rejects_names_user_events_cannot_carry(linux: None, name: str) -> None:
    """On Linux every name outside [A-Za-z0-9_] raises ValueError citing docs/linux.md, unregistered."""
    with pytest.raises(ValueError, match=r"\[A-Za-z0-9_\].*docs/linux.md"):
        EtwRenderer(name)
    assert name not in REGISTRY.named  # the registry's own state: no public name reads it


@pytest.mark.parametrize("name", ["MyCompany.MyService", "My Service"])
def test_eventheader_capture_rejects_a_dotted_name_at_setup(linux: None, name: str) -> None:
    """Under the EventHeader capture every dotted or spaced name raises ValueError at set-up."""
    with capture_etw_events("eventheader"), pytest.raises(ValueError, match=r"\[A-Za-z0-9_\]"):
        EtwRenderer(name)


def test_eventheader_names_work_with_both_formats(linux: None) -> None:
    """A [A-Za-z0-9_] name writes under both the EventHeader and the TraceLogging capture."""
    for fmt in ("eventheader", "tracelogging"):
        with capture_etw_events(fmt) as capture:
            _log(EtwRenderer(f"MyCompany_MyService_{fmt}")).info("x")
        assert [e.format for e in capture.events] == [fmt]


def test_dotted_provider_runs_disabled_with_a_warning_when_back_on_user_events(linux: None) -> None:
    """After a TraceLogging capture a dotted provider runs on NullBackend, writes nothing, never raises."""
    name = _dotted()
    with capture_etw_events("tracelogging"):
        renderer = EtwRenderer(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _log(renderer).info("after_capture")  # never raises
    stats = renderer.provider.stats()
    assert stats["format"] == "eventheader"
    assert "NullBackend" in stats["backend"] and "eventheader format cannot use" in stats["backend"]
    assert stats["written"] == 0 and stats["errors"] == {}
    assert [str(w.message) for w in caught if name in str(w.message)] == []  # status says it (below)


def test_the_switch_back_says_in_the_status_that_the_format_cannot_use_the_name(linux: None) -> None:
    """The end of a capture warns nothing (pytest -W error must pass); the status says why."""
    name = _dotted()
    capture = capture_etw_events("tracelogging")
    capture.__enter__()
    renderer = EtwRenderer(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        capture.__exit__(None, None, None)
    status = renderer.provider.status
    assert status.reason is StatusReason.INVALID_NAME
    assert "eventheader format cannot use" in status.detail


@pytest.mark.parametrize(
    ("size", "group", "ok"),
    [
        (TRAITS_MAX - 3, None, True),  # u16 size + name + NUL = TRAITS_MAX
        (TRAITS_MAX - 2, None, False),
        (TRAITS_MAX - 3 - 19, "mygroup", True),  # + the 19-byte group trait
        (TRAITS_MAX - 2 - 19, "mygroup", False),
    ],
)
def test_tracelogging_name_must_fit_the_provider_traits(size: int, group: str | None, ok: bool) -> None:
    """A name (and group) fits up to the traits budget exactly; one byte more raises ValueError."""
    name = "N" * size
    backend = CaptureBackend(name, group, "tracelogging")
    if ok:
        provider = Provider(name, group=group, backend=backend)
        assert len(provider.encoder.traits) <= TRAITS_MAX
        provider.close()
    else:
        with pytest.raises(ValueError, match="too long for TraceLogging"):
            Provider(name, group=group, backend=backend)


def test_tracelogging_counts_utf8_bytes_not_characters() -> None:
    """The traits budget counts a name's UTF-8 bytes, not characters."""
    name = "é" * ((TRAITS_MAX - 3) // 2 + 1)  # 2 bytes each: one byte too many
    with pytest.raises(ValueError, match="too long for TraceLogging"):
        Provider(name, backend=CaptureBackend(name, None, "tracelogging"))


@pytest.mark.parametrize("name", ["", "My\0Service", "bad\ud800name"])
def test_tracelogging_rejects_empty_nul_and_lone_surrogates(name: str) -> None:
    """Every empty, NUL-holding or lone-surrogate name raises ValueError for TraceLogging."""
    with pytest.raises(ValueError, match="provider name"):
        Provider(name, backend=CaptureBackend("x", None, "tracelogging"))


def test_tracelogging_group_may_be_any_name_eventheader_group_may_not(linux: None) -> None:
    """TraceLogging takes any group name (hashed into the traits); EventHeader refuses it."""
    with capture_etw_events("tracelogging") as capture:
        _log(EtwRenderer("MyCompany.Grouped", group="MyGroup")).info("x")
    (event,) = capture.events
    assert event.record is not None
    assert decode_traits(event.record.traits) == ("MyCompany.Grouped", provider_id("MyGroup"))
    with capture_etw_events("eventheader"), pytest.raises(ValueError, match="group"):
        EtwRenderer("MyCompany_Grouped2", group="MyGroup")


def test_get_provider_with_guid_text_equals_uuid(linux: None) -> None:
    """get_provider with the GUID's text and with the UUID returns the same provider."""
    with capture_etw_events("tracelogging"):
        a = get_provider("MyCompany.Same", provider_id=str(CUSTOM_ID).upper())
        assert get_provider("MyCompany.Same", provider_id=CUSTOM_ID) is a
        assert a.provider_id == CUSTOM_ID
