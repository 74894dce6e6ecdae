"""Context that follows threads' copied contexts and asyncio tasks: the current activity."""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["CURRENT_ACTIVITY"]

#: ``(activity_id, related_id)`` of the innermost activity (16 raw bytes each, RFC 4122 order),
#: or ``None`` outside any activity.  Set and reset only by ``_activity``; read by the renderer.
#: Its name must not start with ``structlog_``: ``structlog.contextvars.merge_contextvars`` copies
#: every such variable into the event dict (the ids would become an ``etw_activity`` field).
CURRENT_ACTIVITY: ContextVar[tuple[bytes, bytes | None] | None] = ContextVar(
    "structlog-etw.current-activity", default=None
)
