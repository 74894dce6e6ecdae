"""pytest plugin: the ``etw_capture`` fixtures (see :mod:`structlog_etw.testing`).

Registered through the ``pytest11`` entry point when structlog-etw is installed; otherwise add
``pytest_plugins = ["structlog_etw.pytest_plugin"]`` to your top-level ``conftest.py``.

pytest imports this module in every run of every project installed beside structlog-etw, so it
imports neither structlog nor the rest of the package: :mod:`structlog_etw.testing` loads when a
test first asks for a fixture.  The fixtures start no OS backend, so they warn nothing (no
``EtwUnavailableWarning``) and pass under ``pytest -W error`` on any host.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .testing import EtwCapture

__all__ = ["etw_capture", "etw_capture_tracelogging"]


@pytest.fixture
def etw_capture() -> Iterator[EtwCapture]:
    """Capture every event of the test in EventHeader format (what Linux user_events receives)."""
    from .testing import capture_etw_events  # noqa: PLC0415 - loads on first use (module docstring)

    with capture_etw_events("eventheader") as capture:
        yield capture


@pytest.fixture
def etw_capture_tracelogging() -> Iterator[EtwCapture]:
    """Capture every event of the test in TraceLogging format (what Windows ETW receives)."""
    from .testing import capture_etw_events  # noqa: PLC0415 - loads on first use (module docstring)

    with capture_etw_events("tracelogging") as capture:
        yield capture
