"""ETW provider id from a provider name (the EventSource / TraceLogging ``*Name`` convention).

One implementation serves the encoder and the CLI: this module re-exports
:func:`structlog_etw._tracelogging.provider_id`.
"""

from __future__ import annotations

from ._tracelogging import provider_id

__all__ = ["provider_id"]
