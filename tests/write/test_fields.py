"""The type table (structlog_etw.write.fields): every row and its edge cases."""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import json
import math
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.write.fields import (
    ARRAY,
    BOOL,
    BYTES,
    F64,
    I64,
    IPV4,
    IPV6,
    JSON,
    MAX_NESTING,
    MAX_STRUCT_FIELDS,
    NULL,
    STR,
    STRUCT,
    TIME,
    U64,
    UUID,
    safe_str,
    to_field,
    to_fields,
)
from tests.helpers.strategies import Unprintable, values


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


class ReprOnly:
    def __str__(self) -> str:
        raise RuntimeError("str")

    def __repr__(self) -> str:
        return "ReprOnly()"


class StrNotStr:
    def __str__(self) -> Any:
        return 5  # noqa: PLE0307 - deliberately broken

    def __repr__(self) -> str:
        return "StrNotStr()"


class MyStr(str):
    pass


class MyInt(int):
    pass


NOW = dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone.utc)
U = uuid.UUID("12345678-1234-5678-1234-567812345678")


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (True, BOOL, True),
        (False, BOOL, False),
        (0, I64, 0),
        (-(2**63), I64, -(2**63)),
        (2**63 - 1, I64, 2**63 - 1),
        (2**63, U64, 2**63),
        (2**64 - 1, U64, 2**64 - 1),
        (2**64, STR, str(2**64)),
        (-(2**63) - 1, STR, str(-(2**63) - 1)),
        (MyInt(7), I64, 7),
        (1.25, F64, 1.25),
        (float("inf"), F64, float("inf")),
        ("text", STR, "text"),
        ("nul\0and\ud800surrogate", STR, "nul\0and\ud800surrogate"),
        (MyStr("sub"), STR, "sub"),
        (b"\x00\x01", BYTES, b"\x00\x01"),
        (bytearray(b"ab"), BYTES, b"ab"),
        (memoryview(b"cd"), BYTES, b"cd"),
        (U, UUID, U),
        (ipaddress.IPv4Address("192.0.2.1"), IPV4, bytes([192, 0, 2, 1])),
        (ipaddress.IPv6Address("2001:db8::1"), IPV6, ipaddress.IPv6Address("2001:db8::1").packed),
        (NOW, TIME, NOW),
        (dt.date(2024, 1, 2), STR, "2024-01-02"),
        (dt.time(3, 4, 5), STR, "03:04:05"),
        (None, NULL, None),
        (Color.RED, STR, "Color.RED"),
        (Level.HIGH, STR, "Level.HIGH"),
        (ValueError("bad thing"), STR, "ValueError: bad thing"),
        (KeyError("k"), STR, "KeyError: 'k'"),
        (ReprOnly(), STR, "ReprOnly()"),
        (StrNotStr(), STR, "StrNotStr()"),
    ],
)
def test_scalar_rows_of_the_type_table(value: Any, kind: int, expected: Any) -> None:
    """Every scalar type maps to its table kind and value, of the exact expected type; others to text."""
    name, got_kind, got = to_field("k", value)
    assert name == "k"
    assert got_kind == kind
    assert type(got) is type(expected)
    assert got == expected


def test_nan_stays_a_float() -> None:
    """NaN is an F64 field holding NaN, not text."""
    _, kind, value = to_field("k", float("nan"))
    assert kind == F64
    assert math.isnan(value)


def test_huge_int_past_cpython_digit_limit_becomes_hex_text() -> None:
    """An int past CPython's str() digit limit, positive or negative, becomes its hex text."""
    _, kind, value = to_field("k", 1 << 20000)
    assert kind == STR
    assert value == hex(1 << 20000)
    _, kind, value = to_field("k", -(1 << 20000))
    assert value == hex(-(1 << 20000))


def test_objects_whose_str_and_repr_raise_get_a_type_marker() -> None:
    """A value whose str and repr raise becomes "<unprintable TypeName>", also through safe_str."""
    assert to_field("k", Unprintable()) == ("k", STR, "<unprintable Unprintable>")
    assert safe_str(Unprintable()) == "<unprintable Unprintable>"


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        ([1, 2, -3], I64 | ARRAY, [1, 2, -3]),
        ((1, 2), I64 | ARRAY, [1, 2]),
        ([2**63, 1], U64 | ARRAY, [2**63, 1]),
        ([0.5, 1.5], F64 | ARRAY, [0.5, 1.5]),
        ([True, False], BOOL | ARRAY, [True, False]),
        (["a", "b"], STR | ARRAY, ["a", "b"]),
        ([b"a", b"b"], BYTES | ARRAY, [b"a", b"b"]),
        ([bytearray(b"a")], BYTES | ARRAY, [b"a"]),
        ([U], UUID | ARRAY, [U]),
        ([ipaddress.IPv4Address("1.2.3.4")], IPV4 | ARRAY, [b"\x01\x02\x03\x04"]),
        ([ipaddress.IPv6Address("::1")], IPV6 | ARRAY, [b"\x00" * 15 + b"\x01"]),
        ([NOW], TIME | ARRAY, [NOW]),
        ([], STR | ARRAY, []),
        ((), STR | ARRAY, []),
    ],
)
def test_homogeneous_lists_become_arrays(value: Any, kind: int, expected: Any) -> None:
    """Every list, tuple or empty sequence of one scalar type becomes an array of that kind."""
    assert to_field("k", value) == ("k", kind, expected)


def test_sets_become_arrays() -> None:
    """Sets and frozensets become arrays of their element kind."""
    _name, kind, value = to_field("k", {3, 1, 2})
    assert kind == I64 | ARRAY
    assert sorted(value) == [1, 2, 3]
    assert to_field("k", frozenset(["x"])) == ("k", STR | ARRAY, ["x"])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ([1, "a"], '[1, "a"]'),
        ([1, True], "[1, true]"),
        ([[1], [2]], "[[1], [2]]"),
        ([-1, 2**63], f"[-1, {2**63}]"),
        ([2**70, 1], f"[{2**70}, 1]"),
        ([{"a": b"\x01"}], '[{"a": "01"}]'),
        ([None, None], "[null, null]"),
        ([Color.RED, Color.RED], '["Color.RED", "Color.RED"]'),
    ],
)
def test_mixed_and_nested_lists_become_json_text(value: Any, text: str) -> None:
    """Every mixed, nested, out-of-range or non-scalar list becomes a JSON field of its JSON text."""
    assert to_field("k", value) == ("k", JSON, text)


def test_lists_with_nan_fall_back_to_text() -> None:
    """A list holding NaN is written as STR text containing "nan", not as JSON."""
    _, kind, value = to_field("k", [float("nan"), 1])
    assert kind == STR
    assert "nan" in value


def test_recursive_list_becomes_its_repr() -> None:
    """A self-containing list becomes its repr text with "[...]"."""
    loop: list[Any] = [1]
    loop.append(loop)
    _name, kind, text = to_field("k", loop)
    assert kind == STR
    assert text.startswith("[1, [") and "[...]" in text


def test_dict_becomes_struct_with_typed_children() -> None:
    """A dict becomes a STRUCT of typed children, nested dicts too, keys made str."""
    assert to_field("k", {"a": 1, "b": {"c": "x"}, 3: True}) == (
        "k",
        STRUCT,
        [("a", I64, 1), ("b", STRUCT, [("c", STR, "x")]), ("3", BOOL, True)],
    )


def test_empty_dict_is_json() -> None:
    """An empty dict becomes the JSON text "{}"."""
    assert to_field("k", {}) == ("k", JSON, "{}")


def test_dict_with_too_many_fields_becomes_json() -> None:
    """A dict past MAX_STRUCT_FIELDS becomes JSON of the same content; one at the limit stays a STRUCT."""
    d = {f"f{i}": i for i in range(MAX_STRUCT_FIELDS + 1)}
    _name, kind, text = to_field("k", d)
    assert kind == JSON
    assert json.loads(text) == d
    ok = {f"f{i}": i for i in range(MAX_STRUCT_FIELDS)}
    assert to_field("k", ok)[1] == STRUCT


def test_deep_dicts_become_json_past_max_nesting() -> None:
    """Dicts nested past MAX_NESTING are STRUCTs down to that depth, then valid JSON text."""
    d: dict[str, Any] = {"leaf": 1}
    for _ in range(MAX_NESTING + 3):
        d = {"x": d}
    f = to_field("k", d)
    depth = 0
    while f[1] == STRUCT:
        depth += 1
        f = f[2][0]
    assert depth == MAX_NESTING
    assert f[1] == JSON
    assert json.loads(f[2]) is not None


def test_recursive_dict_is_bounded_and_ends_in_text() -> None:
    """A self-containing dict nests MAX_NESTING STRUCTs and ends in its repr text."""
    d: dict[str, Any] = {}
    d["self"] = d
    f = to_field("k", d)
    depth = 0
    while f[1] == STRUCT:
        depth += 1
        f = f[2][0]
    assert depth == MAX_NESTING
    assert f[1] == STR
    assert f[2] == "{'self': {...}}"


def test_huge_dict_and_thousands_of_fields_convert_in_order() -> None:
    """5,000 items convert to 5,000 I64 fields in their original order."""
    items = [(f"k{i}", i) for i in range(5000)]
    fields = to_fields(items)
    assert [f[0] for f in fields] == [k for k, _ in items]
    assert all(f[1] == I64 for f in fields)


def test_non_str_keys_become_strings() -> None:
    """Int, None and unprintable keys become their text (or the unprintable marker) as field names."""
    assert to_fields([(1, "a"), (None, "b"), (Unprintable(), "c")]) == [
        ("1", STR, "a"),
        ("None", STR, "b"),
        ("<unprintable Unprintable>", STR, "c"),
    ]


_VALUE_TYPES = {
    BOOL: bool,
    I64: int,
    U64: int,
    F64: float,
    STR: str,
    BYTES: bytes,
    UUID: uuid.UUID,
    IPV4: bytes,
    IPV6: bytes,
    TIME: dt.datetime,
    JSON: str,
    NULL: type(None),
}


def _check(field: Any) -> None:
    name, kind, value = field
    assert type(name) is str
    if kind == STRUCT:
        assert 1 <= len(value) <= MAX_STRUCT_FIELDS
        for child in value:
            _check(child)
    elif kind & ARRAY:
        assert type(value) is list
        assert all(type(v) is _VALUE_TYPES[kind & ~ARRAY] for v in value)
    else:
        assert type(value) is _VALUE_TYPES[kind]
        if kind == I64:
            assert -(2**63) <= value < 2**63
        if kind == U64:
            assert 2**63 <= value < 2**64
        if kind == IPV4:
            assert len(value) == 4
        if kind == IPV6:
            assert len(value) == 16


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.one_of(st.text(), st.integers(), st.none()), values, max_size=8))
def test_any_event_dict_converts_to_well_typed_fields(items: dict[Any, Any]) -> None:
    """Any generated event dict gives one field per key, each of its kind's value type and range."""
    fields = to_fields(items.items())
    assert len(fields) == len(items)
    for f in fields:
        _check(f)
