"""Reading ETW: a real-time session for one provider (Windows), and .etl files (any OS).

* :mod:`~structlog_etw.etw.consumer` - :class:`EtwListener`: starts a named real-time session
  (``StartTraceW``), enables a provider by GUID with a level and a keyword (``EnableTraceEx2``),
  consumes it on a thread (``OpenTraceW``, ``ProcessTrace``) and decodes every ``EVENT_RECORD``
  with the TraceLogging decoder into the :class:`~structlog_etw.read.live.ListenedEvent`
  items the Linux listener yields; it stops and closes the session on exit.
* :mod:`~structlog_etw.etw.etl` - :class:`EtlFile`: the records of an .etl file (what logman,
  wpr, tracelog and PerfView record), TraceLogging events decoded, times in UTC from the file's
  clock; pure Python, on every OS.
* :mod:`~structlog_etw.etw.abi` - the numbers and the ctypes structures of the ETW controller
  and consumer API in the Windows x64 layout (sizes and offsets from the SDK headers).

Importing works on every OS (each name loads its module on first use); starting a session needs
Windows and administrator rights::

    from structlog_etw.etw import EtwListener

    with EtwListener("MyCompany_MyService", level=5) as listener:
        for event in listener.poll(1.0):
            print(event.decoded.name if event.decoded else event.error)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from .consumer import (
        DEFAULT_BUFFERED_BYTES,
        EtwListener,
        EtwListenError,
        RawRecord,
        decode_raw,
        run,
        session_name,
        stop_session,
    )
    from .etl import EtlError, EtlEvent, EtlFile, EtlHeader, is_etl

__all__ = [
    "DEFAULT_BUFFERED_BYTES",
    "EtlError",
    "EtlEvent",
    "EtlFile",
    "EtlHeader",
    "EtwListenError",
    "EtwListener",
    "RawRecord",
    "decode_raw",
    "is_etl",
    "run",
    "session_name",
    "stop_session",
]

#: Names loaded on first use, and the module that has them: reading an .etl file loads neither the
#: ctypes consumer nor what it needs (``ctypes``, the ETW functions' loader).
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "DEFAULT_BUFFERED_BYTES",
            "EtwListener",
            "EtwListenError",
            "RawRecord",
            "decode_raw",
            "run",
            "session_name",
            "stop_session",
        ),
        ".consumer",
    ),
    **dict.fromkeys(("EtlError", "EtlEvent", "EtlFile", "EtlHeader", "is_etl"), ".etl"),
}

__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)
