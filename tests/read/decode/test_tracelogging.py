"""TraceLogging decoder: InTypes/OutTypes beyond what our encoder writes, and malformed input."""

from __future__ import annotations

import datetime as dt
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.formats.tracelogging import InType, OutType, event_descriptor
from structlog_etw.read.decode.tracelogging import decode, decode_event_descriptor, parse_metadata
from structlog_etw.write.tracelogging import event_metadata, field_metadata
from tests.helpers.decoded_spans import assert_read_from

UTC = dt.timezone.utc
SYSTEM_SID = bytes([1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0])  # S-1-5-18


def _one(field_meta: bytes, data: bytes) -> object:
    ev = decode(event_metadata("e", [field_meta]), data)
    return ev.fields[ev.field_list[0].name]


@pytest.mark.parametrize(
    ("in_type", "fmt", "value"),
    [
        (InType.INT8, "<b", -8),
        (InType.UINT8, "<B", 250),
        (InType.INT16, "<h", -30000),
        (InType.UINT16, "<H", 65000),
        (InType.INT32, "<i", -(2**31)),
        (InType.UINT32, "<I", 2**32 - 1),
        (InType.INT64, "<q", -(2**63)),
        (InType.UINT64, "<Q", 2**64 - 1),
        (InType.HEXINT32, "<I", 0xDEADBEEF),
        (InType.HEXINT64, "<Q", 0xDEADBEEFCAFEF00D),
        (InType.FLOAT, "<f", 1.5),
        (InType.DOUBLE, "<d", -2.25),
    ],
)
def test_every_integer_and_float_width_decodes(in_type: int, fmt: str, value: object) -> None:
    """Every signed, unsigned, hex integer width and both float widths decode to the value packed."""
    assert _one(field_metadata("x", in_type), struct.pack(fmt, value)) == value


@pytest.mark.parametrize(
    ("in_type", "data", "value"),
    [
        (InType.UNICODESTRING, "hé".encode("utf-16-le") + b"\0\0", "hé"),
        (InType.ANSISTRING, b"abc\0", "abc"),
        (InType.COUNTEDSTRING, struct.pack("<H", 4) + "hé".encode("utf-16-le"), "hé"),
        (InType.COUNTEDANSISTRING, struct.pack("<H", 3) + b"a\xffb", "a\ufffdb"),
        (InType.BINARY, b"\x02\x00\x01\x02", b"\x01\x02"),
        (InType.COUNTEDBINARY, b"\x01\x00\x09", b"\x09"),
        (InType.GUID, uuid.UUID(int=1).bytes_le, uuid.UUID(int=1)),
        (
            InType.SID,
            bytes([1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0]),
            bytes([1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0]),
        ),
        (InType.BOOL32, struct.pack("<i", 7), 7),
    ],
)
def test_strings_binaries_guid_sid_decode(in_type: int, data: bytes, value: object) -> None:
    """Zero-terminated and counted strings, binaries, GUID, SID and BOOL32 decode to their values."""
    assert _one(field_metadata("x", in_type), data) == value


@pytest.mark.parametrize("pointer_size", [4, 8])
def test_pointer_fields_take_the_events_pointer_size(pointer_size: int) -> None:
    """POINTER values are as wide as the event says (4 bytes in a 32-bit process's event), arrays too."""
    fmt = "<I" if pointer_size == 4 else "<Q"
    meta = event_metadata(
        "e", [field_metadata("p", InType.POINTER), field_metadata("ps", InType.POINTER, vcount=True)]
    )
    data = struct.pack(fmt, 0x1234) + struct.pack("<H", 2) + struct.pack(fmt, 1) + struct.pack(fmt, 2)
    ev = decode(meta, data, pointer_size=pointer_size)
    assert ev.fields == {"p": 0x1234, "ps": [1, 2]}
    with pytest.raises(ValueError, match="pointer size 3"):
        decode(meta, data, pointer_size=3)


def test_filetime_and_systemtime_decode_to_utc_datetimes() -> None:
    """FILETIME and SYSTEMTIME values decode to aware UTC datetimes."""
    ft = struct.pack("<Q", 0x019DB1DED53E8000 + 10**7)
    assert _one(field_metadata("t", InType.FILETIME, OutType.DATETIME_UTC), ft) == dt.datetime(
        1970, 1, 1, 0, 0, 1, tzinfo=UTC
    )
    st_ = struct.pack("<8H", 2024, 2, 4, 29, 13, 14, 15, 678)
    assert _one(field_metadata("t", InType.SYSTEMTIME), st_) == dt.datetime(
        2024, 2, 29, 13, 14, 15, 678000, tzinfo=UTC
    )


def test_uint8_with_boolean_outtype_is_a_bool() -> None:
    """A UINT8 with the BOOLEAN out-type decodes to True, not 1."""
    assert _one(field_metadata("b", InType.UINT8, OutType.BOOLEAN), b"\x01") is True


def test_constant_count_array() -> None:
    """A constant-count (CCOUNT) array decodes to a list of exactly that many values."""
    meta = field_metadata("xs", InType.UINT16, ccount=3)
    assert _one(meta, struct.pack("<3H", 1, 2, 3)) == [1, 2, 3]


def test_array_of_structs() -> None:
    """A VCOUNT array of structs decodes to a list of dicts, and the field after it is intact."""
    metas = [
        field_metadata("pts", InType.STRUCT, 2, vcount=True),
        field_metadata("x", InType.INT32),
        field_metadata("name", InType.COUNTEDANSISTRING, OutType.UTF8),
        field_metadata("after", InType.UINT8),
    ]
    data = struct.pack("<H", 2) + struct.pack("<iH", 1, 1) + b"a" + struct.pack("<iH", 2, 0) + b"\x05"
    ev = decode(event_metadata("e", metas), data)
    assert ev.fields == {"pts": [{"x": 1, "name": "a"}, {"x": 2, "name": ""}], "after": 5}


def test_field_tags_of_any_length_are_read() -> None:
    """A field tag given as a shorter chain of bytes is read to its 28-bit value."""
    meta = b"x\0" + bytes((InType.UINT8 | 0x80, 0x80, 0x05))  # 1-byte field tag
    ev = decode(event_metadata("e", [meta]), b"\x01")
    assert ev.field_list[0].tag == 5 << 21


def test_descriptor_gives_level_keyword_opcode() -> None:
    """The event descriptor gives the event's level, opcode and 64-bit keyword; its channel is 11."""
    ev = decode(event_metadata("e", []), b"", descriptor=event_descriptor(2, 1, 0x8000000000000001))
    assert (ev.level, ev.opcode, ev.keyword) == (2, 1, 0x8000000000000001)
    assert decode_event_descriptor(event_descriptor(5, 2, 3))["channel"] == 11


@pytest.mark.parametrize(
    ("metadata", "data", "message"),
    [
        (b"\x09\x00\x00e\x00", b"", "size"),
        (event_metadata("e", [b"x"]), b"", "unterminated"),
        (event_metadata("e", [field_metadata("x", InType.UINT32)]), b"\x01", "truncated"),
        (event_metadata("e", [field_metadata("x", InType.UINT8)]), b"\x01\x02", "left over"),
        (event_metadata("e", [field_metadata("s", InType.STRUCT, 0)]), b"", "no members"),
        (event_metadata("e", [b"x\0\x1f"]), b"\x00", "unsupported InType"),
        (event_metadata("e", [field_metadata("b", InType.BINARY, vcount=True)]), b"\x00\x00", "array"),
    ],
)
def test_malformed_input_raises_value_error(metadata: bytes, data: bytes, message: str) -> None:
    """Bad sizes, terminators, truncation, leftover data or types raise ValueError saying what."""
    with pytest.raises(ValueError, match=message):
        decode(metadata, data)


def test_wrong_channel_is_rejected() -> None:
    """A descriptor whose channel is not TraceLogging's 11 raises ValueError naming the channel."""
    desc = struct.pack("<HBBBBHQ", 0, 0, 0, 4, 0, 0, 1)
    with pytest.raises(ValueError, match="channel"):
        decode(event_metadata("e", []), b"", descriptor=desc)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.binary(max_size=64))
def test_random_bytes_decode_or_raise_value_error(metadata: bytes, data: bytes) -> None:
    """Random blobs decode or raise ``ValueError``; what decodes was read from the blobs."""
    meta = struct.pack("<H", len(metadata) + 2) + metadata
    try:
        ev = decode(meta, data)
    except ValueError:
        return
    assert_read_from(ev, data, meta, meta + data)


def test_parse_metadata_reports_name_tags_fields() -> None:
    """parse_metadata returns the event name, its tags and each field's name and in-type."""
    name, tags, fields = parse_metadata(event_metadata("ev", [field_metadata("a", InType.INT64)], tags=3))
    assert (name, tags) == ("ev", 3)
    assert [(f.name, f.in_type) for f in fields] == [("a", InType.INT64)]


@pytest.mark.parametrize(
    ("in_type", "data", "raw"),
    [
        (InType.UINT16, struct.pack("<H", 7), struct.pack("<H", 7)),
        (InType.GUID, uuid.UUID(int=1).bytes_le, uuid.UUID(int=1).bytes_le),
        (InType.ANSISTRING, b"abc\0", b"abc"),  # without the terminator
        (InType.UNICODESTRING, "hé".encode("utf-16-le") + b"\0\0", "hé".encode("utf-16-le")),
        (InType.COUNTEDANSISTRING, struct.pack("<H", 3) + b"a\xffb", b"a\xffb"),  # without the count
        (InType.BINARY, b"\x02\x00\x01\x02", b"\x01\x02"),
        (InType.SID, SYSTEM_SID, SYSTEM_SID),
        (InType.NULL, b"", b""),
    ],
)
def test_fields_keep_their_value_bytes(in_type: int, data: bytes, raw: bytes) -> None:
    """Each scalar field keeps its value bytes, without terminator or count, and is no array or struct."""
    (f,) = decode(event_metadata("e", [field_metadata("x", in_type)]), data).field_list
    assert (f.raw, f.raw_elements, f.is_array, f.is_struct) == (raw, (), False, False)


def test_arrays_keep_each_elements_bytes_and_structs_are_marked() -> None:
    """Array fields keep each element's bytes, and a struct is marked as one with its members' bytes."""
    metas = [
        field_metadata("xs", InType.UINT16, ccount=2),
        field_metadata("names", InType.COUNTEDANSISTRING, vcount=True),
        field_metadata("pt", InType.STRUCT, 1),
        field_metadata("x", InType.INT32),
    ]
    data = struct.pack("<2H", 1, 2) + struct.pack("<HH", 2, 1) + b"a" + struct.pack("<H", 0)
    data += struct.pack("<i", -1)
    xs, names, pt = decode(event_metadata("e", metas), data).field_list
    assert (xs.raw, xs.raw_elements) == (b"", (b"\x01\x00", b"\x02\x00"))
    assert (names.value, names.raw_elements) == (["a", ""], (b"a", b""))
    assert (pt.is_struct, pt.is_array, pt.raw) == (True, False, b"")
    assert pt.value[0].raw == struct.pack("<i", -1)
    assert pt.plain_value() == {"x": -1}


def test_event_says_its_format_byte_order_and_raw_name() -> None:
    """A decoded event says it is tracelogging, little-endian, with its name's bytes and its raw bytes."""
    metadata = event_metadata("caf\xe9", [field_metadata("x", InType.UINT8)])
    ev = decode(metadata, b"\x01")
    assert (ev.format, ev.byte_order, ev.raw_name) == ("tracelogging", "little", "caf\xe9".encode())
    assert ev.raw == metadata + b"\x01"
