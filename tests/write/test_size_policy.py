"""The size policy both encoders share: one cap, the largest with which the cut values fit."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.write._size_policy import U16_MAX, Cuttable, Piece, joined, water_level, whole_size
from structlog_etw.write.fields import TRUNCATION_MARKER

MARKER = TRUNCATION_MARKER.encode()


def text(s: str) -> Cuttable:
    return Cuttable(s.encode(), marker=MARKER)


def _bodies(data: bytes) -> list[bytes]:
    """The bodies of the u16-prefixed values written one after the other in ``data``."""
    out = []
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<H", data, pos)
        out.append(data[pos + 2 : pos + 2 + n])
        pos += 2 + n
    return out


def test_values_shorter_than_the_cap_stay_whole_and_the_longest_are_cut_to_it() -> None:
    """Values below the cap stay whole, longer ones are cut to it (text with its marker), filling the room."""
    pieces: list[Piece] = [text("short"), text("a" * 100), Cuttable(b"b" * 100), b"\x01\x02"]
    room = 2 + 3 * 2 + len("short") + 2 * 40
    cap = water_level(pieces, room)
    assert cap == 40
    short, a, b = _bodies(joined(pieces[:3], cap))
    assert short == b"short"
    assert a == b"a" * (40 - len(MARKER)) + MARKER
    assert b == b"b" * 40
    assert len(joined(pieces, cap)) == room


def test_a_string_is_never_cut_below_its_marker_so_without_room_for_it_there_is_no_cap() -> None:
    """A string is never cut below its marker: without room for the markers water_level is None."""
    pieces: list[Piece] = [text("x" * 100), text("y" * 100)]
    assert water_level(pieces, 4 + 2 * len(MARKER)) == len(MARKER)
    assert _bodies(joined(pieces, 0)) == [MARKER, MARKER]
    assert water_level(pieces, 4 + 2 * len(MARKER) - 1) is None
    assert water_level([b"fixed"], 4) is None


def test_a_string_no_longer_than_the_marker_is_never_cut() -> None:
    """A string no longer than the marker stays whole while a longer one is cut to its marker."""
    pieces: list[Piece] = [text("tiny"), text("z" * 100)]
    cap = water_level(pieces, 4 + 4 + len(MARKER))
    assert cap is not None
    assert _bodies(joined(pieces, cap)) == [b"tiny", MARKER]


def test_text_is_cut_on_a_character_boundary() -> None:
    """Text is cut on a UTF-8 character boundary, and size_at reports the bound it was chosen with."""
    value = text("é" * 50)
    body = _bodies(value.cut(len(MARKER) + 5))[0]
    assert body == "éé".encode() + MARKER  # 5 bytes of room hold two 2-byte characters
    assert value.size_at(len(MARKER) + 5) == len(MARKER) + 5  # the bound the cap is chosen with


def test_an_array_keeps_whole_leading_elements_and_its_size_is_what_it_keeps() -> None:
    """A cut array keeps whole leading elements with its count updated; size_at is what it keeps."""
    arr = Cuttable.array([b"\x00" * 8] * 10)
    assert arr.size_at(30) == 24
    assert arr.cut(30) == b"\x03\x00" + b"\x00" * 24
    assert arr.whole() == b"\x0a\x00" + b"\x00" * 80
    assert not arr.is_cut(80) and arr.is_cut(79)


def test_array_items_longer_than_a_u16_prefix_are_cut_to_it() -> None:
    """Array items past 65,535 bytes are cut to the u16 limit, text with its marker."""
    arr = Cuttable.array([text("s"), text("x" * 70_000), Cuttable(b"b" * 70_000)])
    elements = _bodies(arr.whole()[2:])
    assert elements == [b"s", b"x" * (U16_MAX - len(MARKER)) + MARKER, b"b" * U16_MAX]


def test_array_counts_are_cut_to_a_u16() -> None:
    """An array of 70,000 elements is cut to a u16 count and reports it was cut."""
    arr = Cuttable.array([b"\x01"] * 70_000)
    assert arr.cut(100_000)[:2] == struct.pack("<H", U16_MAX)
    assert arr.is_cut(100_000)


_texts = st.text(max_size=300).map(text)
_binaries = st.binary(max_size=300).map(Cuttable)
_elements = st.one_of(st.binary(min_size=1, max_size=40), st.text(max_size=40).map(text))
_arrays = st.lists(_elements, max_size=20).map(Cuttable.array)
_pieces = st.lists(st.one_of(st.binary(min_size=1, max_size=16), _texts, _binaries, _arrays), max_size=12)


def _bound(pieces: list[Piece], cap: int) -> int:
    """The size of the pieces at ``cap`` the cap is chosen with."""
    return sum(2 + p.size_at(cap) if isinstance(p, Cuttable) else len(p) for p in pieces)


@settings(max_examples=500, deadline=None)
@given(_pieces, st.integers(min_value=0, max_value=4000))
def test_the_cap_is_the_largest_with_which_every_value_cut_to_it_fits(pieces: list[Piece], room: int) -> None:
    """For any pieces and room, the cap is the largest that fits, and each value is cut validly to it."""
    cap = water_level(pieces, room)
    if cap is None:
        assert _bound(pieces, 0) > room
        return
    assert _bound(pieces, cap) <= room
    assert cap == max([len(p.body) for p in pieces if isinstance(p, Cuttable)], default=0) or (
        _bound(pieces, cap + 1) > room
    )
    out = joined(pieces, cap)
    assert len(out) <= room
    if whole_size(pieces) <= room:
        assert out == joined(pieces)  # nothing is cut when everything fits
    pos = 0
    for p in pieces:
        if not isinstance(p, Cuttable):
            assert out[pos : pos + len(p)] == p
            pos += len(p)
            continue
        written = p.cut(cap)
        assert out[pos : pos + len(written)] == written
        pos += len(written)
        body = written[2:]
        assert len(body) <= p.size_at(cap)
        assert p.is_cut(cap) == (written != p.whole())
        if p.marker and p.is_cut(cap):
            assert body.endswith(MARKER)
            body.decode("utf-8")  # valid UTF-8
            assert p.body.startswith(body[: -len(MARKER)])
        elif p.ends is None:
            assert p.body.startswith(body)
    assert pos == len(out)


@pytest.mark.parametrize("room", [0, 1, 13])
def test_no_cuttable_values_fit_or_not_by_the_fixed_part_alone(room: int) -> None:
    """Without cuttable values the cap is 0 when the fixed bytes fit the room, else None."""
    pieces: list[Piece] = [b"x" * 13]
    assert water_level(pieces, room) == (0 if room >= 13 else None)
