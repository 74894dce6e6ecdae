"""Activities on the Windows path: the real ctypes backend calling EventWriteTransfer in the
compiled test library (tests/csrc/fake_eventing.c), which records the activity and related ids."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, Provider, etw_activity
from structlog_etw.backends.etw import EtwBackend
from structlog_etw.formats.tracelogging import provider_id
from structlog_etw.write.tracelogging import TraceLoggingEncoder
from tests.helpers.fake_etw import Fake, Record

NAME = "StructlogEtw_ActivityTest"


@pytest.fixture
def win(fake: Fake) -> Iterator[tuple[Fake, Provider, Any]]:
    """A provider on the real ctypes backend over the fake ETW library, a session at level 5."""
    fake.enable(5, 0xFFFF)
    backend = EtwBackend(NAME, provider_id(NAME), TraceLoggingEncoder(NAME).traits, library=fake.path)
    provider = Provider(NAME, default_keyword=0x8, backend=backend)
    log = structlog.wrap_logger(None, processors=[EtwRenderer(NAME, default_keyword=0x8, provider=provider)])
    try:
        yield fake, provider, log
    finally:
        provider.close()


def ids(rec: Record) -> tuple[uuid.UUID | None, uuid.UUID | None]:
    """The GUIDs EventWriteTransfer received (Windows GUID layout) as UUIDs."""
    a = uuid.UUID(bytes_le=rec.activity) if rec.activity is not None else None
    r = uuid.UUID(bytes_le=rec.related) if rec.related is not None else None
    return a, r


def test_event_write_transfer_receives_activity_and_related_ids(win: tuple[Fake, Provider, Any]) -> None:
    """EventWriteTransfer receives each event's activity id, and the related id on nested Starts only."""
    lib, _provider, log = win
    with etw_activity(log, "Outer", n=1) as outer:
        log.info("in_outer")
        with etw_activity(log, "Inner") as inner:
            log.info("in_inner")
    log.info("after")
    recs = lib.records()
    got = [(r.decoded().name, r.decoded().opcode, *ids(r)) for r in recs]
    assert got == [
        ("Outer", 1, outer.id, None),
        ("in_outer", 0, outer.id, None),
        ("Inner", 1, inner.id, outer.id),
        ("in_inner", 0, inner.id, None),
        ("Inner", 2, inner.id, None),
        ("Outer", 2, outer.id, None),
        ("after", 0, None, None),
    ]
    assert all(r.result == 0 for r in recs)
    stop = recs[5].decoded()
    assert stop.fields["n"] == 1
    assert stop.fields["outcome"] == "ok"
    assert (stop.level, stop.keyword) == (4, 0x8)


def test_provider_target_and_async_tasks_reach_event_write_transfer_with_their_ids(
    win: tuple[Fake, Provider, Any],
) -> None:
    """Activities on a provider and in async tasks reach EventWriteTransfer with their own ids."""
    lib, provider, log = win

    async def task(i: int) -> uuid.UUID | None:
        async with etw_activity(log, "Task", i=i) as act:
            await asyncio.sleep(0)
            log.info("step", i=i)
            return act.id

    async def main() -> list[uuid.UUID | None]:
        return list(await asyncio.gather(*(task(i) for i in range(3))))

    with etw_activity(provider, "Batch") as batch:
        task_ids = asyncio.run(main())
    recs = lib.records()
    for r in recs:
        ev = r.decoded()
        a, rel = ids(r)
        if ev.name == "Batch":
            assert (a, rel) == (batch.id, None)
        elif ev.name == "Task" and ev.opcode == 1:
            assert (a, rel) == (task_ids[ev.fields["i"]], batch.id)
        else:
            assert (a, rel) == (task_ids[ev.fields["i"]], None)
    assert len(recs) == 2 + 3 * 3
