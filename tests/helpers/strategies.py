"""Hypothesis strategies shared by the test modules."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: Any value a log call may carry: scalars of every table row, nested lists, tuples and dicts.
values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(),
        st.binary(),
        st.uuids(),
        st.datetimes(),
        st.ip_addresses(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), inner, max_size=4),
    ),
    max_leaves=15,
)


class Unprintable:
    """An object whose ``__str__`` and ``__repr__`` both raise (its text is a type marker)."""

    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


def typed_values(datetimes: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[Any]:
    """Values ``to_fields`` types without falling back to text: a scalar of each table row and a
    homogeneous list of each kind (``datetimes``: the datetimes to draw, default any)."""
    times = st.datetimes() if datetimes is None else datetimes
    scalars = [
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(),
        st.text(max_size=50),
        st.binary(max_size=50),
        st.uuids(),
        times,
        st.ip_addresses(),
    ]
    lists = [
        st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=5),
        st.lists(st.text(max_size=8), max_size=5),
        st.lists(st.binary(max_size=8), max_size=5),
        st.lists(st.floats(), max_size=5),
        st.lists(st.booleans(), max_size=5),
        st.lists(st.uuids(), max_size=3),
        st.lists(times, max_size=3),
        st.lists(st.ip_addresses(v=4), max_size=3),
        st.lists(st.ip_addresses(v=6), max_size=3),
    ]
    return st.one_of(*scalars, *lists)


def with_dicts(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``leaves`` and dicts of them, nested (what ``to_fields`` makes structs of)."""
    return st.recursive(
        leaves,
        lambda inner: st.dictionaries(st.text(max_size=6), inner, min_size=1, max_size=4),
        max_leaves=12,
    )


#: Event dicts for the encoders' ``encode_dict``: the values its shape functions write and values
#: next to their edges (past int64, lone surrogates, longer than u16 or an event budget, before
#: 1601, containers of every kind), under ``str`` keys, the keys it skips, names that need
#: sanitizing and non-``str`` keys.
shape_edge_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(),
    st.text(max_size=30),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.binary(max_size=30),
    st.uuids(),
    st.datetimes(),
    st.sampled_from(["x" * 9000, b"y" * 70000, "z" * 70000]),
    values,
    typed_values(),
)
event_dicts = st.dictionaries(
    st.one_of(st.text(max_size=6), st.sampled_from(["event", "exc_info", "a;b", "n\0ul"]), st.integers()),
    shape_edge_values,
    max_size=10,
)
