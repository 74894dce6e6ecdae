"""Activities in both wire formats: encoded through the real renderer/provider/encoders into the
capture backend, decoded with the project's decoders, ids checked."""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, Provider, etw_activity
from structlog_etw.backends.capture import CaptureBackend, CaptureRecord
from structlog_etw.read.decoded import DecodedEvent
from structlog_etw.testing import decode_record

FORMATS = ["eventheader", "tracelogging"]


def _uuid(raw: bytes | None) -> uuid.UUID | None:
    return None if raw is None else uuid.UUID(bytes=raw)


def activity_ext_size(event: bytes) -> int:
    """Size of the EventHeader ActivityId extension (0 when absent), read from the raw bytes."""
    flags = event[0]
    pos = 8
    while flags & 0x04:
        size, kind = struct.unpack_from("<HH", event, pos)
        if kind & 0x7FFF == 2:
            return int(size)
        pos += 4 + size
        if not kind & 0x8000:
            break
    return 0


class Setup:
    def __init__(self, fmt: str, name: str) -> None:
        self.backend = CaptureBackend(name, format=fmt)
        self.provider = Provider(name, default_keyword=0x10, backend=self.backend)
        renderer = EtwRenderer(name, default_keyword=0x10, provider=self.provider)
        self.log = structlog.wrap_logger(None, processors=[renderer])

    def events(self) -> list[tuple[CaptureRecord, DecodedEvent]]:
        return [(r, decode_record(r).decoded) for r in self.backend.records]


@pytest.fixture(params=FORMATS)
def setup(request: Any) -> Setup:
    """A renderer on a capture backend of each format, default keyword 0x10."""
    return Setup(request.param, f"ActTest_{request.param}")


def test_nested_activities_decode_with_start_stop_opcodes_and_chained_ids(setup: Setup) -> None:
    """In both formats nested activities decode with Start/Stop opcodes, chained ids and Stop fields."""
    log = setup.log
    log.info("before")
    with etw_activity(log, "Outer", job=7) as outer:
        log.info("in_outer")
        with etw_activity(log, "Inner", part=1) as inner:
            log.warning("in_inner", x=1)
            inner.record(size=5)
        log.info("back_in_outer")
    log.info("after")
    ev = [d for _, d in setup.events()]
    got = [(e.name, e.opcode, e.activity_id, e.related_id) for e in ev]
    o, i = outer.id, inner.id
    assert got == [
        ("before", 0, None, None),
        ("Outer", 1, o, None),
        ("in_outer", 0, o, None),
        ("Inner", 1, i, o),
        ("in_inner", 0, i, None),
        ("Inner", 2, i, None),
        ("back_in_outer", 0, o, None),
        ("Outer", 2, o, None),
        ("after", 0, None, None),
    ]
    assert ev[1].fields == {"job": 7}
    assert ev[3].fields == {"part": 1}
    stop_inner = ev[5].fields
    assert stop_inner["part"] == 1
    assert stop_inner["size"] == 5
    assert stop_inner["outcome"] == "ok"
    assert isinstance(stop_inner["duration_ns"], int)
    assert stop_inner["duration_ns"] >= 0
    assert all(e.level == 4 for e in ev if e.name in ("Outer", "Inner"))
    assert all(e.keyword == 0x10 for e in ev)


def test_eventheader_activity_extension_is_32_bytes_only_on_a_start_with_a_parent() -> None:
    """EventHeader's activity extension is 32 bytes (with related id) only on a nested Start, else 16."""
    s = Setup("eventheader", "ActTest_ExtSize")
    with etw_activity(s.log, "Outer"):
        s.log.info("inside")
        with etw_activity(s.log, "Inner"):
            pass
    sizes = [(d.name, d.opcode, activity_ext_size(r.event)) for r, d in s.events()]
    assert sizes == [
        ("Outer", 1, 16),
        ("inside", 0, 16),
        ("Inner", 1, 32),
        ("Inner", 2, 16),
        ("Outer", 2, 16),
    ]


def test_tracelogging_related_id_goes_to_event_write_transfer_only_on_start() -> None:
    """TraceLogging passes the related id to EventWriteTransfer on a nested Start only; opcodes match."""
    s = Setup("tracelogging", "ActTest_Transfer")
    with etw_activity(s.log, "Outer") as outer, etw_activity(s.log, "Inner") as inner:
        s.log.info("inside")
    recs = s.backend.records
    assert [(r.opcode, _uuid(r.activity_id), _uuid(r.related_id)) for r in recs] == [
        (1, outer.id, None),
        (1, inner.id, outer.id),
        (0, inner.id, None),
        (2, inner.id, None),
        (2, outer.id, None),
    ]
    assert all(r.descriptor is None or r.descriptor[4] == r.opcode for r in recs)


def test_exception_outcome_is_encoded_on_the_stop_event(setup: Setup) -> None:
    """In both formats an exception's type name is encoded as the Stop event's outcome."""
    with pytest.raises(ZeroDivisionError), etw_activity(setup.log, "Divide"):
        _ = 1 // 0
    stop = setup.events()[-1][1]
    assert (stop.name, stop.opcode) == ("Divide", 2)
    assert stop.fields["outcome"] == "ZeroDivisionError"


def test_activity_on_a_provider_writes_level_4_default_keyword_and_ids(setup: Setup) -> None:
    """In both formats an activity on a provider writes level 4, the default keyword, or its etw_* values."""
    with etw_activity(setup.provider, "Direct", n=1) as outer:
        with etw_activity(setup.provider, "Nested", etw_keyword=0x20, etw_level=3) as inner:
            setup.log.info("inside")
        outer.record(n=2)
    ev = [d for _, d in setup.events()]
    got = [(e.name, e.opcode, e.level, e.keyword, e.activity_id, e.related_id) for e in ev]
    assert got == [
        ("Direct", 1, 4, 0x10, outer.id, None),
        ("Nested", 1, 3, 0x20, inner.id, outer.id),
        ("inside", 0, 4, 0x10, inner.id, None),
        ("Nested", 2, 3, 0x20, inner.id, None),
        ("Direct", 2, 4, 0x10, outer.id, None),
    ]
    assert ev[0].fields == {"n": 1}
    assert ev[-1].fields["n"] == 2
    assert ev[-1].fields["outcome"] == "ok"


def test_activity_on_a_provider_checks_control_keys_like_the_renderer(setup: Setup) -> None:
    """Invalid control values given to an activity on a provider fall back to their defaults
    and are counted, as the renderer does (one rule); names are made valid the same way."""
    bad = {"etw_level": 0, "etw_keyword": -1, "etw_tags": -1, "etw_name": ""}
    with etw_activity(setup.provider, "Bad;Controls", **bad):
        pass
    with etw_activity(setup.provider, "Direct", etw_name="Re;named", etw_tags=0x5):
        pass
    ev = [d for _, d in setup.events()]
    assert [(e.name, e.opcode, e.level, e.keyword, e.tag) for e in ev] == [
        ("Bad_Controls", 1, 4, 0x10, 0),
        ("Bad_Controls", 2, 4, 0x10, 0),
        ("Re_named", 1, 4, 0x10, 5),
        ("Re_named", 2, 4, 0x10, 5),
    ]
    assert setup.provider.stats()["invalid"] == {
        "etw_level": 2,
        "etw_keyword": 2,
        "etw_tags": 2,
        "etw_name": 2,
    }


def test_nothing_is_written_while_disabled_but_events_inside_still_get_the_id_when_enabled() -> None:
    """A Start while disabled is not written, but events after enabling still carry the activity id."""
    s = Setup("eventheader", "ActTest_Disabled")
    s.backend.set_enabled(False)
    with etw_activity(s.log, "Quiet") as act:
        s.backend.set_enabled(True)
        s.log.info("now_enabled")
    ev = [d for _, d in s.events()]
    assert [(e.name, e.opcode, e.activity_id) for e in ev] == [
        ("now_enabled", 0, act.id),
        ("Quiet", 2, act.id),
    ]


def test_concurrent_tasks_events_carry_their_own_task_activity(setup: Setup) -> None:
    """In both formats each of 4 gathered tasks' events carries its own task's activity id."""
    log = setup.log

    async def task(i: int) -> uuid.UUID | None:
        async with etw_activity(log, "Task", i=i) as act:
            for step in range(3):
                await asyncio.sleep(0)
                log.info("step", i=i, step=step)
            return act.id

    async def main() -> list[uuid.UUID | None]:
        return list(await asyncio.gather(*(task(i) for i in range(4))))

    ids = asyncio.run(main())
    for _, e in setup.events():
        assert e.activity_id == ids[e.fields["i"]]


def test_activity_through_a_stdlib_logger_and_etw_handler_writes_start_stop_with_ids() -> None:
    """An activity on a stdlib logger with EtwHandler writes Start/Stop with chained ids and fields."""
    import logging  # noqa: PLC0415

    from structlog_etw import EtwHandler  # noqa: PLC0415

    backend = CaptureBackend("ActTest_Stdlib", format="eventheader")
    provider = Provider("ActTest_Stdlib", backend=backend)
    logger = logging.getLogger("act_test_stdlib")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = EtwHandler(provider)
    logger.addHandler(handler)
    try:
        with etw_activity(logger, "Job", job=1) as outer, etw_activity(logger, "Step") as inner:
            logger.info("inside %s", "x")
    finally:
        logger.removeHandler(handler)
    ev = [decode_record(r).decoded for r in backend.records]
    assert [(e.name, e.opcode, e.activity_id, e.related_id) for e in ev] == [
        ("Job", 1, outer.id, None),
        ("Step", 1, inner.id, outer.id),
        ("inside %s", 0, inner.id, None),  # EtwHandler names events by the message template
        ("Step", 2, inner.id, None),
        ("Job", 2, outer.id, None),
    ]
    assert ev[0].fields["job"] == 1
    assert ev[-1].fields["outcome"] == "ok"
