"""structlog_etw.otel against the OpenTelemetry SDK's own exporters, in the same run.

    python benchmarks/otel_exporters.py [--quick] [--out docs/benchmarks/otel_exporters.json]

Per exported item (a log record from the stdlib ``LoggingHandler`` with five attributes inside a
span, or an ended span with three attributes and a link), each figure the median ns of an
``export(batch)`` call divided by the batch size, timed round-robin with its baselines
(``_timing.py``: thread CPU time):

* ``console``: the SDK's ``ConsoleLogRecordExporter`` / ``ConsoleSpanExporter`` writing to
  ``/dev/null`` (its JSON text, one ``write`` and a ``flush`` per batch);
* ``otlp``: the OTLP exporters' serialisation, ``encode_logs`` / ``encode_spans`` of
  ``opentelemetry-exporter-otlp-proto-common`` and ``SerializeToString()`` (what the OTLP
  exporters do before the network: no network here);
* ``ours``: ``EtwLogExporter`` / ``EtwSpanExporter`` through a provider whose backend makes the
  user_events backend's system call per event, ``os.writev`` into ``/dev/null``
  (``_ours.WritevBackend``), with a session "listening";
* ``ours_disabled``: the same with no session: what an export costs when nobody records.

Batches of 1 (``SimpleLogRecordProcessor``) and 64 records.  docs/otel-exporters.md shows the
ratios; tests/otel/test_exporters.py holds that page equal to the results file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from _ours import provider  # noqa: E402
from _timing import Case, measure_group  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler  # noqa: E402
from opentelemetry.sdk._logs.export import (  # noqa: E402
    ConsoleLogRecordExporter,
    LogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter  # noqa: E402

from structlog_etw.otel import EtwLogExporter, EtwSpanExporter  # noqa: E402

BATCHES = (1, 64)
RESOURCE = Resource.create({"service.name": "checkout", "service.instance.id": "pod-7"})


class _Keep(LogRecordExporter):
    """Keeps what the SDK hands an exporter (the records of each ``export``)."""

    def __init__(self, into: list[Any]) -> None:
        self.into = into

    def export(self, batch: Any) -> Any:
        self.into.extend(batch)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class _KeepSpans(SpanExporter):
    def __init__(self, into: list[Any]) -> None:
        self.into = into

    def export(self, spans: Any) -> Any:
        self.into.extend(spans)


def log_records(n: int) -> list[Any]:
    """``n`` records as the SDK hands them to an exporter: stdlib warnings inside a span."""
    got: list[Any] = []
    logs = LoggerProvider(resource=RESOURCE)
    logs.add_log_record_processor(SimpleLogRecordProcessor(_Keep(got)))
    log = logging.getLogger("bench.otel")
    log.handlers = [LoggingHandler(logger_provider=logs)]
    log.propagate = False
    tracer = TracerProvider(resource=RESOURCE).get_tracer("bench")
    extra = {"user": "ann", "attempts": 3, "latency_ms": 12.5, "ok": True, "region": "eu-west-1"}
    with tracer.start_as_current_span("request"):
        for i in range(n):
            log.warning("cart %s slow", i, extra=extra)
    return got


def spans(n: int) -> list[Any]:
    """``n`` ended spans with three attributes and one link."""
    got: list[Any] = []
    tp = TracerProvider(resource=RESOURCE)
    tp.add_span_processor(SimpleSpanProcessor(_KeepSpans(got)))
    tracer = tp.get_tracer("bench")
    with tracer.start_as_current_span("warmup") as first:
        pass
    got.clear()
    link = trace.Link(first.get_span_context())
    for i in range(n):
        attrs = {"http.request.method": "GET", "url.full": f"https://example.com/{i}", "items": 3}
        with tracer.start_as_current_span("GET /cart", links=[link], attributes=attrs):
            pass
    return got


def _exporter(cls: Any, *, enabled: bool) -> Any:
    prov = provider(enabled)  # _ours: a WritevBackend (os.writev into /dev/null per event)
    return cls(prov.name, provider=prov)


def _cases(kind: str, batch: list[Any]) -> list[Case]:
    devnull = open(os.devnull, "w")  # noqa: SIM115 - lives for the benchmark
    if kind == "logs":
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs  # noqa: PLC0415

        console: Any = ConsoleLogRecordExporter(out=devnull)
        ours = _exporter(EtwLogExporter, enabled=True)
        off = _exporter(EtwLogExporter, enabled=False)
        encode: Any = encode_logs
    else:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: PLC0415

        console = ConsoleSpanExporter(out=devnull)
        ours = _exporter(EtwSpanExporter, enabled=True)
        off = _exporter(EtwSpanExporter, enabled=False)
        encode = encode_spans
    ns = {"batch": batch, "console": console, "ours": ours, "off": off, "encode": encode}
    return [
        Case("console", "SDK console exporter to /dev/null", "console.export(batch)", ns),
        Case("otlp", "OTLP serialisation", "encode(batch).SerializeToString()", ns),
        Case("ours", "structlog_etw.otel, writev per event", "ours.export(batch)", ns),
        Case("ours_disabled", "structlog_etw.otel, nobody listening", "off.export(batch)", ns),
    ]


def run(quick: bool) -> dict[str, Any]:
    """Every comparison; ns per item and the ratios ours / baseline."""
    rounds, round_s = (5, 0.05) if quick else (15, 0.2)
    out: dict[str, Any] = {}
    for kind, make in (("logs", log_records), ("spans", spans)):
        for size in BATCHES:
            batch = make(size)
            assert len(batch) == size
            got = measure_group(_cases(kind, batch), rounds, round_s)
            per_item = {k: m.ns / size for k, m in got.items()}
            key = f"{kind}_batch{size}"
            out[key] = {
                "ns_per_item": {k: round(v, 1) for k, v in per_item.items()},
                "ours_vs_console": round(per_item["ours"] / per_item["console"], 2),
                "ours_vs_otlp": round(per_item["ours"] / per_item["otlp"], 2),
                "disabled_vs_console": round(per_item["ours_disabled"] / per_item["console"], 3),
            }
            print(key, json.dumps(out[key]), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few short rounds (a smoke test)")
    parser.add_argument("--out", default=str(HERE.parent / "docs" / "benchmarks" / "otel_exporters.json"))
    args = parser.parse_args(argv)
    import importlib.metadata as md  # noqa: PLC0415

    results = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "opentelemetry-sdk": md.version("opentelemetry-sdk"),
        "opentelemetry-exporter-otlp-proto-common": md.version("opentelemetry-exporter-otlp-proto-common"),
        "quick": args.quick,
        "results": run(args.quick),
    }
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
