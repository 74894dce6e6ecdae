"""The EventHeader decoder on hostile events: work and memory stay bounded by the event's size.

The bombs run in a subprocess under a 1 GB address-space limit with a hang timeout
(tests/helpers/hostile.py), so that a regression fails fast instead of taking the machine down.
"""

from __future__ import annotations

import struct

import pytest

from structlog_etw.formats.eventheader import EventHeaderDecodeError
from structlog_etw.read.decode.eventheader import decode_event
from tests.helpers.hostile import (
    EVENTHEADER_BIG_ARRAYS,
    EVENTHEADER_BOMB,
    eventheader_event,
    run_bounded,
)

_DECODE_IN_CHILD = """
import sys
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.formats.eventheader import EventHeaderDecodeError
from tests.helpers import hostile
try:
    decode_event("P_L4K1", getattr(hostile, sys.argv[1]))
except EventHeaderDecodeError as exc:
    print("rejected:", exc)
else:
    print("decoded")
"""


class TestDecoderBombs:
    """Events whose metadata declares billions of values are rejected before any is built."""

    @pytest.mark.parametrize(
        ("bomb", "message"),
        [
            ("EVENTHEADER_BOMB", "struct b'b' declares 1 members, the metadata has none"),
            ("EVENTHEADER_BIG_ARRAYS", "need 4294836225 bytes"),
        ],
    )
    def test_bomb_is_rejected_under_a_memory_limit(self, bomb: str, message: str) -> None:
        """Each tiny decoder bomb is rejected with its message in a memory-limited child, without a hang."""
        run = run_bounded(_DECODE_IN_CHILD, bomb)
        assert not run.hung, "decoder hung on a 29-byte event"
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.startswith("rejected:") and message in run.stdout

    def test_the_bombs_are_small(self) -> None:
        """The EventHeader bombs are tiny: 29 bytes and under 40 bytes."""
        assert len(EVENTHEADER_BOMB) == 29
        assert len(EVENTHEADER_BIG_ARRAYS) < 40


class TestStructMembers:
    """A struct gets the members its format declares; the metadata may end early (perf-decode
    reads Microsoft's own Struct20, which declares 20 and carries 2), but never before the first."""

    def test_struct_cut_short_by_the_end_of_the_metadata_keeps_its_members(self) -> None:
        """A struct declaring more members than the metadata holds keeps the members there are."""
        meta = b"s\0" + bytes([0x81, 20]) + b"x\0\x02" + b"y\0\x02"
        ev = decode_event("P_L4K1", eventheader_event(meta, b"\x05\x06"))
        assert ev.fields == {"s": {"x": 5, "y": 6}}

    def test_struct_without_any_member_is_rejected(self) -> None:
        """A struct with no member left in the metadata is rejected: "the metadata has none"."""
        with pytest.raises(EventHeaderDecodeError, match="the metadata has none"):
            decode_event("P_L4K1", eventheader_event(b"s\0" + bytes([0x81, 1])))


class TestArrayCounts:
    """An array's count is checked against the payload before any element is read."""

    def test_varray_count_beyond_the_payload_is_rejected(self) -> None:
        """A VArray count needing more bytes than the payload holds is rejected, naming the size."""
        meta = b"v\0" + bytes([0x01 | 0x40 | 0x80, 1]) + b"x\0\x03"  # VArray of {u16}
        with pytest.raises(EventHeaderDecodeError, match="need 131070 bytes"):
            decode_event("P_L4K1", eventheader_event(meta, struct.pack("<H", 0xFFFF) + b"\0" * 10))

    def test_arrays_that_fit_decode(self) -> None:
        """A VArray of structs whose count fits the payload decodes to its list of dicts."""
        meta = b"v\0" + bytes([0x01 | 0x40 | 0x80, 1]) + b"x\0\x03"
        ev = decode_event("P_L4K1", eventheader_event(meta, struct.pack("<HHH", 2, 7, 8)))
        assert ev.fields == {"v": [{"x": 7}, {"x": 8}]}
