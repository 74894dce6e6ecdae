"""Provider.status and EtwUnavailableWarning: why a provider runs disabled, typed, told at the user's line."""

from __future__ import annotations

import logging
import logging.config
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import structlog_etw
from structlog_etw import (
    EtwHandler,
    EtwRenderer,
    EtwUnavailableWarning,
    Provider,
    ProviderStatus,
    StatusReason,
    get_provider,
)
from structlog_etw.backends import user_events
from structlog_etw.backends.base import BackendUnavailable
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.provider import _platform
from structlog_etw.testing import capture_etw_events
from tests.helpers.surface import unique_provider


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget which reasons were already warned (the warning is once per reason and process)."""
    monkeypatch.setattr(_platform, "warned", set())


@pytest.fixture
def no_platform(monkeypatch: pytest.MonkeyPatch, fresh_warnings: None) -> Iterator[None]:
    """A platform without any trace facility: every new provider runs disabled, on any host."""
    monkeypatch.setattr(_platform, "PLATFORM", "plan9")
    yield


class TestStatus:
    """``Provider.status`` answers "where do events go, and if nowhere, why" with a typed code."""

    def test_unsupported_platform(self, no_platform: None) -> None:
        """On a platform without a trace facility status is unavailable, UNSUPPORTED_PLATFORM, NullBackend."""
        with pytest.warns(EtwUnavailableWarning):
            provider = get_provider(unique_provider())
        status = provider.status
        assert isinstance(status, ProviderStatus)
        assert status.available is False
        assert status.reason is StatusReason.UNSUPPORTED_PLATFORM
        assert "plan9" in status.detail
        assert status.backend.startswith("NullBackend(")

    def test_capture_and_own_backend_are_custom_backends(self) -> None:
        """A capture or a given backend is CUSTOM_BACKEND and available; after close() it is CLOSED."""
        with capture_etw_events():
            status = get_provider(unique_provider()).status
        assert (status.available, status.reason) == (True, StatusReason.CUSTOM_BACKEND)
        own = Provider(unique_provider(), backend=CaptureBackend("x"))
        assert (own.status.available, own.status.reason) == (True, StatusReason.CUSTOM_BACKEND)
        own.close()
        assert (own.status.available, own.status.reason) == (False, StatusReason.CLOSED)

    def test_invalid_name_for_the_os_format(self, no_platform: None, monkeypatch: pytest.MonkeyPatch) -> None:
        """A dotted name back on Linux's EventHeader runs disabled with reason INVALID_NAME."""
        monkeypatch.setattr(_platform, "PLATFORM", "linux")
        with capture_etw_events("tracelogging"):  # a dotted name is fine in TraceLogging...
            provider = get_provider(f"{unique_provider()}.Dotted")
        # ... and back on Linux's EventHeader it runs disabled, with the reason coded
        assert provider.status.reason is StatusReason.INVALID_NAME
        assert provider.status.available is False

    def test_reason_codes_of_the_user_events_backend(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """user_events raises KERNEL_TOO_OLD, NO_USER_EVENTS or OPEN_FAILED for each cause."""
        monkeypatch.setattr(user_events.sys, "platform", "linux")
        monkeypatch.setattr(user_events.platform, "release", lambda: "5.15.0-generic")
        with pytest.raises(BackendUnavailable) as old:
            user_events.UserEventsBackend("P")
        assert old.value.reason == StatusReason.KERNEL_TOO_OLD.value
        monkeypatch.setattr(user_events.platform, "release", lambda: "6.12.0")
        monkeypatch.setattr(user_events, "find_tracefs", lambda: None)
        with pytest.raises(BackendUnavailable) as missing:
            user_events.UserEventsBackend("P")
        assert missing.value.reason == StatusReason.NO_USER_EVENTS.value
        (tmp_path / "user_events_data").mkdir()  # opening a directory for writing fails: EISDIR
        monkeypatch.setattr(user_events, "find_tracefs", lambda: str(tmp_path))
        with pytest.raises(BackendUnavailable) as unopenable:
            user_events.UserEventsBackend("P")
        assert unopenable.value.reason == StatusReason.OPEN_FAILED.value

    def test_provider_carries_the_backend_code(
        self, no_platform: None, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A provider whose backend was unavailable carries the backend's reason code and detail."""
        monkeypatch.setattr(_platform, "PLATFORM", "linux")
        monkeypatch.setattr(user_events.platform, "release", lambda: "6.12.0")
        monkeypatch.setattr(user_events, "find_tracefs", lambda: None)
        with pytest.warns(EtwUnavailableWarning):
            provider = get_provider(unique_provider())
        assert provider.status.reason is StatusReason.NO_USER_EVENTS
        assert provider.status.detail.startswith("no user_events")


class TestUnavailableWarning:
    """The one-time warning has its own class and points at the line of the program, not the library."""

    def test_class_and_export(self) -> None:
        """EtwUnavailableWarning is a RuntimeWarning exported in structlog_etw.__all__."""
        assert issubclass(EtwUnavailableWarning, RuntimeWarning)
        assert "EtwUnavailableWarning" in structlog_etw.__all__

    @pytest.mark.parametrize(
        "make",
        [
            EtwRenderer,
            EtwHandler,
            get_provider,
            structlog_etw.make_etw_bound_logger,
        ],
        ids=["EtwRenderer", "EtwHandler", "get_provider", "make_etw_bound_logger"],
    )
    def test_points_at_the_callers_line(self, no_platform: None, make: object) -> None:
        """Every public set-up entry point warns at the caller's file, not the library's."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            make(unique_provider())  # type: ignore[operator]
        (warning,) = [w for w in caught if w.category is EtwUnavailableWarning]
        # this test's line is the first frame outside the library
        assert warning.filename == __file__

    def test_points_at_dict_config(self, no_platform: None) -> None:
        """An EtwHandler made by logging.config.dictConfig warns at the dictConfig caller's file."""
        config = {
            "version": 1,
            "handlers": {"etw": {"()": "structlog_etw.EtwHandler", "provider_or_name": unique_provider()}},
            "loggers": {"status.dictconfig": {"handlers": ["etw"]}},
        }
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            logging.config.dictConfig(config)
        (warning,) = [w for w in caught if w.category is EtwUnavailableWarning]
        assert warning.filename == __file__
        logging.getLogger("status.dictconfig").handlers.clear()

    def test_capture_end_does_not_warn(self, no_platform: None) -> None:
        """Ending a capture on a trace-less platform warns nothing; the status gives the reason."""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with capture_etw_events() as capture:
                provider = get_provider(unique_provider())
            assert len(capture) == 0
        # back on this (trace-less) platform: disabled, said by the status instead
        assert provider.status.reason is StatusReason.UNSUPPORTED_PLATFORM

    def test_warned_once_per_reason(self, no_platform: None) -> None:
        """Two providers unavailable for the same reason warn once, at this test's file."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            get_provider(unique_provider())
            get_provider(unique_provider())
        assert [w.category for w in caught] == [EtwUnavailableWarning]
        assert os.path.basename(caught[0].filename) == os.path.basename(__file__)
