"""The EventHeader decoder on hand-made events: the spec's vector, every encoding, big-endian
events, name attributes, malformed input, and perf-decode's text conventions."""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import math
import random
import shutil
import socket
import struct
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.read.decode.eventheader import EventHeaderDecodeError, decode_event, parse_tracepoint_name
from structlog_etw.read.decode.tracelogging import decode as tracelogging_decode
from structlog_etw.read.writers.perf_json import (
    errno_text,
    float_text,
    perf_json,
    perf_json_fields,
    time_text,
)
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import to_fields
from structlog_etw.write.tracelogging import TraceLoggingEncoder
from tests.helpers.decoded_spans import assert_read_from
from tests.helpers.shared_data import skip_or_fail

# The worked example of shared/spec/eventheader.md ("Test vector (DYN)").
SPEC_NAME = "MyCompany_MyComponent_L4K1fGmygroup"
SPEC_EVENT = bytes.fromhex(
    "0702e80334120104"
    "20000280"
    + bytes(range(0xA0, 0xC0)).hex()
    + "2d000100"
    + b"Complex\0".hex()
    + b"i16\0".hex() + "8382efbe"
    + b"arr\0".hex() + "43"
    + b"st\0".hex() + "8102"
    + b"b\0".hex() + "8207"
    + b"w\0".hex() + "0b"
    + b"g\0".hex() + "860f"
    + b"z\0".hex() + "07"
    + b"bin\0".hex() + "0d"
    + "feff" + "0300010002000300" + "01" + "020041006200" + "".join(f"{b:02x}" for b in range(1, 17))
    + b"xy\0".hex() + "02000102"
)  # fmt: skip


def build(
    name: str,
    meta_fields: bytes,
    payload: bytes,
    *,
    level: int = 4,
    opcode: int = 0,
    activity: bytes | None = None,
    big_endian: bool = False,
) -> bytes:
    """A minimal EventHeader event (test-only builder, independent of the project's encoder)."""
    o = ">" if big_endian else "<"
    flags = 0x01 | 0x04 | (0 if big_endian else 0x02)
    out = struct.pack(o + "BBHHBB", flags, 0, 0, 0, opcode, level)
    meta = name.encode() + b"\0" + meta_fields
    if activity is not None:
        out += struct.pack(o + "HH", len(activity), 0x8002) + activity
    out += struct.pack(o + "HH", len(meta), 1) + meta
    return out + payload


def test_spec_vector_decodes_to_every_header_field_and_value() -> None:
    """The spec's Complex vector decodes to its provider, header fields, activity ids and every value."""
    ev = decode_event(SPEC_NAME, SPEC_EVENT)
    assert (ev.provider, ev.name, ev.level, ev.keyword) == ("MyCompany_MyComponent", "Complex", 4, 0x1F)
    assert (ev.version, ev.id, ev.tag, ev.opcode) == (2, 1000, 0x1234, 1)
    assert ev.activity_id == uuid.UUID(bytes=bytes(range(0xA0, 0xB0)))
    assert ev.related_id == uuid.UUID(bytes=bytes(range(0xB0, 0xC0)))
    assert ev.fields == {
        "i16": -2,
        "arr": [1, 2, 3],
        "st": {"b": True, "w": "Ab"},
        "g": uuid.UUID(bytes=bytes(range(1, 17))),
        "z": "xy",
        "bin": b"\x01\x02",
    }
    i16 = ev.field_list[0]
    assert (i16.encoding, i16.format, i16.tag) == (3, 2, 0xBEEF)
    assert ev.field_list[1].is_array
    assert [f.name for f in ev.field_list[2].value] == ["b", "w"]
    assert ev.raw == SPEC_EVENT


def test_spec_vector_fields_keep_their_wire_types_and_value_bytes() -> None:
    """Each decoded field keeps its tag, array/struct shape and raw value bytes (no counts, no NULs)."""
    ev = decode_event(SPEC_NAME, SPEC_EVENT)
    assert (ev.format, ev.byte_order, ev.raw_name) == ("eventheader", "little", b"Complex")
    i16, arr, st_, g, z, bin_ = ev.field_list
    assert (i16.raw, i16.tag, i16.is_array, i16.is_struct) == (b"\xfe\xff", 0xBEEF, False, False)
    assert (arr.raw, arr.raw_elements) == (b"", (b"\x01\x00", b"\x02\x00", b"\x03\x00"))
    assert (st_.is_struct, st_.raw, [c.raw for c in st_.value]) == (
        True,
        b"",
        [b"\x01", "Ab".encode("utf-16-le")],
    )
    assert g.raw == bytes(range(1, 17))
    assert z.raw == b"xy"  # without the terminator
    assert bin_.raw == b"\x01\x02"  # without the count
    assert [f.plain_value() for f in ev.field_list] == list(ev.fields.values())


def test_perf_decode_text_needs_only_the_decoded_event() -> None:
    """The writer renders from the DecodedEvent: without the event bytes the text is the same."""
    ev = decode_event(SPEC_NAME, SPEC_EVENT)
    bare = dataclasses.replace(ev, raw=b"")
    assert perf_json(bare) == perf_json(ev)
    assert perf_json_fields(bare, field_tags=False) == perf_json_fields(ev, field_tags=False)


def test_perf_decode_text_is_only_for_eventheader_events() -> None:
    """perf_json and perf_json_fields refuse a TraceLogging event with a ValueError naming EventHeader."""
    _traits, metadata, data = TraceLoggingEncoder("MyCompany.MyService").encode(
        "e", to_fields({"n": 1}.items()), 4
    )
    ev = tracelogging_decode(metadata, data)
    with pytest.raises(ValueError, match="EventHeader"):
        perf_json(ev)
    with pytest.raises(ValueError, match="EventHeader"):
        perf_json_fields(ev)


def test_spec_vector_in_perf_decode_json() -> None:
    """The spec vector renders as exactly perf-decode's JSON, tags, meta and activity ids included."""
    text = perf_json(decode_event(SPEC_NAME, SPEC_EVENT))
    assert text == (
        '{"n":"MyCompany_MyComponent:Complex","i16;tag=0xBEEF":-2,"arr":[1,2,3],'
        '"st":{"b":true,"w":"Ab"},"g":"01020304-0506-0708-090a-0b0c0d0e0f10","z":"xy","bin":"01 02",'
        '"meta":{"id":1000,"version":2,"level":4,"keyword":"0x1F","opcode":1,"tag":"0x1234",'
        '"activity":"a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf",'
        '"relatedActivity":"b0b1b2b3-b4b5-b6b7-b8b9-babbbcbdbebf"}}'
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("P_L4K1", ("P", 4, 1, "")),
        ("user_events:My_Provider_L5K1fGgroup1", ("My_Provider", 5, 0x1F, "Ggroup1")),
        ("P_L1Kf123456789abcdef", ("P", 1, 0xF123456789ABCDEF, "")),
        ("P_L4K0", ("P", 4, 0, "")),
    ],
)
def test_tracepoint_names_split_at_the_last_underscore(
    name: str, expected: tuple[str, int, int, str]
) -> None:
    """Tracepoint names split at the last underscore into provider, level, keyword and the options."""
    assert parse_tracepoint_name(name) == expected


@pytest.mark.parametrize(
    "name", ["NoUnderscore", "P_4K1", "P_L4", "P_L4K1g", "P_L4K1G!", "x" * 256 + "_L4K1"]
)
def test_names_that_are_not_eventheader_tracepoints_are_rejected(name: str) -> None:
    """Names without the _L<level>K<keyword> suffix, bad options or too long raise EventHeaderDecodeError."""
    with pytest.raises(EventHeaderDecodeError):
        parse_tracepoint_name(name)


def test_header_level_must_match_the_tracepoint_name() -> None:
    """An event whose header level differs from its tracepoint name's is refused, the error naming level."""
    with pytest.raises(EventHeaderDecodeError, match="level"):
        decode_event("MyCompany_MyComponent_L5K1f", SPEC_EVENT)


def test_event_name_attributes_and_double_semicolon_escape() -> None:
    """``;;`` in the event name is a literal ";", and ";k=v" parts after the name become its attributes."""
    ev = decode_event("P_L4K1", build("A;;B;x=1;y=a;;b", b"", b""))
    assert ev.name == "A;B"
    assert ev.attributes == {"x": "1", "y": "a;b"}
    assert ev.raw_name == b"A;;B;x=1;y=a;;b"  # as the Metadata extension spells it


def test_big_endian_events_decode() -> None:
    """A big-endian event decodes its ints, floats, UTF-16 and arrays, and renders as perf-decode does."""
    meta = b"u32\0\x04" + b"f\0\x85\x08" + b"s\0\x0b" + b"a\0\x43"
    payload = struct.pack(">Id", 0xDEADBEEF, 1.5) + struct.pack(">H", 2) + "hé".encode("utf-16-be")
    payload += struct.pack(">HHH", 2, 7, 8)
    ev = decode_event("P_L4K1", build("BE", meta, payload, big_endian=True))
    assert ev.fields == {"u32": 0xDEADBEEF, "f": 1.5, "s": "hé", "a": [7, 8]}
    assert ev.byte_order == "big"
    assert ev.field_list[0].raw == struct.pack(">I", 0xDEADBEEF)
    assert ev.field_list[3].raw_elements == (b"\x00\x07", b"\x00\x08")
    assert perf_json_fields(ev) == '"u32":3735928559,"f":1.5,"s":"hé","a":[7,8]'


def test_every_encoding_gives_the_documented_python_value() -> None:
    """Each encoding and format pair decodes to its documented Python value, odd sizes included."""
    fields = [
        (b"v8\0\x02", b"\xff", 255),
        (b"i8\0\x82\x02", b"\xff", -1),
        (b"b8\0\x82\x07", b"\x01", True),
        (b"c8\0\x82\x0a", b"\xe9", "é"),
        (b"port\0\x83\x10", b"\x00\x50", 80),
        (b"c16\0\x83\x0b", "€".encode("utf-16-le"), "€"),
        (b"hex\0\x84\x03", struct.pack("<I", 0xABC), 0xABC),
        (b"errno\0\x84\x04", struct.pack("<i", -5), -5),
        (b"t32\0\x84\x06", struct.pack("<i", 0), dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)),
        (b"f32\0\x84\x08", struct.pack("<f", 0.5), 0.5),
        (b"ip4\0\x84\x11", bytes([10, 0, 0, 1]), ipaddress.IPv4Address("10.0.0.1")),
        (b"t64\0\x85\x06", struct.pack("<q", 10**15), 10**15),  # beyond datetime: the int
        (b"hb\0\x85\x09", bytes(8), bytes(8)),
        (b"u128\0\x06", bytes(range(16)), bytes(range(16))),
        (b"ip6\0\x86\x11", bytes(15) + b"\x01", ipaddress.IPv6Address("::1")),
        (b"z16\0\x08", "ab".encode("utf-16-le") + b"\0\0", "ab"),
        (b"z32\0\x09", "ab".encode("utf-32-le") + bytes(4), "ab"),
        (b"s32\0\x0c", b"\x01\x00" + "😀".encode("utf-32-le"), "😀"),
        (b"bad8\0\x0a", b"\x02\x00\xff\xfe", "\udcff\udcfe"),  # invalid UTF-8 kept as surrogateescape
        (b"l8\0\x8a\x0a", b"\x01\x00\xe9", "é"),  # String8: Latin-1
        (b"bom\0\x8a\x0c", b"\x04\x00\xff\xfeA\x00", "A"),  # UTF-16LE by its BOM
        (b"n0\0\x8d\x01", b"\x00\x00", None),  # Binary, UnsignedInt, no bytes
        (b"n4\0\x8d\x02", b"\x04\x00" + struct.pack("<i", -3), -3),
        (b"nb\0\x8d\x0f", b"\x02\x00\x01\x02", b"\x01\x02"),  # Uuid of the wrong size: the bytes
    ]
    meta = b"".join(m for m, _, _ in fields)
    payload = b"".join(p for _, p, _ in fields)
    ev = decode_event("P_L4K1", build("All", meta, payload))
    assert list(ev.fields.values()) == [v for _, _, v in fields]


def test_carray_varray_and_arrays_of_structs() -> None:
    """CArrays, VArrays and (empty) arrays of structs decode to lists, and the field after them is intact."""
    meta = (
        b"c\0\x22\x03\x00"  # CArray of 3 Value8
        + b"v\0\x4a"  # VArray of StringLength16Char8
        + b"sa\0\xc1\x02"  # VArray of struct with 2 fields
        + b"x\0\x02"
        + b"y\0\x07"
        + b"empty\0\xc1\x01"  # VArray of struct, 0 elements
        + b"q\0\x02"
        + b"after\0\x02"
    )
    payload = b"\x01\x02\x03" + b"\x02\x00" + b"\x01\x00a" + b"\x00\x00"
    payload += b"\x02\x00" + b"\x05" + b"p\0" + b"\x06" + b"q\0"
    payload += b"\x00\x00" + b"\x09"
    ev = decode_event("P_L4K1", build("Arrays", meta, payload))
    assert ev.fields == {
        "c": [1, 2, 3],
        "v": ["a", ""],
        "sa": [{"x": 5, "y": "p"}, {"x": 6, "y": "q"}],
        "empty": [],
        "after": 9,
    }


@pytest.mark.parametrize(
    ("meta", "payload", "message"),
    [
        (b"x\0\x04", b"\x01\x02", "truncated"),
        (b"x\0\x07", b"abc", "truncated"),  # no NUL terminator
        (b"x\0\x0a", b"\x05\x00ab", "truncated"),
        (b"x\0\x42", b"\x05\x00\x01", "truncated"),
        (b"x\0\x01", b"", "0 fields"),
        (b"x\0\x1f", b"", "unsupported encoding"),
        (b"x\0\x62", b"", "both CArray and VArray"),
        (b"x\0\x22\x00\x00", b"", "CArray length 0"),
        (b"x", b"", "metadata"),
    ],
)
def test_malformed_events_raise_a_clear_error(meta: bytes, payload: bytes, message: str) -> None:
    """Truncated values and invalid metadata raise EventHeaderDecodeError with a message saying what."""
    with pytest.raises(EventHeaderDecodeError, match=message):
        decode_event("P_L4K1", build("Bad", meta, payload))


def test_events_without_metadata_or_with_bad_headers_are_rejected() -> None:
    """A too short event, unknown flags or no Metadata extension raise EventHeaderDecodeError saying so."""
    with pytest.raises(EventHeaderDecodeError, match="too short"):
        decode_event("P_L4K1", b"\x07\x00")
    with pytest.raises(EventHeaderDecodeError, match="flags"):
        decode_event("P_L4K1", b"\x47" + SPEC_EVENT[1:])
    with pytest.raises(EventHeaderDecodeError, match="Metadata"):
        decode_event("P_L4K1", struct.pack("<BBHHBB", 3, 0, 0, 0, 0, 4))


def test_every_prefix_of_a_valid_event_is_rejected_cleanly() -> None:
    """Every proper prefix of the spec vector raises EventHeaderDecodeError, nothing else."""
    for n in range(len(SPEC_EVENT)):
        with pytest.raises(EventHeaderDecodeError):
            decode_event(SPEC_NAME, SPEC_EVENT[:n])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, len(SPEC_EVENT)))
def test_arbitrary_bytes_never_raise_anything_but_decode_errors(junk: bytes, cut: int) -> None:
    """Junk decodes or raises the decode error; what decodes was read from the input, and renders."""
    for data in (junk, SPEC_EVENT[:cut] + junk, b"\x07" + junk):
        try:
            ev = decode_event("P_L4K1", data)
        except EventHeaderDecodeError:
            continue
        assert_read_from(ev, data, data, data)
        perf_json_fields(ev)  # whatever decodes also renders


@pytest.mark.parametrize(
    ("value", "single", "text"),
    [
        (3.140000104904175, True, "3.14"),
        (1 / 3, False, "0.3333333333333333"),
        (struct.unpack("<f", struct.pack("<f", 1 / 3))[0], True, "0.33333334"),
        (65.0, True, "65"),
        (1e-45, True, "1e-45"),
        (5e-324, False, "5e-324"),
        (1e16, False, "1e+16"),
        (123456789012.0, False, "123456789012"),
        (0.0001, False, "1e-04"),
        (0.001, False, "0.001"),
        (-0.0, False, "-0"),
        (-math.inf, False, "-inf"),
        (-math.nan, False, "-nan"),
        # near FLT_MAX a shorter candidate ("3.403e+38") is past float32's range: not a match
        (struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0], True, "3.4028235e+38"),
        (struct.unpack("<f", struct.pack("<I", 0xFF7FFFFF))[0], True, "-3.4028235e+38"),
        (struct.unpack("<f", struct.pack("<I", 0x7F7FFFFE))[0], True, "3.4028233e+38"),
        (struct.unpack("<f", struct.pack("<I", 0x7F7FF000))[0], True, "3.401993e+38"),
    ],
)
def test_floats_print_like_cxx_to_chars(value: float, single: bool, text: str) -> None:
    """float_text prints the shortest round-trip text as C++ to_chars does, float32 and edge values too."""
    assert float_text(value, single=single) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "1970-01-01T00:00:00"),
        (-(2**31), "1901-12-13T20:45:52"),
        (-11644473601, "1600-12-31T23:59:59"),
        (910692730086, "30828-09-14T02:48:06"),
        (9000000000000000000, "TIME(9000000000000000000)"),
    ],
)
def test_times_print_like_gmtime(seconds: int, text: str) -> None:
    """time_text prints seconds as gmtime's ISO text, pre-1970 and far future too, or TIME(n) past range."""
    assert time_text(seconds) == text


def test_a_float_near_the_float32_limit_renders() -> None:
    """An event holding FLT_MAX renders (perf_json used to raise OverflowError on it)."""
    meta = b"f\0\x84\x08"  # Value32, Float
    ev = decode_event("P_L4K1", build("Max", meta, struct.pack("<I", 0x7F7FFFFF)))
    assert perf_json_fields(ev) == '"f":3.4028235e+38'


def test_errno_names() -> None:
    """errno_text names known errno values as NAME(n) and others, 0 and negatives as ERRNO(n)."""
    assert errno_text(1) == "EPERM(1)"
    assert errno_text(131) == "ENOTRECOVERABLE(131)"
    assert errno_text(41) == "ERRNO(41)"
    assert errno_text(0) == "ERRNO(0)"
    assert errno_text(-5) == "ERRNO(-5)"


@pytest.mark.parametrize(
    "address",
    ["::", "::1", "1::", "1:0:0:2::3", "::ffff:1.2.3.4", "::1.2.3.4", "fe80::1:2", "1:2:3:4:5:6:7:8"],
)
def test_ipv6_text_matches_inet_ntop(address: str) -> None:
    """An IPv6 field renders as the text inet_ntop gives, compressed and IPv4-mapped forms included."""
    packed = socket.inet_pton(socket.AF_INET6, address)
    meta = b"ip\0\x86\x11"
    ev = decode_event("P_L4K1", build("Ip", meta, packed))
    assert perf_json_fields(ev) == f'"ip":"{socket.inet_ntop(socket.AF_INET6, packed)}"'


_TO_CHARS_CPP = r"""
#include <charconv>
#include <cstdio>
#include <cstring>
#include <cstdint>
int main() {
    char kind; unsigned long long bits; char buf[64];
    while (std::scanf(" %c %llx", &kind, &bits) == 2) {
        std::to_chars_result r;
        if (kind == 'f') { uint32_t b32 = (uint32_t)bits; float f; std::memcpy(&f, &b32, 4);
                           r = std::to_chars(buf, buf + 64, f); }
        else { double d; std::memcpy(&d, &bits, 8); r = std::to_chars(buf, buf + 64, d); }
        *r.ptr = 0; std::puts(buf);
    }
}
"""


def test_float_text_agrees_with_the_cxx_library_on_random_values(tmp_path: Path) -> None:
    """perf-decode prints floats with std::to_chars; compile it and compare on 4000 bit patterns."""
    gxx = shutil.which("g++")
    if gxx is None:
        skip_or_fail("g++ not installed (needed to compare with std::to_chars)")
    src = tmp_path / "to_chars.cpp"
    exe = tmp_path / "to_chars"
    src.write_text(_TO_CHARS_CPP)
    subprocess.run([gxx, "-std=c++17", "-O1", str(src), "-o", str(exe)], check=True, timeout=300)
    rng = random.Random(1234)
    cases: list[tuple[str, int]] = []
    for _ in range(2000):
        cases.append(("f", rng.getrandbits(32)))
        cases.append(("d", rng.getrandbits(64)))
    cases += [("d", struct.unpack("<Q", struct.pack("<d", v))[0]) for v in (1e-4, 1e21, 123.0, 0.1, 1e100)]
    stdin = "".join(f"{k} {b:x}\n" for k, b in cases)
    run = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True, timeout=300)
    out = run.stdout.split("\n")
    for (kind, bits), expected in zip(cases, out, strict=False):
        if kind == "f":
            value = struct.unpack("<f", struct.pack("<I", bits))[0]
        else:
            value = struct.unpack("<d", struct.pack("<Q", bits))[0]
        if math.isnan(value):
            continue  # NaN payload/sign printing is covered above
        assert float_text(value, single=kind == "f") == expected, (kind, hex(bits))


# --- round trip through the project's encoder --------------------------------------------------


def _expected(value: object) -> object:
    """What the decoder returns for a value logged through the type table (docs/types.md)."""
    if value is None:
        return None  # a nullable field of length 0: null
    if isinstance(value, bool | float | bytes | uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _expected(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expected(v) for v in value]
    return str(value)


def test_every_type_table_kind_round_trips_through_encoder_and_decoder() -> None:
    """Every type-table kind, with header fields and activity ids, decodes as our encoder wrote it."""
    values: dict[str, object] = {
        "b": True,
        "i": -5,
        "u": 2**64 - 1,
        "f": 1.5,
        "s": "hé ✓",
        "by": b"\x00\x01",
        "g": uuid.UUID(int=5),
        "ip4": ipaddress.IPv4Address("1.2.3.4"),
        "ip6": ipaddress.IPv6Address("::1"),
        "t": dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone.utc),
        "st": {"a": 1, "b": {"c": "d"}},
        "arr": [1, 2],
        "sarr": ["x", "y"],
        "barr": [True, False],
        "big": 10**30,
        "n": None,
    }
    activity, related = uuid.uuid4(), uuid.uuid4()
    data = EventHeaderEncoder().encode(
        "Ev",
        to_fields(values.items()),
        3,
        opcode=1,
        tag=7,
        activity_id=activity.bytes,
        related_id=related.bytes,
    )
    assert data is not None
    ev = decode_event("MyCompany_MyService_L3K4", data)
    assert (ev.provider, ev.name, ev.level, ev.keyword, ev.opcode, ev.tag) == (
        "MyCompany_MyService",
        "Ev",
        3,
        4,
        1,
        7,
    )
    assert (ev.activity_id, ev.related_id) == (activity, related)
    assert ev.fields == {k: _expected(v) for k, v in values.items()}


_scalars = (
    st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30)
    | st.binary(max_size=30)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.dictionaries(st.text(alphabet="abcxyz", min_size=1, max_size=4), inner, min_size=1, max_size=4)
        | st.lists(st.integers(min_value=0, max_value=2**63 - 1), max_size=5)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(alphabet="abcdefgh_", min_size=1, max_size=8), _values, max_size=8))
def test_random_events_round_trip_through_encoder_and_decoder(values: dict[str, object]) -> None:
    """Generated event dicts decode to the values our encoder wrote, and render as perf-decode JSON."""
    data = EventHeaderEncoder().encode("Random", to_fields(values.items()), 4)
    assert data is not None
    ev = decode_event("P_L4K1", data)
    assert ev.fields == {k: _expected(v) for k, v in values.items()}
    perf_json(ev)  # and it renders
