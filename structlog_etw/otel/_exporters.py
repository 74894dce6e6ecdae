"""The exporters of :mod:`structlog_etw.otel` (its docstring describes them); importing this module imports
the OpenTelemetry SDK."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import opentelemetry.sdk._logs as _sdk_logs
from opentelemetry.sdk._logs import export as _logs_export
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..backends.base import UNWRITABLE_WORD
from ..context._resolve import KeywordsByLogger
from ..formats._levels import check_keyword, valid_keyword
from ..provider._provider import Provider, get_provider
from ..write.fields import STR, Field, to_field, to_fields
from ._common_schema import otel_record_fields, otel_span_fields

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk._logs.export import LogRecordExporter as _LogExporterBase
    from opentelemetry.sdk._logs.export import LogRecordExportResult as _LogResult
else:  # newer SDKs name the interface LogRecordExporter; older ones LogExporter (records as LogData)
    ReadableLogRecord = getattr(_sdk_logs, "ReadableLogRecord", None) or _sdk_logs.LogData
    _LogExporterBase = getattr(_logs_export, "LogRecordExporter", None) or _logs_export.LogExporter
    _LogResult = getattr(_logs_export, "LogRecordExportResult", None) or _logs_export.LogExportResult

__all__ = ["WELL_KNOWN_SPAN_ATTRIBUTES", "EtwLogExporter", "EtwSpanExporter", "level_of_severity"]

#: Span attributes the exporters move into PartB under another name (both Rust trace exporters'
#: table); every other attribute goes into PartC under its own name.
WELL_KNOWN_SPAN_ATTRIBUTES: Final[Mapping[str, str]] = {
    "db.system.name": "dbSystem",
    "db.namespace": "dbName",
    "db.query.text": "dbStatement",
    "http.request.method": "httpMethod",
    "url.full": "httpUrl",
    "http.response.status_code": "httpStatusCode",
    "messaging.system": "messagingSystem",
    "messaging.destination.name": "messagingDestination",
    "messaging.url": "messagingUrl",
    "rpc.system.name": "rpcSystem",
    "rpc.response.status_code": "rpcGrpcStatusCode",
}
_HTTP_STATUS: Final = "httpStatusCode"
_SERVICE_NAME: Final = "service.name"
_SERVICE_INSTANCE: Final = "service.instance.id"
_STATUS_ERROR: Final = 2  # opentelemetry.trace.StatusCode.ERROR
_EVENTHEADER: Final = "eventheader"

_KeywordFor = Callable[[str | None, int], int]


def level_of_severity(severity_number: int) -> int:
    """The trace level of an OpenTelemetry severity number, as the exporters map it.

    FATAL (21-24) -> 1 critical, ERROR (17-20) -> 2, WARN (13-16) -> 3, INFO (9-12) -> 4,
    DEBUG and TRACE (1-8) and an unspecified severity (0) -> 5 verbose.
    """
    if severity_number >= 21:
        return 1
    if severity_number >= 17:
        return 2
    if severity_number >= 13:
        return 3
    if severity_number >= 9:
        return 4
    return 5


def _keyword_chooser(
    provider: Provider,
    keyword: int,
    keywords_by_scope: Mapping[str, int] | KeywordsByLogger | None,
    keyword_for: _KeywordFor | None,
) -> tuple[_KeywordFor | None, tuple[int, ...]]:
    """Decided once, at construction: ``(choose, keywords to register up front)``; ``choose`` is
    ``None`` when every record gets ``keyword``."""
    if keyword_for is not None:
        if not callable(keyword_for):
            raise TypeError(f"keyword_for must be callable, got {keyword_for!r}")
        user = keyword_for

        def choose_by_function(scope: str | None, number: int) -> int:
            try:
                kw = user(scope, number)
            except Exception:
                kw = None
            if kw is not None and valid_keyword(kw):
                return kw
            provider.count_invalid("keyword")
            return keyword

        return choose_by_function, ()
    if keywords_by_scope is None:
        return None, ()
    if isinstance(keywords_by_scope, KeywordsByLogger):
        table = keywords_by_scope
    elif isinstance(keywords_by_scope, Mapping):
        table = KeywordsByLogger(keywords_by_scope)
    else:
        raise TypeError(f"keywords_by_scope must be a mapping or KeywordsByLogger, got {keywords_by_scope!r}")
    if not table:
        return None, ()
    lookup = table.lookup

    def choose_by_scope(scope: str | None, number: int) -> int:
        kw = lookup(scope)
        return keyword if kw is None else kw

    return choose_by_scope, table.keywords()


class _Exporter:
    """What both exporters share: the provider, the keyword choice, the resource cache, shutdown,
    and their options (the one list of them; ``event_name`` ``None``: the exporter's own default)."""

    #: The name of every event when ``event_name`` is not given.
    default_event_name = "Log"

    def __init__(
        self,
        provider_name: str,
        *,
        keyword: int = 1,
        keywords_by_scope: Mapping[str, int] | KeywordsByLogger | None = None,
        keyword_for: _KeywordFor | None = None,
        event_name: str | None = None,
        resource_attributes: Iterable[str] = (),
        provider: Provider | None = None,
    ) -> None:
        if event_name is None:
            event_name = self.default_event_name
        check_keyword(keyword, "keyword")
        if not isinstance(event_name, str) or not event_name:
            raise ValueError(f"event_name must be a non-empty str, got {event_name!r}")
        keys = tuple(resource_attributes)
        for key in keys:
            if not isinstance(key, str):
                raise TypeError(f"resource_attributes must be str keys, got {key!r}")
        if provider is None:
            provider = get_provider(provider_name, keywords=(keyword,))
        elif provider.name != provider_name:
            raise ValueError(f"provider {provider.name!r} is not named {provider_name!r}")
        self._keyword = keyword
        self._choose, extra = _keyword_chooser(provider, keyword, keywords_by_scope, keyword_for)
        for kw in extra:  # the mapping's keywords are registered up front: perf can name them
            for level in range(1, 6):
                provider.slot(level, kw)
        for level in range(1, 6):
            provider.slot(level, keyword)
        #: The provider the events are written to (its ``stats()`` count what was not written).
        self.provider: Provider = provider
        #: The name of every event written (``"Log"`` / ``"Span"`` unless given).
        self.event_name: str = event_name
        self._resource_keys = frozenset(keys)
        self._resource: tuple[object, tuple[str | None, str | None], list[Field]] = (None, (None, None), [])
        self._shut_down = False

    def _from_resource(self, resource: Any) -> tuple[tuple[str | None, str | None], list[Field]]:
        """``(cloud role and instance, PartC resource fields)`` of ``resource``; the last one is kept."""
        last = self._resource
        if last[0] is resource:
            return last[1], last[2]
        attrs = getattr(resource, "attributes", None) or {}
        role = attrs.get(_SERVICE_NAME)
        instance = attrs.get(_SERVICE_INSTANCE)
        cloud = (None if role is None else str(role), None if instance is None else str(instance))
        own = [to_field(k, v) for k, v in attrs.items() if k in self._resource_keys]
        self._resource = (resource, cloud, own)
        return cloud, own

    def _slot_of(self, level: int, scope: Any, number: int) -> Any:
        """The slot a record goes to, or ``None`` when no session wants it (nothing converted yet)."""
        choose = self._choose
        kw = self._keyword if choose is None else choose(getattr(scope, "name", None), number)
        provider = self.provider
        slot = provider.slots.get((level, kw))
        if slot is None:
            slot = provider.slot(level, kw)
        if slot.enabled or slot.word is UNWRITABLE_WORD:  # unwritable: provider.write counts it
            return slot
        return None

    def _export_one(self, item: Any) -> bool:
        raise NotImplementedError

    def _export_all(self, batch: Iterable[Any]) -> bool:
        """Write each item some session wants; False if one failed (counted) or after shutdown."""
        if self._shut_down:
            return False
        ok = True
        try:
            for item in batch:
                try:
                    if not self._export_one(item):
                        ok = False
                except Exception:
                    ok = False
                    self._count_internal_error()
        except Exception:  # the batch itself cannot be iterated
            self._count_internal_error()
            return False
        return ok

    def _count_internal_error(self) -> None:
        with contextlib.suppress(Exception):  # a counter; nothing reaches the SDK
            self.provider.count_dropped("internal_error")

    def shutdown(self) -> None:
        """Stop exporting: later exports write nothing and return ``FAILURE`` (the SDK's contract)."""
        self._shut_down = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Always ``True``: every event is handed to the OS inside ``export``, nothing is buffered."""
        return True


class EtwLogExporter(_Exporter, _LogExporterBase):
    """An OpenTelemetry SDK log-record exporter writing Common Schema ``Log`` events.

    Use it with the SDK's processors, e.g.
    ``logger_provider.add_log_record_processor(SimpleLogRecordProcessor(EtwLogExporter("MyCompany_MyService")))``.
    Each record becomes one event named ``event_name`` (default ``"Log"``), at the level of its
    severity (:func:`level_of_severity`) and at a keyword chosen per record: ``keyword_for(scope
    name, severity number)`` when given, else the longest match of the instrumentation scope's
    name in ``keywords_by_scope`` (dotted prefixes, as :class:`structlog_etw.KeywordsByLogger`;
    the stdlib ``LoggingHandler`` names the scope after the logger), else ``keyword`` (default 1,
    the exporters' keyword).  An invalid keyword from ``keyword_for`` (or an exception) means
    ``keyword``, counted in ``stats()["invalid"]["keyword"]``.

    The resource's ``service.name`` and ``service.instance.id`` fill PartA's cloud role and
    instance; resource attributes named in ``resource_attributes`` are written into PartC.
    ``provider`` is a :class:`structlog_etw.Provider` of that name to write to (else
    :func:`structlog_etw.get_provider`).  ``shutdown`` stops the exporter (later exports write
    nothing and report failure); the provider stays registered for others of the process.
    """

    def export(self, batch: Sequence[ReadableLogRecord]) -> _LogResult:
        """Write every record some session wants; ``FAILURE`` if one could not be written.  Never raises."""
        return _LogResult.SUCCESS if self._export_all(batch) else _LogResult.FAILURE

    def _export_one(self, data: Any) -> bool:
        record = data.log_record
        severity = record.severity_number
        number = 0 if severity is None else int(severity.value)
        level = level_of_severity(number)
        slot = self._slot_of(level, data.instrumentation_scope, number)
        if slot is None:
            return True  # no session wants it: nothing built
        provider = self.provider
        # ReadableLogRecord (newer SDKs) holds the resource; the older LogData's record does
        resource = getattr(data, "resource", None) or getattr(record, "resource", None)
        cloud, res_fields = self._from_resource(resource)
        attributes = record.attributes
        fields = to_fields(attributes.items()) if attributes else []
        body = record.body
        if body is None:
            body_field: Field | None = None
        elif type(body) is str:
            body_field = ("body", STR, body)
        else:
            body_field = to_field("body", body)
        trace_id = record.trace_id
        span_id = record.span_id
        when = record.timestamp or record.observed_timestamp or time.time_ns()
        out = otel_record_fields(
            fields,
            fmt=provider.format,
            time_ns=when,
            severity_number=number,
            severity_text=record.severity_text,
            body=body_field,
            name=getattr(record, "event_name", None) or None,
            trace_id=f"{trace_id:032x}" if trace_id and span_id else None,
            span_id=f"{span_id:016x}" if trace_id and span_id else None,
            cloud=cloud,
            resource=res_fields,
        )
        return provider.write(slot, self.event_name, out)


class EtwSpanExporter(_Exporter, SpanExporter):
    """An OpenTelemetry SDK span exporter writing one Common Schema ``Span`` event per ended span.

    Use it with the SDK's span processors, e.g.
    ``tracer_provider.add_span_processor(SimpleSpanProcessor(EtwSpanExporter("MyCompany_MyService")))``.
    Each span is one event named ``event_name`` (default ``"Span"``) at ``level`` (default 4,
    informational, as the user_events trace exporter) and a keyword chosen as
    :class:`EtwLogExporter` does, with ``keyword_for(scope name, span kind number)``.  PartB
    carries the name, start time, kind, success (``False`` only for an ``ERROR`` status), parent
    span id, the links (JSON text ``[{"toTraceId":..,"toSpanId":..}]``), the status description
    and the well-known attributes (:data:`WELL_KNOWN_SPAN_ATTRIBUTES`); PartC every other
    attribute, lists and maps kept.  Span events (``span.add_event``) are not written, as the
    exporters do not write them.
    """

    #: The name of every Span event when ``event_name`` is not given.
    default_event_name = "Span"

    def __init__(
        self,
        provider_name: str,
        *,
        level: int = 4,
        keyword: int = 1,
        keywords_by_scope: Mapping[str, int] | KeywordsByLogger | None = None,
        keyword_for: Callable[[str | None, int], int] | None = None,
        event_name: str | None = None,
        resource_attributes: Iterable[str] = (),
        provider: Provider | None = None,
    ) -> None:
        if type(level) is not int or not 1 <= level <= 5:
            raise ValueError(f"level must be an int in 1..5, got {level!r}")
        super().__init__(
            provider_name,
            provider=provider,
            keyword=keyword,
            keywords_by_scope=keywords_by_scope,
            keyword_for=keyword_for,
            event_name=event_name,
            resource_attributes=resource_attributes,
        )
        #: The level of every Span event.
        self.level: int = level

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write every span some session wants; ``FAILURE`` if one could not be written.  Never raises."""
        return SpanExportResult.SUCCESS if self._export_all(spans) else SpanExportResult.FAILURE

    def _export_one(self, span: Any) -> bool:
        kind = int(span.kind.value)
        slot = self._slot_of(self.level, span.instrumentation_scope, kind)
        if slot is None:
            return True
        provider = self.provider
        fmt = provider.format
        cloud, res_fields = self._from_resource(span.resource)
        own: list[Field] = []
        well_known: list[Field] = []
        http_status = False
        attributes = span.attributes
        if attributes:
            for key, value in attributes.items():
                moved = WELL_KNOWN_SPAN_ATTRIBUTES.get(key)
                if moved is None:
                    own.append(to_field(key, value))
                else:
                    well_known.append(to_field(moved, value))
                    http_status = http_status or moved == _HTTP_STATUS
        status = span.status
        error = int(status.status_code.value) == _STATUS_ERROR
        message = status.description if error else None
        if http_status and fmt == _EVENTHEADER:
            message = None  # the user_events exporter leaves it out when httpStatusCode is there
        context = span.context
        parent = span.parent
        links = span.links
        end = span.end_time or time.time_ns()
        out = otel_span_fields(
            span.name,
            own,
            fmt=fmt,
            start_ns=span.start_time or end,
            stop_ns=end,
            trace_id=f"{context.trace_id:032x}",
            span_id=f"{context.span_id:016x}",
            parent_id=f"{parent.span_id:016x}" if parent is not None and parent.span_id else None,
            success=not error,
            status_message=message or None,
            kind=kind,
            cloud=cloud,
            links=_links_json(links) if links else None,
            well_known=well_known,
            resource=res_fields,
        )
        return provider.write(slot, self.event_name, out)


def _links_json(links: Sequence[Any]) -> str:
    """The exporters' ``links`` text: ``[{"toTraceId":"<32 hex>","toSpanId":"<16 hex>"},...]``."""
    parts = [
        f'{{"toTraceId":"{link.context.trace_id:032x}","toSpanId":"{link.context.span_id:016x}"}}'
        for link in links
    ]
    return "[" + ",".join(parts) + "]"
