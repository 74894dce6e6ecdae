"""On Windows only: the backend against the real ETW provider API (no session needed, no admin)."""

from __future__ import annotations

import sys

import pytest

from structlog_etw.backends.etw import EtwBackend
from structlog_etw.formats.tracelogging import provider_id
from structlog_etw.write import fields as F
from structlog_etw.write.tracelogging import TraceLoggingEncoder

pytestmark = pytest.mark.skipif(sys.platform != "win32", reason="needs the Windows ETW provider API")

NAME = "StructlogEtw_RealEtwTest"


def test_registers_sets_traits_writes_and_unregisters_with_the_real_api() -> None:
    """The real ETW API registers, sets traits, writes (0 with no session), refuses writes after close."""
    enc = TraceLoggingEncoder(NAME)
    b = EtwBackend(NAME, provider_id(NAME), enc.traits)
    try:
        assert b.set_traits_result == 0
        slot = b.open_slot(4, 1)
        result = enc.encode("real_event", F.to_fields({"user": "ann", "n": 3}.items()))
        assert result is not None
        # No session listens: EventWriteTransfer returns 0 (success, nobody to deliver to).
        assert b.write(slot, result) == 0
        assert b.provider_enabled(4, 1) == bool(slot.word[0])
    finally:
        b.close()
    assert b.write(slot, result) == 6
