"""The TraceLogging decoder on hostile metadata: work and memory stay bounded by the data's size.

A NULL value takes no data bytes, so an array of them costs nothing in the data; each element
still claims one byte of room (read/decode/tracelogging.py), and the bomb runs under a memory limit
and a hang timeout (tests/helpers/hostile.py).
"""

from __future__ import annotations

import struct

import pytest

from structlog_etw.read.decode.tracelogging import decode
from tests.helpers.hostile import TRACELOGGING_BOMB, run_bounded, tracelogging_metadata

_DECODE_IN_CHILD = """
from structlog_etw.read.decode.tracelogging import decode
from tests.helpers.hostile import TRACELOGGING_BOMB
try:
    decode(TRACELOGGING_BOMB, b"")
except ValueError as exc:
    print("rejected:", exc)
else:
    print("decoded")
"""


class TestDecoderBomb:
    """15 bytes of metadata declaring 4.3e9 NULL values are rejected before any is built."""

    def test_bomb_is_rejected_under_a_memory_limit(self) -> None:
        """The TraceLogging bomb is rejected with its message in a memory-limited child, without a hang."""
        run = run_bounded(_DECODE_IN_CHILD)
        assert not run.hung, "decoder hung on 15 bytes of metadata"
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.startswith("rejected:") and "65535 elements need at least 65535 bytes" in run.stdout

    def test_the_bomb_is_small(self) -> None:
        """The TraceLogging bomb is under 20 bytes."""
        assert len(TRACELOGGING_BOMB) < 20


class TestZeroSizeElements:
    """Elements that take no bytes may repeat only as often as the data has bytes left."""

    def test_null_array_within_the_data_size_decodes(self) -> None:
        """A NULL array whose count fits the data left decodes to Nones, and the next field too."""
        meta = tracelogging_metadata(b"n\0\x20" + struct.pack("<H", 3) + b"x\0\x08")  # NULL[3], UINT32
        ev = decode(meta, struct.pack("<I", 7))
        assert ev.fields == {"n": [None, None, None], "x": 7}

    def test_null_array_longer_than_the_data_is_rejected(self) -> None:
        """A NULL array counting more elements than bytes left raises ValueError with the sizes."""
        meta = tracelogging_metadata(b"n\0\x20" + struct.pack("<H", 3) + b"x\0\x04")  # NULL[3], UINT8
        with pytest.raises(ValueError, match="3 elements need at least 3 bytes of data, 1 left"):
            decode(meta, b"\x07")

    def test_counts_beyond_the_data_are_rejected_before_reading(self) -> None:
        """A VCOUNT needing more bytes than the data holds raises ValueError before reading."""
        meta = tracelogging_metadata(b"v\0\x48")  # VCount UINT32
        with pytest.raises(ValueError, match="65535 elements need at least 262140 bytes"):
            decode(meta, struct.pack("<H", 0xFFFF) + b"\0" * 8)
