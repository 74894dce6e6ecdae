"""The fixed-width integer kinds Common Schema prescribes (U8, I16, U16, U32), in both encoders."""

from __future__ import annotations

import pytest

from structlog_etw import Provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.formats.tracelogging import InType, OutType
from structlog_etw.testing import decode_record
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import I16, STRUCT, U8, U16, U32, Field
from tests.helpers.eventheader_reader import parse

FIELDS: list[Field] = [("a", U8, 255), ("b", I16, -32768), ("c", U16, 65535), ("d", U32, 2**32 - 1)]


def test_eventheader_writes_each_width_with_its_encoding_and_format() -> None:
    """EventHeader writes U8, I16, U16, U32 (in structs too) with their encoding, format and LE bytes."""
    event = EventHeaderEncoder().encode("W", [*FIELDS, ("s", STRUCT, [("e", I16, 7)])], 4)
    assert event is not None
    p = parse(event)
    # (name, encoding without the chain bit, format, value): Value8/16/32 = 2/3/4, UnsignedInt 1, SignedInt 2
    assert [(n, e & 0x7F, f, v) for n, e, f, v in p.fields[:4]] == [
        ("a", 2, 1, 255),
        ("b", 3, 2, -32768),
        ("c", 3, 1, 65535),
        ("d", 4, 1, 2**32 - 1),
    ]
    assert p.values()["s"] == {"e": 7}
    assert event.endswith(b"\xff" + b"\x00\x80" + b"\xff\xff" + b"\xff\xff\xff\xff" + b"\x07\x00")


@pytest.mark.parametrize(
    ("kind", "value"), [(U8, 256), (U8, -1), (I16, 2**15), (U16, -1), (U32, 2**32), (U32, "x")]
)
def test_eventheader_writes_a_value_out_of_range_as_its_text(kind: int, value: object) -> None:
    """EventHeader writes every value out of its width's range, or not an int, as its text."""
    event = EventHeaderEncoder().encode("W", [("v", kind, value)], 4)
    assert event is not None
    assert parse(event).values() == {"v": str(value)}


def _tracelogging(fields: list[Field]) -> list[tuple[str, int, int, object]]:
    backend = CaptureBackend("Widths", format="tracelogging")
    provider = Provider("Widths", backend=backend)
    provider.write(provider.slot(4, 1), "W", fields, 0, 0)
    ev = decode_record(backend.records[0]).decoded
    assert ev is not None
    return [(f.name, f.encoding, f.format, f.value) for f in ev.field_list]


def test_tracelogging_writes_each_width_with_its_in_type() -> None:
    """TraceLogging writes U8, I16, U16, U32 with their InType (U16 with the unsigned OutType)."""
    assert _tracelogging(FIELDS) == [
        ("a", InType.UINT8, 0, 255),
        ("b", InType.INT16, 0, -32768),
        ("c", InType.UINT16, OutType.UNSIGNED, 65535),
        ("d", InType.UINT32, 0, 2**32 - 1),
    ]


def test_tracelogging_writes_a_value_out_of_range_as_its_text() -> None:
    """TraceLogging writes a value out of its width's range, or not an int, as counted text."""
    out = _tracelogging([("v", U16, 70000), ("w", I16, "x")])
    assert [(n, v) for n, _i, _o, v in out] == [("v", "70000"), ("w", "x")]
    assert {i for _n, i, _o, _v in out} == {InType.COUNTEDANSISTRING}
