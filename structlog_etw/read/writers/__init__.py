"""Decoded events as text, one module per output, each with its fast plan for perf.data samples
beside its :class:`~structlog_etw.read.decoded.DecodedEvent` writer:
:mod:`~structlog_etw.read.writers.perf_json` (perf-decode's JSON),
:mod:`~structlog_etw.read.writers.json_lines` (one JSON object per line),
:mod:`~structlog_etw.read.writers.console` (console text),
:mod:`~structlog_etw.read.writers.chrome_trace` (a Chrome / Perfetto timeline)."""

__all__: list[str] = []
