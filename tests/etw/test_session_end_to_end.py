"""structlog -> EtwRenderer -> ETW -> a real-time session -> EtwListener -> the TraceLogging decoder.

On Windows (elevated) this is the real thing: EventRegister/EventWriteTransfer write into a
session that StartTraceW/EnableTraceEx2 made and OpenTraceW/ProcessTrace consume.  Elsewhere the
same code runs against the C stand-in of advapi32 (tests/csrc/fake_eventing.c), which builds the
EVENT_RECORDs as ETW does (TraceLogging metadata in EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL).
"""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import uuid
from typing import Any

import structlog

from structlog_etw import EtwRenderer, etw_activity
from structlog_etw.etw import EtwListener
from structlog_etw.formats.tracelogging import provider_id
from structlog_etw.read.decoded import DecodedEvent
from tests.etw.conftest import EtwOs

U = uuid.UUID("12345678-1234-5678-1234-567812345678")
WHEN = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc)


class Color(enum.Enum):
    RED = 1


def _log(provider: str) -> Any:
    return structlog.wrap_logger(None, processors=[EtwRenderer(provider)])


def _events(listener: EtwListener) -> list[DecodedEvent]:
    """Stop the session (ETW flushes it to the consumer) and return what arrived, decoded."""
    got = listener.drain()
    assert [e.error for e in got if e.error] == [], "every event decodes"
    return [e.decoded for e in got if e.decoded is not None]


def test_every_type_table_field_arrives_through_a_session(etw_os: EtwOs) -> None:
    """Every type-table value logged arrives through a real ETW session as its documented value."""
    with EtwListener(etw_os.provider, level=5, library=etw_os.library) as listener:
        _log(etw_os.provider).info(
            "roundtrip",
            s="hé\0llo",
            i=-5,
            u=2**64 - 1,
            big=2**70,
            f=0.25,
            ok=True,
            raw=b"\x00\xff",
            id=U,
            v4=ipaddress.IPv4Address("192.0.2.1"),
            v6=ipaddress.IPv6Address("2001:db8::1"),
            when=WHEN,
            nothing=None,
            color=Color.RED,
            err=ValueError("bad"),
            ints=[1, 2, 3],
            words=["a", "b"],
            empty=[],
            nested={"a": 1, "b": {"c": "x"}},
            mixed=[1, "a"],
        )
        (ev,) = _events(listener)
    assert (ev.provider, ev.name, ev.level, ev.keyword, ev.opcode) == (etw_os.provider, "roundtrip", 4, 1, 0)
    assert ev.fields == {
        "s": "hé\0llo",
        "i": -5,
        "u": 2**64 - 1,
        "big": str(2**70),
        "f": 0.25,
        "ok": True,
        "raw": b"\x00\xff",
        "id": U,
        "v4": ipaddress.IPv4Address("192.0.2.1"),
        "v6": ipaddress.IPv6Address("2001:db8::1"),
        "when": WHEN,
        "nothing": "None",
        "color": "Color.RED",
        "err": "ValueError: bad",
        "ints": [1, 2, 3],
        "words": ["a", "b"],
        "empty": [],
        "nested": {"a": 1, "b": {"c": "x"}},
        "mixed": '[1, "a"]',
    }


def test_the_session_filters_by_level_and_keyword(etw_os: EtwOs) -> None:
    """A session at level 3, keyword 0x4 receives only events at or above warning sharing a keyword bit."""
    with EtwListener(etw_os.provider, level=3, keyword=0x4, library=etw_os.library) as listener:
        log = _log(etw_os.provider)
        log.info("info_k4", etw_keyword=0x4)  # level 4 > 3: not delivered
        log.warning("warning_k4", etw_keyword=0x4)
        log.error("error_k8", etw_keyword=0x8)  # shares no bit with 0x4
        log.error("error_k6", etw_keyword=0x6)
        log.critical("critical_k1")  # the default keyword 1
        evs = _events(listener)
    assert [(e.name, e.level, e.keyword) for e in evs] == [("warning_k4", 3, 0x4), ("error_k6", 2, 0x6)]


def test_every_level_arrives_with_its_number(etw_os: EtwOs) -> None:
    """The five structlog levels arrive as ETW levels 1 to 5."""
    with EtwListener(etw_os.provider, library=etw_os.library) as listener:  # all levels, all keywords
        log = _log(etw_os.provider)
        for method in ("critical", "error", "warning", "info", "debug"):
            getattr(log, method)(method)
        evs = _events(listener)
    assert [(e.name, e.level) for e in evs] == [
        ("critical", 1),
        ("error", 2),
        ("warning", 3),
        ("info", 4),
        ("debug", 5),
    ]


def test_activities_and_related_ids_arrive_as_logged(etw_os: EtwOs) -> None:
    """Nested activities arrive with their start/stop opcodes, activity and related ids, and fields."""
    with EtwListener(etw_os.provider, level=5, library=etw_os.library) as listener:
        log = _log(etw_os.provider)
        with etw_activity(log, "Outer") as outer, etw_activity(log, "Inner", n=1) as inner:
            log.info("inside")
        evs = _events(listener)
    assert outer.id is not None and inner.id is not None and inner.related_id == outer.id
    got = [(e.name, e.opcode, e.activity_id, e.related_id) for e in evs]
    assert got[:3] == [
        ("Outer", 1, outer.id, None),
        ("Inner", 1, inner.id, outer.id),
        ("inside", 0, inner.id, None),
    ]
    assert [(n, op, a) for n, op, a, _ in got[3:]] == [("Inner", 2, inner.id), ("Outer", 2, outer.id)]
    assert evs[1].fields == {"n": 1}
    assert evs[3].fields["outcome"] == "ok"


def test_a_session_enabled_by_guid_text_gets_the_named_provider(etw_os: EtwOs) -> None:
    """A session enabled by the provider's GUID text receives the named provider's events."""
    guid = provider_id(etw_os.provider)
    with EtwListener(f"{{{guid}}}", level=5, library=etw_os.library) as listener:
        assert listener.provider_id == guid
        _log(etw_os.provider).info("by_guid", x=1)
        (ev,) = _events(listener)
    assert (ev.provider, ev.name, ev.fields) == (etw_os.provider, "by_guid", {"x": 1})
