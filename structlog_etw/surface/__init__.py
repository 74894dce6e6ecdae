"""The structlog surface: the only code of the package that imports structlog.

The renderer, the bound-logger wrapper, the stdlib handlers and the contextvars watch; what an
event's control keys and activity resolve to lives below it, in :mod:`structlog_etw.context`, which
the OpenTelemetry exporters share.  Its public names are exported by
:mod:`structlog_etw` itself; the modules here are private.
"""

__all__: list[str] = []
