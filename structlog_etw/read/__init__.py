"""Decoding: event bytes -> :class:`~structlog_etw.read.decoded.DecodedEvent`, and its text.

* :mod:`structlog_etw.read.decoded` - what every decoder returns and raises;
* :mod:`structlog_etw.read.live` - what a live reader yields, and the read loop;
* :mod:`structlog_etw.read.sample` - what the writers read of a perf.data sample (protocols);
* :mod:`structlog_etw.read.decode` - one decoder per format;
* :mod:`structlog_etw.read.writers` - decoded events as text (perf-decode's JSON).

Nothing here loads the write side (:mod:`structlog_etw.write`).
"""

__all__: list[str] = []
