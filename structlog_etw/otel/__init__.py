"""OpenTelemetry SDK exporters: log records and spans as ETW / user_events events.

:class:`EtwLogExporter` (a log-record exporter of ``opentelemetry.sdk._logs.export``) and
:class:`EtwSpanExporter` (a ``opentelemetry.sdk.trace.export.SpanExporter``) write what the SDK
hands them through this package's providers: user_events tracepoints on Linux, ETW on Windows,
the capture of :func:`structlog_etw.testing.capture_etw_events` in tests.  The layout is the
Common Schema 4.0 one that Microsoft's OpenTelemetry exporters (``opentelemetry-user-events-logs``,
``-trace``, ``opentelemetry-etw-logs``, ``-traces``) write and their collectors read
(docs/otel-exporters.md has every field).  Beyond those exporters: a keyword per instrumentation
scope or severity (they always write 1), lists and maps kept as arrays and structs (they write
``""``), event names of your choice.

Install the ``otel`` extra (``pip install structlog-etw[otel]``); this module imports the
OpenTelemetry SDK, nothing else of the package does.  It does not import structlog.

An export hands each record to the provider only when a session wants its level and keyword;
the enabled check comes first, before anything of the record is converted.  ``export`` never
raises: what cannot be written is counted in the provider's ``stats()`` and the batch reports
``FAILURE``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ._exporters import WELL_KNOWN_SPAN_ATTRIBUTES, EtwLogExporter, EtwSpanExporter, level_of_severity

__all__ = ["WELL_KNOWN_SPAN_ATTRIBUTES", "EtwLogExporter", "EtwSpanExporter", "level_of_severity"]

# The exporters (and with them the OpenTelemetry SDK) load on first use of a name: the package's
# private modules (correlation, Common Schema layouts) need no SDK.
__getattr__, __dir__ = _lazy_exports(globals(), dict.fromkeys(__all__, "._exporters"))
