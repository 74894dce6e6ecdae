"""Fixtures of the ETW session tests: the C stand-in on Linux, the real advapi32 on Windows."""

from __future__ import annotations

import ctypes
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from structlog_etw.provider import _platform
from structlog_etw.provider._provider import set_backend_factory
from structlog_etw.testing import isolated_providers
from tests.helpers.shared_data import skip_or_fail


@dataclass
class EtwOs:
    """Where the session tests run: ``library`` None means the real Windows DLLs."""

    library: str | None
    provider: str  # a provider name unique to the test


def _is_admin() -> bool:
    try:
        return bool(ctypes.windll.shell32.IsUserAnAdmin())  # type: ignore[attr-defined]
    except Exception:
        return False


@pytest.fixture
def etw_os(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[EtwOs]:
    """Providers on the Windows path: on Windows the real ETW (admin needed: sessions), elsewhere
    the compiled stand-in of advapi32.  In CI on Windows a missing admin right fails, never skips."""
    if sys.platform == "win32":
        if not _is_admin():
            skip_or_fail("ETW sessions need an elevated (administrator) process")
        library = None
    else:
        library = request.getfixturevalue("fake").path
        monkeypatch.setattr(_platform, "PLATFORM", "win32")
        monkeypatch.setattr(_platform, "ETW_LIBRARY", library)
    with isolated_providers():
        set_backend_factory(None)  # the OS path (restored with the registry)
        yield EtwOs(library, f"StructlogEtw_Session_{uuid.uuid4().hex[:10]}")
