"""TraceLogging encoder: spec vectors, the type table, the size policy, robustness."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import math
import re
import struct
import uuid
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from structlog_etw.formats.tracelogging import (
    DEFAULT_MAX_SIZE,
    MAX_FIELDS,
    InType,
    OutType,
    event_descriptor,
    group_guid,
    provider_id,
    provider_traits,
)
from structlog_etw.read.decode.tracelogging import decode, decode_traits, parse_metadata
from structlog_etw.write import fields as F
from structlog_etw.write.fields import TRUNCATED_FIELD, TRUNCATION_MARKER
from structlog_etw.write.tracelogging._encoder import (
    TraceLoggingEncoder,
    encode_tag,
    event_metadata,
    field_metadata,
    filetime,
)
from tests.helpers.strategies import Unprintable, typed_values, with_dicts
from tests.helpers.tracelogging import blobs

# ---------------------------------------------------------------------------------------------
# Spec vectors


@pytest.mark.parametrize(
    ("name", "guid"),
    [
        ("MyProvider", "b3864c38-4273-58c5-545b-8b3608343471"),
        ("TestProvider", "97c801ee-c28b-5bb6-2ae4-11e18fe6137a"),
        ("MyProviderName", "b7aa4d18-240c-5f41-5852-817dbf477472"),
    ],
)
def test_provider_id_matches_eventsource_hash_vectors(name: str, guid: str) -> None:
    """provider_id() gives the GUIDs EventSource's name hash gives for three known provider names."""
    assert provider_id(name) == uuid.UUID(guid)


def test_provider_id_ignores_case_like_eventsource() -> None:
    """provider_id() ignores the case of the name, as EventSource does."""
    assert provider_id("myprovider") == provider_id("MYPROVIDER") == provider_id("MyProvider")


def test_provider_traits_vector_and_group_trait() -> None:
    """Provider traits match the known bytes, with a group GUID appended as trait 1, and decode back."""
    assert provider_traits("MyProvider") == bytes.fromhex("0d 00 4d 79 50 72 6f 76 69 64 65 72 00")
    group = uuid.UUID("12345678-1234-5678-9abc-def012345678")
    blob = provider_traits("MyProvider", group)
    assert blob == bytes.fromhex("20 00 4d 79 50 72 6f 76 69 64 65 72 00 13 00 01") + group.bytes_le
    assert decode_traits(blob) == ("MyProvider", group)
    assert TraceLoggingEncoder("MyProvider", group).traits == blob


def test_provider_group_from_guid_text_or_name() -> None:
    """A group is a GUID, GUID text or a name hashed to a GUID; None is no group, an int a TypeError."""
    g = uuid.UUID("4f50731a-89cf-4782-b3e0-dce8c90476ba")
    assert group_guid(g) == g
    assert group_guid(str(g)) == g
    assert group_guid("mygroup") == provider_id("mygroup")
    assert group_guid(None) is None
    assert decode_traits(TraceLoggingEncoder("P", "mygroup").traits) == ("P", provider_id("mygroup"))
    with pytest.raises(TypeError):
        TraceLoggingEncoder("P", 5)  # type: ignore[arg-type]


def test_worked_example_metadata_data_and_descriptor_match_microsoft_bytes() -> None:
    """Metadata, payload and descriptor of Microsoft's worked example match its bytes and decode back."""
    meta = event_metadata(
        "MyEvent",
        [
            field_metadata("pid", InType.UINT32, OutType.PID),
            field_metadata("msg", InType.COUNTEDANSISTRING, OutType.UTF8),
            field_metadata("arr", InType.INT32, vcount=True),
            field_metadata("t", InType.UINT8, tag=0x1234567),
        ],
    )
    assert meta == bytes.fromhex(
        "24 00 00 4d 79 45 76 65 6e 74 00 70 69 64 00 88 05 6d 73 67 00 97 23"
        " 61 72 72 00 47 74 00 84 80 89 8d 8a 67"
    )
    data = struct.pack("<I", 1234) + struct.pack("<H", 2) + b"hi" + struct.pack("<Hii", 2, 1, 2) + b"\x07"
    assert data == bytes.fromhex("d2 04 00 00 02 00 68 69 02 00 01 00 00 00 02 00 00 00 07")
    assert event_descriptor(4, 0, 1) == bytes.fromhex("00 00 00 0b 04 00 00 00 01 00 00 00 00 00 00 00")
    ev = decode(meta, data, descriptor=event_descriptor(4, 0, 1))
    assert ev.name == "MyEvent"
    assert (ev.level, ev.keyword, ev.opcode) == (4, 1, 0)
    assert ev.fields == {"pid": 1234, "msg": "hi", "arr": [1, 2], "t": 7}
    assert ev.field_list[3].tag == 0x1234567
    assert ev.field_list[0].format == OutType.PID


def test_encoder_reproduces_the_worked_example_string_field() -> None:
    """The encoder writes the worked example's string field as exactly Microsoft's metadata and data bytes."""
    enc = TraceLoggingEncoder("MyProvider")
    result = blobs(enc.encode("MyEvent", [("msg", F.STR, "hi")]))
    assert result == (bytes.fromhex("11 00 00 4d 79 45 76 65 6e 74 00 6d 73 67 00 97 23"), b"\x02\x00hi")


@pytest.mark.parametrize(
    ("tag", "expected"),
    [(0, "00"), (0xFE00000, "7f"), (0xFEDC000, "ff 37"), (0xFEDCBAF, "ff b7 97 2f")],
)
def test_event_tags_use_the_shortest_of_1_2_4_bytes(tag: int, expected: str) -> None:
    """An event tag is written in the shortest of 1, 2 or 4 bytes and parsed back to the same value."""
    assert encode_tag(tag) == bytes.fromhex(expected)
    meta = blobs(TraceLoggingEncoder("P").encode("e", [], tag=tag))
    assert meta is not None
    assert parse_metadata(meta[0])[1] == tag


def test_struct_metadata_vector() -> None:
    """A struct field's metadata is its name, the STRUCT type with the chain bit and its member count."""
    assert field_metadata("st", InType.STRUCT, 2) == bytes.fromhex("73 74 00 98 02")


# ---------------------------------------------------------------------------------------------
# The type table: every row encodes to the documented InType/OutType and decodes back

UTC = dt.timezone.utc
_SURROGATE = re.compile("[\ud800-\udfff]")
T0 = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
U0 = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
IP4 = ipaddress.IPv4Address("10.1.2.3")
IP6 = ipaddress.IPv6Address("fe80::1")
ROW = ("label", "value", "in_type", "out_type", "decoded")

TABLE: list[tuple[str, object, int, int, object]] = [
    # (id, python value, InType, OutType, decoded value)
    ("bool", True, InType.BOOL32, 0, True),
    ("int64", -5, InType.INT64, 0, -5),
    ("uint64", 2**64 - 1, InType.UINT64, 0, 2**64 - 1),
    ("bigint", 2**70, InType.COUNTEDANSISTRING, OutType.UTF8, str(2**70)),
    ("float", 1.25, InType.DOUBLE, 0, 1.25),
    ("str", "héllo", InType.COUNTEDANSISTRING, OutType.UTF8, "héllo"),
    ("bytes", b"\x00\xff", InType.COUNTEDBINARY, 0, b"\x00\xff"),
    ("uuid", U0, InType.GUID, 0, U0),
    (
        "ipv4",
        ipaddress.IPv4Address("10.1.2.3"),
        InType.UINT32,
        OutType.IPV4,
        ipaddress.IPv4Address("10.1.2.3"),
    ),
    ("ipv6", ipaddress.IPv6Address("fe80::1"), InType.BINARY, OutType.IPV6, ipaddress.IPv6Address("fe80::1")),
    ("datetime", T0, InType.FILETIME, OutType.DATETIME_UTC, T0),
    ("json", [1, "a"], InType.COUNTEDANSISTRING, OutType.JSON, '[1, "a"]'),
    ("none", None, InType.COUNTEDANSISTRING, OutType.UTF8, "None"),
]


@pytest.mark.parametrize(
    ("label", "value", "in_type", "out_type", "decoded"), TABLE, ids=[r[0] for r in TABLE]
)
def test_type_table_row_round_trips(
    label: str, value: object, in_type: int, out_type: int, decoded: object
) -> None:
    """Each type-table value is written with its row's in/out types as a scalar and decodes to its value."""
    enc = TraceLoggingEncoder("MyCompany.Test")
    result = blobs(enc.encode("ev", F.to_fields([("v", value)])))
    assert result is not None
    ev = decode(*result)
    (f,) = ev.field_list
    assert (f.encoding, f.format, f.is_array) == (in_type, out_type, False)
    assert ev.fields == {"v": decoded}


ARRAYS: list[tuple[str, list[Any], int, int, list[Any]]] = [
    ("bool[]", [True, False], InType.BOOL32, 0, [True, False]),
    ("int64[]", [1, -2], InType.INT64, 0, [1, -2]),
    ("uint64[]", [2**63, 1], InType.UINT64, 0, [2**63, 1]),
    ("float[]", [0.5, -1.0], InType.DOUBLE, 0, [0.5, -1.0]),
    ("str[]", ["a", "bc"], InType.COUNTEDANSISTRING, OutType.UTF8, ["a", "bc"]),
    ("bytes[]", [b"a", b""], InType.COUNTEDBINARY, 0, [b"a", b""]),
    ("uuid[]", [U0, U0], InType.GUID, 0, [U0, U0]),
    (
        "ipv4[]",
        [ipaddress.IPv4Address("1.2.3.4")],
        InType.UINT32,
        OutType.IPV4,
        [ipaddress.IPv4Address("1.2.3.4")],
    ),
    (
        "ipv6[]",
        [ipaddress.IPv6Address("::1"), ipaddress.IPv6Address("2001:db8::2")],
        InType.COUNTEDBINARY,
        OutType.IPV6,
        [ipaddress.IPv6Address("::1"), ipaddress.IPv6Address("2001:db8::2")],
    ),
    ("datetime[]", [T0], InType.FILETIME, OutType.DATETIME_UTC, [T0]),
    ("empty[]", [], InType.COUNTEDANSISTRING, OutType.UTF8, []),
]


@pytest.mark.parametrize(
    ("label", "value", "in_type", "out_type", "decoded"), ARRAYS, ids=[r[0] for r in ARRAYS]
)
def test_homogeneous_list_becomes_vcount_array(
    label: str, value: list[Any], in_type: int, out_type: int, decoded: list[Any]
) -> None:
    """A list of one element type becomes a VCOUNT array with that type and decodes to the same list."""
    enc = TraceLoggingEncoder("MyCompany.Test")
    result = blobs(enc.encode("ev", F.to_fields([("v", value)])))
    assert result is not None
    meta, data = result
    assert meta[-1] & InType.VCOUNT or meta[-2] & InType.VCOUNT
    ev = decode(meta, data)
    (f,) = ev.field_list
    assert (f.encoding, f.format, f.is_array) == (in_type, out_type, True)
    assert ev.fields == {"v": decoded}


def test_dict_becomes_nested_struct_with_member_count() -> None:
    """A dict becomes a struct with its member count in metadata and decodes to the same nested values."""
    enc = TraceLoggingEncoder("MyCompany.Test")
    value = {"a": 1, "b": {"c": "x", "d": [1.5]}, "e": True}
    result = blobs(enc.encode("ev", F.to_fields([("s", value), ("after", 2)])))
    assert result is not None
    ev = decode(*result)
    assert ev.fields == {"s": value, "after": 2}
    s = ev.field_list[0]
    assert s.encoding == InType.STRUCT
    assert [m.name for m in s.value] == ["a", "b", "e"]
    assert field_metadata("s", InType.STRUCT, 3) in result[0]


def test_aware_datetime_is_converted_to_utc() -> None:
    """An aware datetime is written as the FILETIME of its UTC instant and decodes as that UTC time."""
    enc = TraceLoggingEncoder("P")
    plus2 = dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    result = blobs(enc.encode("e", [("t", F.TIME, plus2)]))
    assert result is not None
    assert decode(*result).fields["t"] == dt.datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
    assert result[1] == struct.pack("<Q", 0x019DB1DED53E8000 + 1704103200 * 10**7)


def test_naive_datetime_is_taken_as_local_time() -> None:
    """A naive datetime is read as local time: it decodes as its astimezone(UTC) value."""
    naive = dt.datetime(2024, 1, 1, 12, 0)
    enc = TraceLoggingEncoder("P")
    result = blobs(enc.encode("e", [("t", F.TIME, naive)]))
    assert result is not None
    assert decode(*result).fields["t"] == naive.astimezone(UTC)


def test_filetime_of_unix_epoch() -> None:
    """filetime() of the Unix epoch is 0x019DB1DED53E8000, the FILETIME of 1970-01-01."""
    assert filetime(dt.datetime(1970, 1, 1, tzinfo=UTC)) == 0x019DB1DED53E8000


def test_lone_surrogates_become_valid_utf8_and_nul_in_names_underscore() -> None:
    """Lone surrogates become U+FFFD in names and values; NUL becomes '_' in names, stays in values."""
    enc = TraceLoggingEncoder("P")
    result = blobs(enc.encode("ev\0x\ud800", [("k\0\udfff", F.STR, "a\ud800b\0c")]))
    assert result is not None
    ev = decode(*result)
    assert ev.name == "ev_x\ufffd"
    assert ev.fields == {"k_\ufffd": "a\ufffdb\0c"}


def test_event_with_no_fields() -> None:
    """An event without fields is just its name in metadata and an empty payload, decoding to no fields."""
    result = blobs(TraceLoggingEncoder("P").encode("empty", []))
    assert result == (b"\x09\x00\x00empty\x00", b"")
    assert decode(*result).fields == {}


def test_same_shape_reuses_cached_metadata_object() -> None:
    """Two events of one shape share the very same cached metadata bytes object, with different data."""
    enc = TraceLoggingEncoder("P")
    a = blobs(enc.encode("e", [("x", F.I64, 1)]))
    b = blobs(enc.encode("e", [("x", F.I64, 2)]))
    assert a is not None
    assert b is not None
    assert a[0] is b[0]
    assert a[1] != b[1]


def test_shape_cache_is_bounded() -> None:
    """5000 distinct event shapes leave at most 1024 entries in the encoder's metadata cache."""
    enc = TraceLoggingEncoder("P")
    for i in range(5000):
        assert blobs(enc.encode(f"e{i}", [("x", F.I64, i)])) is not None
    assert len(enc._cache) <= 1024


# ---------------------------------------------------------------------------------------------
# Size policy


def _total(enc: TraceLoggingEncoder, result: tuple[bytes, bytes] | None) -> int:
    assert result is not None
    return len(enc.traits) + len(result[0]) + len(result[1])


def test_oversized_string_is_truncated_with_marker_and_counted() -> None:
    """A 200 KB string is cut to fit max_size with the marker, the flag field set and one count."""
    enc = TraceLoggingEncoder("MyCompany.Test")
    result = blobs(enc.encode("big", [("small", F.STR, "keep me"), ("msg", F.STR, "x" * 200_000)]))
    assert _total(enc, result) <= enc.max_size
    assert result is not None
    ev = decode(*result)
    assert ev.fields["small"] == "keep me"
    assert ev.fields["msg"].endswith(TRUNCATION_MARKER)
    assert ev.fields[TRUNCATED_FIELD] is True
    assert enc.truncated == 1


def test_truncation_cuts_the_longest_values_first() -> None:
    """Over max_size, the two long values are cut while the short string and small array stay whole."""
    enc = TraceLoggingEncoder("P", max_size=4096)
    result = blobs(
        enc.encode(
            "e",
            [
                ("a", F.STR, "a" * 3000),
                ("b", F.BYTES, b"b" * 3000),
                ("c", F.STR, "c" * 100),
                ("d", F.I64 | F.ARRAY, [1] * 10),
            ],
        )
    )
    assert _total(enc, result) <= 4096
    assert result is not None
    ev = decode(*result)
    assert ev.fields["c"] == "c" * 100
    assert ev.fields["d"] == [1] * 10
    assert 1000 < len(ev.fields["a"]) < 3000
    assert 1000 < len(ev.fields["b"]) < 3000


def test_oversized_arrays_are_shortened() -> None:
    """A 100 000-element array over max_size keeps a leading run of more than 100 of its elements."""
    enc = TraceLoggingEncoder("P", max_size=2048)
    result = blobs(enc.encode("e", F.to_fields([("xs", list(range(100_000)))])))
    assert _total(enc, result) <= 2048
    assert result is not None
    xs = decode(*result).fields["xs"]
    assert xs == list(range(len(xs)))
    assert len(xs) > 100


def test_too_many_fields_keeps_leading_fields_and_marks_truncation() -> None:
    """Of 1000 fields the first 128 (with the flag) are kept in order, and the truncation is counted."""
    enc = TraceLoggingEncoder("P")
    fields = F.to_fields((f"f{i}", i) for i in range(1000))
    result = blobs(enc.encode("many", fields))
    assert result is not None
    ev = decode(*result)
    assert len(ev.field_list) == 128
    assert list(ev.fields)[:3] == ["f0", "f1", "f2"]
    assert ev.fields[TRUNCATED_FIELD] is True
    assert enc.truncated == 1


def test_a_cut_event_of_128_logical_fields_leaves_one_off_for_the_truncated_field() -> None:
    """A cut event of 128 logical fields drops its last field so the flag field makes it 128, not 129."""
    # 127 ints and a string too long for the budget are 128 logical fields; with the marker field
    # they would be 129, more than decoders handle: the last field is left off instead.
    enc = TraceLoggingEncoder("P")
    fields = [*F.to_fields((f"f{i}", i) for i in range(127)), ("big", F.STR, "x" * 70_000)]
    result = blobs(enc.encode("many", fields))
    assert result is not None
    names = list(decode(*result).fields)
    assert len(names) == 128
    assert names[:2] == ["f0", "f1"]
    assert names[-2:] == ["f126", TRUNCATED_FIELD]


def test_binary_and_arrays_count_two_toward_the_field_limit() -> None:
    """Binary fields count two each toward the 128 limit: 63 of 100 are kept, then the flag field."""
    enc = TraceLoggingEncoder("P")
    result = blobs(enc.encode("many", [(f"b{i}", F.BYTES, b"x") for i in range(100)]))
    assert result is not None
    names = list(decode(*result).fields)
    assert len(names) == 64  # 63 binaries (2 each) + the marker
    assert names[-1] == TRUNCATED_FIELD


def test_struct_over_the_field_limit_is_kept_as_json() -> None:
    """A dict of too many logical fields is written as one JSON field that loads back to the dict."""
    enc = TraceLoggingEncoder("P")
    big = {f"k{i}": [i] for i in range(100)}  # 1 + 100 * 2 logical fields
    result = blobs(enc.encode("e", F.to_fields([("first", 1), ("big", big), ("last", 2)])))
    assert result is not None
    ev = decode(*result)
    assert ev.fields["first"] == 1
    assert ev.field_list[1].format == OutType.JSON
    assert json.loads(ev.fields["big"]) == big
    assert list(ev.fields) == ["first", "big", TRUNCATED_FIELD]


def test_struct_kept_as_json_has_valid_text_even_with_surrogates_and_nan() -> None:
    """A struct written as JSON is valid JSON even with lone surrogates in keys and NaN values."""
    enc = TraceLoggingEncoder("P")
    big = {f"k\ud800{i}": [math.nan] for i in range(100)}
    result = blobs(enc.encode("e", F.to_fields([("big", big)])))
    assert result is not None
    text = decode(*result).fields["big"]
    assert json.loads(text)["k\ufffd0"] == ["nan"]


def test_huge_string_inside_an_array_is_cut_not_dropped() -> None:
    """An array holding a 70 KB string is emptied, not the event dropped: later fields and the flag stay."""
    enc = TraceLoggingEncoder("P")
    result = blobs(enc.encode("e", F.to_fields([("a", ["x" * 70_000, "y"]), ("b", 1)])))
    assert result is not None
    assert decode(*result).fields == {"a": [], "b": 1, TRUNCATED_FIELD: True}


def test_nested_struct_strings_are_truncated_in_place() -> None:
    """A long string two structs deep is cut with the marker in place; its sibling value stays intact."""
    enc = TraceLoggingEncoder("P", max_size=2048)
    result = blobs(enc.encode("e", F.to_fields([("outer", {"inner": {"text": "z" * 10_000}, "n": 1})])))
    assert _total(enc, result) <= 2048
    assert result is not None
    outer = decode(*result).fields["outer"]
    assert outer["n"] == 1
    assert outer["inner"]["text"].endswith(TRUNCATION_MARKER)


def test_malformed_field_lists_never_raise() -> None:
    """Malformed field entries and a None event name do not raise: the well-formed field is still written."""
    enc = TraceLoggingEncoder("P")
    bad: list[Any] = ["not a tuple", ("short",), (1, F.I64, 5), ("ok", F.I64, 3)]
    result = blobs(enc.encode("e", bad))
    assert result is not None
    assert decode(*result).fields["ok"] == 3
    assert blobs(enc.encode(None, [("x", F.I64, 1)])) is not None  # type: ignore[arg-type]


def test_metadata_that_cannot_fit_is_dropped() -> None:
    """An event whose 40 KB name cannot fit the metadata limit is dropped (None) and not counted as cut."""
    enc = TraceLoggingEncoder("P")
    assert blobs(enc.encode("n" * 40_000, [("x", F.I64, 1)])) is None
    assert enc.truncated == 0


def test_long_field_names_are_dropped_from_the_end_until_metadata_fits() -> None:
    """Fields with huge names are dropped from the end until metadata fits under 32 KB, then flagged."""
    enc = TraceLoggingEncoder("P")
    result = blobs(enc.encode("e", [("a" * 20_000, F.I64, 1), ("b" * 20_000, F.I64, 2)]))
    assert result is not None
    assert len(result[0]) < 32 * 1024
    assert decode(*result).fields == {"a" * 20_000: 1, TRUNCATED_FIELD: True}


def test_max_size_is_validated() -> None:
    """A max_size past the ETW limit and an empty provider name raise ValueError naming the problem."""
    with pytest.raises(ValueError, match="max_size"):
        TraceLoggingEncoder("P", max_size=70_000)
    with pytest.raises(ValueError, match="provider name"):
        TraceLoggingEncoder("")


# ---------------------------------------------------------------------------------------------
# Robustness: bad field values never raise and never produce undecodable bytes


@pytest.mark.parametrize(
    "field",
    [
        ("t", F.TIME, dt.datetime(1, 1, 1, tzinfo=UTC)),
        ("i", F.I64, 2**80),
        ("u", F.U64, -1),
        ("b", F.BYTES, 5),
        ("ip", F.IPV4, b"\x01\x02"),
        ("s", F.STRUCT, []),
        ("a", F.I64 | F.ARRAY, [1, "x"]),
        ("k", 999, Unprintable()),
        ("f", F.F64, "nan"),
    ],
)
def test_mistyped_field_value_becomes_a_string(field: tuple[str, int, object]) -> None:
    """A value that does not fit its declared kind is written as a string; the other field is unharmed."""
    enc = TraceLoggingEncoder("P")
    result = blobs(enc.encode("e", [("ok", F.I64, 1), field]))
    assert result is not None
    ev = decode(*result)
    assert ev.fields["ok"] == 1
    assert isinstance(ev.fields[field[0]], str)


def test_nan_and_infinity_are_kept() -> None:
    """NaN and -inf float values are written as floats and decode as NaN and -inf."""
    result = blobs(TraceLoggingEncoder("P").encode("e", F.to_fields([("n", math.nan), ("i", -math.inf)])))
    assert result is not None
    fields = decode(*result).fields
    assert math.isnan(fields["n"])
    assert fields["i"] == -math.inf


#: Datetimes a FILETIME holds (UTC, after 1601).
_filetimes = st.datetimes(timezones=st.just(UTC), min_value=dt.datetime(1602, 1, 1))
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.uuids(),
    _filetimes,
    st.builds(ipaddress.IPv4Address, st.integers(0, 2**32 - 1)),
    st.builds(ipaddress.IPv6Address, st.integers(0, 2**128 - 1)),
)
_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=20,
)


def _expected(field: F.Field) -> object:
    """What the decoder should return for a field produced by _fields.to_field."""
    _, kind, value = field
    if kind == F.STRUCT:
        return {_name(n): _expected((n, k, v)) for n, k, v in value}
    if kind in (F.STR, F.JSON):
        return _SURROGATE.sub("\ufffd", value)
    if kind == F.NULL:
        return "None"  # TraceLogging has no null: the text (docs/types.md)
    if kind == F.IPV4:
        return ipaddress.IPv4Address(value)
    if kind == F.IPV6:
        return ipaddress.IPv6Address(value)
    if kind & F.ARRAY:
        base = kind & ~F.ARRAY
        return [_expected(("", base, v)) for v in value]
    return value


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _values, max_size=12))
@example({f"k{i}": {"a": None, "b": b"x"} for i in range(40)})  # 160 logical fields: cut
def test_arbitrary_event_dict_round_trips(event: dict[str, object]) -> None:
    """Any event dict of generated values decodes to the same field names and the expected values;
    one past TraceLogging's 128 logical fields (nested dicts count each member) keeps its leading
    fields whole and ends with the ``_truncated`` marker."""
    enc = TraceLoggingEncoder("MyCompany.Test")
    fields = F.to_fields(event.items())
    result = blobs(enc.encode("ev", fields))
    assert result is not None
    ev = decode(*result)
    names = [f.name for f in ev.field_list]
    expected = [_name(n) for n, _, _ in fields]
    decoded_fields = ev.field_list
    if enc.truncated:
        assert sum(_logical_fields(f) for f in fields) > MAX_FIELDS
        assert names[-1] == TRUNCATED_FIELD and ev.fields[TRUNCATED_FIELD] is True
        kept = len(names) - 1
        assert names[:kept] == expected[:kept]
        # the last kept field may be a struct cut inside: every one before it is whole
        decoded_fields, fields = ev.field_list[: max(kept - 1, 0)], fields[: max(kept - 1, 0)]
    else:
        assert names == expected
    for decoded, field in zip(decoded_fields, fields, strict=True):
        got = _plain(decoded.value) if decoded.encoding == InType.STRUCT else decoded.value
        assert got == _expected(field)


def _logical_fields(field: F.Field) -> int:
    """TraceLogging's logical field count of a field: a struct is one plus its members', a binary
    value (bytes, an IPv6 address) or an array two (its length is a field of its own)."""
    _, kind, value = field
    if kind == F.STRUCT:
        return 1 + sum(_logical_fields(m) for m in value)
    return 2 if kind & F.ARRAY or kind in (F.BYTES, F.IPV6) else 1


def _name(name: str) -> str:
    return _SURROGATE.sub("\ufffd", name).replace("\0", "_")


def _plain(members: list[Any]) -> dict[str, object]:
    return {m.name: (_plain(m.value) if m.encoding == InType.STRUCT else m.value) for m in members}


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(max_size=300), st.one_of(st.text(max_size=3000), st.binary(max_size=3000))),
        max_size=40,
    ),
    st.integers(min_value=1024, max_value=8192),
)
def test_encoded_events_never_exceed_the_size_budget(items: list[tuple[str, object]], max_size: int) -> None:
    """Generated events of long names and values are never larger than max_size and always decode."""
    enc = TraceLoggingEncoder("MyCompany.Test", max_size=max_size)
    result = blobs(enc.encode("ev", F.to_fields(items)))
    if result is None:
        return  # dropped: the caller counts it (only when even the names cannot fit)
    assert _total(enc, result) <= max_size
    decode(*result)  # and it decodes


_any_value = st.one_of(
    _scalars,
    st.lists(_scalars, max_size=4),
    st.builds(Unprintable),
    st.integers(),
    st.binary(min_size=4, max_size=4),
    st.binary(min_size=16, max_size=16),
)
_kinds = st.sampled_from(
    [F.BOOL, F.I64, F.U64, F.F64, F.STR, F.BYTES, F.UUID, F.IPV4, F.IPV6, F.TIME, F.JSON, F.STRUCT, 0, 99]
) | st.sampled_from([F.BOOL, F.I64, F.STR, F.BYTES, F.IPV6, F.TIME, F.STRUCT]).map(lambda k: k | F.ARRAY)
_raw_fields: st.SearchStrategy[list[Any]] = st.lists(
    st.tuples(st.text(max_size=6), _kinds, _any_value), max_size=20
)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20), _raw_fields, st.integers(min_value=0, max_value=0x0FFFFFFF))
def test_any_field_list_encodes_to_a_decodable_event_or_none(name: str, fields: list[Any], tags: int) -> None:
    """Any raw field list encodes to an event within max_size that decodes with the event tag given."""
    enc = TraceLoggingEncoder("MyCompany.Test", max_size=2048)
    result = blobs(enc.encode(name, fields, tag=tags))
    assert result is not None  # nothing here is too large to truncate
    assert _total(enc, result) <= 2048
    ev = decode(*result)
    assert ev.tag == tags


@pytest.mark.parametrize(
    "args",
    [
        {"tag": 0x10000000},
        {"tag": -1},
        {"level": 256},
        {"level": -1},
        {"opcode": 256},
        {"level": "4"},
        {"activity_id": b"short"},
        {"activity_id": bytes(16), "related_id": bytes(15)},
    ],
)
def test_arguments_outside_the_header_ranges_raise_value_error(args: dict[str, Any]) -> None:
    """A tag, level, opcode or activity id outside its header range raises ValueError ("must be")."""
    # The one error contract of both encoders: ValueError only for header arguments out of range
    # (the provider never passes them); tags were silently masked to 28 bits before.
    with pytest.raises(ValueError, match="must be"):
        TraceLoggingEncoder("P").encode("e", [("x", F.I64, 1)], **args)


# ---------------------------------------------------------------------------------------------
# Size policy with huge field names (the EventHeader property-test failures, checked here too)


def _big_dict() -> dict[str, int]:
    """More members than a struct may hold: a JSON field."""
    return {f"k{i}": i for i in range(500)}


def _deep_dict() -> dict[str, Any]:
    """Nested past the struct depth limit: the inner part becomes JSON."""
    d: dict[str, Any] = {"leaf": "x"}
    for i in range(40):
        d = {f"l{i}": d}
    return d


def test_json_value_of_a_field_with_a_huge_name_is_cut_with_its_marker() -> None:
    """A JSON value beside a 7.9 KB name is cut as plain text with the marker, a prefix of the JSON."""
    name = "1" + "0" * 7900
    enc = TraceLoggingEncoder("P", max_size=9000)
    result = blobs(enc.encode("e", F.to_fields([(name, _big_dict())])))
    assert _total(enc, result) <= 9000
    assert result is not None
    ev = decode(*result)
    field, flag = ev.field_list
    assert field.name == name
    assert field.format == OutType.UTF8  # cut JSON is written as a plain string
    assert field.value.endswith(TRUNCATION_MARKER)
    assert len(field.value) > len(TRUNCATION_MARKER)
    assert json.dumps(_big_dict()).startswith(field.value[: -len(TRUNCATION_MARKER)])
    assert (flag.name, flag.value) == (TRUNCATED_FIELD, True)


@pytest.mark.parametrize("max_size", [DEFAULT_MAX_SIZE, 16_000, 9000, 8300])
def test_huge_key_names_with_json_values_are_kept_whole_or_cut_with_markers(max_size: int) -> None:
    """Huge key names with JSON values keep every field: values whole, or cut with the marker when small."""
    # The EventHeader property test's falsifying example 1: no value may come back emptied.
    items = {"": _deep_dict(), 0: _deep_dict(), 10**4000: _big_dict(), -(10**4000): _big_dict()}
    fields = F.to_fields(items.items())
    enc = TraceLoggingEncoder("P", max_size=max_size)
    result = blobs(enc.encode("", fields))
    assert _total(enc, result) <= max_size  # names of 8 KB leave room for the markers at 8300
    assert result is not None
    decoded = decode(*result).field_list
    truncated = decoded[-1].name == TRUNCATED_FIELD
    body = decoded[:-1] if truncated else decoded
    assert len(body) == len(fields)
    for got, (name, kind, value) in zip(body, fields, strict=False):
        assert got.name == name
        if kind == F.JSON and got.value != value:
            assert truncated and got.value.endswith(TRUNCATION_MARKER)
            assert value.startswith(got.value[: -len(TRUNCATION_MARKER)])
    assert truncated == (max_size < DEFAULT_MAX_SIZE)
    assert enc.truncated == (1 if truncated else 0)


def test_binary_array_element_past_u16_is_truncated_not_dropped() -> None:
    """A binary array element past 65535 bytes empties the array and is flagged; the event is kept."""
    # The EventHeader property test's falsifying example 2.
    enc = TraceLoggingEncoder("P")
    result = blobs(enc.encode("", F.to_fields({"": _big_dict(), "0": [bytes(70000)]}.items())))
    assert result is not None
    fields = decode(*result).fields
    assert fields["0"] == []
    assert fields[""] == json.dumps(_big_dict())
    assert fields[TRUNCATED_FIELD] is True
    assert enc.truncated == 1


# ---------------------------------------------------------------------------------------------
# The shared size policy and the one error contract (docs/limits.md)


def test_an_array_whose_elements_cannot_fit_leaves_its_room_to_the_other_values() -> None:
    """An array whose element cannot fit is emptied and takes no room: the string beside it stays whole."""
    # One cap for all values, computed with what each value really keeps at that cap: an array
    # keeps whole elements only, so a 3000-byte element that cannot fit takes no room and the
    # string beside it stays whole (0.1.0 cut it to 2029 bytes).
    enc = TraceLoggingEncoder("P", max_size=4096)
    result = blobs(enc.encode("e", [("a", F.STR | F.ARRAY, ["x" * 3000]), ("s", F.STR, "y" * 3000)]))
    assert _total(enc, result) <= 4096
    assert result is not None
    assert decode(*result).fields == {"a": [], "s": "y" * 3000, TRUNCATED_FIELD: True}
    assert enc.truncated == 1


def test_fields_past_the_metadata_limit_are_left_off_one_by_one() -> None:
    """Fields past the metadata limit are left off one at a time: three of four 10 KB names are kept."""
    # The leading fields whose metadata fits are kept (the old loop halved the list: 2 of 4).
    enc = TraceLoggingEncoder("P")
    fields = [(c * 10_000, F.I64, i) for i, c in enumerate("abcd")]
    result = blobs(enc.encode("e", fields))
    assert result is not None
    assert len(result[0]) <= 32767
    kept = {"a" * 10_000: 0, "b" * 10_000: 1, "c" * 10_000: 2, TRUNCATED_FIELD: True}
    assert decode(*result).fields == kept


def test_a_datetime_filetime_cannot_hold_is_written_as_its_iso_text() -> None:
    """A datetime before 1601 is written as UTF-8 text: isoformat() alone, str() of the list in an array."""
    enc = TraceLoggingEncoder("P")
    early = dt.datetime(1600, 12, 31, 23, 59, tzinfo=UTC)
    result = blobs(enc.encode("e", [("t", F.TIME, early), ("a", F.TIME | F.ARRAY, [T0, early])]))
    assert result is not None
    ev = decode(*result)
    assert ev.fields == {"t": early.isoformat(), "a": str([T0, early])}
    assert [f.format for f in ev.field_list] == [OutType.UTF8, OutType.UTF8]


def test_a_value_that_does_not_fit_its_kind_is_written_as_its_text() -> None:
    """A str given for an I64 field is written as that text, and the next field is still the int."""
    enc = TraceLoggingEncoder("P")
    result = blobs(enc.encode("e", [("x", F.I64, "not an int"), ("n", F.I64, 3)]))
    assert result is not None
    assert decode(*result).fields == {"x": "not an int", "n": 3}


@settings(max_examples=300, deadline=None)
@given(
    name=st.text(max_size=20),
    items=st.dictionaries(st.text(max_size=8), with_dicts(typed_values(_filetimes)), max_size=10),
)
def test_fast_and_general_paths_write_the_same_blobs(name: str, items: dict[str, Any]) -> None:
    """The fast path and the general path write identical blobs and truncation counts for any event."""
    fields = F.to_fields(items.items())
    fast, general = TraceLoggingEncoder("P"), TraceLoggingEncoder("P")
    assert fast.encode(name, fields) == general._encode_general(name, fields, 0)
    assert fast.truncated == general.truncated
