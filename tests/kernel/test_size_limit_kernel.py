"""The EventHeader size budget is exactly what perf keeps (marker ``kernel``).

``_eventheader.PERF_MAX_EVENT_SIZE`` (8184) comes from the kernel source: user_event_perf()
asks perf_trace_buf_alloc() for ALIGN(8 + size, 8) bytes, refused above PERF_MAX_TRACE_SIZE
(8192).  This proves it against the real kernel: events of 8184 bytes reach perf, events of
8185 bytes vanish although writev reports success, so the encoder's default budget is the
largest safe one and every event it produces arrives.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kernel_harness import PerfSession, wait_until

from structlog_etw.backends.user_events import UserEventsBackend
from structlog_etw.formats.eventheader import DYN_MAX_EVENT_SIZE, PERF_MAX_EVENT_SIZE
from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.read.decoded import DecodedEvent
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import I64, STR

pytestmark = pytest.mark.kernel


def _decoded(session: PerfSession) -> list[DecodedEvent]:
    """Every user_events sample of the capture, decoded by the project's reader and decoder."""
    out = []
    for sample in PerfDataFile.open(session.path).samples():
        if sample.name.startswith("user_events:"):
            out.append(decode_event(sample.name, sample.data))
    return out


def test_perf_keeps_events_up_to_the_budget_and_silently_loses_one_byte_more(
    user_events_backend: Callable[..., UserEventsBackend],
    perf_session: Callable[..., PerfSession],
    provider_name: str,
) -> None:
    """Perf keeps events up to 8184 bytes and silently loses larger ones; our encoder cuts within budget."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    tp = backend.tracepoint_name(4, 1)
    wide = EventHeaderEncoder(max_size=DYN_MAX_EVENT_SIZE)  # lets us build over-budget events
    base = wide.encode("edge", [("seq", I64, 0), ("s", STR, "")], 4)
    assert base is not None

    def event(seq: int, size: int) -> bytes:
        ev = wide.encode("edge", [("seq", I64, seq), ("s", STR, "x" * (size - len(base)))], 4)
        assert ev is not None and len(ev) == size
        return ev

    sizes = [
        PERF_MAX_EVENT_SIZE - 8,
        PERF_MAX_EVENT_SIZE - 1,
        PERF_MAX_EVENT_SIZE,
        PERF_MAX_EVENT_SIZE + 1,
        8192,
    ]
    ours = EventHeaderEncoder()  # the default budget
    with perf_session([tp], label="size_limit") as session:
        wait_until(lambda: slot.word[0], what="perf to enable the tracepoint")
        warm = wide.encode("warmup", [], 4)
        assert warm is not None
        for _ in range(3):  # perf may miss the first instant after the enable bit flips
            assert backend.write(slot, warm) == 0
        for seq, size in enumerate(sizes):
            assert backend.write(slot, event(seq, size)) == 0  # writev succeeds for all of them
        cut = ours.encode("edge", [("seq", I64, 99), ("s", STR, "y" * 50_000)], 4)
        assert cut is not None and len(cut) <= PERF_MAX_EVENT_SIZE
        assert backend.write(slot, cut) == 0
        closing = wide.encode("closing", [], 4)
        assert closing is not None
        assert backend.write(slot, closing) == 0

    captured = _decoded(session)
    events = [ev for ev in captured if ev.name == "edge"]
    # perf pads the raw sample, so compare what decoded, not the padded sample size
    arrived = {ev.fields["seq"]: len(ev.fields["s"]) for ev in events}
    expected = {seq: size - len(base) for seq, size in enumerate(sizes) if size <= PERF_MAX_EVENT_SIZE}
    assert {k: v for k, v in arrived.items() if k != 99} == expected
    assert arrived[99] > 8000 and events[-1].fields["s"].endswith("...[truncated]")
    assert captured[-1].name == "closing"  # the capture ran to the end
