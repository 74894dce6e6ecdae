"""The provider word: one read that is non-zero whenever a session wants anything of a provider,
read first by make_etw_bound_logger's methods; the capture and the Windows (fake ETW) backends
keep its meaning, and the provider re-points it when the backend changes, closes or fills up."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, Provider, get_provider, make_etw_bound_logger
from structlog_etw.backends import CaptureBackend, Slot
from structlog_etw.backends.base import UNKNOWN_WORD
from structlog_etw.backends.etw import EtwBackend
from structlog_etw.testing import EtwCapture, capture_etw_events
from tests.helpers.fake_etw import Fake
from tests.helpers.surface import bound, unique_provider


class _NoProviderWord:
    """A backend of the program's own without ``any_word``: every slot enabled."""

    format = "eventheader"

    def open_slot(self, level: int, keyword: int) -> Slot:
        return Slot(level, keyword, [1])

    def write(
        self, slot: Slot, event: Any, opcode: int = 0, activity_id: Any = None, related_id: Any = None
    ) -> int:
        return 0

    def close(self) -> None:
        pass


class TestCaptureBackendWord:
    """``CaptureBackend.any_word[0]`` is 1 while some (level, keyword) pair is enabled, else 0."""

    def test_follows_set_enabled_for_opened_and_unopened_pairs(self) -> None:
        """Enabling one pair anywhere (also one never opened) sets it; disabling all clears it."""
        backend = CaptureBackend("P")
        backend.open_slot(4, 1)
        assert backend.any_word[0] == 1
        backend.set_enabled(False)
        assert backend.any_word[0] == 0
        backend.set_enabled(True, level=2, keyword=0x40)  # a pair no slot has yet
        assert backend.any_word[0] == 1
        backend.set_enabled(False, level=2, keyword=0x40)
        assert backend.any_word[0] == 0
        backend.set_enabled(True, keyword=0x8)
        assert backend.any_word[0] == 1
        backend.close()
        assert backend.any_word[0] == 0

    def test_starts_disabled_when_told(self) -> None:
        """``enabled=False``: zero until a pair is enabled."""
        backend = CaptureBackend("P", enabled=False)
        assert backend.any_word[0] == 0
        backend.set_enabled(True, level=5)
        assert backend.any_word[0] == 1


class TestEtwBackendWord:
    """The enable callback keeps the provider word: 1 while a session has the provider enabled."""

    def test_the_enable_callback_sets_and_clears_the_word(self, fake: Fake) -> None:
        """Enable at any level and keywords sets it, capture-state leaves it, disable clears it."""
        backend = EtwBackend("MyCompany.Word", library=fake.path)
        try:
            backend.open_slot(4, 1)
            assert backend.any_word[0] == 0
            fake.enable(2, 0x8)  # our slot (level 4, keyword 1) stays disabled; the provider is on
            assert (backend.any_word[0], backend.open_slot(4, 1).word[0]) == (1, 0)
            assert backend.open_slot(2, 0x8).word[0] == 1
            fake.enable(5, 0xFF, 0, is_enabled=2)
            assert backend.any_word[0] == 1
            fake.enable(0, 0, 0, is_enabled=0)
            assert backend.any_word[0] == 0
            fake.enable(5, 0xFF)
        finally:
            backend.close()
        assert backend.any_word[0] == 0


class TestProviderAnySlot:
    """``Provider.any_slot`` is one object whose word follows the provider's backend."""

    def test_re_pointed_when_a_capture_starts_and_ends(self) -> None:
        """A provider made before a capture reads the capture's word inside it, its own after."""
        provider = get_provider(unique_provider())
        holder = provider.any_slot
        before = holder.word
        with capture_etw_events() as cap:
            assert provider.any_slot is holder and holder.word[0] == 1
            cap.set_enabled(False)
            assert holder.word[0] == 0
            cap.set_enabled(True, level=1, keyword=0x10)
            assert holder.word[0] == 1
        assert holder.word is before

    def test_unknown_without_a_backend_word_when_closed_and_when_full(self) -> None:
        """No ``any_word``, a closed provider, a full slot table: the word reads non-zero, so the
        events reach ``Provider.write`` and are counted there."""
        assert Provider(unique_provider(), backend=_NoProviderWord()).any_slot.word is UNKNOWN_WORD
        capture = CaptureBackend("P", enabled=False)
        provider = Provider(unique_provider(), backend=capture, max_slots=6)
        assert provider.any_slot.word is capture.any_word
        provider.slot(3, 0x2)  # the sixth slot: full
        assert provider.any_slot.word is UNKNOWN_WORD
        other = Provider(unique_provider(), backend=CaptureBackend("P", enabled=False))
        other.close()
        assert other.any_slot.word[0] != 0


def _calls_of(function_name: str, action: Any) -> int:
    """How many times a Python function called *function_name* ran during *action()*."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event == "call" and frame.f_code.co_name == function_name:
            count += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count


class TestWrapperReadsTheWordFirst:
    """With the provider word zero a call returns after it (and the chain check); only a
    non-zero word leads to the call's keys, context and slot, and nothing is dropped."""

    @pytest.fixture
    def capture(self) -> Iterator[EtwCapture]:
        """A capture with every pair disabled."""
        with capture_etw_events() as cap:
            cap.set_enabled(False)
            yield cap

    def test_a_zero_word_skips_without_resolving_the_call(self, capture: EtwCapture) -> None:
        """Nothing listens: no call reaches the resolution, whatever ``etw_*`` keys it has."""
        renderer = EtwRenderer(unique_provider())
        log = bound(make_etw_bound_logger(renderer), [structlog.contextvars.merge_contextvars, renderer])
        assert renderer.provider.any_slot.word[0] == 0

        def calls() -> None:
            log.info("plain", user="ann")
            log.info("keyed", etw_keyword=0x2)
            log.bind(etw_level=1).debug("bound")

        assert _calls_of("_listening_call", calls) == 0
        assert capture.events == []

    def test_a_non_zero_word_looks_at_the_call_and_writes_what_the_renderer_would(
        self, capture: EtwCapture
    ) -> None:
        """Another pair enabled: the call's own slot decides (skipped, or written)."""
        renderer = EtwRenderer(unique_provider())
        log = bound(make_etw_bound_logger(renderer), [structlog.contextvars.merge_contextvars, renderer])
        capture.set_enabled(True, keyword=0x2)
        assert renderer.provider.any_slot.word[0] == 1
        assert _calls_of("_listening_call", lambda: log.info("default_keyword")) == 1
        log.info("keyed", etw_keyword=0x2)
        assert [(e.name, e.keyword) for e in capture.events] == [("keyed", 0x2)]
