"""Event encoding: a Python value becomes a typed field, a typed field becomes bytes.

* :mod:`structlog_etw.write.fields` - the type table (Python value -> field kind);
* :mod:`structlog_etw.write.eventheader` - :class:`~structlog_etw.write.eventheader.EventHeaderEncoder`
  (Linux user_events);
* :mod:`structlog_etw.write.tracelogging` -
  :class:`~structlog_etw.write.tracelogging.TraceLoggingEncoder` (Windows ETW);
* :mod:`structlog_etw.write.shapes` - the per-shape encode functions both encoders share (and
  the optional compiled packer).

Nothing of the read side (:mod:`structlog_etw.read`, :mod:`structlog_etw.perf`,
:mod:`structlog_etw.etw`) nor :mod:`structlog_etw.formats` or :mod:`structlog_etw.backends`
imports this package.
"""

__all__: list[str] = []
