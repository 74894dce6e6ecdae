"""pytest plugin: the ``etw_capture`` fixture (see :mod:`structlog_etw.testing`).

Registered through the ``pytest11`` entry point when structlog-etw is installed; otherwise add
``pytest_plugins = ["structlog_etw.pytest_plugin"]`` to your top-level ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .testing import EtwCapture, capture_etw_events

__all__ = ["etw_capture", "etw_capture_tracelogging"]


@pytest.fixture
def etw_capture() -> Iterator[EtwCapture]:
    """Capture every event of the test in EventHeader format (what Linux user_events receives)."""
    with capture_etw_events("eventheader") as capture:
        yield capture


@pytest.fixture
def etw_capture_tracelogging() -> Iterator[EtwCapture]:
    """Capture every event of the test in TraceLogging format (what Windows ETW receives)."""
    with capture_etw_events("tracelogging") as capture:
        yield capture
