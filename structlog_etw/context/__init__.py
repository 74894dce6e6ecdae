"""An event's context, below both front ends: how control values resolve to a provider's slot
(control keys, event names, keywords by logger name), activities and the current activity, and
OpenTelemetry span correlation.

The structlog surface (:mod:`structlog_etw`) and the OpenTelemetry SDK exporters
(:mod:`structlog_etw.otel`) both use it, so nothing here imports structlog or the SDK.  Its public
names are exported by :mod:`structlog_etw` itself; the modules here are private.
"""

__all__: list[str] = []
