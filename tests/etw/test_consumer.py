"""EtwListener against the C stand-in of advapi32: session life cycle, bounds, undecodable input."""

from __future__ import annotations

import ctypes
import threading
import uuid

import pytest

from structlog_etw.backends.etw import EtwBackend
from structlog_etw.etw import (
    EtwListener,
    EtwListenError,
    RawRecord,
    abi,
    consumer,
    decode_raw,
    session_name,
    stop_session,
)
from structlog_etw.formats.tracelogging import provider_id
from structlog_etw.write.fields import to_fields
from structlog_etw.write.tracelogging import TraceLoggingEncoder
from tests.helpers.fake_etw import Fake

NAME = "MyCompany_Consumer"


def _write(backend: EtwBackend, enc: TraceLoggingEncoder, name: str, level: int = 4, **fields: object) -> int:
    event = enc.encode(name, to_fields(fields.items()), level)
    assert event is not None
    return backend.write(backend.open_slot(level, 1), event)


def test_events_arrive_decoded_with_header_facts(fake: Fake) -> None:
    """An event written while listening arrives decoded, with pid, tid and its FILETIME as Unix ns."""
    with EtwListener(NAME, level=5, library=fake.path) as listener:
        assert fake.session_info(listener.name) == {"lost": 0, "params_version": 2, "enable_property": 0}
        backend = EtwBackend(NAME, library=fake.path)
        try:
            assert backend.open_slot(4, 1).word[0] == 1  # the session's enable reached the provider
            assert _write(backend, TraceLoggingEncoder(NAME), "hello", x=1) == 0
        finally:
            backend.close()
        (ev,) = listener.drain()
    assert ev.decoded is not None and ev.error is None
    assert (ev.decoded.name, ev.decoded.fields, ev.decoded.provider) == ("hello", {"x": 1}, NAME)
    assert ev.pid is not None and ev.tid is not None and ev.realtime_ns is not None
    assert ev.realtime_ns > 1_600_000_000 * 10**9  # the FILETIME stamp converted to Unix ns
    assert listener.process_result == 0 and not listener.running


def test_the_session_is_named_after_the_provider_and_gone_after_close(fake: Fake) -> None:
    """The session is named structlog-etw-listen-<provider>, and close(), twice, leaves no session."""
    listener = EtwListener(NAME, library=fake.path)
    assert listener.name == session_name(NAME) == f"structlog-etw-listen-{NAME}"
    assert fake.lib.fake_sessions_in_use() == 1
    listener.close()
    listener.close()  # idempotent
    assert fake.lib.fake_sessions_in_use() == 0
    assert fake.session_info(listener.name) is None


def test_a_stale_session_of_the_same_name_is_stopped_and_replaced(fake: Fake) -> None:
    """A session of the same name left behind is stopped and replaced, and says so (stale_stopped)."""
    fake.start_session(session_name(NAME))  # left behind by a process that died
    with EtwListener(NAME, library=fake.path) as listener:
        assert listener.stale_stopped
        assert fake.lib.fake_sessions_in_use() == 1
    assert fake.lib.fake_sessions_in_use() == 0


def test_stop_session_stops_one_by_name(fake: Fake) -> None:
    """stop_session() stops the named session and returns True, then False once none is left."""
    fake.start_session("leftover")
    assert stop_session("leftover", library=fake.path) is True
    assert stop_session("leftover", library=fake.path) is False
    assert fake.lib.fake_sessions_in_use() == 0


def test_no_rights_is_a_clear_error_and_leaves_no_session(fake: Fake) -> None:
    """Access denied at start raises EtwListenError telling to run as administrator, leaving no session."""
    fake.lib.fake_set_start_result(abi.ERROR_ACCESS_DENIED)
    with pytest.raises(EtwListenError, match="administrator"):
        EtwListener(NAME, library=fake.path)
    assert fake.lib.fake_sessions_in_use() == 0


def test_a_failure_after_start_stops_the_session(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure after the session started (OpenTraceW) re-raises and stops the session."""

    def fail(self: EtwListener) -> None:
        raise EtwListenError("OpenTraceW failed")

    monkeypatch.setattr(EtwListener, "_open", fail)
    with pytest.raises(EtwListenError, match="OpenTraceW"):
        EtwListener(NAME, library=fake.path)
    assert fake.lib.fake_sessions_in_use() == 0  # started, enabled, then stopped on the error


@pytest.mark.parametrize(("level", "keyword"), [(0, None), (256, None), (None, 2**64)])
def test_bad_arguments_are_refused(fake: Fake, level: int | None, keyword: int | None) -> None:
    """A level of 0 or 256 or a keyword past 64 bits raises EtwListenError."""
    with pytest.raises(EtwListenError):
        EtwListener(NAME, level=level, keyword=keyword, library=fake.path)


def test_the_queue_is_bounded_in_bytes_and_drops_are_counted(fake: Fake) -> None:
    """Past max_buffered_bytes events are dropped, and received plus lost is exactly what was written."""
    with EtwListener(NAME, level=5, library=fake.path, max_buffered_bytes=3000) as listener:
        backend = EtwBackend(NAME, library=fake.path)
        enc = TraceLoggingEncoder(NAME)
        try:
            # ProcessTrace queues what arrives; nobody polls until drain().
            for i in range(20):
                _write(backend, enc, "big", s="x" * 500, i=i)
        finally:
            backend.close()
        evs = listener.drain()
    assert 0 < len(evs) < 20
    assert len(evs) + listener.lost == 20


def test_an_event_without_tracelogging_metadata_is_reported_undecodable(fake: Fake) -> None:
    """An event from a provider without traits comes back undecoded, its error naming EVENT_SCHEMA_TL."""
    other = provider_id("SomebodyElse")
    with EtwListener(str(other), level=5, library=fake.path) as listener:
        # A provider that never set its traits: ETW ignores the descriptor types and the
        # TraceLogging metadata lands in the user data (no EVENT_SCHEMA_TL item).
        lib = fake.lib
        handle = ctypes.c_uint64()
        cb = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 7))(lambda *a: None)
        assert lib.EventRegister(other.bytes_le, cb, None, ctypes.byref(handle)) == 0
        try:
            enc = TraceLoggingEncoder("SomebodyElse")
            traits, meta, data = enc.encode("raw", to_fields({"x": 1}.items()), 4)  # type: ignore[misc]
            desc = bytes([0, 0, 0, 11, 4, 0, 0, 0]) + (1).to_bytes(8, "little")
            bufs = [ctypes.create_string_buffer(b, len(b)) for b in (traits, meta, data)]
            dd = b"".join(
                ctypes.addressof(b).to_bytes(8, "little") + len(b).to_bytes(4, "little") + bytes([t, 0, 0, 0])
                for b, t in zip(bufs, (2, 1, 0), strict=True)
            )
            assert lib.EventWriteTransfer(handle, desc, None, None, 3, dd) == 0
        finally:
            lib.EventUnregister(handle)
        (ev,) = listener.drain()
    assert ev.decoded is None
    assert ev.error is not None and "EVENT_SCHEMA_TL" in ev.error
    assert ev.raw == traits + meta + data  # everything arrived as user data


def _raw(**kw: object) -> RawRecord:
    base: dict[str, object] = {
        "provider_id": uuid.uuid4(),
        "descriptor": bytes([0, 0, 0, 11, 4, 0, 0, 0]) + (1).to_bytes(8, "little"),
        "timestamp": abi.FILETIME_UNIX_EPOCH,
        "pid": 1,
        "tid": 2,
        "cpu": 0,
        "activity_id": bytes(16),
        "metadata": None,
        "traits": None,
        "related_id": None,
        "data": b"",
    }
    base.update(kw)
    return RawRecord(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({}, "EVENT_SCHEMA_TL"),
        ({"metadata": b"\xff\xff garbage"}, "metadata size"),
        ({"metadata": b"\x01\x00"}, "truncated"),
        ({"metadata": b"\x05\x00\x00ab"}, "unterminated"),
        ({"metadata": b"\x06\x00\x00e\x00x", "data": b""}, ""),
        ({"metadata": b"\x05\x00\x00e\x00", "related_id": b"short"}, "related activity id"),
        ({"metadata": b"\x05\x00\x00e\x00", "descriptor": bytes(16)}, "channel 0"),
        ({"metadata": b"\x05\x00\x00e\x00", "traits": b"\x09\x00"}, "traits size"),
    ],
)
def test_crafted_records_become_error_events_not_exceptions(kw: dict[str, object], message: str) -> None:
    """Crafted records (bad metadata, ids, descriptor, traits) become error events, never exceptions."""
    ev = decode_raw(_raw(**kw), "P")
    assert ev.decoded is None and ev.error is not None
    assert message in ev.error
    assert ev.realtime_ns == 0 and ev.pid == 1


def test_metadata_is_read_up_to_its_own_size() -> None:
    """Metadata is read to its own size, padding after it ignored; a size past the blob is an error."""
    meta = b"\x07\x00\x00ev\x00"  # 6 bytes that claim 7
    ev = decode_raw(_raw(metadata=b"\x06\x00\x00ev\x00" + b"\0\0", data=b""), "P")  # two bytes of padding
    assert ev.error is None and ev.decoded is not None
    assert (ev.decoded.name, ev.decoded.fields) == ("ev", {})
    assert decode_raw(_raw(metadata=meta), "P").error is not None  # a size past the blob is an error


def test_the_stand_in_reads_fields_where_the_sdk_puts_them(fake: Fake) -> None:
    """A logfile whose callback sits 8 bytes early (a layout slip) is refused, the right one opens."""
    fake.start_session("layout")
    try:
        lib = fake.lib
        lib.OpenTraceW.restype = ctypes.c_uint64
        name = abi.wide("layout")
        callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda record: None)
        address = ctypes.cast(callback, ctypes.c_void_p).value
        mode = abi.PROCESS_TRACE_MODE_REAL_TIME | abi.PROCESS_TRACE_MODE_EVENT_RECORD
        wrong = bytearray(ctypes.sizeof(abi.EVENT_TRACE_LOGFILEW))
        wrong[8:16] = ctypes.addressof(name).to_bytes(8, "little")
        wrong[28:32] = mode.to_bytes(4, "little")
        wrong[416:424] = (address or 0).to_bytes(8, "little")  # EventsLost's slot, not the callback's
        buf = (ctypes.c_char * len(wrong)).from_buffer(wrong)
        assert lib.OpenTraceW(buf) == abi.INVALID_PROCESSTRACE_HANDLE
        assert lib.GetLastError() == 87
        right = abi.EVENT_TRACE_LOGFILEW()
        right.LoggerName = ctypes.addressof(name)
        right.ProcessTraceMode = mode
        right.EventRecordCallback = address
        handle = lib.OpenTraceW(ctypes.byref(right))
        assert handle != abi.INVALID_PROCESSTRACE_HANDLE
        assert right.BufferSize == 64 * 1024  # written back by the stand-in at the SDK's offset 408
        assert lib.CloseTrace(ctypes.c_uint64(handle)) == 0
    finally:
        assert stop_session("layout", library=fake.path)


def test_records_of_other_providers_are_skipped_not_shown(fake: Fake) -> None:
    """Records of another provider are counted as skipped and not queued; ours are."""
    with EtwListener(NAME, library=fake.path) as listener:
        rec = abi.EVENT_RECORD()
        rec.EventHeader.ProviderId = abi.GUID.from_uuid(provider_id("Other"))
        listener._on_record(ctypes.pointer(rec))  # as ProcessTrace would call it
        rec.EventHeader.ProviderId = abi.GUID.from_uuid(listener.provider_id)
        listener._on_record(ctypes.pointer(rec))
        assert listener.skipped == 1
        (ev,) = listener.poll(0)
    assert ev.error is not None and "EVENT_SCHEMA_TL" in ev.error


def test_listeners_left_open_are_stopped_at_exit(fake: Fake) -> None:
    """The atexit hook stops the session of a listener left open."""
    listener = EtwListener(NAME, library=fake.path)
    assert fake.lib.fake_sessions_in_use() == 1
    consumer._close_open_listeners()  # what atexit runs
    assert fake.lib.fake_sessions_in_use() == 0
    assert not listener.running


def test_ctrl_c_during_start_up_leaves_no_session(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt while the listener starts propagates and leaves no session."""

    def interrupted(self: threading.Thread) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", interrupted)  # between OpenTraceW and the thread
    with pytest.raises(KeyboardInterrupt):
        EtwListener(NAME, library=fake.path)
    assert fake.lib.fake_sessions_in_use() == 0  # stopped, and the opened trace closed


class TestProcessorIndex:
    """The processor comes from ETW_BUFFER_CONTEXT.ProcessorIndex (16 bits) where the header says so."""

    @staticmethod
    def _record(flags: int, index: int) -> abi.EVENT_RECORD:
        record = abi.EVENT_RECORD()
        record.EventHeader.Flags = flags
        record.ProcessorIndex = index
        return record

    def test_the_16_bit_index_is_read_when_the_flag_is_set(self) -> None:
        """A crafted record with EVENT_HEADER_FLAG_PROCESSOR_INDEX and processor 300 says 300, not 44."""
        record = self._record(abi.EVENT_HEADER_FLAG_PROCESSOR_INDEX | 0x0040, 300)
        assert (record.ProcessorNumber, record.Alignment) == (44, 1)  # the union's two bytes
        assert consumer._copy_record(record).cpu == 300
        assert consumer._copy_record(self._record(abi.EVENT_HEADER_FLAG_PROCESSOR_INDEX, 65535)).cpu == 65535

    def test_without_the_flag_only_the_processor_number_byte_counts(self) -> None:
        """Without the flag (before Windows 8) the byte after ProcessorNumber is Alignment, not the CPU."""
        record = self._record(0x0040, 0x0107)
        assert consumer._copy_record(record).cpu == 7

    def test_a_processor_past_255_arrives_through_a_session(self, fake: Fake) -> None:
        """The stand-in sets the flag as Windows 8+ does; processor 300 reaches the listened event as 300."""
        fake.lib.fake_set_processor_index.argtypes = [ctypes.c_int32]
        fake.lib.fake_set_processor_index(300)
        with EtwListener(NAME, level=5, library=fake.path) as listener:
            backend = EtwBackend(NAME, library=fake.path)
            try:
                assert _write(backend, TraceLoggingEncoder(NAME), "on_cpu_300") == 0
            finally:
                backend.close()
            (ev,) = listener.drain()
        assert ev.cpu == 300 and ev.decoded is not None and ev.decoded.name == "on_cpu_300"


class TestPointerWidth:
    """A live event of a 32-bit process (EVENT_HEADER_FLAG_32_BIT_HEADER): POINTER fields are 4 bytes."""

    def test_the_flag_makes_pointers_4_bytes(self) -> None:
        """The header's 32-bit flag is copied, and the POINTER field decodes from 4 bytes."""
        record = abi.EVENT_RECORD()
        record.EventHeader.Flags = abi.EVENT_HEADER_FLAG_32_BIT_HEADER
        assert consumer._copy_record(record).pointer_size == 4
        assert consumer._copy_record(abi.EVENT_RECORD()).pointer_size == 8
        meta = b"\x09\x00\x00ev\x00p\x00\x10"  # event "ev", one field "p" of InType POINTER
        ev = decode_raw(_raw(metadata=meta, data=(7).to_bytes(4, "little"), pointer_size=4), "P")
        assert ev.error is None and ev.decoded is not None and ev.decoded.fields == {"p": 7}
        assert decode_raw(_raw(metadata=meta, data=(7).to_bytes(4, "little")), "P").error is not None


class TestFallbackToTheNextLibrary:
    """The consumer loads through the provider's loader: functions missing from the first library
    of the chain come from the next one."""

    def test_a_session_runs_with_functions_from_two_libraries(self, fake: Fake, apiset_library: str) -> None:
        """EnableTraceEx2 and ProcessTrace (absent from the API-set stand-in) come from the full stand-in."""
        with EtwListener(NAME, level=5, library=[apiset_library, fake.path]) as listener:
            sources = listener._api.sources
            assert (
                sources["StartTraceW"] == sources["OpenTraceW"] == sources["GetLastError"] == apiset_library
            )
            assert sources["EnableTraceEx2"] == sources["ProcessTrace"] == fake.path
            backend = EtwBackend(NAME, library=[apiset_library, fake.path])
            try:
                assert _write(backend, TraceLoggingEncoder(NAME), "two_libraries", x=1) == 0
            finally:
                backend.close()
            (ev,) = listener.drain()
        assert ev.decoded is not None and (ev.decoded.name, ev.decoded.fields) == ("two_libraries", {"x": 1})

    def test_a_function_no_library_has_is_a_listen_error(self, fake: Fake, apiset_library: str) -> None:
        """With the API-set stand-in alone, EnableTraceEx2 is missing: EtwListenError names it."""
        with pytest.raises(EtwListenError, match="no EnableTraceEx2"):
            EtwListener(NAME, library=[apiset_library])
        assert fake.lib.fake_sessions_in_use() == 0
