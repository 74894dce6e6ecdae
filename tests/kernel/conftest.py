"""Fixtures and collection rules for tests that need a real kernel with user_events.

Mark such tests ``@pytest.mark.kernel`` and put them in ``tests/kernel/``.

* On a machine whose kernel has user_events (and write access to ``user_events_data``),
  ``pytest`` runs them like any other test.
* Elsewhere a plain ``pytest`` run *deselects* them and says so in the summary; they run in
  a virtme-ng guest through ``python tests/kernel/run_in_guest.py`` (``nox -s kernel``).
* When they are asked for explicitly (``-m kernel``, or inside the guest) and the kernel or
  ``perf`` is missing, every one of them FAILS with the reason: never a skip.

Fixtures: ``kernel_out_dir`` (where perf.data files go: the guest's ``--rwdir`` when set),
``perf_session`` (start a :class:`kernel_harness.PerfSession`), ``provider_name`` (a
tracepoint-safe provider name unique to the test), ``user_events_backend`` (open a
:class:`~structlog_etw.backends.user_events.UserEventsBackend` closed at teardown).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import pytest
from kernel_harness import PerfSession, perf_path, user_events_unavailable_reason

from structlog_etw.backends.user_events import UserEventsBackend

#: Set by run_in_guest.py: the directory the guest may write (perf.data, logs).
OUT_ENV = "STRUCTLOG_ETW_KERNEL_OUT"
#: Set by run_in_guest.py: these tests were asked for; never deselect them.
REQUIRE_ENV = "STRUCTLOG_ETW_KERNEL_REQUIRED"

_deselected: list[str] = []


def _explicitly_requested(config: pytest.Config) -> bool:
    if os.environ.get(REQUIRE_ENV):
        return True
    expr = str(config.getoption("markexpr", "") or "")
    return bool(re.search(r"(?<!not )\bkernel\b", expr))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect ``kernel`` tests (loudly) where they cannot run and were not asked for."""
    kernel = [item for item in items if item.get_closest_marker("kernel") is not None]
    if not kernel or _explicitly_requested(config):
        return
    reason = user_events_unavailable_reason()
    if reason is None:
        return
    config.hook.pytest_deselected(items=kernel)
    keep = set(map(id, kernel))
    items[:] = [item for item in items if id(item) not in keep]
    _deselected[:] = [reason, str(len(kernel))]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say that kernel tests were deselected, why, and how to run them."""
    if _deselected:
        reason, count = _deselected
        terminalreporter.write_sep("=", "kernel tests deselected", yellow=True)
        terminalreporter.write_line(
            f"{count} tests marked 'kernel' were deselected: {reason}.\n"
            "They run in a virtme-ng guest with a user_events kernel: "
            "`nox -s kernel` or `python tests/kernel/run_in_guest.py`."
        )


@pytest.fixture(autouse=True)
def _kernel_prerequisites(request: pytest.FixtureRequest) -> None:
    """A kernel test fails (not skips) when user_events or perf are missing."""
    if request.node.get_closest_marker("kernel") is None:
        return
    reason = user_events_unavailable_reason()
    if reason is not None:
        pytest.fail(f"kernel test cannot run: {reason}", pytrace=False)
    if perf_path() is None:
        pytest.fail(
            "kernel test cannot run: perf is not installed (apt-get install linux-perf)", pytrace=False
        )


@pytest.fixture
def kernel_out_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A directory for this test's perf.data and perf logs (kept on the host after a guest run)."""
    base = os.environ.get(OUT_ENV)
    if not base:
        return tmp_path
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)[-120:]
    out = Path(base) / safe
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def perf_session(kernel_out_dir: Path) -> Iterator[Callable[..., PerfSession]]:
    """Factory: ``with perf_session(["Prov_L4K1", ...], label="perf") as s: ...``.

    The session is recording (all events enabled) when the ``with`` body starts; after the
    block ``s.events()`` decodes the capture.  Sessions left running are stopped at teardown.
    """
    started: list[PerfSession] = []

    def make(tracepoints: Iterable[str], label: str = "perf", extra_args: Sequence[str] = ()) -> PerfSession:
        session = PerfSession(tracepoints, kernel_out_dir, label=label, extra_args=extra_args)
        started.append(session)
        return session

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def provider_name(request: pytest.FixtureRequest) -> str:
    """A provider name unique to this test and process (letters, digits, ``_``)."""
    base = re.sub(r"[^A-Za-z0-9]+", "", request.node.name.title())[:40]
    return f"SlEtw{base}P{os.getpid()}"


@pytest.fixture
def user_events_backend() -> Iterator[Callable[..., UserEventsBackend]]:
    """Factory: ``user_events_backend(provider_name, group=None)``; closed at teardown."""
    opened: list[UserEventsBackend] = []

    def make(provider: str, group: str | None = None) -> UserEventsBackend:
        backend = UserEventsBackend(provider, group)
        opened.append(backend)
        return backend

    yield make
    for b in opened:
        b.close()
