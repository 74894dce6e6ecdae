"""The shape functions' cheaper forms: each event name's last shape found without building its key
(``ShapeCache.recent``), and the u16 length of a counted value looked up (``U16_BYTES``)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest

from structlog_etw.write import shapes as _shapes
from structlog_etw.write.eventheader._codec import CODEC
from structlog_etw.write.fields import dict_fields
from tests.helpers.encoders import FORMATS, fast_and_general


@pytest.fixture(autouse=True)
def eager_shapes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Shapes get their entry at the first written event and layouts compile at once."""
    monkeypatch.setattr(_shapes._caches, "SHAPE_HOT", 1)
    monkeypatch.setattr(_shapes._caches, "LAYOUT_HOT", 1)
    monkeypatch.setattr(_shapes._caches, "COMPILE_COST", 0)
    yield


class TestRecentShape:
    """The last shape of a name is found by comparing its keys; what is written never changes."""

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_shapes_alternating_under_one_name_give_the_general_routes_bytes(self, fmt: str) -> None:
        """Two key orders, a third key set and the other skip key under one name, in turns: every
        event is the general route's, and the name's recent entry follows the last shape found."""
        fast, general, header = fast_and_general(fmt)
        events = [
            ({"event": "e", "a": "x", "b": 1}, "event"),
            ({"event": "e", "b": 2, "a": "y"}, "event"),
            ({"event": "e", "a": "z"}, "event"),
            ({"event": "e", "a": "x", "b": 1}, None),
        ]
        for _ in range(4):
            for d, skip in events:
                want = general.encode_fields("E", dict_fields(d.items(), skip), header)
                assert fast.encode_dict("E", d, skip, header) == want
        recent = fast._shapes.recent["E"]
        assert recent[1] == ["event", "a", "b"]  # the last one found

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_clearing_the_cache_forgets_the_recent_shapes(self, fmt: str) -> None:
        """ShapeCache.clear() empties ``recent`` with the entries (an entry it holds is never
        used after its cache forgot it)."""
        fast, _, header = fast_and_general(fmt)
        for _ in range(3):
            fast.encode_dict("E", {"event": "e", "a": 1}, "event", header)
        assert "E" in fast._shapes.recent
        fast._shapes.clear()
        assert fast._shapes.recent == {}

    def test_recent_holds_at_most_max_entries_names_and_a_bounded_number_of_keys(self) -> None:
        """Past ``max_entries`` names, or past the key budget, ``recent`` starts over."""
        cache = _shapes.ShapeCache(max_entries=4)
        for i in range(10):
            cache.remember(f"n{i}", (f"n{i}", None, None), object(), ["k"])
            assert len(cache.recent) <= 4
        many = ["k"] * (_shapes._caches._RECENT_KEYS // 2 + 1)
        cache.remember("big1", ("big1", None, None), object(), many)
        cache.remember("big2", ("big2", None, None), object(), many)
        assert list(cache.recent) == ["big2"]

    def test_an_unhashable_name_takes_the_general_route(self) -> None:
        """A name the recent table cannot hold is written all the same (by the general route)."""
        fast, general, header = fast_and_general("eventheader")
        name: Any = ["not", "hashable"]
        d = {"a": 1}
        assert fast.encode_dict(name, d, None, header) == general.encode_fields(
            name, dict_fields(d.items(), None), header
        )


class TestLengthLookup:
    """A counted value no fixed value precedes has its u16 length looked up."""

    @pytest.mark.parametrize("n", [0, 1, 255, 1023, 1024, 4000, 65535])
    def test_the_table_is_the_little_endian_u16(self, n: int) -> None:
        """U16_BYTES[n] is struct.pack('<H', n), inside the prebuilt range and past it."""
        assert _shapes.U16_BYTES[n] == struct.pack("<H", n)

    def test_past_u16_raises_as_packing_does(self) -> None:
        """A length past 65535 raises struct.error (the shape function's caller then takes the
        general route, which cuts the value)."""
        with pytest.raises(struct.error):
            _shapes.U16_BYTES[65536]

    @pytest.mark.parametrize("first", [0, 5, 1023, 1024, 3000, 65535])
    @pytest.mark.parametrize("second", [0, 1023, 1024])
    def test_the_generated_function_writes_lengths_inside_and_past_the_prebuilt_list(
        self, first: int, second: int
    ) -> None:
        """A shape function of two strings (both lengths looked up) writes each u16 length and its
        bytes itself, also for a length past the prebuilt list (no exception left to its caller)."""
        kinds = _shapes.layout(["a", "b"], [str, str], None)
        assert kinds is not None
        fn = _shapes.compile_shape_function(kinds, CODEC.steps, CODEC.lead, CODEC.env)
        a, b = "x" * first, "é" * second
        want = b"".join(
            (b"H", b"M", struct.pack("<H", first), a.encode(), struct.pack("<H", 2 * second), b.encode())
        )
        assert fn({"a": a, "b": b}, b"H", b"M") == want

    def test_a_long_length_switches_that_function_alone_to_the_mapping(self) -> None:
        """After a length past the list a function looks lengths up in U16_BYTES (no exception
        per event from then on) and keeps writing every length right; another function of the
        same layout keeps the list."""
        kinds = _shapes.layout(["a", "b"], [str, str], None)
        assert kinds is not None
        fn = _shapes.compile_shape_function(kinds, CODEC.steps, CODEC.lead, CODEC.env)
        other = _shapes.compile_shape_function(kinds, CODEC.steps, CODEC.lead, CODEC.env)
        assert fn.__globals__["_u16"] is _shapes._layout.U16_LIST
        for a in ["x", "y" * 5000, "z", "w" * 1024, ""]:
            want = b"".join((b"H", b"M", struct.pack("<H", len(a)), a.encode(), b"\x01\x00b"))
            assert fn({"a": a, "b": "b"}, b"H", b"M") == want
        assert fn.__globals__["_u16"] is _shapes.U16_BYTES
        assert other.__globals__["_u16"] is _shapes._layout.U16_LIST
        assert other({"a": "x", "b": "b"}, b"H", b"M") == b"HM\x01\x00x\x01\x00b"

    def test_a_length_past_u16_still_raises_from_the_generated_function(self) -> None:
        """Past 65535 bytes the function raises struct.error, inside the list's range or not (its
        caller then takes the general route, which cuts the value)."""
        kinds = _shapes.layout(["a", "b"], [str, str], None)
        assert kinds is not None
        fn = _shapes.compile_shape_function(kinds, CODEC.steps, CODEC.lead, CODEC.env)
        with pytest.raises(struct.error):
            fn({"a": "x", "b": "y" * 65536}, b"H", b"M")

    @pytest.mark.parametrize("fmt", FORMATS)
    @pytest.mark.parametrize("size", [0, 3, 1023, 1024, 3000])
    def test_strings_after_strings_give_the_general_routes_bytes(self, fmt: str, size: int) -> None:
        """Strings one after another (each length a look-up) of sizes around the prebuilt range
        are written as the general route writes them."""
        fast, general, header = fast_and_general(fmt)
        d = {"a": "x" * size, "b": "é" * (size // 2), "c": 7, "d": "y"}
        want = general.encode_fields("S", dict_fields(d.items(), None), header)
        for _ in range(3):
            assert fast.encode_dict("S", d, None, header) == want


class _LoudStr(str):
    """A str subclass whose ``encode`` writes something else (what a shape function must not use)."""

    __slots__ = ()

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        """Upper-cased UTF-8: differs from ``str.encode`` of the same text."""
        return str.upper(self).encode(encoding, errors)


class TestStringEncoding:
    """Shape functions encode strings with ``str.encode``; only exact ``str`` values reach it."""

    @pytest.mark.parametrize("fmt", FORMATS)
    @pytest.mark.parametrize("text", ["", "ann", "é\u20ac\U0001f600", "x" * 2000])
    def test_strings_give_the_general_routes_bytes(self, fmt: str, text: str) -> None:
        """ASCII, multi-byte and long strings between fixed-size values and after each other."""
        fast, general, header = fast_and_general(fmt)
        d = {"a": text, "b": 1, "c": text, "d": text, "e": True}
        want = general.encode_fields("T", dict_fields(d.items(), None), header)
        for _ in range(3):
            assert fast.encode_dict("T", d, None, header) == want

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_str_subclass_takes_the_general_route_in_a_hot_shape(self, fmt: str) -> None:
        """A hot shape of ``str`` values given a subclass with its own ``encode``: the event is
        the general route's (the subclass's class fails the check, its ``encode`` is never used)."""
        fast, general, header = fast_and_general(fmt)
        for _ in range(3):
            fast.encode_dict("T", {"a": "ann", "b": 1}, None, header)
        d = {"a": _LoudStr("ann"), "b": 1}
        want = general.encode_fields("T", dict_fields(d.items(), None), header)
        assert fast.encode_dict("T", d, None, header) == want
        assert b"ANN" not in bytes(want if isinstance(want, bytes) else b"".join(want[1:]))
