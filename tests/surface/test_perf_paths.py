"""Behaviour the performance work relies on (not timing): the renderer's shortcut when no control
key is bound anywhere must not lose a control key that IS bound through structlog's contextvars.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, Provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.read.decode.eventheader import decode_event


@pytest.fixture
def captured() -> Iterator[tuple[Any, CaptureBackend]]:
    """A logger merging contextvars into a renderer on an EventHeader capture, and its backend."""
    structlog.contextvars.clear_contextvars()
    backend = CaptureBackend("PerfPaths", format="eventheader")
    prov = Provider("PerfPaths", backend=backend)
    log = structlog.wrap_logger(
        None,
        wrapper_class=structlog.make_filtering_bound_logger(0),
        processors=[structlog.contextvars.merge_contextvars, EtwRenderer("PerfPaths", provider=prov)],
    )
    yield log, backend
    structlog.contextvars.clear_contextvars()
    prov.close()


def _keywords_levels(backend: CaptureBackend) -> list[tuple[int, int, str]]:
    out = []
    for rec in backend.clear():
        ev = decode_event(rec.tracepoint, rec.event)
        out.append((ev.keyword, ev.level, ev.name))
    return out


def test_contextvar_control_keys_apply_while_bound_and_stop_after_clear(captured: Any) -> None:
    """Contextvar control keys apply while bound and stop after clear, unbind or the with block."""
    log, backend = captured
    log.info("plain")
    structlog.contextvars.bind_contextvars(etw_keyword=0x8, etw_level=2, etw_name="renamed")
    log.info("bound")
    structlog.contextvars.clear_contextvars()  # leaves the variables holding structlog's "unset"
    log.info("cleared")
    with structlog.contextvars.bound_contextvars(etw_keyword=0x4):
        log.info("inside")
    log.info("outside")
    structlog.contextvars.bind_contextvars(etw_keyword=0x2)
    structlog.contextvars.unbind_contextvars("etw_keyword")
    log.info("unbound")
    assert _keywords_levels(backend) == [
        (1, 4, "plain"),
        (8, 2, "renamed"),
        (1, 4, "cleared"),
        (4, 4, "inside"),
        (1, 4, "outside"),
        (1, 4, "unbound"),
    ]


def test_control_keys_in_the_call_still_win_without_contextvars(captured: Any) -> None:
    """Control keys given in the call apply when no contextvar is bound, and are not fields."""
    log, backend = captured
    log.info("call", etw_keyword=0x10, etw_level=3, etw_opcode=1, x=1)
    log.info("call2", etw_name="named", y=2)
    recs = backend.clear()
    e1 = decode_event(recs[0].tracepoint, recs[0].event)
    e2 = decode_event(recs[1].tracepoint, recs[1].event)
    assert (e1.keyword, e1.level, e1.opcode, e1.fields) == (0x10, 3, 1, {"x": 1})
    assert (e2.name, e2.fields) == ("named", {"event": "call2", "y": 2})
