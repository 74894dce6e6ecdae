"""The provider word against a real kernel: every tracepoint of a provider is also one bit of a
shared word, so one read tells whether a consumer has any of them enabled (marker ``kernel``)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from kernel_harness import PerfSession, wait_until

from structlog_etw.backends.base import UNKNOWN_WORD
from structlog_etw.backends.user_events import UserEventsBackend

pytestmark = pytest.mark.kernel

BackendFactory = Callable[..., UserEventsBackend]
PerfFactory = Callable[..., PerfSession]

#: (level, keyword) pairs registered: every default level, and two other keywords.
PAIRS = [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (2, 0x8), (5, 0x40000000000)]


def _event(level: int) -> bytes:
    """A minimal valid EventHeader event without fields."""
    meta = b"probe\0"
    return struct.pack("<BBHHBB", 0x07, 0, 0, 0, 0, level) + struct.pack("<HH", len(meta), 1) + meta


class TestProviderWord:
    """``UserEventsBackend.any_word[0]`` is non-zero exactly while some tracepoint is enabled."""

    @pytest.mark.parametrize("enabled", [(5, 1), (2, 0x8), (5, 0x40000000000)])
    def test_an_enabled_tracepoint_of_any_level_and_keyword_flips_the_provider_word(
        self,
        user_events_backend: BackendFactory,
        perf_session: PerfFactory,
        provider_name: str,
        enabled: tuple[int, int],
    ) -> None:
        """perf enabling one tracepoint (any level, any keyword) sets the provider word and only
        that slot's word; the word is zero again once perf leaves, and events still go out."""
        backend = user_events_backend(provider_name)
        slots = {pair: backend.open_slot(*pair) for pair in PAIRS}
        assert backend.any_word is not UNKNOWN_WORD
        assert backend.any_word[0] == 0
        tracepoint = backend.tracepoint_name(*enabled)
        with perf_session([tracepoint], label="provider_word") as session:
            wait_until(lambda: backend.any_word[0], what="the provider word to flip")
            wait_until(lambda: slots[enabled].word[0], what="the slot's own word")
            assert [pair for pair, slot in slots.items() if slot.word[0]] == [enabled]
            assert bin(backend.any_word[0]).count("1") == 1  # one bit per tracepoint
            for _ in range(3):
                assert backend.write(slots[enabled], _event(enabled[0])) == 0
        wait_until(lambda: not backend.any_word[0], what="the provider word to clear")
        assert not any(slot.word[0] for slot in slots.values())
        assert [e.name for e in session.events()].count("probe") >= 1

    def test_more_tracepoints_than_bits_make_the_word_unknown_and_close_clears_it(
        self, user_events_backend: BackendFactory, provider_name: str
    ) -> None:
        """Past 64 tracepoints (32 on 32-bit) the word cannot tell any more: it reads non-zero;
        close() unregisters every bit (no error) and the earlier words read zero."""
        backend = user_events_backend(provider_name)
        word = backend.any_word
        bits = word.itemsize * 8
        for keyword in range(1, bits + 1):
            backend.open_slot(5, keyword)
        assert backend.any_word is word
        backend.open_slot(4, 1)
        assert backend.any_word is UNKNOWN_WORD and backend.any_word[0]
        backend.close()
        assert word[0] == 0
