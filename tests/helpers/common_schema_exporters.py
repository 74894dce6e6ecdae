"""The bytes OpenTelemetry's user_events exporters would write, modelled from their source.

Independent of the package's encoder: a small model of ``eventheader_dynamic::EventBuilder``
(repository ``microsoft/LinuxTracepoints-Rust``, commit
``bb466c10cb7a5aa8d13fba34f4f1824706be1734``, ``eventheader_dynamic/src/builder.rs``: ``reset``,
``raw_add_meta``, ``add_value``, ``add_str``, ``add_struct_with_bookmark``,
``set_struct_field_count``, ``write``), driven by the call sequences of

- ``opentelemetry-user-events-logs/src/logs/exporter.rs`` (``export_log_data``, ``build_part_a``)
- ``opentelemetry-user-events-trace/src/trace/exporter.rs`` (``export_span``)

in ``open-telemetry/opentelemetry-rust-contrib`` at commit ``e075a6c382cb9e46aa48e319c141d909692ed966``.

Builder rules: the metadata starts with the event name and a NUL; a field is its name, a NUL and
the encoding byte, with ``0x80`` and a format byte after it when the format is not 0; a struct is
encoding ``Struct`` (1) with its field count as the format byte.  Values are little-endian; a
``&str`` is ``StringLength16Char8`` (10): u16 length + UTF-8.  ``write`` emits the 8-byte header
(flags 0x07, version 0, id 0, tag, opcode Info 0, level), the Metadata extension (u16 size, u16
kind 1) with the metadata, then the data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

ENC_STRUCT, ENC_VALUE8, ENC_VALUE16, ENC_VALUE32, ENC_VALUE64, ENC_STR16 = 1, 2, 3, 4, 5, 10
FMT_DEFAULT, FMT_UNSIGNED, FMT_SIGNED, FMT_BOOLEAN, FMT_FLOAT = 0, 1, 2, 7, 8
_WIDTH = {ENC_VALUE8: "B", ENC_VALUE16: "H", ENC_VALUE32: "I", ENC_VALUE64: "Q"}
_SIGNED = {ENC_VALUE8: "b", ENC_VALUE16: "h", ENC_VALUE32: "i", ENC_VALUE64: "q"}


class EventBuilder:
    """``eventheader_dynamic::EventBuilder`` for the calls the exporters make."""

    def __init__(self) -> None:
        self.meta = bytearray()
        self.data = bytearray()
        self.tag = 0

    def reset(self, name: str, event_tag: int = 0) -> None:
        self.meta = bytearray(name.encode() + b"\0")
        self.data = bytearray()
        self.tag = event_tag

    def _meta(self, name: str, encoding: int, fmt: int) -> None:
        self.meta += name.encode() + b"\0"
        self.meta += bytes((0x80 | encoding, fmt)) if fmt else bytes((encoding,))

    def add_value(self, name: str, value: float | bool, encoding: int, fmt: int) -> None:
        """``add_value``: the value type's width decides the encoding (bool: Value8)."""
        self._meta(name, encoding, fmt)
        if fmt == FMT_FLOAT:
            self.data += struct.pack("<d" if encoding == ENC_VALUE64 else "<f", value)
        else:
            code = _SIGNED[encoding] if fmt == FMT_SIGNED else _WIDTH[encoding]
            self.data += struct.pack("<" + code, int(value))

    def add_str(self, name: str, value: str) -> None:
        self._meta(name, ENC_STR16, FMT_DEFAULT)
        b = value.encode()
        self.data += struct.pack("<H", len(b)) + b

    def add_struct_with_bookmark(self, name: str, count: int) -> int:
        self._meta(name, ENC_STRUCT, count)
        return len(self.meta) - 1

    def set_struct_field_count(self, bookmark: int, count: int) -> None:
        masked = count & 0x7F
        if masked == 0:
            raise AssertionError("updated_struct_field_count must not be 0")  # the Rust assert!
        self.meta[bookmark] = (self.meta[bookmark] & 0x80) | masked

    def write(self, level: int) -> bytes:
        header = struct.pack("<BBHHBB", 0x07, 0, 0, self.tag, 0, level)
        return header + struct.pack("<HH", len(self.meta), 1) + bytes(self.meta) + bytes(self.data)


@dataclass
class LogRecord:
    """The parts of an OpenTelemetry log record ``export_log_data`` reads."""

    time: str
    severity_number: int
    level: int
    body: str | None = None
    severity_text: str | None = None
    event_name: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    attributes: tuple[tuple[str, object], ...] = ()
    cloud_role: str | None = None
    cloud_role_instance: str | None = None


def _add_attribute(eb: EventBuilder, name: str, value: object) -> None:
    """``add_attribute_to_event``: bool, i64, f64, str; anything else as ``""``."""
    if isinstance(value, bool):
        eb.add_value(name, value, ENC_VALUE8, FMT_BOOLEAN)
    elif isinstance(value, int):
        eb.add_value(name, value, ENC_VALUE64, FMT_SIGNED)
    elif isinstance(value, float):
        eb.add_value(name, value, ENC_VALUE64, FMT_FLOAT)
    elif isinstance(value, str):
        eb.add_str(name, value)
    else:
        eb.add_str(name, "")


def log_event(rec: LogRecord) -> bytes:
    """What ``UserEventsExporter::export_log_data`` writes for ``rec`` (default event name ``Log``)."""
    eb = EventBuilder()
    eb.reset("Log", 0)
    eb.add_value("__csver__", 1024, ENC_VALUE32, FMT_UNSIGNED)  # u32 literal 1024
    # build_part_a
    mark = eb.add_struct_with_bookmark("PartA", 2)
    count = 1
    eb.add_str("time", rec.time)
    if rec.trace_id is not None and rec.span_id is not None:
        count += 2
        eb.add_str("ext_dt_traceId", rec.trace_id)
        eb.add_str("ext_dt_spanId", rec.span_id)
    if rec.cloud_role is not None:
        count += 1
        eb.add_str("ext_cloud_role", rec.cloud_role)
    if rec.cloud_role_instance is not None:
        count += 1
        eb.add_str("ext_cloud_roleInstance", rec.cloud_role_instance)
    eb.set_struct_field_count(mark, count)
    # PartC: attributes, an int event_id moved to PartB
    event_id = None
    c_mark = c_count = 0
    for key, value in rec.attributes:
        if key == "event_id" and isinstance(value, int) and not isinstance(value, bool):
            event_id = value
            continue
        if not c_count:
            c_mark = eb.add_struct_with_bookmark("PartC", 1)
        _add_attribute(eb, key, value)
        c_count += 1
    if c_count:
        eb.set_struct_field_count(c_mark, c_count)
    # PartB
    b_mark = eb.add_struct_with_bookmark("PartB", 1)
    b_count = 1
    eb.add_str("_typeName", "Log")
    if rec.body is not None:
        eb.add_str("body", rec.body)
        b_count += 1
    eb.add_value("severityNumber", rec.severity_number, ENC_VALUE16, FMT_SIGNED)  # as i16
    b_count += 1
    if rec.severity_text is not None:
        eb.add_str("severityText", rec.severity_text)
        b_count += 1
    if event_id is not None:
        eb.add_value("eventId", event_id, ENC_VALUE64, FMT_SIGNED)
        b_count += 1
    if rec.event_name is not None and rec.event_name.strip():
        eb.add_str("name", rec.event_name)
        b_count += 1
    eb.set_struct_field_count(b_mark, b_count)
    return eb.write(rec.level)


@dataclass
class SpanRecord:
    """The parts of an OpenTelemetry span ``export_span`` reads.

    ``links`` are ``(trace id, span id)`` hex pairs (written as the exporter's ``links_to_json``
    text); ``well_known`` the PartB fields of well-known attributes, already renamed
    (``("httpMethod", "GET")``), in the span's attribute order."""

    name: str
    start_time: str
    end_time: str
    trace_id: str
    span_id: str
    parent_id: str | None = None
    success: bool = True
    kind: int = 0
    status_message: str | None = None
    attributes: tuple[tuple[str, object], ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    well_known: tuple[tuple[str, object], ...] = ()
    cloud_role: str | None = None
    cloud_role_instance: str | None = None


def span_event(span: SpanRecord) -> bytes:
    """What ``UserEventsSpanExporter::export_span`` writes (event ``Span``, level Informational)."""
    eb = EventBuilder()
    eb.reset("Span", 0)
    eb.add_value("__csver__", 1024, ENC_VALUE32, FMT_UNSIGNED)
    mark = eb.add_struct_with_bookmark("PartA", 3)
    eb.add_str("time", span.end_time)
    eb.add_str("ext_dt_traceId", span.trace_id)
    eb.add_str("ext_dt_spanId", span.span_id)
    count = 3
    if span.cloud_role is not None:
        count += 1
        eb.add_str("ext_cloud_role", span.cloud_role)
    if span.cloud_role_instance is not None:
        count += 1
        eb.add_str("ext_cloud_roleInstance", span.cloud_role_instance)
    eb.set_struct_field_count(mark, count)
    b_mark = eb.add_struct_with_bookmark("PartB", 5)
    eb.add_str("_typeName", "Span")
    eb.add_str("name", span.name)
    eb.add_str("startTime", span.start_time)
    eb.add_value("success", span.success, ENC_VALUE8, FMT_BOOLEAN)
    eb.add_value("kind", span.kind, ENC_VALUE32, FMT_UNSIGNED)  # i32 literal
    count = 5
    if span.parent_id is not None:
        eb.add_str("parentId", span.parent_id)
        count += 1
    if span.links:
        text = ",".join(f'{{"toTraceId":"{t}","toSpanId":"{s}"}}' for t, s in span.links)
        eb.add_str("links", f"[{text}]")
        count += 1
    for key, value in span.well_known:
        _add_attribute(eb, key, value)
        count += 1
    if span.status_message and not any(k == "httpStatusCode" for k, _ in span.well_known):
        eb.add_str("statusMessage", span.status_message)
        count += 1
    eb.set_struct_field_count(b_mark, count)
    if span.attributes:
        eb.add_struct_with_bookmark("PartC", len(span.attributes))
        for key, value in span.attributes:
            _add_attribute(eb, key, value)
    return eb.write(4)
