"""structlog events as ETW TraceLogging events (Windows) and user_events EventHeader tracepoints (Linux).

import structlog
from structlog_etw import EtwRenderer

structlog.configure(processors=[structlog.processors.add_log_level, EtwRenderer("MyCompany_MyService")])
structlog.get_logger().info("user_login", user="ann", attempts=3)
"""

from __future__ import annotations

from ._provider import Provider, close_all, get_provider
from ._renderer import EtwRenderer

__version__ = "0.1.0"

__all__ = ["EtwRenderer", "Provider", "__version__", "close_all", "get_provider"]
