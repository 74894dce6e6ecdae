"""EventHeader encoder: exact bytes per field type, names, registration text, size policy, cache."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import struct
import uuid
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw import EtwRenderer, Provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.formats import eventheader as spec
from structlog_etw.formats.header import Header
from structlog_etw.write.eventheader import _encoder as eh
from structlog_etw.write.fields import (
    ARRAY,
    BOOL,
    BYTES,
    F64,
    I64,
    IPV4,
    IPV6,
    JSON,
    STR,
    STRUCT,
    TIME,
    TRUNCATION_MARKER,
    U64,
    UUID,
    Field,
    to_fields,
)
from tests.helpers.eventheader_reader import parse
from tests.helpers.strategies import Unprintable, typed_values, with_dicts

HDR = bytes((0x07, 0, 0, 0, 0, 0, 0, 4))  # flags, version, id, tag, opcode 0, level 4


def meta_ext(meta: bytes) -> bytes:
    return struct.pack("<HH", len(meta), 1) + meta


def enc1(kind: int, value: Any, name: str = "f") -> bytes:
    return eh.EventHeaderEncoder().encode("E", [(name, kind, value)], 4)  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("kind", "value", "meta", "payload"),
    [
        (BOOL, True, b"\x82\x07", b"\x01"),
        (BOOL, False, b"\x82\x07", b"\x00"),
        (I64, -2, b"\x85\x02", struct.pack("<q", -2)),
        (I64, -(2**63), b"\x85\x02", struct.pack("<q", -(2**63))),
        (U64, 2**64 - 1, b"\x85\x01", b"\xff" * 8),
        (F64, 1.5, b"\x85\x08", struct.pack("<d", 1.5)),
        (F64, float("nan"), b"\x85\x08", struct.pack("<d", float("nan"))),
        (STR, "hé", b"\x0a", b"\x03\x00h\xc3\xa9"),
        (STR, "a\0b", b"\x0a", b"\x03\x00a\x00b"),  # NUL kept in counted strings
        (STR, "x\ud800y", b"\x0a", b"\x05\x00x\xef\xbf\xbdy"),  # lone surrogate -> U+FFFD
        (STR, "", b"\x0a", b"\x00\x00"),
        (BYTES, b"\x00\xff", b"\x8d\x09", b"\x02\x00\x00\xff"),
        (UUID, uuid.UUID(bytes=bytes(range(16))), b"\x86\x0f", bytes(range(16))),
        (IPV4, ipaddress.IPv4Address("10.1.2.3").packed, b"\x84\x11", b"\x0a\x01\x02\x03"),
        (IPV6, ipaddress.IPv6Address("::1").packed, b"\x86\x11", b"\x00" * 15 + b"\x01"),
        (
            TIME,
            dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc),
            b"\x0a",
            b"\x20\x002024-05-06T07:08:09.123456+00:00",
        ),
        (JSON, '{"a": [1]}', b"\x8a\x0e", b'\x0a\x00{"a": [1]}'),
        (I64 | ARRAY, [1, -1], b"\xc5\x02", b"\x02\x00" + struct.pack("<qq", 1, -1)),
        (U64 | ARRAY, [2**64 - 1], b"\xc5\x01", b"\x01\x00" + b"\xff" * 8),
        (F64 | ARRAY, [0.5], b"\xc5\x08", b"\x01\x00" + struct.pack("<d", 0.5)),
        (BOOL | ARRAY, [True, False], b"\xc2\x07", b"\x02\x00\x01\x00"),
        (STR | ARRAY, ["a", "bc"], b"\x4a", b"\x02\x00\x01\x00a\x02\x00bc"),
        (STR | ARRAY, [], b"\x4a", b"\x00\x00"),
        (BYTES | ARRAY, [b"\x01"], b"\xcd\x09", b"\x01\x00\x01\x00\x01"),
        (UUID | ARRAY, [uuid.UUID(int=1)], b"\xc6\x0f", b"\x01\x00" + uuid.UUID(int=1).bytes),
        (IPV4 | ARRAY, [b"\x01\x02\x03\x04"], b"\xc4\x11", b"\x01\x00\x01\x02\x03\x04"),
        (IPV6 | ARRAY, [b"\x00" * 16], b"\xc6\x11", b"\x01\x00" + b"\x00" * 16),
        (TIME | ARRAY, [dt.datetime(2020, 1, 2)], b"\x4a", b"\x01\x00\x13\x002020-01-02T00:00:00"),
    ],
)
def test_each_field_kind_encodes_to_the_documented_bytes(
    kind: int, value: Any, meta: bytes, payload: bytes
) -> None:
    """Each field kind, scalar or array, is written as exactly the documented metadata and payload bytes."""
    expected = HDR + meta_ext(b"E\0f\0" + meta) + payload
    assert enc1(kind, value) == expected


def test_struct_is_a_count_in_metadata_and_nothing_in_payload() -> None:
    """A struct is its member count in metadata only: nested members follow in the payload, and parse back."""
    fields: list[Field] = [
        ("s", STRUCT, [("a", I64, 1), ("b", STRUCT, [("c", STR, "x")])]),
        ("z", BOOL, True),
    ]
    got = eh.EventHeaderEncoder().encode("E", fields, 4)
    meta = b"E\0s\0\x81\x02a\0\x85\x02b\0\x81\x01c\0\x0az\0\x82\x07"
    assert got == HDR + meta_ext(meta) + struct.pack("<q", 1) + b"\x01\x00x" + b"\x01"
    assert parse(got).values() == {"s": {"a": 1, "b": {"c": "x"}}, "z": True}  # type: ignore[arg-type]


def test_activity_extension_16_and_32_bytes_precede_metadata() -> None:
    """An activity id (16 bytes) or activity and related id (32) is an extension before the metadata."""
    a, r = bytes(range(16)), bytes(range(16, 32))
    enc = eh.EventHeaderEncoder()
    one = enc.encode("E", [], 4, activity_id=a)
    two = enc.encode("E", [], 4, opcode=1, activity_id=a, related_id=r)
    assert one == HDR + b"\x10\x00\x02\x80" + a + meta_ext(b"E\0")
    assert two == bytes((7, 0, 0, 0, 0, 0, 1, 4)) + b"\x20\x00\x02\x80" + a + r + meta_ext(b"E\0")


def test_header_carries_tag_opcode_level() -> None:
    """The 8-byte header carries the flags, the tag little-endian, then the opcode and the level."""
    got = eh.EventHeaderEncoder().encode("E", [], 2, opcode=2, tag=0xBEEF)
    assert got is not None
    assert got[:8] == bytes((7, 0, 0, 0, 0xEF, 0xBE, 2, 2))


def test_activity_ids_of_wrong_size_are_rejected() -> None:
    """An activity id that is not 16 bytes raises ValueError saying "16 bytes"."""
    with pytest.raises(ValueError, match="16 bytes"):
        eh.EventHeaderEncoder().encode("E", [], 4, activity_id=b"short")


# --- the spec's test vector --------------------------------------------------------------------

SPEC_VECTOR = bytes.fromhex(
    "07 02 e8 03 34 12 01 04"
    "20 00 02 80"
    + bytes(range(0xA0, 0xC0)).hex()
    + "2d 00 01 00"
    + b"Complex\0".hex()
    + b"i16\0".hex()
    + "83 82 ef be"
    + b"arr\0".hex()
    + "43"
    + b"st\0".hex()
    + "81 02"
    + b"b\0".hex()
    + "82 07"
    + b"w\0".hex()
    + "0b"
    + b"g\0".hex()
    + "86 0f"
    + b"z\0".hex()
    + "07"
    + b"bin\0".hex()
    + "0d"
    + "fe ff 03 00 01 00 02 00 03 00 01 02 00 41 00 62 00"
    + bytes(range(1, 17)).hex()
    + "78 79 00 02 00 01 02"
)


def test_spec_vector_is_reproduced_by_the_building_blocks() -> None:
    """field_metadata and assemble_event rebuild the spec's Complex vector byte for byte, with its name."""
    meta = b"".join(
        [
            b"Complex\0",
            eh.field_metadata("i16", spec.ENC_VALUE16, spec.FMT_SIGNED_INT, tag=0xBEEF),
            eh.field_metadata("arr", spec.ENC_VALUE16 | spec.ENCODING_VARRAY),
            eh.field_metadata("st", spec.ENC_STRUCT, 2),
            eh.field_metadata("b", spec.ENC_VALUE8, spec.FMT_BOOLEAN),
            eh.field_metadata("w", spec.ENC_STRING_LENGTH16_CHAR16),
            eh.field_metadata("g", spec.ENC_VALUE128, spec.FMT_UUID),
            eh.field_metadata("z", spec.ENC_ZSTRING_CHAR8),
            eh.field_metadata("bin", spec.ENC_BINARY_LENGTH16_CHAR8),
        ]
    )
    payload = (
        bytes.fromhex("feff030001000200030001020041006200") + bytes(range(1, 17)) + b"xy\0\x02\x00\x01\x02"
    )
    got = eh.assemble_event(
        4,
        meta,
        payload,
        opcode=1,
        tag=0x1234,
        version=2,
        event_id=1000,
        activity_id=bytes(range(0xA0, 0xB0)),
        related_id=bytes(range(0xB0, 0xC0)),
    )
    assert got == SPEC_VECTOR
    assert (
        spec.tracepoint_name("MyCompany_MyComponent", 4, 0x1F, "mygroup")
        == "MyCompany_MyComponent_L4K1fGmygroup"
    )


def test_encoder_matches_the_spec_vector_layout_for_the_types_it_emits() -> None:
    """The encoder writes the spec vector's header, extension and bool/uuid/binary layout for its fields."""
    # Our encoder emits the same header/extension layout; bool and uuid fields byte-identical
    # to the vector's, binary with the HexBytes format (8d 09) the type table asks for.
    a, r = bytes(range(0xA0, 0xB0)), bytes(range(0xB0, 0xC0))
    g = uuid.UUID(bytes=bytes(range(1, 17)))
    fields: list[Field] = [("b", BOOL, True), ("g", UUID, g), ("bin", BYTES, b"\x01\x02")]
    got = eh.EventHeaderEncoder().encode(
        "Complex", fields, 4, opcode=1, tag=0x1234, activity_id=a, related_id=r
    )
    meta = b"Complex\0" + b"b\0\x82\x07" + b"g\0\x86\x0f" + b"bin\0\x8d\x09"
    want = eh.assemble_event(
        4, meta, b"\x01" + g.bytes + b"\x02\x00\x01\x02", opcode=1, tag=0x1234, activity_id=a, related_id=r
    )
    assert got == want
    assert SPEC_VECTOR[:12] == bytes((7, 2, 0xE8, 3, 0x34, 0x12, 1, 4, 0x20, 0, 2, 0x80))
    assert got[:12] == bytes((7, 0, 0, 0, 0x34, 0x12, 1, 4, 0x20, 0, 2, 0x80))


# --- names and registration --------------------------------------------------------------------


def test_tracepoint_names_use_lowercase_hex_and_group_option() -> None:
    """Tracepoint names write level and keyword in lowercase hex, with the group as a G suffix."""
    assert spec.tracepoint_name("P", 5, 0) == "P_L5K0"
    assert spec.tracepoint_name("P", 10, 0xABCDEF) == "P_LaKabcdef"
    assert spec.tracepoint_name("P", 4, 2**64 - 1, "grp1") == "P_L4KffffffffffffffffGgrp1"


def test_register_command_is_the_exact_eventheader_field_list() -> None:
    """The register command is the tracepoint name followed by the exact EventHeader field list."""
    assert (
        spec.register_command("P_L4K1")
        == "P_L4K1 u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level"
    )


@pytest.mark.parametrize(
    ("name", "group", "message"),
    [
        ("", None, "non-empty"),
        ("has space", None, "A-Za-z0-9_"),
        ("colon:name", None, "A-Za-z0-9_"),
        ("ünïcode", None, "A-Za-z0-9_"),
        ("P", "Upper", "a-z0-9"),
        ("P", "with_underscore", "a-z0-9"),
        ("P" * 234, None, "too long"),
        ("P" * 200, "g" * 34, "too long"),
    ],
)
def test_invalid_provider_names_raise_clear_value_errors(name: str, group: str | None, message: str) -> None:
    """Empty, non-[A-Za-z0-9_], bad-group or too long provider names raise ValueError saying which rule."""
    with pytest.raises(ValueError, match=message):
        spec.validate_provider_name(name, group)


def test_valid_provider_names_pass_and_longest_names_fit_the_tracepoint_limit() -> None:
    """Valid names pass, and the longest valid provider and group give a name under NAME_MAX."""
    spec.validate_provider_name("MyCompany_MyService")
    spec.validate_provider_name("P" * 200, "g" * 33)
    longest = spec.tracepoint_name("P" * 200, 0xFF, 2**64 - 1, "g" * 33)
    assert len(longest) < spec.NAME_MAX


def test_semicolons_and_nuls_in_names_become_underscores() -> None:
    """Semicolons and NULs in event and field names are written as underscores."""
    got = eh.EventHeaderEncoder().encode("a;b\0c", [("x;y\0z", BOOL, True)], 4)
    assert got is not None
    p = parse(got)
    assert p.name == "a_b_c"
    assert p.fields[0][0] == "x_y_z"


def test_lone_surrogates_in_names_become_replacement_characters() -> None:
    """Lone surrogates in event and field names are written as U+FFFD."""
    got = eh.EventHeaderEncoder().encode("e\udc80", [("k\ud800", STR, "v")], 4)
    assert got is not None
    p = parse(got)
    assert p.name == "e\ufffd"
    assert p.fields[0][0] == "k\ufffd"


# --- size policy ------------------------------------------------------------------------------


def test_perf_budget_is_8184_bytes() -> None:
    """The perf budget is 8184 bytes: the largest size that, 8-aligned with 8 more, fits 8192."""
    # ALIGN(8 + size, 8) <= PERF_MAX_TRACE_SIZE (8192) in user_event_perf/perf_trace_buf_alloc.
    assert spec.PERF_MAX_EVENT_SIZE == 8184
    assert ((8 + spec.PERF_MAX_EVENT_SIZE + 7) // 8) * 8 <= 8192
    assert ((8 + spec.PERF_MAX_EVENT_SIZE + 1 + 7) // 8) * 8 > 8192


def test_event_exactly_at_the_budget_is_written_unchanged() -> None:
    """An event of exactly the budget is written whole: its value intact and nothing counted truncated."""
    enc = eh.EventHeaderEncoder()
    base = enc.encode("E", [("s", STR, "")], 4)
    assert base is not None
    text = "x" * (spec.PERF_MAX_EVENT_SIZE - len(base))
    got = enc.encode("E", [("s", STR, text)], 4)
    assert got is not None
    assert len(got) == spec.PERF_MAX_EVENT_SIZE
    assert parse(got).values() == {"s": text}
    assert enc.truncated == 0


def test_oversized_string_is_cut_with_marker_and_event_flagged() -> None:
    """An oversized string is cut on a character boundary with the marker; the event is flagged, counted."""
    enc = eh.EventHeaderEncoder()
    got = enc.encode("E", [("s", STR, "é" * 10000), ("n", I64, 7)], 4)
    assert got is not None
    assert len(got) <= spec.PERF_MAX_EVENT_SIZE
    vals = parse(got).values()
    assert vals["s"].endswith(TRUNCATION_MARKER)
    assert set(vals["s"][: -len(TRUNCATION_MARKER)]) == {"é"}  # cut on a character boundary
    assert vals["n"] == 7
    assert vals[eh.TRUNCATED_FIELD] is True
    assert enc.truncated == 1


def test_the_longest_values_are_cut_first_and_short_ones_kept() -> None:
    """Over budget the long string, bytes and array are cut to prefixes while the short string stays whole."""
    enc = eh.EventHeaderEncoder()
    fields: list[Field] = [
        ("short", STR, "keep me"),
        ("big1", STR, "a" * 6000),
        ("big2", BYTES, b"b" * 6000),
        ("arr", I64 | ARRAY, list(range(2000))),
    ]
    got = enc.encode("E", fields, 4)
    assert got is not None
    assert len(got) <= spec.PERF_MAX_EVENT_SIZE
    vals = parse(got).values()
    assert vals["short"] == "keep me"
    assert vals["big1"].endswith(TRUNCATION_MARKER)
    assert vals["big2"] == b"b" * len(vals["big2"])
    assert 0 < len(vals["big2"]) < 6000
    assert vals["arr"] == list(range(len(vals["arr"])))
    assert 0 < len(vals["arr"]) < 2000


def test_values_beyond_u16_are_cut_even_with_a_large_budget() -> None:
    """With a large budget, a string and an array past 65535 are still cut to fit their u16 lengths."""
    enc = eh.EventHeaderEncoder(max_size=spec.DYN_MAX_EVENT_SIZE)
    got = enc.encode("E", [("s", STR, "z" * 70000), ("a", BOOL | ARRAY, [True] * 70000)], 4)
    assert got is not None
    assert len(got) <= spec.DYN_MAX_EVENT_SIZE
    vals = parse(got).values()
    assert len(vals["s"].encode()) <= 0xFFFF
    assert len(vals["a"]) <= 0xFFFF


def test_event_whose_fixed_part_cannot_fit_is_dropped() -> None:
    """An event whose names alone exceed the budget is dropped (None) and not counted as truncated."""
    enc = eh.EventHeaderEncoder()
    fields: list[Field] = [(f"field_number_{i:05d}", I64, i) for i in range(600)]
    assert enc.encode("E", fields, 4) is None
    assert enc.truncated == 0


def test_max_size_is_validated() -> None:
    """A max_size past the largest event size raises ValueError naming max_size."""
    with pytest.raises(ValueError, match="max_size"):
        eh.EventHeaderEncoder(max_size=70000)


# --- cache -------------------------------------------------------------------------------------


def test_cache_reuses_the_plan_for_the_same_shape() -> None:
    """Two events of one shape use one cache entry and share every byte but the value's."""
    enc = eh.EventHeaderEncoder()
    a = enc.encode("E", [("x", I64, 1)], 4)
    b = enc.encode("E", [("x", I64, 2)], 4)
    assert len(enc._cache) == 1
    assert a is not None and b is not None and a[:-8] == b[:-8]


def test_same_names_different_kinds_are_different_shapes() -> None:
    """The same field names with different kinds, also inside structs, are encoded as different shapes."""
    enc = eh.EventHeaderEncoder()
    a = enc.encode("E", [("x", I64, 1)], 4)
    b = enc.encode("E", [("x", STR, "1")], 4)
    assert a != b
    assert parse(b).values() == {"x": "1"}  # type: ignore[arg-type]
    c = enc.encode("E", [("s", STRUCT, [("a", I64, 1)])], 4)
    d = enc.encode("E", [("s", STRUCT, [("a", STR, "1")])], 4)
    assert parse(c).values() == {"s": {"a": 1}}  # type: ignore[arg-type]
    assert parse(d).values() == {"s": {"a": "1"}}  # type: ignore[arg-type]


def test_cache_is_bounded_for_high_cardinality_names() -> None:
    """1000 event names keep at most cache_limit (50) entries, and each event is still named right."""
    enc = eh.EventHeaderEncoder(cache_limit=50)
    for i in range(1000):
        got = enc.encode(f"event_{i}", [("x", I64, i)], 4)
        assert got is not None and parse(got).name == f"event_{i}"
        assert len(enc._cache) <= 50


# --- well-formedness under arbitrary input ---------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=50),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    st.binary(max_size=50),
    st.uuids(),
    st.datetimes(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.text(max_size=8), inner, max_size=5),
    ),
    max_leaves=20,
)
big = st.builds(
    lambda ch, n, as_bytes: (ch * n).encode("utf-8", "surrogatepass") if as_bytes else ch * n,
    st.sampled_from(["x", "é", "😀", "\0", "\ud800"]),
    st.integers(min_value=1000, max_value=20000),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(max_size=40),
    items=st.dictionaries(st.text(max_size=12), st.one_of(values, big), max_size=12),
    activity=st.one_of(st.none(), st.binary(min_size=16, max_size=16)),
)
def test_any_event_dict_encodes_to_a_well_formed_event_within_budget(
    name: str, items: dict[str, Any], activity: bytes | None
) -> None:
    """Any event dict encodes within budget with its level, activity and every field, flagged if cut."""
    enc = eh.EventHeaderEncoder()
    got = enc.encode(name, to_fields(items.items()), 3, activity_id=activity)
    if got is None:  # only when the fixed part alone cannot fit
        return
    assert len(got) <= spec.PERF_MAX_EVENT_SIZE
    p = parse(got)
    assert p.level == 3
    assert p.activity == activity
    expected_names = list(items)
    got_names = [f[0] for f in p.fields]
    if len(got_names) == len(expected_names) + 1:  # cut by the size policy: flagged at the end
        assert got_names.pop() == eh.TRUNCATED_FIELD
        assert p.fields[-1][3] is True
    assert len(got_names) == len(expected_names)


def test_json_fields_of_a_truncated_event_become_plain_strings() -> None:
    """In a truncated event every JSON field, cut or not, is written as a plain string field."""
    enc = eh.EventHeaderEncoder()
    text = "[" + ", ".join(["1"] * 5000) + "]"
    got = enc.encode("E", [("j", JSON, text), ("small", JSON, "[1]")], 4)
    assert got is not None
    p = parse(got)
    kinds = {name: (encoding, fmt) for name, encoding, fmt, _v in p.fields}
    assert kinds["j"] == (spec.ENC_STRING_LENGTH16_CHAR8, 0)
    assert kinds["small"] == (spec.ENC_STRING_LENGTH16_CHAR8, 0)
    assert p.values()["j"].endswith(TRUNCATION_MARKER)


def test_an_array_whose_elements_cannot_fit_leaves_its_room_to_the_other_values() -> None:
    """An array whose element cannot fit is emptied and takes no room: the string beside it stays whole."""
    # One cap for all values, computed with what each value really keeps at that cap: an array
    # keeps whole elements only, so a 3000-byte element that cannot fit takes no room and the
    # string beside it stays whole (0.1.0 cut it to 2029 bytes).
    enc = eh.EventHeaderEncoder(max_size=4096)
    got = enc.encode("E", [("a", STR | ARRAY, ["x" * 3000]), ("s", STR, "y" * 3000)], 4)
    assert got is not None and len(got) <= 4096
    assert parse(got).values() == {"a": [], "s": "y" * 3000, eh.TRUNCATED_FIELD: True}
    assert enc.truncated == 1


# --- size policy regressions (falsifying examples of tests/surface/test_properties.py) ------------------


def _big_dict() -> dict[str, int]:
    """More members than a struct may hold: encoded as a JSON field (the property test's big_dict)."""
    return {f"k{i}": i for i in range(500)}


def _deep_dict() -> dict[str, Any]:
    """Nested deeper than 8 levels: the inner part becomes JSON (the property test's deep_dict)."""
    d: dict[str, Any] = {"leaf": "x"}
    for i in range(40):
        d = {f"l{i}": d}
    return d


def _room_for_values(name_len: int) -> int:
    """Bytes left for the one string value of ``[("n" * name_len, STR, ...)]`` once it is cut."""
    enc = eh.EventHeaderEncoder()
    flagged = enc.encode("E", [("n" * name_len, STR, ""), (eh.TRUNCATED_FIELD, BOOL, True)], 4)
    assert flagged is not None
    return spec.PERF_MAX_EVENT_SIZE - len(flagged)


def test_json_value_of_a_field_with_a_huge_name_is_cut_with_its_marker() -> None:
    """A JSON value beside a 7.9 KB name is cut as plain text with the marker, a prefix of the JSON."""
    name = "1" + "0" * 7900  # str(10**7900)-like key: the name takes most of the budget
    enc = eh.EventHeaderEncoder()
    got = enc.encode("E", to_fields([(name, _big_dict())]), 4)
    assert got is not None and len(got) <= spec.PERF_MAX_EVENT_SIZE
    p = parse(got)
    (fname, encoding, fmt, value), flag = p.fields
    assert fname == name
    assert (encoding, fmt) == (spec.ENC_STRING_LENGTH16_CHAR8, 0)  # JSON written as a plain string
    assert value.endswith(TRUNCATION_MARKER)
    assert str(_big_dict()).replace("'", '"').startswith(value[: -len(TRUNCATION_MARKER)])
    assert len(value) > len(TRUNCATION_MARKER)  # the name did not eat the value's room
    assert flag[0] == eh.TRUNCATED_FIELD and flag[3] is True


def test_a_cut_string_with_no_more_room_than_the_marker_is_the_marker_alone() -> None:
    """A cut string with room for exactly the marker is written as the marker, never as ""."""
    # Names of this length leave exactly the marker's bytes for the value: it is the marker,
    # never an empty string.
    marker = len(TRUNCATION_MARKER.encode())
    name_len = 8000
    name_len += _room_for_values(name_len) - marker
    assert _room_for_values(name_len) == marker
    enc = eh.EventHeaderEncoder()
    got = enc.encode("E", [("n" * name_len, STR, "v" * 500)], 4)
    assert got is not None and len(got) == spec.PERF_MAX_EVENT_SIZE
    assert parse(got).values() == {"n" * name_len: TRUNCATION_MARKER, eh.TRUNCATED_FIELD: True}


def test_event_without_room_for_the_marker_of_a_cut_string_is_dropped_not_emptied() -> None:
    """With one byte less than the marker a cut string drops the event; a value that fits is kept."""
    marker = len(TRUNCATION_MARKER.encode())
    name_len = 8000
    name_len += _room_for_values(name_len) - (marker - 1)
    assert _room_for_values(name_len) == marker - 1
    enc = eh.EventHeaderEncoder()
    assert enc.encode("E", [("n" * name_len, STR, "v" * 500)], 4) is None
    assert enc.truncated == 0
    # A value that fits whole in that room is still written whole (nothing needs cutting).
    got = enc.encode("E", [("n" * name_len, STR, "v" * (marker - 1))], 4)
    assert got is not None
    assert parse(got).values() == {"n" * name_len: "v" * (marker - 1)}


def test_short_strings_stay_whole_when_long_ones_are_cut_to_their_marker() -> None:
    """With room only for two markers and a short value, the long strings become markers, the short stays."""
    # Room for the three markers and the short value, not more: the short one is never cut.
    marker = len(TRUNCATION_MARKER.encode())
    enc = eh.EventHeaderEncoder()
    fields: list[Field] = [("a", STR, "a" * 3000), ("s", STR, "short"), ("b", STR, "b" * 3000)]
    empty = [(f, STR, "") for f, _k, _v in fields] + [(eh.TRUNCATED_FIELD, BOOL, True)]
    want = 2 * marker + len("short") + 1  # one byte short of cutting the long ones to a character

    def room(name: str) -> int:
        probe = enc.encode(name, empty, 4)
        assert probe is not None
        return spec.PERF_MAX_EVENT_SIZE - len(probe)

    name = "N" * 8000
    name += "N" * (room(name) - want)
    assert room(name) == want
    got = enc.encode(name, fields, 4)
    assert got is not None
    assert parse(got).values() == {
        "a": TRUNCATION_MARKER,
        "s": "short",
        "b": TRUNCATION_MARKER,
        eh.TRUNCATED_FIELD: True,
    }


def _provider_pipeline() -> tuple[CaptureBackend, Provider, EtwRenderer]:
    """A renderer and provider writing EventHeader events to a capture backend."""
    backend = CaptureBackend("Reg_eh", format="eventheader")
    provider = Provider("Reg_eh", backend=backend)
    return backend, provider, EtwRenderer("Reg_eh", provider=provider)


def _log(renderer: EtwRenderer, event_dict: dict[Any, Any]) -> None:
    """Run the renderer as structlog does (it ends the chain with DropEvent)."""
    with pytest.raises(structlog.DropEvent):
        renderer(None, "info", {"event": "", **event_dict})


def test_huge_key_names_leaving_no_room_for_value_markers_are_counted_too_large() -> None:
    """Huge keys leaving no room for value markers: nothing written, one too_large drop, no encode_error."""
    # Falsifying example 1 of the property test: two 4001-digit int keys (names of 4001 and 4002
    # characters) with JSON values fill the budget; the four JSON values were written as "".
    backend, provider, renderer = _provider_pipeline()
    _log(renderer, {"": _deep_dict(), 0: _deep_dict(), 10**4000: _big_dict(), -(10**4000): _big_dict()})
    stats = provider.stats()
    assert backend.records == []
    assert stats["written"] == 0
    assert stats["dropped"]["too_large"] == 1
    assert stats["dropped"].get("encode_error", 0) == 0


def test_binary_array_element_past_u16_is_truncated_not_an_encode_error() -> None:
    """A 70000-byte element in a list is cut (array emptied, flagged), written, not an encode_error."""
    # Falsifying example 2 of the property test: a 70000-byte element inside a list made the
    # size policy's element packing raise struct.error (counted encode_error).
    backend, provider, renderer = _provider_pipeline()
    _log(renderer, {"": _big_dict(), "0": [bytes(70000)]})
    stats = provider.stats()
    assert stats["dropped"].get("encode_error", 0) == 0
    assert stats["written"] == 1 and stats["truncated"] == 1
    (record,) = backend.records
    values = parse(record.event).values()
    assert values["0"] == []  # the element cannot fit: the array keeps its first 0 elements
    # ... so the size policy counts the array as empty and the JSON text fits whole (written as a
    # plain string, as every JSON field of a cut event), as the Windows encoder has always done.
    assert values[""] == json.dumps(_big_dict())
    assert values[eh.TRUNCATED_FIELD] is True


@pytest.mark.parametrize(
    ("kind", "items", "small"),
    [
        (BYTES | ARRAY, [b"s", b"\x01" * 70000], b"s"),
        (STR | ARRAY, ["s", "x" * 70000], "s"),
        (JSON | ARRAY, ["s", "é" * 40000], "s"),
    ],
)
def test_array_elements_past_u16_keep_the_leading_elements(kind: int, items: list[Any], small: Any) -> None:
    """An array with an element past 65535 bytes keeps the elements before it, at either budget."""
    for max_size in (spec.PERF_MAX_EVENT_SIZE, spec.DYN_MAX_EVENT_SIZE):
        enc = eh.EventHeaderEncoder(max_size=max_size)
        got = enc.encode("E", [("a", kind, items), ("n", I64, 1)], 4)
        assert got is not None and len(got) <= max_size
        assert parse(got).values() == {"a": [small], "n": 1, eh.TRUNCATED_FIELD: True}


# --- one fast path, one general path ---------------------------------------------------------------

HEAD = spec.HEADER.pack(spec.HEADER_FLAGS, 0, 0, 0, 0, 4)  # what encode() prefixes for level 4


def _same_from_both_paths(name: str, items: dict[str, Any]) -> None:
    fields = to_fields(items.items())
    fast, general = eh.EventHeaderEncoder(), eh.EventHeaderEncoder()
    assert fast.encode(name, fields, 4) == general._encode_general(name, fields, HEAD)
    assert fast.truncated == general.truncated


@settings(max_examples=300, deadline=None)
@given(name=st.text(max_size=20), items=st.dictionaries(st.text(max_size=8), typed_values(), max_size=12))
def test_fast_and_general_paths_write_the_same_bytes_for_flat_fields(
    name: str, items: dict[str, Any]
) -> None:
    """The fast path and the general path write identical bytes for any event of flat fields."""
    _same_from_both_paths(name, items)


@settings(max_examples=300, deadline=None)
@given(
    name=st.text(max_size=20),
    items=st.dictionaries(st.text(max_size=8), with_dicts(typed_values()), max_size=8),
)
def test_fast_and_general_paths_write_the_same_bytes_for_structs(name: str, items: dict[str, Any]) -> None:
    """The fast path and the general path write identical bytes for any event with nested dicts."""
    _same_from_both_paths(name, items)


# --- the error contract (docs/limits.md) -------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "text"),
    [
        (("i", I64, "not an int"), "not an int"),
        (("i", I64, 2**80), str(2**80)),
        (("u", U64, -1), "-1"),
        (("f", F64, "nan"), "nan"),
        (("s", STR, 5), "5"),
        (("j", JSON, b"{}"), "b'{}'"),
        (("b", BYTES, 5), "5"),
        (("g", UUID, "not a uuid"), "not a uuid"),
        (("ip", IPV4, b"\x01\x02"), "b'\\x01\\x02'"),
        (("ip6", IPV6, b"\x01" * 4), repr(b"\x01" * 4)),
        (("t", TIME, 7), "7"),
        (("s", STRUCT, []), "[]"),
        (("s", STRUCT, "not fields"), "not fields"),
        (("s", STRUCT, [("m", I64, 1)] * 128), str([("m", I64, 1)] * 128)),
        (("a", I64 | ARRAY, [1, "x"]), "[1, 'x']"),
        (("a", BYTES | ARRAY, [5]), "[5]"),
        (("a", STR | ARRAY, None), "None"),
        (("o", STR, Unprintable()), "<unprintable Unprintable>"),
    ],
)
def test_a_value_that_does_not_fit_its_kind_is_written_as_its_text(field: Field, text: str) -> None:
    """A value that does not fit its kind is written as its text in a plain string field, not counted cut."""
    enc = eh.EventHeaderEncoder()
    got = enc.encode("E", [("ok", I64, 1), field, ("after", STR, "x")], 4)
    assert got is not None
    p = parse(got)
    assert p.values() == {"ok": 1, field[0]: text, "after": "x"}
    assert p.fields[1][1:3] == (spec.ENC_STRING_LENGTH16_CHAR8, 0)  # a plain string field
    assert enc.truncated == 0


@pytest.mark.parametrize(
    "args",
    [
        {"level": 256},
        {"level": -1},
        {"opcode": 256},
        {"tag": 0x10000},
        {"tag": -1},
        {"level": "4"},
        {"activity_id": b"short"},
        {"activity_id": bytes(10), "related_id": bytes(22)},  # 32 bytes, but not two ids
        {"activity_id": bytes(16), "related_id": bytes(15)},
    ],
)
def test_arguments_outside_the_header_ranges_raise_value_error(args: dict[str, Any]) -> None:
    """A level, opcode, tag or activity/related id outside its header range raises ValueError ("must be")."""
    call: dict[str, Any] = {"level": 4, **args}
    with pytest.raises(ValueError, match="must be"):
        eh.EventHeaderEncoder().encode("E", [("x", I64, 1)], **call)


_any_value = st.one_of(
    scalars,
    st.lists(scalars, max_size=4),
    st.tuples(scalars, scalars),
    st.builds(Unprintable),
    st.binary(min_size=4, max_size=4),
    st.binary(min_size=16, max_size=16),
    st.dates(),
    big,
)
_table_kinds = st.sampled_from([BOOL, I64, U64, F64, STR, BYTES, UUID, IPV4, IPV6, TIME, JSON])
_kinds = st.one_of(_table_kinds, _table_kinds.map(lambda k: k | ARRAY), st.just(STRUCT))
_leaf = st.tuples(st.text(max_size=6), _kinds, _any_value)
_struct = st.tuples(st.text(max_size=6), st.just(STRUCT))
_field_lists: st.SearchStrategy[list[Any]] = st.recursive(
    st.lists(_leaf, max_size=12),
    lambda inner: st.lists(st.one_of(_leaf, st.builds(lambda s, v: (*s, v), _struct, inner)), max_size=6),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    name=st.text(max_size=20),
    fields=_field_lists,
    max_size=st.sampled_from([64, 512, spec.PERF_MAX_EVENT_SIZE]),
)
def test_any_values_of_the_table_kinds_encode_to_a_well_formed_event_or_none(
    name: str, fields: list[Any], max_size: int
) -> None:
    """Any table-kind values encode within max_size with their cleaned names, or None only when too large."""
    # The error contract: never an exception, whatever the values; None only when too large.
    enc = eh.EventHeaderEncoder(max_size=max_size)
    got = enc.encode(name, fields, 3)
    if got is None:
        assert max_size < spec.PERF_MAX_EVENT_SIZE or len(fields) > 2  # only when it cannot fit
        return
    assert len(got) <= max_size
    p = parse(got)
    names = [f[0] for f in p.fields]
    if enc.truncated:
        assert names.pop() == eh.TRUNCATED_FIELD
    assert names == [eh.sanitize_name(f[0]).encode("utf-8", "replace").decode() for f in fields]


def test_encode_takes_the_informational_level_by_default() -> None:
    """``encode`` without a level writes what ``encode_fields`` writes for a level-4 header, as
    TraceLoggingEncoder.encode does."""
    fields: list[Field] = [("msg", STR, "hi"), ("n", I64, 3)]
    enc = eh.EventHeaderEncoder()
    assert enc.encode("E", fields) == enc.encode_fields("E", fields, Header(4)) == enc.encode("E", fields, 4)
