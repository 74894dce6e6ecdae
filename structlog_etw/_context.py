"""Context that follows threads' copied contexts and asyncio tasks: the current activity."""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["CURRENT_ACTIVITY"]

#: ``(activity_id, related_id)`` of the innermost activity (16 raw bytes each, RFC 4122 order),
#: or ``None`` outside any activity.  Set and reset only by ``_activity``; read by the renderer.
CURRENT_ACTIVITY: ContextVar[tuple[bytes, bytes | None] | None] = ContextVar(
    "structlog_etw_activity", default=None
)
