"""Hypothesis strategies shared by the test modules."""

from __future__ import annotations

import struct
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


# --- hostile metadata: structurally valid EventHeader and TraceLogging layouts -------------------
#
# Field declarations that parse (names NUL-terminated, flags consistent, structs with members)
# but carry adversarial numbers: array counts up to 65535, structs declaring more members than
# follow, nesting up to the decoders' limits, zero-size elements (TraceLogging NULL).  With a
# small random payload they are what a crafted event looks like; the decoders must answer each
# with a value or their error within work bounded by the event's size.

#: Payloads: random bytes, large u16 counts, zeros (zero counts and empty strings: events decode).
_PAYLOADS = st.one_of(
    st.binary(max_size=64),
    st.just(b"\xff\xff" * 8),
    st.binary(max_size=600),
    st.integers(0, 3000).map(bytes),
)
_COUNTS = st.one_of(st.sampled_from([1, 2, 255, 256, 0x7FFF, 0xFFFF]), st.integers(1, 0xFFFF))
_NAMES = st.one_of(
    st.sampled_from([b"a", b"", b"\x1b]0;x\x07", b"\xe2\x80\xae", b"\x9b2J"]), st.binary(max_size=4)
)


@st.composite
def _eventheader_field(draw: st.DrawFn, depth: int) -> bytes:
    name = draw(_NAMES).replace(b"\0", b"")
    struct_field = depth < 6 and draw(st.booleans())
    array = draw(st.sampled_from([0, 0x20, 0x40]))  # none, CArray, VArray
    tag = draw(st.one_of(st.none(), st.integers(0, 0xFFFF)))
    if struct_field:
        members = draw(st.lists(_eventheader_field(depth + 1), min_size=1, max_size=3))
        declared = draw(st.one_of(st.just(len(members)), st.integers(len(members), 127)))
        fmt = declared
        encoding = 0x01
    else:
        members = []
        encoding = draw(st.integers(2, 13))
        fmt = draw(st.one_of(st.none(), st.integers(0, 20)))
    out = name + b"\0"
    chain = fmt is not None
    out += bytes([encoding | array | (0x80 if chain else 0)])
    if chain:
        assert fmt is not None
        out += bytes([fmt | (0x80 if tag is not None else 0)])
        if tag is not None:
            out += struct.pack("<H", tag)
    if array == 0x20:
        out += struct.pack("<H", draw(_COUNTS))
    return out + b"".join(members)


@st.composite
def eventheader_events(draw: st.DrawFn) -> bytes:
    """A little-endian EventHeader event (level 4) with hostile but well-formed metadata and a
    random payload, optionally starting with large u16 counts."""
    fields = b"".join(draw(st.lists(_eventheader_field(0), min_size=1, max_size=4)))
    payload = draw(_PAYLOADS)
    meta = draw(_NAMES).replace(b"\0", b"") + b"\0" + fields
    header = struct.pack("<BBHHBB", 0x07, 0, 0, 0, draw(st.integers(0, 3)), 4)
    return header + struct.pack("<HH", len(meta), 1) + meta + payload


@st.composite
def _tracelogging_field(draw: st.DrawFn, depth: int) -> bytes:
    name = draw(_NAMES).replace(b"\0", b"")
    struct_field = depth < 6 and draw(st.booleans())
    array = draw(st.sampled_from([0, 0x20, 0x40]))  # none, CCount, VCount
    if struct_field:
        members = draw(st.lists(_tracelogging_field(depth + 1), min_size=1, max_size=3))
        in_type, out_type, tag = 24, len(members), None
    else:
        members = []
        in_type = draw(st.sampled_from([0, 0, 1, 2, 3, 4, 7, 8, 10, 13, 15, 17, 18, 19, 22, 23, 25]))
        out_type = draw(st.one_of(st.none(), st.integers(0, 40)))
        tag = draw(st.one_of(st.none(), st.integers(0, 0x0FFFFFFF)))
    out = name + b"\0"
    chain = out_type is not None
    out += bytes([in_type | array | (0x80 if chain else 0)])
    if chain:
        assert out_type is not None
        out += bytes([out_type | (0x80 if tag is not None else 0)])
        if tag is not None:
            out += bytes(
                [0x80 | (tag >> 21) & 0x7F, 0x80 | (tag >> 14) & 0x7F, 0x80 | (tag >> 7) & 0x7F, tag & 0x7F]
            )
    if array == 0x20:
        out += struct.pack("<H", draw(_COUNTS))
    return out + b"".join(members)


@st.composite
def tracelogging_events(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """``(metadata, data)`` of a TraceLogging event with hostile but well-formed metadata."""
    fields = b"".join(draw(st.lists(_tracelogging_field(0), min_size=1, max_size=4)))
    body = b"\0" + draw(_NAMES).replace(b"\0", b"") + b"\0" + fields
    data = draw(_PAYLOADS)
    return struct.pack("<H", len(body) + 2) + body, data
