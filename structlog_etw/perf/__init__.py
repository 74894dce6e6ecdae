"""Reading what perf and the kernel record: perf.data files, tracefs formats, live listening.

* :mod:`~structlog_etw.perf.datafile` - :class:`PerfDataFile` (and :func:`read_samples`): the
  samples of a ``perf record`` file (:class:`Sample`: tracepoint name, time, cpu, pid/tid, raw data).
* :mod:`~structlog_etw.perf.samples` - :func:`decode_sample`: a sample ->
  :class:`~structlog_etw.read.decoded.DecodedEvent` (EventHeader events and plain kernel tracepoints).
* :mod:`~structlog_etw.perf.tracefs_format` - :func:`parse_format`: a tracepoint's tracefs
  ``format`` (:class:`TracepointFormat`, :class:`FormatField`) and plain-field decoding.
* :mod:`~structlog_etw.perf.listener` - :class:`Listener`: a provider's user_events read live
  through ``perf_event_open`` (Linux, root), no perf binary.
* Below them: :mod:`~structlog_etw.perf.abi` (the perf ABI's numbers),
  :mod:`~structlog_etw.perf.records` (the one layout and parser of sample records, and lost records),
  :mod:`~structlog_etw.perf.ring` (records out of a kernel ring buffer) and
  :mod:`~structlog_etw.perf.perf_event_open` (the system call; Linux only, imported by name).

Importing this package works on every OS and imports nothing else: each name loads its module
on first use (PEP 562), so that ``structlog-etw decode`` (which imports
:mod:`~structlog_etw.perf.datafile`) does not load the listener, and the Linux-only machinery is
loaded only when a :class:`Listener` starts::

    from structlog_etw.perf import PerfDataFile, decode_sample

    with PerfDataFile.open("perf.data") as f:
        for sample in f.samples():
            if sample.is_eventheader:
                print(sample.realtime_ns, decode_sample(sample).name)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from .datafile import PerfDataError, PerfDataFile, Sample, read_samples
    from .listener import ListenedEvent, Listener, ListenError, LostEvents, match_tracepoint
    from .samples import SampleDecodeError, decode_sample
    from .tracefs_format import FormatField, TracepointFormat, eventheader_offset, parse_format

#: Public name -> the module (below this package) that defines it.
_EXPORTS: dict[str, str] = {
    "FormatField": ".tracefs_format",
    "ListenError": ".listener",
    "ListenedEvent": ".listener",
    "Listener": ".listener",
    "LostEvents": ".listener",
    "PerfDataError": ".datafile",
    "PerfDataFile": ".datafile",
    "Sample": ".datafile",
    "SampleDecodeError": ".samples",
    "TracepointFormat": ".tracefs_format",
    "decode_sample": ".samples",
    "eventheader_offset": ".tracefs_format",
    "match_tracepoint": ".listener",
    "parse_format": ".tracefs_format",
    "read_samples": ".datafile",
}

__all__ = [
    "FormatField",
    "ListenError",
    "ListenedEvent",
    "Listener",
    "LostEvents",
    "PerfDataError",
    "PerfDataFile",
    "Sample",
    "SampleDecodeError",
    "TracepointFormat",
    "decode_sample",
    "eventheader_offset",
    "match_tracepoint",
    "parse_format",
    "read_samples",
]

__getattr__, __dir__ = _lazy_exports(globals(), _EXPORTS)
