"""Memory: the hot path keeps nothing per event, and the per-shape caches stay bounded (issue 7).

Not timing tests: tracemalloc counts bytes still allocated after the work, which does not depend
on the machine's speed.  Both formats, through the whole pipeline (structlog call -> EtwRenderer
-> Provider -> encoder -> capture backend, whose records are cleared as we go so that only what
the library itself keeps is measured).
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, Provider
from structlog_etw.backends.capture import CaptureBackend

FORMATS = ["eventheader", "tracelogging"]
_PACKAGE_FILES = ("structlog_etw", "structlog")


def _pipeline(fmt: str, name: str) -> tuple[Any, Provider, CaptureBackend]:
    backend = CaptureBackend(name, format=fmt)
    prov = Provider(name, backend=backend)
    log = structlog.wrap_logger(
        None,
        wrapper_class=structlog.make_filtering_bound_logger(0),
        processors=[structlog.contextvars.merge_contextvars, EtwRenderer(name, provider=prov)],
    )
    return log, prov, backend


@pytest.fixture
def traced() -> Iterator[None]:
    """tracemalloc running for the test."""
    tracemalloc.start(1)
    try:
        yield
    finally:
        tracemalloc.stop()


def _retained(snapshot_before: tracemalloc.Snapshot) -> int:
    """Bytes allocated since ``snapshot_before`` in our package or structlog and still alive."""
    gc.collect()
    after = tracemalloc.take_snapshot()
    filters = [tracemalloc.Filter(True, f"*{p}*") for p in _PACKAGE_FILES]
    diff = after.filter_traces(filters).compare_to(snapshot_before.filter_traces(filters), "filename")
    return sum(d.size_diff for d in diff)


@pytest.mark.parametrize("fmt", FORMATS)
def test_100k_events_of_repeated_shapes_leave_nothing_allocated(fmt: str, traced: None) -> None:
    """In both formats 100,000 events of 4 repeated shapes leave under 8 KiB allocated, all written."""
    log, prov, backend = _pipeline(fmt, f"MemRepeat_{fmt}")
    shapes = [
        lambda i: log.info("user_login", user="ann", attempts=i, latency_ms=12.5, ok=True, region="eu"),
        lambda i: log.warning("cache_miss", key=f"k{i % 100}", size=i * 3, hit=False),
        lambda i: log.error("failed", err="boom", codes=[1, 2, 3], ctx={"a": i, "b": "x"}),
        lambda i: log.debug("blob", data=b"\x00" * 40, n=None),
    ]
    for i in range(2_000):  # warm-up: caches, slots, interned names
        shapes[i % 4](i)
    backend.clear()
    gc.collect()
    before = tracemalloc.take_snapshot()
    for i in range(100_000):
        shapes[i % 4](i)
        if i % 1000 == 999:
            backend.clear()  # the capture backend's own records are not the library's memory
    backend.clear()
    retained = _retained(before)
    stats = prov.stats()
    assert stats["written"] == 102_000, stats
    # 100k events: even one leaked byte per event would show as ~100 KB.
    assert retained < 8 * 1024, f"{retained} bytes retained after 100k events"


@pytest.mark.parametrize("fmt", FORMATS)
def test_metadata_cache_is_bounded_with_high_cardinality_names_and_field_sets(fmt: str, traced: None) -> None:
    """In both formats new names and field sets keep every cache within its limit and memory flat."""
    log, prov, backend = _pipeline(fmt, f"MemCardinality_{fmt}")
    encoder: Any = prov.encoder
    limit = encoder.cache_limit
    counter = iter(range(10**9))

    def new_shapes(count: int) -> None:
        for i in range(count):
            n = next(counter)
            if i % 2:
                log.info(f"event_{n}", value=n)  # a new event name every call
            else:
                log.info("shape", **{f"field_{n}": n, "other": "x"})  # a new field set every call
            if i % 500 == 499:
                backend.clear()
        backend.clear()

    log.info("warm", a=1)
    backend.clear()
    gc.collect()
    before = tracemalloc.take_snapshot()
    new_shapes(limit - 2)  # the cache holds as many shapes as it ever will
    full = _retained(before)
    assert full > 0
    samples = []
    for _ in range(6):  # 3-4 times the cache size in new shapes, checked along the way
        new_shapes(limit * 2 // 3)
        assert len(encoder._cache) <= limit
        assert len(encoder._shapes.first) <= limit  # the renderer's shapes (encode_dict)
        assert len(encoder._shapes.by_class) <= limit
        samples.append(_retained(before))
    assert prov.stats()["written"] == 1 + limit - 2 + 6 * (limit * 2 // 3)
    assert max(samples) < full * 1.25 + 64 * 1024, (full, samples)
