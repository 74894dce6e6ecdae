"""An ETW real-time consumer through ctypes: a session for one provider, its events decoded.

:class:`EtwListener` starts a real-time session (``StartTraceW``), enables one provider in it
by GUID with a level and a MatchAnyKeyword (``EnableTraceEx2``), opens it for consumption
(``OpenTraceW`` with ``PROCESS_TRACE_MODE_REAL_TIME | PROCESS_TRACE_MODE_EVENT_RECORD``) and
runs ``ProcessTrace`` on a thread of its own.  The EventRecordCallback copies what it needs
out of each ``EVENT_RECORD`` (header, the TraceLogging metadata of the extended data item
``EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL``, the provider traits, the related activity id and
the user data: every piece bounded by a 16-bit length) into a queue bounded in bytes;
:meth:`EtwListener.poll` decodes them with :func:`structlog_etw.read.decode.tracelogging.decode` into
:class:`~structlog_etw.read.live.ListenedEvent` items, the same objects the Linux listener yields
(read by the same loop, :func:`structlog_etw.read.live.pump`), so ``structlog-etw listen`` prints
both the same way.

The session is named (``structlog-etw-listen-<provider>`` unless told otherwise) so that a
session left behind by a process that died before it could stop it is found and stopped by the
next run (``StartTraceW`` answers ``ERROR_ALREADY_EXISTS``).  :meth:`EtwListener.close` stops
the session (ETW then flushes what is buffered to the consumer and ``ProcessTrace`` returns),
joins the thread and closes the trace; it runs on ``with`` exit, on errors during start-up
and from ``close()`` in a ``finally`` (Ctrl-C).  Starting a session needs administrator rights
(or the Performance Log Users group).

The functions are loaded from ``advapi32.dll`` through the loader the provider backend uses
(``backends._dll``).  The internal ``library`` parameter loads given shared libraries (a path or
a chain of paths, each function from the first that has it) instead: the tests run these ctypes
calls on Linux against the C stand-in ``tests/csrc/fake_eventing.c``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..backends import _dll
from ..formats._levels import valid_keyword, valid_level
from ..formats.tracelogging import provider_id as _provider_id
from ..read.live import ListenedEvent, pump
from . import abi

__all__ = [
    "DEFAULT_BUFFERED_BYTES",
    "EtwListenError",
    "EtwListener",
    "RawRecord",
    "decode_raw",
    "run",
    "session_name",
    "stop_session",
]

#: The most event bytes :class:`EtwListener` keeps between two polls; beyond it events are
#: counted in ``lost`` instead of queued.
DEFAULT_BUFFERED_BYTES: Final = 64 << 20
#: What one queued record costs beyond its bytes (header fields, tuple), for the budget.
_RECORD_OVERHEAD: Final = 256
_SESSION_PREFIX: Final = "structlog-etw-listen-"
_NAME_MAX: Final = 1024  # characters of a session name (ETW's limit)
_JOIN_SECONDS: Final = 10.0
_ENABLE_TIMEOUT_MS: Final = 10_000


class EtwListenError(Exception):
    """A session could not be started or consumed (no Windows, no rights, bad arguments)."""


@dataclass(frozen=True)
class RawRecord:
    """What the EventRecordCallback copied out of one ``EVENT_RECORD`` (bytes, never pointers)."""

    provider_id: uuid.UUID
    descriptor: bytes  # the 16-byte EVENT_DESCRIPTOR
    timestamp: int  # FILETIME ticks
    pid: int
    tid: int
    cpu: int
    activity_id: bytes  # 16 bytes, bytes_le; zeros = none
    metadata: bytes | None  # EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL
    traits: bytes | None  # EVENT_HEADER_EXT_TYPE_PROV_TRAITS
    related_id: bytes | None  # EVENT_HEADER_EXT_TYPE_RELATED_ACTIVITYID
    data: bytes  # UserData
    pointer_size: int = 8  # 4 when the header has EVENT_HEADER_FLAG_32_BIT_HEADER (a 32-bit process)

    @property
    def size(self) -> int:
        """Bytes this record holds."""
        return len(self.data) + len(self.metadata or b"") + len(self.traits or b"") + _RECORD_OVERHEAD


def _processor(record: abi.EVENT_RECORD) -> int:
    """The processor an ``EVENT_RECORD`` was written on: the 16-bit ``ProcessorIndex`` where the
    header says it holds it (``EVENT_HEADER_FLAG_PROCESSOR_INDEX``), else the 8-bit ``ProcessorNumber``."""
    if record.EventHeader.Flags & abi.EVENT_HEADER_FLAG_PROCESSOR_INDEX:
        return int(record.ProcessorIndex)
    return int(record.ProcessorNumber)


def _copy_record(record: abi.EVENT_RECORD) -> RawRecord:
    """Copy one EVENT_RECORD (valid only during the callback) into a :class:`RawRecord`."""
    header = record.EventHeader
    metadata = traits = related = None
    count = record.ExtendedDataCount
    items = record.ExtendedData
    if count and items:
        for i in range(count):
            item = items[i]
            kind = item.ExtType
            if kind not in (
                abi.EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL,
                abi.EVENT_HEADER_EXT_TYPE_PROV_TRAITS,
                abi.EVENT_HEADER_EXT_TYPE_RELATED_ACTIVITYID,
            ):
                continue
            blob = ctypes.string_at(item.DataPtr, item.DataSize) if item.DataPtr and item.DataSize else b""
            if kind == abi.EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL:
                metadata = blob
            elif kind == abi.EVENT_HEADER_EXT_TYPE_PROV_TRAITS:
                traits = blob
            else:
                related = blob
    size = record.UserDataLength
    data = ctypes.string_at(record.UserData, size) if size and record.UserData else b""
    return RawRecord(
        provider_id=header.ProviderId.to_uuid(),
        descriptor=bytes(header.EventDescriptor),
        timestamp=header.TimeStamp,
        pid=header.ProcessId,
        tid=header.ThreadId,
        cpu=_processor(record),
        activity_id=bytes(header.ActivityId),
        metadata=metadata,
        traits=traits,
        related_id=related,
        data=data,
        pointer_size=4 if header.Flags & abi.EVENT_HEADER_FLAG_32_BIT_HEADER else 8,
    )


def decode_raw(raw: RawRecord, provider: str = "") -> ListenedEvent:
    """Decode one copied record; a record that cannot be decoded becomes an event with ``error``.

    ``provider`` names the provider when the record carries no provider traits.
    """
    from ..read.decode.tracelogging import decode, decode_traits  # noqa: PLC0415 (decoder: first use)

    realtime_ns = (raw.timestamp - abi.FILETIME_UNIX_EPOCH) * 100 if raw.timestamp else None
    try:
        metadata = raw.metadata
        if metadata is None:
            raise ValueError("no TraceLogging metadata (EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL)")
        if len(metadata) >= 2 and int.from_bytes(metadata[:2], "little") < len(metadata):
            # The blob starts with its own u16 size; anything after it (padding) is not metadata.
            metadata = metadata[: int.from_bytes(metadata[:2], "little")]
        name = decode_traits(raw.traits)[0] if raw.traits else provider
        if raw.related_id is not None and len(raw.related_id) != 16:
            raise ValueError(f"related activity id of {len(raw.related_id)} bytes (not 16)")
        activity = uuid.UUID(bytes_le=raw.activity_id) if any(raw.activity_id) else None
        related = uuid.UUID(bytes_le=raw.related_id) if raw.related_id is not None else None
        decoded = decode(
            metadata,
            raw.data,
            provider=name,
            descriptor=raw.descriptor,
            activity_id=activity,
            related_id=related,
            pointer_size=raw.pointer_size,
        )
    except ValueError as e:
        return ListenedEvent(
            provider or str(raw.provider_id),
            None,
            realtime_ns,
            raw.cpu,
            raw.pid,
            raw.tid,
            None,
            str(e),
            (raw.metadata or b"") + raw.data,
        )
    return ListenedEvent(provider or decoded.provider, None, realtime_ns, raw.cpu, raw.pid, raw.tid, decoded)


class _Api:
    """The controller and consumer functions of advapi32 (or of the stand-in), bound once."""

    def __init__(self, library: str | Sequence[str] | None) -> None:
        try:
            dlls = _dll.Dlls(library, _dll.CONSUMER_DLLS, use_last_error=True)
            self.callback_type: Any = dlls.callback_type(None, ctypes.POINTER(abi.EVENT_RECORD))
            self.last_error: Callable[[], int] = dlls.last_error()
            u32, u64, ptr = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
            props = ctypes.POINTER(abi.EVENT_TRACE_PROPERTIES)
            self.start = dlls.bind("StartTraceW", u32, [ctypes.POINTER(u64), ptr, props])
            self.control = dlls.bind("ControlTraceW", u32, [u64, ptr, props, u32])
            self.enable = dlls.bind(
                "EnableTraceEx2",
                u32,
                [
                    u64,
                    ctypes.POINTER(abi.GUID),
                    u32,
                    ctypes.c_uint8,
                    u64,
                    u64,
                    u32,
                    ctypes.POINTER(abi.ENABLE_TRACE_PARAMETERS),
                ],
            )
            self.open = dlls.bind("OpenTraceW", u64, [ctypes.POINTER(abi.EVENT_TRACE_LOGFILEW)])
            self.process = dlls.bind("ProcessTrace", u32, [ctypes.POINTER(u64), u32, ptr, ptr])
            self.close = dlls.bind("CloseTrace", u32, [u64])
        except _dll.DllError as e:
            raise EtwListenError(str(e)) from None
        self.sources = dlls.sources  #: function name -> the library it came from


class _Properties:
    """An EVENT_TRACE_PROPERTIES followed by room for the logger name (as ETW wants it)."""

    def __init__(self, name: str) -> None:
        size = ctypes.sizeof(abi.EVENT_TRACE_PROPERTIES) + 2 * (_NAME_MAX + 1)
        self.buffer = ctypes.create_string_buffer(size)
        self.props = abi.EVENT_TRACE_PROPERTIES.from_buffer(self.buffer)
        self.props.Wnode.BufferSize = size
        self.props.Wnode.Flags = abi.WNODE_FLAG_TRACED_GUID
        self.props.Wnode.ClientContext = abi.WNODE_CLIENT_CONTEXT_QPC
        self.props.LoggerNameOffset = ctypes.sizeof(abi.EVENT_TRACE_PROPERTIES)
        self.name = name

    def pointer(self) -> Any:
        return ctypes.pointer(self.props)


def session_name(provider: str) -> str:
    """The session name :class:`EtwListener` uses for ``provider`` (also to find a stale one)."""
    return (_SESSION_PREFIX + provider)[:_NAME_MAX]


def _provider_guid(provider: str) -> tuple[str, uuid.UUID]:
    """(name or "", GUID): a GUID in text (``{...}`` or plain) is taken as it is, else a name's GUID."""
    text = provider.strip()
    with contextlib.suppress(ValueError):
        return "", uuid.UUID(text.strip("{}"))
    name = text.removeprefix("*")
    if not name:
        raise EtwListenError("empty provider name")
    return name, _provider_id(name)


def _stop_by_name(api: _Api, name: str) -> bool:
    props = _Properties(name)
    rc = int(api.control(0, abi.wide(name), props.pointer(), abi.EVENT_TRACE_CONTROL_STOP))
    if rc in (0, abi.ERROR_WMI_INSTANCE_NOT_FOUND):
        return rc == 0
    raise EtwListenError(f"ControlTraceW(STOP {name!r}) failed with error {rc}")


def stop_session(name: str, *, library: str | Sequence[str] | None = None) -> bool:
    """Stop the ETW session called ``name`` (e.g. a stale :func:`session_name`); False if none runs."""
    return _stop_by_name(_Api(library), name)


#: Listeners not yet closed: stopped at interpreter exit, so a session does not outlive a
#: process that ends without closing its listener (a killed one leaves it to the next run).
_OPEN: weakref.WeakSet[EtwListener] = weakref.WeakSet()


@atexit.register
def _close_open_listeners() -> None:
    for listener in list(_OPEN):
        with contextlib.suppress(Exception):
            listener.close()


class EtwListener:
    """A live ETW session for one provider (see the module docstring).  Use it as a context manager.

    ``provider`` is a provider name (its GUID is derived as ``*Name`` tools do) or a GUID in
    text; ``level`` the most verbose level delivered (None: all); ``keyword`` the session's
    MatchAnyKeyword (None: all; events with keyword 0 always match).  Raises
    :class:`EtwListenError` when the session cannot be set up (and leaves none behind).
    """

    def __init__(
        self,
        provider: str,
        *,
        level: int | None = None,
        keyword: int | None = None,
        name: str | None = None,
        buffer_kb: int = 64,
        max_buffered_bytes: int = DEFAULT_BUFFERED_BYTES,
        library: str | Sequence[str] | None = None,
    ) -> None:
        if level is not None and not valid_level(level):
            raise EtwListenError(f"level {level} out of range 1..255")
        if keyword is not None and not valid_keyword(keyword):
            raise EtwListenError("keyword out of range 0..2**64-1")
        self.provider_name, self.provider_id = _provider_guid(provider)
        self._provider_guid = self.provider_id.bytes_le
        self.name = name if name is not None else session_name(self.provider_name or str(self.provider_id))
        if not 0 < len(self.name) <= _NAME_MAX or "\0" in self.name:
            raise EtwListenError(f"bad session name {self.name!r}")
        self.level = level or 0
        self.keyword = keyword or 0
        self.lost = 0  #: records dropped because the queue was full
        self.skipped = 0  #: records of other providers (not shown)
        self.stale_stopped = False  #: a session of this name was left over and has been stopped
        self.process_result: int | None = None  #: what ProcessTrace returned (after close)
        self._api = _Api(library)
        self._max_bytes = max_buffered_bytes
        self._queued_bytes = 0
        self._queue: deque[RawRecord] = deque()
        self._cond = threading.Condition()
        self._session = 0
        self._trace = abi.INVALID_PROCESSTRACE_HANDLE
        self._thread: threading.Thread | None = None
        self._closed = False
        self._callback = self._api.callback_type(self._on_record)  # alive as long as the trace
        self._name_w = abi.wide(self.name)
        _OPEN.add(self)
        try:
            self._start(buffer_kb)
            self._enable()
            self._open()
        except BaseException:
            self.close()
            raise

    # -- set-up --------------------------------------------------------------------------------

    def _start(self, buffer_kb: int) -> None:
        for attempt in (0, 1):
            props = _Properties(self.name)
            props.props.BufferSize = buffer_kb
            props.props.LogFileMode = abi.EVENT_TRACE_REAL_TIME_MODE
            props.props.FlushTimer = 1  # seconds: real-time buffers reach us within a second
            handle = ctypes.c_uint64(0)
            rc = self._api.start(ctypes.byref(handle), self._name_w, props.pointer())
            if rc == 0:
                self._session = handle.value
                return
            if rc == abi.ERROR_ALREADY_EXISTS and attempt == 0:
                # A session of this name outlived its process: stop it, then start ours.
                _stop_by_name(self._api, self.name)
                self.stale_stopped = True
                continue
            if rc == abi.ERROR_ACCESS_DENIED:
                raise EtwListenError("starting an ETW session needs administrator rights (error 5)")
            raise EtwListenError(f"StartTraceW({self.name!r}) failed with error {rc}")

    def _enable(self) -> None:
        params = abi.ENABLE_TRACE_PARAMETERS()
        params.Version = abi.ENABLE_TRACE_PARAMETERS_VERSION_2
        guid = abi.GUID.from_uuid(self.provider_id)
        rc = self._api.enable(
            self._session,
            ctypes.byref(guid),
            abi.EVENT_CONTROL_CODE_ENABLE_PROVIDER,
            self.level,
            self.keyword,
            0,
            _ENABLE_TIMEOUT_MS,  # wait for the provider's enable callback (if it is registered)
            ctypes.byref(params),
        )
        if rc != 0:
            raise EtwListenError(f"EnableTraceEx2({self.provider_id}) failed with error {rc}")

    def _open(self) -> None:
        logfile = abi.EVENT_TRACE_LOGFILEW()
        logfile.LoggerName = ctypes.addressof(self._name_w)
        logfile.ProcessTraceMode = abi.PROCESS_TRACE_MODE_REAL_TIME | abi.PROCESS_TRACE_MODE_EVENT_RECORD
        logfile.EventRecordCallback = ctypes.cast(self._callback, ctypes.c_void_p).value
        handle = int(self._api.open(ctypes.byref(logfile)))
        if handle == abi.INVALID_PROCESSTRACE_HANDLE:
            raise EtwListenError(f"OpenTraceW({self.name!r}) failed with error {self._api.last_error()}")
        self._trace = handle
        self._thread = threading.Thread(target=self._process, name=f"ProcessTrace {self.name}", daemon=True)
        self._thread.start()

    # -- the consumer thread -----------------------------------------------------------------------

    def _process(self) -> None:  # the ProcessTrace thread
        handles = (ctypes.c_uint64 * 1)(self._trace)
        try:
            self.process_result = int(self._api.process(handles, 1, None, None))
        finally:
            with self._cond:
                self._cond.notify_all()

    def _on_record(self, record: Any) -> None:
        """The EventRecordCallback: copy and queue (never raises into ETW's thread)."""
        try:
            contents = record.contents
            if bytes(contents.EventHeader.ProviderId) != self._provider_guid:  # not ours: copy nothing
                self.skipped += 1
                return
            raw = _copy_record(contents)
            with self._cond:
                if self._queued_bytes + raw.size > self._max_bytes:
                    self.lost += 1
                    return
                self._queue.append(raw)
                self._queued_bytes += raw.size
                self._cond.notify_all()
        except Exception:
            self.lost += 1

    # -- reading -----------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether ProcessTrace is still delivering events."""
        return self._thread is not None and self._thread.is_alive()

    def poll(self, timeout: float) -> list[ListenedEvent]:
        """The events that arrived, waiting up to ``timeout`` seconds for the first one."""
        with self._cond:
            if not self._queue and self.running:
                self._cond.wait(timeout)
            raws = list(self._queue)
            self._queue.clear()
            self._queued_bytes = 0
        return [decode_raw(raw, self.provider_name) for raw in raws]

    def drain(self) -> list[ListenedEvent]:
        """Stop the session (ETW flushes its buffers to us), then every event not yet polled."""
        self.close()
        return self.poll(0)

    # -- tear-down ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the session, wait for ProcessTrace to return, close the trace.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        session, self._session = self._session, 0
        if session:
            props = _Properties(self.name)
            with contextlib.suppress(Exception):
                self._api.control(session, self._name_w, props.pointer(), abi.EVENT_TRACE_CONTROL_STOP)
        thread = self._thread if self._thread is not None and self._thread.ident is not None else None
        if thread is not None:
            thread.join(_JOIN_SECONDS)
        trace, self._trace = self._trace, abi.INVALID_PROCESSTRACE_HANDLE
        if trace != abi.INVALID_PROCESSTRACE_HANDLE:
            with contextlib.suppress(Exception):
                self._api.close(trace)  # 0, or ERROR_CTX_CLOSE_PENDING while ProcessTrace finishes
        if thread is not None and thread.is_alive():
            thread.join(_JOIN_SECONDS)

    def __enter__(self) -> EtwListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def run(
    listener: EtwListener,
    emit: Callable[[ListenedEvent], None],
    *,
    count: int | None = None,
    duration: float | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """Feed ``listener``'s events to ``emit`` until ``count`` events, ``duration`` seconds or ``stop()``.

    Like :func:`structlog_etw.perf.listener.run`: the session is stopped at the end and what it
    still delivers is shown (also when interrupted).  Returns the number of events emitted.
    """
    try:
        return pump(
            listener.poll,
            listener.drain,
            emit,
            lambda lost: None,  # none come in line: the listener counts what it drops in .lost
            count=count,
            duration=duration,
            stop=stop,
            running=lambda: listener.running,
        )
    finally:
        listener.close()
