"""structlog events as ETW TraceLogging events (Windows) and user_events EventHeader tracepoints (Linux)."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
