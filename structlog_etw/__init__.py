"""structlog events as ETW TraceLogging events (Windows) and user_events EventHeader tracepoints (Linux)."""

from __future__ import annotations

from ._activity import Activity, current_activity_id, etw_activity

__version__ = "0.1.0"

__all__ = ["Activity", "__version__", "current_activity_id", "etw_activity"]
