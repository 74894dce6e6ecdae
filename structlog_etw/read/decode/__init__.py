"""One decoder per format: :mod:`structlog_etw.read.decode.eventheader` (Linux user_events) and
:mod:`structlog_etw.read.decode.tracelogging` (Windows ETW)."""

__all__: list[str] = []
