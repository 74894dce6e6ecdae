"""The write path under production variability: new layouts, huge keys, data-driven logger names,
names past TraceLogging's metadata budget, keys that raise, containers far past the budget.

CPU-time ratios are measured with ``time.process_time`` as the min of several interleaved runs,
with the garbage collector paused (as ``timeit`` does), with the margins the issue sets (never
wall-clock assertions).
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import random
import time
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, KeywordsByLogger, Provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.eventheader import Header
from structlog_etw.eventheader.encoder import EventHeaderEncoder
from structlog_etw.fields import dict_fields
from structlog_etw.testing import decode_record
from structlog_etw.tracelogging.encoder import TraceLoggingEncoder

FORMATS = ["eventheader", "tracelogging"]
#: One value of every class a shape function writes.
VALUES: list[Any] = [
    "text",
    7,
    2.5,
    True,
    None,
    b"\x01\x02",
    uuid.UUID(int=3),
    dt.datetime(2024, 1, 2, 3, 4, 5),
]


def _pipeline(fmt: str, name: str) -> tuple[Any, Provider, CaptureBackend]:
    backend = CaptureBackend(name, format=fmt)
    provider = Provider(name, backend=backend)
    log = structlog.wrap_logger(None, processors=[EtwRenderer(name, provider=provider)])
    return log, provider, backend


def _cpu(run: Callable[[], None]) -> float:
    """CPU time of ``run()`` with the garbage collector paused, as ``timeit`` does: a collection's
    cost depends on everything the test process holds (the suite before this test), not on the
    code measured."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.process_time()
        run()
        return time.process_time() - start
    finally:
        if enabled:
            gc.enable()


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
        from structlog_etw import _shapes  # noqa: PLC0415

        calls: list[object] = []
        real = _shapes.compile_shape_function

        def counting(*args: Any, **kw: Any) -> Any:
            calls.append(args[0])
            return real(*args, **kw)

        monkeypatch.setattr(_shapes, "compile_shape_function", counting)
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

    def test_a_200_kb_dotted_name_costs_at_most_50x_a_dotless_one(self) -> None:
        """Looking up ``"a." * 100000`` costs at most 50x a dotless name of the same length."""
        mapping = {"db": 2, "a.b": 4, "app_*": 8}
        dotted, dotless = "a." * 100_000, "a" * 200_000
        t_dotted = t_dotless = float("inf")
        for _ in range(5):
            t_dotted = min(t_dotted, _cpu(lambda: KeywordsByLogger(mapping).lookup(dotted)))
            t_dotless = min(t_dotless, _cpu(lambda: KeywordsByLogger(mapping).lookup(dotless)))
        assert t_dotted <= 50 * max(t_dotless, 1e-6), (t_dotted, t_dotless)

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


class TestCostFollowsWhatIsWritten:
    """A container far past the budget costs what the kept part costs, not its length."""

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_list_of_300k_strings_costs_at_most_3x_json_dumps_of_it(self, fmt: str) -> None:
        """Writing a list of 300,000 short strings (cut to what fits) costs at most 3x
        ``json.dumps`` of the list (min of 3 runs)."""
        log, provider, _ = _pipeline(fmt, f"BigList_{fmt}")
        items = [f"item{i}" for i in range(300_000)]
        t_ours = t_json = float("inf")
        for _ in range(3):
            t_ours = min(t_ours, _cpu(lambda: log.info("e", items=items)))
            t_json = min(t_json, _cpu(lambda: json.dumps(items)))
        assert provider.stats()["written"] == 3 and provider.stats()["truncated"] == 3
        assert t_ours <= 3 * t_json, (t_ours, t_json)

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_20_mb_string_with_a_lone_surrogate_costs_at_most_5x_a_200_kb_one(self, fmt: str) -> None:
        """Text is cleaned (lone surrogates) and encoded only over what is kept: a 20 MB string
        costs at most 5x a 200 KB one (both are cut to the same budget)."""
        log, provider, _ = _pipeline(fmt, f"BigText_{fmt}")
        big, small = "\ud800" + "x" * 20_000_000, "\ud800" + "x" * 200_000
        t_big = t_small = float("inf")
        for _ in range(3):
            t_big = min(t_big, _cpu(lambda: log.info("e", text=big)))
            t_small = min(t_small, _cpu(lambda: log.info("e", text=small)))
        assert provider.stats()["truncated"] == 6
        assert t_big <= 5 * max(t_small, 1e-4), (t_big, t_small)
