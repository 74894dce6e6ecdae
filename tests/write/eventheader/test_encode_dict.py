"""EventHeaderEncoder.encode_dict: the per-shape functions write what the general route writes."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.formats import eventheader as spec
from structlog_etw.formats.header import Header
from structlog_etw.write import shapes as _shapes
from structlog_etw.write.eventheader import _encoder as eh
from structlog_etw.write.eventheader._codec import CODEC
from structlog_etw.write.fields import dict_fields
from tests.helpers.eventheader_reader import parse
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


def _general(enc: eh.EventHeaderEncoder, name: str, d: dict[Any, Any], skip: str | None, **kw: Any) -> Any:
    return enc.encode(name, dict_fields(d.items(), skip), **kw)


class TestSameBytesAsTheGeneralRoute:
    """encode_dict(name, d, skip) == encode(name, dict_fields(d.items(), skip)), whatever d holds."""

    @settings(max_examples=400, deadline=None)
    @given(
        name=st.one_of(st.text(max_size=12), st.just("hello")),
        first=event_dicts,
        second=shape_edge_values,
        skip=st.sampled_from([None, "event"]),
        max_size=st.sampled_from([64, 300, spec.PERF_MAX_EVENT_SIZE]),
        header=st.sampled_from(
            [{}, {"opcode": 1, "tag": 7}, {"activity_id": bytes(range(16))}, {"level": 0}, {"level": 255}]
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
        """encode_dict writes the general route's bytes for any dict, budget and header, repeats included."""
        kw: dict[str, Any] = {"level": 4, **header}
        fast, general = eh.EventHeaderEncoder(max_size=max_size), eh.EventHeaderEncoder(max_size=max_size)
        # The same keys again with one value of another class: the class-keyed entry is used.
        again = dict(first)
        if again:
            again[next(iter(again))] = second
        for d in (first, again, first):
            assert fast.encode_dict(name, d, skip, Header(**kw)) == _general(general, name, d, skip, **kw)
        assert fast.truncated == general.truncated

    @settings(max_examples=200, deadline=None)
    @given(st.dictionaries(st.text(max_size=6), typed_values(), max_size=12))
    def test_typed_values_of_every_table_row(self, d: dict[str, Any]) -> None:
        """encode_dict writes the general route's bytes for dicts of every type-table row's values."""
        fast, general = eh.EventHeaderEncoder(), eh.EventHeaderEncoder()
        assert fast.encode_dict("E", d, "event", Header(5)) == _general(general, "E", d, "event", level=5)


class TestShapeFunctionIsUsed:
    """The common shapes go through a cached shape function, not through typed fields."""

    def test_the_five_field_call_is_written_by_its_shape_function(self) -> None:
        """A hot five-field call is written by its shape function, without the typed-field plans."""
        enc = eh.EventHeaderEncoder()
        enc.encode_dict("hello", FIVE, "event", Header(4))  # the first: general route; the shape is hot
        enc._cache.clear()
        got = enc.encode_dict("hello", FIVE, "event", Header(4))
        assert got is not None
        entry = _shapes.shape_entry(enc, "hello", FIVE, "event")
        assert entry is not None and entry is not _shapes.GENERAL
        assert entry.lead == entry.metadata and entry.fn(FIVE, got[:8], entry.lead) == got  # 8-byte head
        assert enc._cache == {}  # the typed-field plans were not needed
        assert parse(got).values() == {k: v for k, v in FIVE.items() if k != "event"}

    def test_scalar_classes_none_bytes_uuid_and_datetime_are_written_by_the_shape_function(self) -> None:
        """None, bytes, UUID and datetime values get a shape function writing the general bytes."""
        d = {
            "n": None,
            "b": b"\x00\x01",
            "u": uuid.UUID(int=5),
            "t": dt.datetime(2024, 1, 2, 3, 4, 5),
            "x": -1,
        }
        enc = eh.EventHeaderEncoder()
        enc.encode_dict("E", d, None, Header(4))
        enc._cache.clear()
        got = enc.encode_dict("E", d, None, Header(4))
        assert _shapes.shape_entry(enc, "E", d, None) not in (None, _shapes.GENERAL)
        assert enc._cache == {}
        assert got == _general(eh.EventHeaderEncoder(), "E", d, None, level=4)

    def test_a_new_event_name_with_a_known_layout_compiles_nothing(self) -> None:
        """A new event name with a known layout compiles nothing and reuses the same shape function."""
        enc = eh.EventHeaderEncoder()
        enc.encode_dict("first", FIVE, "event", Header(4))
        compiled = CODEC.functions.compiled()
        enc.encode_dict("second", FIVE, "event", Header(4))
        assert CODEC.functions.compiled() == compiled
        first, second = (_shapes.shape_entry(enc, name, FIVE, "event") for name in ("first", "second"))
        assert first is not None and second is not None and first.fn is second.fn

    def test_a_shape_first_seen_with_a_container_gets_a_shape_function_for_scalars(self) -> None:
        """Keys first seen with a dict value stay general, yet get a shape function for int values."""
        enc = eh.EventHeaderEncoder()
        for v in ({"nested": 1}, 5):
            enc.encode_dict("E", {"a": v}, None, Header(4))
        assert _shapes.shape_entry(enc, "E", {"a": {"nested": 1}}, None) is _shapes.GENERAL
        assert _shapes.shape_entry(enc, "E", {"a": 5}, None) not in (None, _shapes.GENERAL)

    def test_values_of_other_classes_get_their_own_entry_and_keep_the_first(self) -> None:
        """A value of another class gets its own class-keyed entry, keeps the first, and needs no plan."""
        enc = eh.EventHeaderEncoder()
        enc.encode_dict("E", {"a": 1}, None, Header(4))
        first = _shapes.shape_entry(enc, "E", {"a": 1}, None)
        assert enc.encode_dict("E", {"a": "x"}, None, Header(4)) == _general(
            eh.EventHeaderEncoder(), "E", {"a": "x"}, None, level=4
        )
        assert first is not None and _shapes.shape_entry(enc, "E", {"a": 1}, None) is first
        assert _shapes.shape_entry(enc, "E", {"a": "x"}, None) not in (
            None,
            _shapes.GENERAL,
            first,
        )
        enc._cache.clear()
        enc.encode_dict("E", {"a": "y"}, None, Header(4))
        assert enc._cache == {}

    def test_shapes_it_cannot_write_are_remembered_as_general(self) -> None:
        """A shape with a nested dict is written by the general route and remembered as general."""
        enc = eh.EventHeaderEncoder()
        d = {"nested": {"a": 1}, "k": 1}
        assert enc.encode_dict("E", d, None, Header(4)) == _general(
            eh.EventHeaderEncoder(), "E", d, None, level=4
        )
        assert _shapes.shape_entry(enc, "E", d, None) is _shapes.GENERAL


class TestShapeCachesAreBounded:
    """High-cardinality names and key sets never grow the shape caches past cache_limit."""

    def test_by_keys_and_by_classes_stay_within_the_limit(self) -> None:
        """Both shape caches (by keys, by classes) stay within cache_limit over 100 event names."""
        enc = eh.EventHeaderEncoder(cache_limit=16)
        for i in range(100):
            enc.encode_dict(f"e{i}", {"a": 1}, None, Header(4))
            enc.encode_dict(f"e{i}", {"a": "x"}, None, Header(4))  # another class: the second cache
            assert len(enc._shapes.first) <= 16
            assert len(enc._shapes.by_class) <= 16


class TestValuesTheShapeFunctionCannotWrite:
    """Values of a shape-function class that it cannot write take the general route, exactly."""

    def test_int_past_int64_is_uint64_then_text(self) -> None:
        """An int past int64 is as uint64, past uint64 or below int64 as text, as the general route does."""
        enc = eh.EventHeaderEncoder()
        for v in (1, 2**63, 2**64, -(2**63) - 1):
            d = {"v": v}
            got = enc.encode_dict("E", d, None, Header(4))
            assert got == _general(eh.EventHeaderEncoder(), "E", d, None, level=4)
            assert got is not None
            assert parse(got).values()["v"] == (v if v < 2**64 and v >= -(2**63) else str(v))

    def test_too_large_string_is_cut_by_the_size_policy(self) -> None:
        """A string over max_size is cut by the size policy: within budget, flagged and counted."""
        enc = eh.EventHeaderEncoder(max_size=200)
        got = enc.encode_dict("E", {"s": "x" * 500}, None, Header(4))
        assert got is not None and len(got) <= 200
        assert parse(got).values()[eh.TRUNCATED_FIELD] is True
        assert enc.truncated == 1
