"""Decoded events as text: :mod:`structlog_etw.read.writers.perf_json` (perf-decode's JSON)."""

__all__: list[str] = []
