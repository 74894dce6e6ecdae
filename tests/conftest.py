"""Fixtures shared by the host test suite (the kernel tests have their own in tests/kernel/)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.fake_etw import Fake, build_apiset_library, build_fake_library
from tests.helpers.forking import foreign_threads, threads_left_running

#: Seconds a thread a test started may take to finish after the test before it counts as left running.
THREAD_GRACE = 10.0


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


@pytest.fixture(autouse=True)
def no_thread_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test that leaves a thread it started running (a queue listener not stopped, an
    SDK batch processor not shut down): a later test that forks could give a child that inherits
    a lock that thread holds and waits for it forever, and its parent with it.  A module whose
    fixtures keep a thread for all its tests marks itself ``threads_outlive_test``."""
    before = set(foreign_threads())
    yield
    if request.node.get_closest_marker("threads_outlive_test"):
        return
    if alive := threads_left_running(before, THREAD_GRACE):
        names = ", ".join(f"{t.name} (target {getattr(t, '_target', None)!r})" for t in alive)
        pytest.fail(f"the test left {len(alive)} thread(s) running: {names}", pytrace=False)
