"""Fixtures shared by the host test suite (the kernel tests have their own in tests/kernel/)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.fake_etw import Fake, build_apiset_library, build_fake_library


@pytest.fixture(scope="session")
def fake_library(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Path of the compiled fake ETW library (built once per session)."""
    return build_fake_library(tmp_path_factory.mktemp("fake_eventing"))


@pytest.fixture(scope="session")
def apiset_library(tmp_path_factory: pytest.TempPathFactory, fake_library: str) -> str:
    """Path of an API-set DLL stand-in: part of the fake library's functions, forwarded to it."""
    return build_apiset_library(tmp_path_factory.mktemp("fake_apiset"), fake_library)


@pytest.fixture
def fake(fake_library: str) -> Iterator[Fake]:
    """The fake ETW library, reset; fails the test if it leaves a registration or a session open."""
    f = Fake(fake_library)
    f.lib.fake_reset()
    yield f
    live = f.lib.fake_live_providers()
    sessions = f.lib.fake_sessions_in_use()
    f.lib.fake_reset()
    assert live == 0, "a test left an ETW registration open"
    assert sessions == 0, "a test left an ETW session running (or its trace open)"
