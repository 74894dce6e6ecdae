"""structlog events as ETW TraceLogging events (Windows) and user_events EventHeader tracepoints (Linux)."""

from __future__ import annotations

from ._activity import Activity, current_activity_id, etw_activity
from ._otel import add_otel_ids, use_otel_activity_ids

__version__ = "0.1.0"

__all__ = [
    "Activity",
    "__version__",
    "add_otel_ids",
    "current_activity_id",
    "etw_activity",
    "use_otel_activity_ids",
]
