"""``dict_fields`` (the renderer's inline conversion) gives exactly ``to_field``'s fields."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from structlog_etw.write.fields import I64, STR, U64, dict_fields, to_field
from tests.helpers.strategies import values


class _Text(str):
    pass


def _same(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x[0] != y[0] or x[1] != y[1] or type(x[2]) is not type(y[2]):
            return False
        if isinstance(x[2], float) and math.isnan(x[2]):
            if not math.isnan(y[2]):
                return False
        elif x[2] != y[2]:
            return False
    return True


@given(
    st.dictionaries(
        st.one_of(st.text(max_size=8), st.integers(), st.none(), st.builds(_Text, st.text(max_size=8))),
        st.one_of(values, st.builds(_Text, st.text()), st.integers(min_value=-(2**70), max_value=2**70)),
        max_size=8,
    ),
    st.sampled_from([None, "event"]),
)
def test_dict_fields_equals_to_field_per_key_without_exc_info_and_skipped_key(
    d: dict[Any, Any], skip: str | None
) -> None:
    """For any dict, dict_fields gives to_field's field per key, leaving out exc_info and the skipped key."""
    expected = [to_field(k, v) for k, v in d.items() if k != "exc_info" and not (skip and k == skip)]
    assert _same(dict_fields(d.items(), skip), expected)


def test_dict_fields_keeps_int_ranges_bool_and_str_subclasses_apart() -> None:
    """dict_fields keeps I64, U64 and text int ranges, bool and str subclasses apart, None keys as text."""
    d = {
        "a": 2**63 - 1,
        "b": 2**63,
        "c": 2**64,
        "d": True,
        "e": _Text("x"),
        "event": "e",
        "exc_info": True,
        None: 1,
    }
    out = dict_fields(d.items(), "event")
    assert out[:3] == [("a", I64, 2**63 - 1), ("b", U64, 2**63), ("c", STR, str(2**64))]
    assert out[3][1:] == to_field("d", True)[1:] and type(out[3][2]) is bool
    assert out[4] == ("e", STR, "x") and type(out[4][2]) is str
    assert out[5] == ("None", I64, 1)
    assert len(out) == 6
