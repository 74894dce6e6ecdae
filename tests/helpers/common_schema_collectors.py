"""How Microsoft's user_events collectors read a Common Schema event, written down from their source.

Two stages, as a Linux event travels to Geneva:

1. **otel-arrow's user_events receiver** (repository ``open-telemetry/otel-arrow``, commit
   ``929d7e87d6402c4a5a92b97fb0f9d4f5535b983b``, file
   ``rust/otap-dataflow/crates/contrib-nodes/src/receivers/user_events_receiver/decoder.rs``:
   ``decode_eventheader_attrs`` and ``item_as_any_scalar_value``) turns an EventHeader event into
   a flat list of OTLP log attributes: struct members get dot-joined names (``PartB.body``), each
   element of an array becomes one attribute under the array's name, and only these values
   survive (anything else is dropped silently):

   - ``StringLength16Char8`` (any format) -> the UTF-8 text (invalid UTF-8: dropped);
   - ``Value8``: Boolean -> bool, SignedInt -> int8, else uint8;
   - ``Value16``: SignedInt -> int16, else uint16;
   - ``Value32``: Float -> float32, Boolean -> bool (non-zero), SignedInt -> int32, else uint32;
   - ``Value64``: Float -> double, SignedInt -> int64, else uint64 (saturated at 2**63-1).

   The record's time is the perf sample time, its event name the tracepoint name, its body and
   severity empty: the receiver itself promotes nothing.

2. **The Geneva uploader's OTLP encoder** (repository ``open-telemetry/opentelemetry-rust-contrib``,
   commit ``e075a6c382cb9e46aa48e319c141d909692ed966``, file
   ``opentelemetry-exporter-geneva/geneva-uploader/src/payload_encoder/otlp_encoder.rs``:
   ``is_common_schema_record``, ``CommonSchemaParts::parse`` / ``apply_attr``) treats a log record
   as Common Schema only when an attribute ``__csver__`` is an *integer* equal to ``0x400`` and an
   attribute ``PartB._typeName`` is the string ``"Log"``.  It then promotes, from the attributes
   from the first Common Schema key on:

   - ``PartA.time`` (RFC 3339) -> the record's timestamp;
   - ``PartA.ext_dt_traceId`` / ``PartA.ext_dt.traceId`` -> trace id, only if exactly 32 hex digits;
   - ``PartA.ext_dt_spanId`` / ``PartA.ext_dt.spanId`` -> span id, only if exactly 16 hex digits;
   - ``PartA.ext_cloud_role`` / ``.ext_cloud.role``, ``..._roleInstance`` -> role, role instance;
   - ``PartB.body`` (a string) -> body; ``PartB.severityNumber`` (an int) -> severity number;
     ``PartB.severityText`` -> severity text; ``PartB.name`` (else ``PartA.name``) -> name;
   - ``PartB.eventId`` and every other ``PartA.x`` / ``PartB.x`` / ``PartC.x`` -> a column ``x``.

   A record that is not Common Schema keeps every attribute as a column of its own name.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from .eventheader_reader import parse

Attr = tuple[str, Any]

_STRING16 = 10
_VALUE8, _VALUE16, _VALUE32, _VALUE64 = 2, 3, 4, 5
_FMT_SIGNED, _FMT_BOOLEAN, _FMT_FLOAT = 2, 7, 8
_I64_MAX = (1 << 63) - 1
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")
_HEX = re.compile(r"^[0-9a-fA-F]*$")


def _unsigned(value: Any) -> int:
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(value, "little")
    return int(value)


def _scalar(encoding: int, fmt: int, value: Any) -> Any:
    """``item_as_any_scalar_value``: the attribute value of one item, or ``None`` (dropped)."""
    base = encoding & 0x1F
    if base == _STRING16:
        if isinstance(value, str):
            return value
        try:
            return bytes(value).decode("utf-8")
        except Exception:
            return None
    if base == _VALUE8:
        if fmt == _FMT_BOOLEAN:
            return bool(value)
        return int(value) if fmt == _FMT_SIGNED else _unsigned(value)
    if base == _VALUE16:
        return int(value) if fmt == _FMT_SIGNED else _unsigned(value)
    if base == _VALUE32:
        if fmt == _FMT_FLOAT:
            return float(value)
        if fmt == _FMT_BOOLEAN:
            return bool(value)
        return int(value) if fmt == _FMT_SIGNED else _unsigned(value)
    if base == _VALUE64:
        if fmt == _FMT_FLOAT:
            return float(value)
        return int(value) if fmt == _FMT_SIGNED else min(_unsigned(value), _I64_MAX)
    return None


def otel_arrow_attributes(event: bytes) -> list[Attr]:
    """The attributes otel-arrow's receiver makes of one EventHeader event (``decode_eventheader_attrs``).

    Bytes after the last field are ignored, as the receiver's enumerator ignores them (a perf
    sample's raw data is padded to 8 bytes).
    """
    out: list[Attr] = []
    _flatten(parse(event, trailing_ok=True).fields, [], out)
    return out


def _flatten(fields: list[Any], prefix: list[str], out: list[Attr]) -> None:
    for name, encoding, fmt, value in fields:
        if encoding & 0x1F == 1:  # struct: members under "<prefix>.<name>."
            _flatten(value, [*prefix, name], out)
            continue
        key = ".".join([*prefix, name])
        items = value if encoding & 0x60 else [value]  # array: one attribute per element
        for item in items:
            v = _scalar(encoding, fmt, item)
            if v is not None:
                out.append((key, v))


@dataclass
class GenevaRecord:
    """A log record as the Geneva uploader encodes it (the promoted columns and the rest)."""

    common_schema: bool
    timestamp_ns: int
    name: str | None = None
    severity_number: int = 0
    severity_text: str | None = None
    body: str | None = None
    trace_id: bytes | None = None
    span_id: bytes | None = None
    role: str | None = None
    role_instance: str | None = None
    columns: list[Attr] = field(default_factory=list)


def _is_int(value: Any) -> bool:
    return type(value) is int  # value_as_i64: numeric only (not bool, not text, not float)


def is_common_schema_record(attrs: list[Attr]) -> bool:
    """``is_common_schema_record``: ``__csver__`` an int equal to 0x400 and ``PartB._typeName == "Log"``."""
    version = log_type = False
    for key, value in attrs:
        if key == "__csver__":
            version = _is_int(value) and value == 0x400
        elif key == "PartB._typeName":
            log_type = isinstance(value, str) and value == "Log"
        if version and log_type:
            return True
    return False


def _parse_rfc3339(text: str) -> int | None:
    if not _RFC3339.match(text):
        return None
    head, _, rest = text.partition(".")
    frac = ""
    zone = rest or head[19:]
    if rest:
        digits = re.match(r"\d+", rest)
        assert digits is not None
        frac = digits.group()
        zone = rest[len(frac) :]
    stamp = dt.datetime.fromisoformat(head[:19] + ("+00:00" if zone in ("Z", "z") else zone))
    return int(stamp.timestamp()) * 1_000_000_000 + int((frac + "000000000")[:9])


def _hex_bytes(text: str, size: int) -> bytes | None:
    text = text.strip()
    if len(text) != size * 2 or not _HEX.match(text):
        return None
    return bytes.fromhex(text)


def _is_cs_key(key: str) -> bool:
    return key in ("__csver__", "PartB._typeName") or key.startswith(("PartA.", "PartB.", "PartC."))


def geneva_record(attrs: list[Attr], *, sample_time_ns: int = 0) -> GenevaRecord:
    """The record the Geneva uploader encodes from otel-arrow's attributes (``LogRecordParts::new``)."""
    if not is_common_schema_record(attrs):
        return GenevaRecord(False, sample_time_ns, columns=list(attrs))
    rec = GenevaRecord(True, sample_time_ns)
    part_a_name = part_b_name = None
    seen = False
    for key, value in attrs:
        if not (seen or _is_cs_key(key)):
            rec.columns.append((key, value))
            continue
        seen = True
        text = value if isinstance(value, str) else None
        if key in ("__csver__", "PartB._typeName"):
            continue
        if key == "PartA.time":
            t = None if text is None else _parse_rfc3339(text)
            if t is not None:
                rec.timestamp_ns = t
        elif key == "PartA.name":
            part_a_name = text or part_a_name
        elif key == "PartB.name":
            part_b_name = text or part_b_name
        elif key in ("PartA.ext_dt_traceId", "PartA.ext_dt.traceId"):
            rec.trace_id = (None if text is None else _hex_bytes(text, 16)) or rec.trace_id
        elif key in ("PartA.ext_dt_spanId", "PartA.ext_dt.spanId"):
            rec.span_id = (None if text is None else _hex_bytes(text, 8)) or rec.span_id
        elif key in ("PartA.ext_cloud_role", "PartA.ext_cloud.role"):
            if text and text.strip():
                rec.role = text
        elif key in ("PartA.ext_cloud_roleInstance", "PartA.ext_cloud.roleInstance"):
            if text and text.strip():
                rec.role_instance = text
        elif key == "PartB.body":
            if text is not None:
                rec.body = text
            else:
                rec.columns.append(("body", value))
        elif key == "PartB.severityNumber":
            if _is_int(value):
                rec.severity_number = value if -(1 << 31) <= value < (1 << 31) else 0
        elif key == "PartB.severityText":
            if text:
                rec.severity_text = text
        elif key == "PartB.eventId":
            rec.columns.append(("eventId", value))
        elif key.startswith(("PartA.", "PartB.", "PartC.")):
            rec.columns.append((key[6:], value))
        else:
            rec.columns.append((key, value))
    rec.name = part_b_name or part_a_name
    return rec


def read_like_geneva(event: bytes, *, sample_time_ns: int = 0) -> GenevaRecord:
    """One EventHeader event through both stages: otel-arrow's receiver, then the Geneva encoder."""
    return geneva_record(otel_arrow_attributes(event), sample_time_ns=sample_time_ns)


__all__ = [
    "GenevaRecord",
    "geneva_record",
    "is_common_schema_record",
    "otel_arrow_attributes",
    "read_like_geneva",
]
