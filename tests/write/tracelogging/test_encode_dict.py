"""TraceLoggingEncoder.encode_dict: the per-shape functions write what the general route writes."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.formats.header import Header
from structlog_etw.write import shapes as _shapes
from structlog_etw.write.fields import dict_fields
from structlog_etw.write.tracelogging import _encoder as tl
from tests.helpers.strategies import event_dicts, shape_edge_values, typed_values

FIVE = {"event": "hello", "user": "ann", "attempts": 3, "latency_ms": 12.5, "ok": True, "region": "eu-west-1"}


@pytest.fixture(autouse=True)
def eager_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes get their entry at the first written event and layouts compile at once (the tiers'
    thresholds and budget are tested in tests/test_shape_tiers.py): these tests are about what the
    shape functions write."""
    monkeypatch.setattr(_shapes._caches, "SHAPE_HOT", 1)
    monkeypatch.setattr(_shapes._caches, "LAYOUT_HOT", 1)
    monkeypatch.setattr(_shapes._caches, "COMPILE_COST", 0)


def _general(enc: tl.TraceLoggingEncoder, name: str, d: dict[Any, Any], skip: str | None, **kw: Any) -> Any:
    return enc.encode(name, dict_fields(d.items(), skip), **kw)


class TestSameBlobsAsTheGeneralRoute:
    """encode_dict(name, d, skip) == encode(name, dict_fields(d.items(), skip)), whatever d holds."""

    @settings(max_examples=400, deadline=None)
    @given(
        name=st.one_of(st.text(max_size=12), st.just("hello")),
        first=event_dicts,
        second=shape_edge_values,
        skip=st.sampled_from([None, "event"]),
        max_size=st.sampled_from([1024, 4000, 64000]),
        header=st.sampled_from(
            [{}, {"opcode": 1, "tag": 0x0ABCDEF}, {"activity_id": bytes(range(16))}, {"level": 0}]
        ),
    )
    def test_any_event_dict_any_budget_and_header(
        self,
        name: str,
        first: dict[Any, Any],
        second: Any,
        skip: str | None,
        max_size: int,
        header: dict[str, Any],
    ) -> None:
        """encode_dict writes the general route's blobs for any dict, budget and header, repeats included."""
        kw: dict[str, Any] = {"level": 4, **header}
        fast, general = (
            tl.TraceLoggingEncoder("P", max_size=max_size),
            tl.TraceLoggingEncoder("P", max_size=max_size),
        )
        again = dict(first)
        if again:  # the same keys again with one value of another class
            again[next(iter(again))] = second
        for d in (first, again, first):
            assert fast.encode_dict(name, d, skip, Header(**kw)) == _general(general, name, d, skip, **kw)
        assert fast.truncated == general.truncated

    @settings(max_examples=200, deadline=None)
    @given(st.dictionaries(st.text(max_size=6), typed_values(), max_size=12))
    def test_typed_values_of_every_table_row(self, d: dict[str, Any]) -> None:
        """encode_dict writes the general route's blobs for dicts of every type-table row's values."""
        fast, general = tl.TraceLoggingEncoder("P"), tl.TraceLoggingEncoder("P")
        assert fast.encode_dict("E", d, "event", Header(5)) == _general(general, "E", d, "event", level=5)

    def test_many_fields_past_the_field_limit_take_the_general_route(self) -> None:
        """200 fields, past the field limit, go the general route (cut, counted), remembered as general."""
        d = {f"f{i}": i for i in range(200)}
        enc = tl.TraceLoggingEncoder("P")
        assert enc.encode_dict("E", d, None) == _general(tl.TraceLoggingEncoder("P"), "E", d, None)
        assert _shapes.shape_entry(enc, "E", d, None) is _shapes.GENERAL
        assert enc.truncated == 1


class TestShapeFunctionIsUsed:
    """The common shapes go through a cached shape function, not through typed fields."""

    def test_the_five_field_call_is_written_by_its_shape_function(self) -> None:
        """A hot five-field call is written by its shape function, without the typed-field plans."""
        enc = tl.TraceLoggingEncoder("P")
        enc.encode_dict("hello", FIVE, "event")  # the first: general route; the shape is hot
        enc._cache.clear()
        got = enc.encode_dict("hello", FIVE, "event")
        entry = _shapes.shape_entry(enc, "hello", FIVE, "event")
        assert entry is not None and entry is not _shapes.GENERAL
        assert entry.lead == b"" and got == (enc.traits, entry.metadata, entry.fn(FIVE, b"", b""))
        assert enc._cache == {}

    def test_scalar_classes_none_bytes_uuid_and_datetime_are_written_by_the_shape_function(self) -> None:
        """None, bytes, UUID and datetime values get a shape function writing the general blobs."""
        d = {
            "n": None,
            "b": b"\x00\x01",
            "u": uuid.UUID(int=5),
            "t": dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc),
        }
        enc = tl.TraceLoggingEncoder("P")
        enc.encode_dict("E", d, None)
        enc._cache.clear()
        got = enc.encode_dict("E", d, None)
        assert _shapes.shape_entry(enc, "E", d, None) not in (None, _shapes.GENERAL)
        assert enc._cache == {}
        assert got == _general(tl.TraceLoggingEncoder("P"), "E", d, None)

    def test_a_shape_first_seen_with_a_container_gets_a_shape_function_for_scalars(self) -> None:
        """Keys first seen with a dict value stay general, yet get a shape function for int values."""
        enc = tl.TraceLoggingEncoder("P")
        for v in ({"nested": 1}, 5):
            enc.encode_dict("E", {"a": v}, None)
        assert _shapes.shape_entry(enc, "E", {"a": {"nested": 1}}, None) is _shapes.GENERAL
        assert _shapes.shape_entry(enc, "E", {"a": 5}, None) not in (None, _shapes.GENERAL)

    def test_values_of_other_classes_get_their_own_entry_and_keep_the_first(self) -> None:
        """A value of another class gets its own class-keyed entry, keeps the first, and needs no plan."""
        enc = tl.TraceLoggingEncoder("P")
        enc.encode_dict("E", {"a": 1}, None)
        first = _shapes.shape_entry(enc, "E", {"a": 1}, None)
        assert enc.encode_dict("E", {"a": "x"}, None) == _general(
            tl.TraceLoggingEncoder("P"), "E", {"a": "x"}, None
        )
        assert first is not None and _shapes.shape_entry(enc, "E", {"a": 1}, None) is first
        assert _shapes.shape_entry(enc, "E", {"a": "x"}, None) not in (None, _shapes.GENERAL, first)
        enc._cache.clear()
        enc.encode_dict("E", {"a": "y"}, None)
        assert enc._cache == {}

    def test_a_datetime_before_1601_is_written_as_text_by_the_general_route(self) -> None:
        """A datetime before 1601 is written as the general route writes it, both times the shape is seen."""
        d = {"t": dt.datetime(1500, 1, 1, tzinfo=dt.timezone.utc)}
        enc = tl.TraceLoggingEncoder("P")
        for _ in range(2):  # the general route first, then the shape function (which cannot write it)
            assert enc.encode_dict("E", d, None) == _general(tl.TraceLoggingEncoder("P"), "E", d, None)


class TestShapeCachesAreBounded:
    """High-cardinality names and key sets never grow the shape caches past cache_limit."""

    def test_by_keys_and_by_classes_stay_within_the_limit(self) -> None:
        """Both shape caches (by keys, by classes) stay within cache_limit over 100 event names."""
        enc = tl.TraceLoggingEncoder("P", cache_limit=16)
        for i in range(100):
            enc.encode_dict(f"e{i}", {"a": 1}, None)
            enc.encode_dict(f"e{i}", {"a": "x"}, None)
            assert len(enc._shapes.first) <= 16
            assert len(enc._shapes.by_class) <= 16
