"""structlog events as ETW TraceLogging events (Windows) and user_events EventHeader tracepoints (Linux).

Example::

    import structlog
    from structlog_etw import EtwRenderer

    structlog.configure(processors=[structlog.processors.add_log_level, EtwRenderer("MyCompany_MyService")])
    structlog.get_logger().info("user_login", user="ann", attempts=3)
"""

from __future__ import annotations

from ._activity import Activity, current_activity_id, etw_activity
from ._otel import add_otel_ids, use_otel_activity_ids
from ._provider import Provider, close_all, get_provider
from ._renderer import EtwRenderer
from ._resolve import KeywordsByLogger
from ._stdlib import EtwHandler
from ._wrapper import EtwEarlyDrop, make_etw_bound_logger

__version__ = "0.1.0"

__all__ = [
    "Activity",
    "EtwEarlyDrop",
    "EtwHandler",
    "EtwRenderer",
    "KeywordsByLogger",
    "Provider",
    "__version__",
    "add_otel_ids",
    "close_all",
    "current_activity_id",
    "etw_activity",
    "get_provider",
    "make_etw_bound_logger",
    "use_otel_activity_ids",
]
