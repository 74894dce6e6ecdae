"""The Windows backend's real ctypes path, run against tests/csrc/fake_eventing.c compiled with gcc.

The C library has the ETW provider entry points with the Windows x64 data layouts; it records
what it receives, calls the enable callback from its own threads and lets the tests set the
session state and the write result.  What it recorded is decoded with our TraceLogging decoder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import importlib.util
import os
import threading
import types
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from structlog_etw.backends import _dll
from structlog_etw.backends.base import BackendUnavailable
from structlog_etw.backends.etw import EtwBackend
from structlog_etw.formats.tracelogging import provider_id
from structlog_etw.read.decode.tracelogging import decode_event_descriptor, decode_traits
from structlog_etw.write import fields as F
from structlog_etw.write.tracelogging import TraceLoggingEncoder
from tests.helpers.fake_etw import HANDLE_BASE, Fake
from tests.helpers.shared_data import find_spec_or_skip


@pytest.fixture
def backends(fake: Fake) -> Iterator[list[EtwBackend]]:
    """Backends a test opens; closed afterwards."""
    opened: list[EtwBackend] = []
    yield opened
    for b in opened:
        b.close()


NAME = "MyCompany.Component"
Opened = list[EtwBackend]


def _open(
    fake: Fake, backends: Opened, group: uuid.UUID | None = None
) -> tuple[EtwBackend, TraceLoggingEncoder]:
    enc = TraceLoggingEncoder(NAME, group)
    b = EtwBackend(NAME, provider_id(NAME), enc.traits, library=fake.path)
    backends.append(b)
    return b, enc


def _encode(enc: TraceLoggingEncoder, name: str, fields: list[F.Field]) -> tuple[bytes, bytes]:
    """The event's (metadata, data); the encoder's first element is the provider traits."""
    result = enc.encode(name, fields)
    assert result is not None
    assert result[0] == enc.traits
    return result[1], result[2]


# ---------------------------------------------------------------------------------------------
# What reaches EventWriteTransfer


def test_written_event_decodes_to_name_level_keyword_opcode_and_fields(fake: Fake, backends: Opened) -> None:
    """A written event reaches ETW with its name, level, keyword, opcode, fields and channel-11 descriptor."""
    fake.enable(5, 0xFF)
    b, enc = _open(fake, backends)
    slot = b.open_slot(4, 0x4)
    meta, data = _encode(enc, "user_login", F.to_fields({"user": "ann", "attempts": 3, "ok": True}.items()))
    assert b.write(slot, (enc.traits, meta, data), 1, None, None) == 0
    (rec,) = fake.records()
    ev = rec.decoded()
    assert ev.provider == NAME
    assert ev.name == "user_login"
    assert (ev.level, ev.keyword, ev.opcode) == (4, 0x4, 1)
    assert ev.fields == {"user": "ann", "attempts": 3, "ok": True}
    assert decode_event_descriptor(rec.descriptor) == {
        "id": 0,
        "version": 0,
        "channel": 11,
        "level": 4,
        "opcode": 1,
        "task": 0,
        "keyword": 0x4,
    }


def test_descriptors_are_traits_metadata_data_with_types_2_1_0_and_zero_reserved(
    fake: Fake, backends: Opened
) -> None:
    """The data descriptors are traits, metadata, data with types 2, 1, 0 and zeroed reserved fields."""
    fake.enable(5)
    b, enc = _open(fake, backends)
    meta, data = _encode(enc, "ev", [("x", F.I64, 7)])
    assert b.write(b.open_slot(4, 1), (enc.traits, meta, data), 0, None, None) == 0
    (rec,) = fake.records()
    assert [d.type for d in rec.data] == [2, 1, 0]
    assert [(d.reserved1, d.reserved2) for d in rec.data] == [(0, 0)] * 3
    assert [d.data for d in rec.data] == [enc.traits, meta, data]


def test_event_without_fields_passes_traits_and_metadata_only(fake: Fake, backends: Opened) -> None:
    """An event without fields passes only the traits and metadata descriptors (types 2, 1)."""
    fake.enable(5)
    b, enc = _open(fake, backends)
    meta, data = _encode(enc, "empty", [])
    assert data == b""
    assert b.write(b.open_slot(4, 1), (enc.traits, meta, data), 0, None, None) == 0
    (rec,) = fake.records()
    assert [d.type for d in rec.data] == [2, 1]
    assert rec.decoded().name == "empty"


def test_reghandle_keeps_all_64_bits(fake: Fake, backends: Opened) -> None:
    """The REGHANDLE is kept with all 64 bits: writes reach the provider registered under our GUID."""
    b, enc = _open(fake, backends)
    meta, data = _encode(enc, "ev", [])
    b.write(b.open_slot(4, 1), (enc.traits, meta, data), 0, None, None)
    (rec,) = fake.records()
    assert rec.handle > HANDLE_BASE
    assert fake.provider_guid(rec.handle) == provider_id(NAME)


def test_activity_ids_are_passed_as_guid_structures(fake: Fake, backends: Opened) -> None:
    """Activity and related ids are passed as GUID structures (bytes_le), or NULL when not given."""
    b, enc = _open(fake, backends)
    act, rel = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"), uuid.uuid4()
    meta, data = _encode(enc, "start", [])
    slot = b.open_slot(4, 1)
    assert b.write(slot, (enc.traits, meta, data), 1, act.bytes, rel.bytes) == 0
    assert b.write(slot, (enc.traits, meta, data), 0, act.bytes, None) == 0
    assert b.write(slot, (enc.traits, meta, data), 0, None, None) == 0
    r1, r2, r3 = fake.records()
    assert r1.activity == act.bytes_le
    assert r1.related == rel.bytes_le
    ev = r1.decoded()
    assert (ev.activity_id, ev.related_id, ev.opcode) == (act, rel, 1)
    assert (r2.activity, r2.related) == (act.bytes_le, None)
    assert (r3.activity, r3.related) == (None, None)


def test_traits_are_set_with_eventsetinformation_class_2(fake: Fake, backends: Opened) -> None:
    """The provider traits with their group are set by EventSetInformation class 2 on our handle."""
    group = uuid.UUID("4f50731a-89cf-4782-b3e0-dce8c90476ba")
    b, enc = _open(fake, backends, group)
    assert b.set_traits_result == 0
    ((handle, cls, blob),) = fake.setinfos()
    assert cls == 2
    assert blob == enc.traits
    assert decode_traits(blob) == (NAME, group)
    assert fake.provider_guid(handle) == provider_id(NAME)


def test_defaults_derive_guid_and_traits_from_the_name(fake: Fake, backends: Opened) -> None:
    """Given only a name, the backend registers the name-hashed GUID and sets the name's traits."""
    b = EtwBackend(NAME, library=fake.path)
    backends.append(b)
    ((handle, cls, blob),) = fake.setinfos()
    assert (cls, blob) == (2, TraceLoggingEncoder(NAME).traits)
    assert fake.provider_guid(handle) == provider_id(NAME)
    assert b.provider_id == provider_id(NAME)


def test_setting_traits_later_calls_eventsetinformation_again_and_is_used_by_writes(
    fake: Fake, backends: Opened
) -> None:
    """Assigning traits later calls EventSetInformation again, and later writes pass the new traits."""
    b = EtwBackend(NAME, library=fake.path)
    backends.append(b)
    enc = TraceLoggingEncoder(NAME, "mygroup")
    b.traits = enc.traits
    assert b.traits == enc.traits
    assert [(cls, blob) for _, cls, blob in fake.setinfos()] == [
        (2, TraceLoggingEncoder(NAME).traits),
        (2, enc.traits),
    ]
    meta, data = _encode(enc, "ev", [])
    assert b.write(b.open_slot(4, 1), (enc.traits, meta, data), 0, None, None) == 0
    (rec,) = fake.records()
    assert rec.data[0].data == enc.traits
    assert decode_traits(rec.data[0].data) == (NAME, provider_id("mygroup"))


def test_a_str_second_argument_is_the_provider_group(fake: Fake, backends: Opened) -> None:
    """A str second argument is the provider group, not the GUID; an int there is a TypeError."""
    b = EtwBackend(NAME, "mygroup", library=fake.path)
    backends.append(b)
    assert b.provider_id == provider_id(NAME)
    assert b.traits == TraceLoggingEncoder(NAME, "mygroup").traits
    ((handle, _, blob),) = fake.setinfos()
    assert decode_traits(blob) == (NAME, provider_id("mygroup"))
    assert fake.provider_guid(handle) == provider_id(NAME)
    with pytest.raises(TypeError, match="provider_id"):
        EtwBackend(NAME, 5, library=fake.path)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Enablement: the callback rewrites slot words


def test_no_session_means_every_slot_is_disabled(fake: Fake, backends: Opened) -> None:
    """Without any ETW session every slot's enabled word is 0."""
    b, _ = _open(fake, backends)
    assert [b.open_slot(lv, kw).word[0] for lv, kw in [(1, 0), (5, 1), (0, 0)]] == [0, 0, 0]


def test_enable_at_level_3_with_keywords_then_capture_state_then_disable(
    fake: Fake, backends: Opened
) -> None:
    """Slot words follow the session's level and keywords as ETW's own check; capture state changes none."""
    b, _ = _open(fake, backends)
    slots = {key: b.open_slot(*key) for key in [(3, 0x2), (4, 0x2), (3, 0x8), (3, 0), (1, 0x6)]}

    def words() -> dict[tuple[int, int], int]:
        return {k: s.word[0] for k, s in slots.items()}

    fake.enable(3, 0x6)
    expected = {(3, 0x2): 1, (4, 0x2): 0, (3, 0x8): 0, (3, 0): 1, (1, 0x6): 1}
    assert words() == expected
    assert b.open_slot(2, 0x4).word[0] == 1  # a slot opened later sees the current state
    for key, on in expected.items():
        assert b.provider_enabled(*key) == bool(on)  # agrees with ETW's own answer
    fake.enable(5, 0xFF, 0, is_enabled=2)  # capture state: sessions want a rundown, nothing changes
    assert words() == expected
    fake.enable(0, 0, 0, is_enabled=0)
    assert set(words().values()) == {0}


def test_level_0_means_all_levels_and_match_any_0_all_keywords(fake: Fake, backends: Opened) -> None:
    """A session with level 0 and MatchAnyKeyword 0 enables every level and every keyword."""
    b, _ = _open(fake, backends)
    slots = [b.open_slot(lv, kw) for lv, kw in [(1, 1), (5, 0x80), (255, 1 << 63), (0, 0)]]
    fake.enable(0, 0, 0)
    assert [s.word[0] for s in slots] == [1, 1, 1, 1]


def test_match_all_requires_every_bit(fake: Fake, backends: Opened) -> None:
    """With MatchAllKeyword set, a slot is enabled only if its keyword has every one of those bits."""
    b, _ = _open(fake, backends)
    partial, full, outside = b.open_slot(4, 0x1), b.open_slot(4, 0x3), b.open_slot(4, 0x10)
    fake.enable(5, 0xF, 0x3)
    assert (partial.word[0], full.word[0], outside.word[0]) == (0, 1, 0)
    assert (b.provider_enabled(4, 0x1), b.provider_enabled(4, 0x3)) == (False, True)


def test_callback_during_eventregister_on_another_thread_enables_slots(fake: Fake, backends: Opened) -> None:
    """An enable callback made inside EventRegister on another thread enables the matching slots."""
    fake.enable(4, 0x1)  # a session already waits for the provider
    b, _ = _open(fake, backends)
    assert fake.lib.fake_callback_calls() == 1  # the call made inside EventRegister
    assert fake.lib.fake_last_callback_on_other_thread() == 1
    assert b.open_slot(4, 0x1).word[0] == 1
    assert b.open_slot(5, 0x1).word[0] == 0


def test_slot_words_follow_enable_changes_made_while_threads_write(fake: Fake, backends: Opened) -> None:
    """Enable changes made while four threads write lose no write and leave the slot at the last state."""
    b, enc = _open(fake, backends)
    fake.enable(5)
    meta, data = _encode(enc, "ev", [("i", F.I64, 1)])
    slot = b.open_slot(4, 1)
    results: list[int] = []

    def writer() -> None:
        results.extend(b.write(slot, (enc.traits, meta, data), 0, None, None) for _ in range(500))

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for level in (1, 5, 0, 3):
        fake.enable(level)
    for t in threads:
        t.join()
    assert results == [0] * 2000
    assert len(fake.records()) == 2000
    assert slot.word[0] == 0  # the last session state (level 3) excludes level 4
    fake.enable(4)
    assert slot.word[0] == 1


# ---------------------------------------------------------------------------------------------
# Errors are returned, never raised; close is final and idempotent


@pytest.mark.parametrize("code", [8, 234, 534, 87])
def test_write_error_codes_are_returned_to_the_caller(fake: Fake, backends: Opened, code: int) -> None:
    """An EventWriteTransfer error code is returned by write(), and 0 again once the call succeeds."""
    b, enc = _open(fake, backends)
    fake.lib.fake_set_write_result(code)
    meta, data = _encode(enc, "ev", [("x", F.STR, "y")])
    assert b.write(b.open_slot(4, 1), (enc.traits, meta, data), 0, None, None) == code
    fake.lib.fake_set_write_result(0)
    assert b.write(b.open_slot(4, 1), (enc.traits, meta, data), 0, None, None) == 0


def test_bad_arguments_return_an_error_code_instead_of_raising(fake: Fake, backends: Opened) -> None:
    """A short activity id or an out-of-range opcode makes write() return 87 and write nothing."""
    b, enc = _open(fake, backends)
    meta, data = _encode(enc, "ev", [])
    slot = b.open_slot(4, 1)
    assert b.write(slot, (enc.traits, meta, data), 0, b"short", None) == 87
    assert b.write(slot, (enc.traits, meta, data), 999, None, None) == 87
    assert fake.records() == []


def test_close_unregisters_even_if_a_slot_word_was_re_pointed(fake: Fake, backends: Opened) -> None:
    """close() unregisters the provider even after a slot's word was re-pointed."""
    b, _ = _open(fake, backends)
    slot = b.open_slot(4, 1)
    slot.word = (0,)  # the provider does this to its slots when it closes
    b.close()
    assert fake.lib.fake_live_providers() == 0
    fake.enable(5)  # no callback reaches the closed backend


def test_a_backend_dropped_without_close_unregisters(fake: Fake) -> None:
    """A backend garbage-collected without close() unregisters, so no callback reaches freed memory."""
    b, _ = _open(fake, [])
    assert fake.lib.fake_live_providers() == 1
    del b
    gc.collect()
    assert fake.lib.fake_live_providers() == 0
    fake.enable(5)  # would call a freed callback if the registration had survived


def test_close_unregisters_once_and_later_writes_return_invalid_handle(fake: Fake, backends: Opened) -> None:
    """close() twice unregisters once; later writes return 6 and write nothing; nothing is enabled."""
    fake.enable(5)
    b, enc = _open(fake, backends)
    slot = b.open_slot(4, 1)
    assert slot.word[0] == 1
    b.close()
    b.close()
    assert fake.lib.fake_unregister_calls() == 1
    assert slot.word[0] == 0
    meta, data = _encode(enc, "ev", [])
    assert b.write(slot, (enc.traits, meta, data), 0, None, None) == 6
    assert fake.records() == []
    assert b.provider_enabled(4, 1) is False


# ---------------------------------------------------------------------------------------------
# Loading


def test_missing_library_raises_backend_unavailable(tmp_path: Path) -> None:
    """A library path that does not exist raises BackendUnavailable saying it "cannot load"."""
    with pytest.raises(BackendUnavailable, match="cannot load"):
        EtwBackend(NAME, provider_id(NAME), b"", library=str(tmp_path / "nope.so"))


def test_library_without_etw_functions_raises_backend_unavailable() -> None:
    """A library without the ETW functions (libc) raises BackendUnavailable naming EventRegister."""
    libc = ctypes.util.find_library("c")
    assert libc is not None
    with pytest.raises(BackendUnavailable, match="EventRegister"):
        EtwBackend(NAME, provider_id(NAME), b"", library=libc)


@pytest.mark.skipif(os.name == "nt", reason="on Windows the real DLLs load")
def test_without_library_outside_windows_raises_backend_unavailable() -> None:
    """Outside Windows, with no library given, BackendUnavailable says it is "only available on Windows"."""
    with pytest.raises(BackendUnavailable, match="only available on Windows"):
        EtwBackend(NAME, provider_id(NAME), b"")


class TestFallbackToTheNextLibrary:
    """A function missing from the API-set DLL is taken from advapi32.dll (the next of the chain)."""

    def test_the_windows_chain_is_the_api_set_then_advapi32(self) -> None:
        """On Windows the provider API is looked up in the API-set DLL first, then in advapi32.dll."""
        assert _dll.PROVIDER_DLLS == ("api-ms-win-eventing-provider-l1-1-0.dll", "advapi32.dll")
        assert _dll.CONSUMER_DLLS == ("advapi32.dll",)

    def test_missing_functions_come_from_the_next_library_and_work(
        self, fake: Fake, apiset_library: str
    ) -> None:
        """EventSetInformation and EventProviderEnabled (absent from the API-set stand-in) come from the
        full stand-in; registration and writes still go through the API-set one."""
        before = fake_apiset_calls(apiset_library)
        b = EtwBackend(NAME, provider_id(NAME), b"\x05\x00X\x00", library=[apiset_library, fake.path])
        try:
            assert b.set_traits_result == 0
            ((handle, cls, blob),) = fake.setinfos()  # EventSetInformation reached the full library
            assert (handle, cls, blob) == (b._handle, 2, b"\x05\x00X\x00")
            fake.enable(5)
            assert b.provider_enabled(4, 1) is True  # EventProviderEnabled: the full library's
            slot = b.open_slot(4, 1)
            enc = TraceLoggingEncoder(NAME)
            meta, data = _encode(enc, "ev", [])
            assert b.write(slot, (enc.traits, meta, data), 0, None, None) == 0
            assert len(fake.records()) == 1
        finally:
            b.close()
        # EventRegister, EventWriteTransfer and EventUnregister went through the API-set library
        assert fake_apiset_calls(apiset_library) - before == 3
        assert fake.lib.fake_unregister_calls() == 1

    def test_a_function_no_library_has_is_unavailable_and_named(
        self, fake: Fake, apiset_library: str
    ) -> None:
        """With the API-set stand-in alone, the missing function is a BackendUnavailable that names it."""
        with pytest.raises(BackendUnavailable, match=r"no EventSetInformation .*libfake_apiset"):
            EtwBackend(NAME, provider_id(NAME), b"", library=[apiset_library])
        assert fake.lib.fake_live_providers() == 0  # nothing was registered

    def test_a_later_library_is_loaded_only_when_needed(self, fake: Fake, tmp_path: Path) -> None:
        """A chain whose first library has every function never loads the next (it may not even exist)."""
        b = EtwBackend(NAME, provider_id(NAME), b"", library=[fake.path, str(tmp_path / "absent.so")])
        b.close()

    def test_an_unloadable_first_library_is_passed_over(self, fake: Fake, tmp_path: Path) -> None:
        """A library of the chain that does not load is skipped, as an absent API-set DLL on old Windows."""
        b = EtwBackend(NAME, provider_id(NAME), b"", library=[str(tmp_path / "absent.so"), fake.path])
        b.close()
        with pytest.raises(BackendUnavailable, match=r"cannot load .*absent\.so.*; .*nope\.so"):
            EtwBackend(
                NAME, provider_id(NAME), b"", library=[str(tmp_path / "absent.so"), str(tmp_path / "nope.so")]
            )


def fake_apiset_calls(path: str) -> int:
    """How many calls the API-set stand-in forwarded so far."""
    return int(ctypes.CDLL(path).fake_apiset_calls())


# ---------------------------------------------------------------------------------------------
# Same calls as Microsoft's own Python TraceLogging provider


def _microsoft_provider_module(fake_path: str) -> types.ModuleType:
    """A private copy of ``traceloggingdynamic`` whose "Windows DLL" is the compiled fake library."""
    spec = find_spec_or_skip("traceloggingdynamic")
    assert spec.origin is not None
    copy_spec = importlib.util.spec_from_file_location("_tld_on_fake_eventing", spec.origin)
    assert copy_spec is not None
    assert copy_spec.loader is not None
    module = importlib.util.module_from_spec(copy_spec)
    added = not hasattr(ctypes, "WinDLL")
    if added:
        ctypes.WinDLL = lambda name, mode=0: ctypes.CDLL(fake_path)  # type: ignore[attr-defined]
    try:
        copy_spec.loader.exec_module(module)
    finally:
        if added:
            del ctypes.WinDLL  # type: ignore[attr-defined]
    return module


def test_backend_makes_the_same_etw_calls_as_microsofts_provider(fake: Fake, backends: Opened) -> None:
    """Our backend makes the same ETW calls, descriptors, bytes and traits as Microsoft's Python provider."""
    tld = _microsoft_provider_module(fake.path)
    act, rel = uuid.uuid4(), uuid.uuid4()

    ms = tld.Provider(NAME.encode())
    eb = tld.EventBuilder(initial_meta_len=32768, initial_data_len=65536)
    eb.reset(b"user_login", 4, 0x4, opcode=1)
    eb.add_str8(b"user", "ann")
    eb.add_int64(b"attempts", 3)
    eb.add_bool32(b"ok", 1)
    assert ms.write(eb, act, rel) == 0
    ms.close()

    b, enc = _open(fake, backends)
    meta, data = _encode(enc, "user_login", F.to_fields({"user": "ann", "attempts": 3, "ok": True}.items()))
    assert b.write(b.open_slot(4, 0x4), (enc.traits, meta, data), 1, act.bytes, rel.bytes) == 0

    theirs, ours = fake.records()
    assert ours.descriptor == theirs.descriptor
    assert (ours.activity, ours.related) == (theirs.activity, theirs.related)
    assert ours.data == theirs.data  # traits, metadata, data: types, reserved fields and bytes
    (_, their_cls, their_blob), (_, our_cls, our_blob) = fake.setinfos()
    assert (our_cls, our_blob) == (their_cls, their_blob)
    assert fake.provider_guid(ours.handle) == tld.providerid_from_name(NAME)
