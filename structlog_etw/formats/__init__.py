"""The numbers and layouts both directions share: what the encoders write and the decoders read.

* :mod:`structlog_etw.formats.eventheader` - EventHeader (Linux user_events): wire numbers, size
  limits, tracepoint names and provider-name rules;
* :mod:`structlog_etw.formats.tracelogging` - TraceLogging (Windows ETW): InType / OutType, the
  channel, provider ids, group GUIDs, provider traits;
* :mod:`structlog_etw.formats.header` - :class:`~structlog_etw.formats.header.Header`, the level,
  opcode, tag and activity ids of one event.

These modules import only the standard library.
"""

__all__: list[str] = []
