"""The write path under production variability: new layouts, huge keys, data-driven logger names,
names past TraceLogging's metadata budget, keys that raise, containers far past the budget.

These tests hold what does not depend on the machine (what is written, dropped, kept, compiled).
What these inputs cost is measured in benchmarks, as ratios against a baseline timed in the same
run: a new layout per event in benchmarks/layouts.py, the huge logger names, lists and strings
in benchmarks/input_sizes.py (docs/performance.md shows both; never timed assertions here).
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, KeywordsByLogger, Provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.formats.header import Header
from structlog_etw.testing import decode_record
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import TRUNCATION_MARKER, dict_fields
from structlog_etw.write.tracelogging import TraceLoggingEncoder
from tests.helpers.value_kinds import VALUES

FORMATS = ["eventheader", "tracelogging"]


def _pipeline(fmt: str, name: str) -> tuple[Any, Provider, CaptureBackend]:
    backend = CaptureBackend(name, format=fmt)
    provider = Provider(name, backend=backend)
    log = structlog.wrap_logger(None, processors=[EtwRenderer(name, provider=provider)])
    return log, provider, backend


class TestNewLayoutPerEvent:
    """A stream of new value layouts costs a bounded multiple of a fixed shape: nothing compiles per event."""

    @pytest.mark.parametrize("fmt", FORMATS)
    @pytest.mark.parametrize("fields", [5, 20, 120])
    def test_a_new_layout_per_event_is_written_whole(self, fmt: str, fields: int) -> None:
        """2,000 log calls whose value kinds are drawn at random per event are all written, none
        dropped, each as the fields it was given (what it costs against a fixed shape, at most 3x,
        is measured by benchmarks/layouts.py: docs/performance.md)."""
        keys = [f"field_{i}" for i in range(fields)]
        rnd = random.Random(fields)
        churn_log, churn_provider, churn_backend = _pipeline(fmt, f"Churn_{fmt}_{fields}")
        churn = [{k: rnd.choice(VALUES) for k in keys} for _ in range(2000)]
        for event in churn:
            churn_log.info("e", **event)
        assert len(churn_backend.records) == 2000  # every event written
        assert churn_provider.stats()["dropped"] == {}
        for record in churn_backend.records[::97]:
            got = decode_record(record)
            names = [k for k in got.fields if k != "_truncated"]
            assert got.name == "e"  # all the keys, or the first ones and the truncation marker
            assert names == (keys if "_truncated" not in got.fields else keys[: len(names)])

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_the_general_route_compiles_nothing(self, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """Events of shapes that are not hot (each written once) never call the code generator."""
        from structlog_etw.write import shapes as _shapes  # noqa: PLC0415

        calls: list[object] = []
        real = _shapes.compile_shape_function

        def counting(*args: Any, **kw: Any) -> Any:
            calls.append(args[0])
            return real(*args, **kw)

        monkeypatch.setattr(_shapes._generate, "compile_shape_function", counting)
        encoder: Any = EventHeaderEncoder() if fmt == "eventheader" else TraceLoggingEncoder("P")
        for i in range(300):  # every event a new shape (a new key), layouts of every kind
            event = {f"k{i}": VALUES[i % len(VALUES)], "n": i, "s": "x" * (i % 5)}
            assert encoder.encode_dict("e", event, None, Header(4)) == encoder.encode(
                "e", dict_fields(event.items(), None), 4
            )
        assert calls == []


class TestRetention:
    """Nothing is kept for an event that is not written, nor for a key past the documented length."""

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_300_events_with_distinct_1mb_keys_leave_at_most_64_mb(self, fmt: str) -> None:
        """300 events each with its own 1 MB key (EventHeader: dropped too_large; TraceLogging:
        written with the fields that fit) leave at most 64 MB allocated (tracemalloc)."""
        log, provider, backend = _pipeline(fmt, f"Retention_{fmt}")
        log.info("warm", a=1)
        backend.clear()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(300):
                log.info("huge_key", **{f"{i:04d}" + "k" * (1 << 20): 1, "n": i})
                backend.clear()
            gc.collect()
            retained = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        stats = provider.stats()
        assert stats["written"] + stats["dropped"].get("too_large", 0) == 301
        assert retained <= 64 << 20, f"{retained / 2**20:.0f} MB retained"


class TestDottedLoggerNames:
    """``KeywordsByLogger`` is linear in the name and its cache bounded by the characters it holds."""

    def test_a_200_kb_dotted_name_is_matched_as_the_hierarchy_says(self) -> None:
        """A 200 KB name of 100,000 dots matches no key, below an exact key it takes that key's
        keyword, and a star key matches it by its start (what such a look-up costs against a
        dotless name, at most 50x, is measured by benchmarks/input_sizes.py: docs/performance.md)."""
        names = KeywordsByLogger({"db": 2, "a.b": 4, "app_*": 8})
        assert names.lookup("a." * 100_000) is None
        assert names.lookup("a" * 200_000) is None
        assert names.lookup("a.b" + ".x" * 100_000) == 4
        assert names.lookup("a.bx" + ".x" * 100_000) is None
        assert names.lookup("app_" + "a." * 100_000) == 8
        assert names._cache == {}  # longer than any cached name

    def test_matches_are_those_of_the_dotted_hierarchy(self) -> None:
        """Exact keys match the name and its dotted descendants only; the longest wins; stars prefix."""
        names = KeywordsByLogger({"db": 2, "db.pool": 4, "app_*": 8, "a.": 16})
        assert names.lookup("db") == 2
        assert names.lookup("db.pool.x") == 4
        assert names.lookup("db.poolx") == 2
        assert names.lookup("dbx") is None
        assert names.lookup("app_web.db") == 8
        assert names.lookup("a..b") == 16

    def test_the_cache_is_bounded_by_characters(self) -> None:
        """500 distinct 1 MB names are resolved but never cached; many short names stay within
        the character budget."""
        names = KeywordsByLogger({"db": 2})
        for i in range(500):
            assert names.lookup("db." + str(i) * 10 + "x" * (1 << 20)) == 2
        assert names._cache == {}
        for i in range(20_000):
            names.lookup(f"db.worker_{i:06d}.{'x' * 100}")
        assert sum(map(len, names._cache)) <= 256 * 1024


class TestTraceLoggingNamesPastTheMetadataBudget:
    """TraceLogging keeps the leading fields whose names fit the metadata budget, plus ``_truncated``."""

    @pytest.mark.parametrize("size", [40_000, 70_000, 300_000])
    def test_a_long_field_name_keeps_the_fields_before_it(self, size: int) -> None:
        """A field name of 40 KB, 70 KB or 300 KB: the event is written with the fields before it
        and ``_truncated``, counted truncated, never ``encode_error``."""
        log, provider, backend = _pipeline("tracelogging", f"LongNames_{size}")
        log.info("e", first=1, **{"n" * size: 2}, last=3)
        stats = provider.stats()
        assert stats["dropped"] == {} and stats["written"] == 1 and stats["truncated"] == 1
        (record,) = backend.records
        assert decode_record(record).fields == {"first": 1, "_truncated": True}


class _RaisingClass:
    """A key whose ``__class__`` property raises (as some proxies do)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        raise RuntimeError("no class for you")

    def __str__(self) -> str:
        return "weird_key"


class TestKeysWhoseAttributesRaise:
    """A key whose ``__class__`` raises is written under its text, as the type table says."""

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_the_event_is_written_with_the_key_as_text(self, fmt: str) -> None:
        """``{<key whose __class__ raises>: 1, "a": 2}`` is written with fields weird_key=1, a=2."""
        backend = CaptureBackend("RaisingKey", format=fmt)
        provider = Provider("RaisingKey", backend=backend)
        assert provider.write_dict(provider.slot(4, 1), "e", {_RaisingClass(): 1, "a": 2}, None) is True
        assert decode_record(backend.records[0]).fields == {"weird_key": 1, "a": 2}
        assert provider.stats()["dropped"] == {}


class TestContainersPastTheBudget:
    """A container far past the budget is written cut to what fits, its leading part kept whole."""

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_list_of_300k_strings_is_written_with_its_leading_items(self, fmt: str) -> None:
        """A list of 300,000 short strings is written once, counted truncated, with its first items
        in order, the field after it and ``_truncated`` (what it costs against ``json.dumps`` of the
        list, at most 3x, is measured by benchmarks/input_sizes.py: docs/performance.md)."""
        log, provider, backend = _pipeline(fmt, f"BigList_{fmt}")
        items = [f"item{i}" for i in range(300_000)]
        log.info("e", items=items, after=1)
        stats = provider.stats()
        assert stats["dropped"] == {} and stats["written"] == 1 and stats["truncated"] == 1
        fields = decode_record(backend.records[0]).fields
        kept = fields["items"]
        assert 0 < len(kept) < len(items) and kept == items[: len(kept)]
        assert fields["after"] == 1 and fields["_truncated"] is True

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_20_mb_string_keeps_what_a_200_kb_one_keeps(self, fmt: str) -> None:
        """A 20 MB and a 200 KB string, each opening with a lone surrogate, are both written cut to
        the same budget: the same kept text (the surrogate replaced by U+FFFD, then the truncation
        marker), both counted truncated (what the big one costs against the small one, at most
        5x, is measured by benchmarks/input_sizes.py: docs/performance.md)."""
        log, provider, backend = _pipeline(fmt, f"BigText_{fmt}")
        for size in (20_000_000, 200_000):
            log.info("e", text="\ud800" + "x" * size, after=1)
        stats = provider.stats()
        assert stats["dropped"] == {} and stats["written"] == 2 and stats["truncated"] == 2
        big, small = (decode_record(r).fields for r in backend.records)
        assert big == small
        text = big["text"]
        kept = len(text) - 1 - len(TRUNCATION_MARKER)
        assert 0 < kept < 200_000 and text == "\ufffd" + "x" * kept + TRUNCATION_MARKER
        assert big["after"] == 1 and big["_truncated"] is True
