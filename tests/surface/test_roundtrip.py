"""structlog call -> renderer -> provider -> encoder -> capture -> the project's decoders, both formats.

Every row of the type table must come back as documented (docs/types.md), with name, level,
keyword, opcode, tag and activity ids intact.
"""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structlog_etw import EtwRenderer, get_provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.context._activity import CURRENT_ACTIVITY
from structlog_etw.provider._provider import set_backend_factory
from structlog_etw.testing import decode_record, isolated_providers
from structlog_etw.write.fields import TRUNCATED_FIELD, TRUNCATION_MARKER

PROV = "Co_Round"


class Color(enum.Enum):
    RED = 1


@pytest.fixture(params=["eventheader", "tracelogging"])
def cap(request: pytest.FixtureRequest) -> Iterator[CaptureBackend]:
    made: dict[str, CaptureBackend] = {}

    def factory(name: str, group: str | None, provider_id: uuid.UUID) -> CaptureBackend:
        made[name] = CaptureBackend(name, group, format=request.param)
        return made[name]

    with isolated_providers():
        set_backend_factory(factory)
        get_provider(PROV)
        yield made[PROV]


def log_one(**kw: Any) -> Any:
    log = structlog.wrap_logger(None, processors=[EtwRenderer(PROV)])
    return log.info("roundtrip", **kw)


U = uuid.UUID("12345678-1234-5678-1234-567812345678")
WHEN = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc)


def test_every_type_table_row_decodes_as_documented(cap: CaptureBackend) -> None:
    """In both formats every type-table row decodes back as docs/types.md documents, header intact."""
    log_one(
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
        nothing=None,
        color=Color.RED,
        err=ValueError("bad"),
        ints=[1, 2, 3],
        words=["a", "b"],
        empty=[],
        nested={"a": 1, "b": {"c": "x"}},
        mixed=[1, "a"],
    )
    (rec,) = cap.records
    ev = decode_record(rec).decoded
    assert (ev.provider, ev.name, ev.level, ev.keyword) == (PROV, "roundtrip", 4, 1)
    f = ev.fields
    assert f["s"] == "hé\0llo"
    assert f["i"] == -5
    assert f["u"] == 2**64 - 1
    assert f["big"] == str(2**70)
    assert f["f"] == 0.25
    assert f["ok"] is True
    assert f["raw"] == b"\x00\xff"
    assert f["id"] == U
    assert str(f["v4"]) == "192.0.2.1"
    assert str(f["v6"]) == "2001:db8::1"
    # None: null on Linux (a nullable field); TraceLogging has no null: the text (docs/types.md)
    assert f["nothing"] == (None if cap.format == "eventheader" else "None")
    assert f["color"] == "Color.RED"
    assert f["err"] == "ValueError: bad"
    assert f["ints"] == [1, 2, 3]
    assert f["words"] == ["a", "b"]
    assert f["empty"] == []
    assert f["nested"] == {"a": 1, "b": {"c": "x"}}
    assert f["mixed"] == '[1, "a"]'


def test_datetime_is_lossless_iso_text_on_linux(cap: CaptureBackend) -> None:
    """A datetime decodes as its lossless ISO text on EventHeader and as the datetime on TraceLogging."""
    log_one(when=WHEN)
    ev = decode_record(cap.records[0]).decoded
    if cap.format == "eventheader":
        assert ev.fields["when"] == WHEN.isoformat()
        assert dt.datetime.fromisoformat(ev.fields["when"]) == WHEN
    else:  # FILETIME on Windows (see docs/windows.md)
        assert ev.fields["when"] == WHEN


def test_header_parts_and_activity_ids_round_trip(cap: CaptureBackend) -> None:
    """In both formats name, level, keyword, opcode and activity and related ids decode as written."""
    a, r = uuid.uuid4(), uuid.uuid4()
    token = CURRENT_ACTIVITY.set((a.bytes, r.bytes))
    try:
        log_one(etw_keyword=0x8, etw_level=2, etw_opcode=1, etw_name="Start", x=1)
    finally:
        CURRENT_ACTIVITY.reset(token)
    ev = decode_record(cap.records[0]).decoded
    assert (ev.name, ev.level, ev.keyword, ev.opcode) == ("Start", 2, 0x8, 1)
    assert (ev.activity_id, ev.related_id) == (a, r)
    assert ev.fields == {"event": "roundtrip", "x": 1}


def test_oversized_event_arrives_truncated_and_flagged(cap: CaptureBackend) -> None:
    """In both formats an oversized value arrives with the marker, flagged truncated, and is counted."""
    size = 100_000 if cap.format == "tracelogging" else 20_000
    log_one(body="x" * size, n=1)
    ev = decode_record(cap.records[0]).decoded
    assert ev.fields["body"].endswith(TRUNCATION_MARKER)
    assert ev.fields["n"] == 1
    assert ev.fields[TRUNCATED_FIELD] is True
    assert get_provider(PROV).stats()["truncated"] == 1


# Not fields by design: control keys, the event text, structlog's exc_info (an ``exception`` field
# when it holds an exception), ProcessorFormatter's meta keys (``_record``, ``_from_structlog``).
keys = st.text(min_size=1, max_size=10).filter(
    lambda k: not k.startswith("etw_") and k not in ("event", "exc_info", "_record", "_from_structlog")
)
values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=False),
        st.text(max_size=30),
        st.binary(max_size=30),
        st.uuids(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(keys, inner, min_size=1, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=st.text(max_size=20), items=st.dictionaries(keys, values, max_size=8))
def test_any_structlog_call_decodes_with_the_project_decoder(
    cap: CaptureBackend, event: str, items: dict[str, Any]
) -> None:
    """In both formats any generated structlog call decodes, with one field per key (plus the flag)."""
    cap.clear()
    log = structlog.wrap_logger(None, processors=[EtwRenderer(PROV)])
    log.info(event, **items)
    (rec,) = cap.records
    ev = decode_record(rec).decoded  # raises if the bytes are malformed
    assert ev.level == 4
    assert len(ev.field_list) in (len(items), len(items) + 1)  # + the truncation flag
