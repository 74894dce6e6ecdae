"""Issue 28 in a real kernel: the OpenTelemetry SDK exporters' events in perf, and tracing that starts
before the app (``structlog-etw tracepoints --register`` / ``--persist``), recorded by real perf and
decoded by the project's perf.data reader and EventHeader decoder (marker ``kernel``)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog
from kernel_harness import PerfSession, wait_until
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from structlog_etw import EtwRenderer, Provider
from structlog_etw.backends.user_events import find_tracefs
from structlog_etw.otel import EtwLogExporter, EtwSpanExporter
from tests.helpers.common_schema_collectors import otel_arrow_attributes, read_like_geneva

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.filterwarnings("ignore:.*LoggingHandler.*:DeprecationWarning"),
]

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _app_logs_its_first_event(provider: str) -> None:
    """The application starting: its own provider registers the tracepoints (the kernel reuses the
    held ones) and it logs at keyword 0x4 as its very first act."""
    prov = Provider(provider, default_keyword=0x4)
    try:
        renderer = EtwRenderer(provider, provider=prov, default_keyword=0x4)
        log = structlog.wrap_logger(None, processors=[renderer])
        log.info("first_event", n=1)
        assert prov.stats()["written"] == 1, prov.stats()
    finally:
        prov.close()


def _status_names() -> set[str]:
    where = find_tracefs()
    assert where is not None
    text = Path(where, "user_events_status").read_text()
    return {line.split(" ", 1)[0] for line in text.splitlines() if line and not line.startswith(" ")}


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "structlog_etw", "tracepoints", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
        check=False,
    )


class TestExportersInPerf:
    """The SDK exporters' Log and Span events, recorded by perf from the real kernel."""

    def test_log_and_span_events_decode_and_the_collectors_promote_them(
        self, provider_name: str, perf_session: Callable[..., PerfSession]
    ) -> None:
        """An SDK app's records and spans arrive in perf.data: our decoder reads their layout, and the
        samples' bytes read with the receiver's and Geneva's rules give body, severity and ids."""
        provider = Provider(provider_name)
        resource = Resource.create({"service.name": "checkout"})
        logs = LoggerProvider(resource=resource)
        log_exporter = EtwLogExporter(provider_name, provider=provider)
        logs.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
        spans = TracerProvider(resource=resource)
        spans.add_span_processor(SimpleSpanProcessor(EtwSpanExporter(provider_name, provider=provider)))
        tracer = spans.get_tracer("shop")
        log = logging.getLogger(f"shop.{provider_name}")
        log.handlers = [LoggingHandler(logger_provider=logs)]
        log.propagate = False
        try:
            with perf_session([f"{provider_name}_L3K1", f"{provider_name}_L4K1"]) as session:
                wait_until(lambda: provider.enabled(3, 1) and provider.enabled(4, 1), what="perf to enable")
                with tracer.start_as_current_span("warmup") as warmup:
                    pass
                link = trace.Link(warmup.get_span_context())
                with tracer.start_as_current_span(
                    "GET /cart", links=[link], attributes={"tags": ("a", "b")}
                ) as request:
                    log.warning("cart slow", extra={"n": 1, "sizes": [1, 2]})
        finally:
            logs.shutdown()
            spans.shutdown()
            provider.close()
        events = [e for e in session.events() if e.provider == provider_name]
        assert [e.name for e in events] == ["Span", "Log", "Span"]
        _, record, span = events
        ctx = request.get_span_context()
        assert record.fields["PartB"]["body"] == "cart slow"
        assert record.fields["PartC"]["sizes"] == [1, 2]
        assert record.fields["PartA"]["ext_dt_spanId"] == f"{ctx.span_id:016x}"
        assert span.fields["PartB"]["links"].startswith('[{"toTraceId":"')
        assert span.fields["PartC"] == {"tags": ["a", "b"]}
        samples = [s for s in session.samples() if s.name.startswith(f"user_events:{provider_name}_")]
        geneva = read_like_geneva(samples[1].data)
        assert geneva.common_schema and geneva.body == "cart slow" and geneva.severity_number == 13
        assert geneva.trace_id == ctx.trace_id.to_bytes(16, "big") and geneva.role == "checkout"
        assert ("PartB.name", "GET /cart") in otel_arrow_attributes(samples[2].data)


class TestTracingBeforeTheApp:
    """``tracepoints --register`` / ``--persist``: perf starts first and catches the app's first event."""

    def test_without_registration_perf_refuses_the_tracepoint(
        self, provider_name: str, perf_session: Callable[..., PerfSession]
    ) -> None:
        """The problem: perf started before the app cannot open a tracepoint nobody registered."""
        with pytest.raises(AssertionError, match=r"perf (exited|record failed)"):
            perf_session([f"{provider_name}_L4K4"], label="refused").start()

    def test_register_lets_perf_start_before_the_app_and_catch_its_first_event(
        self, provider_name: str, perf_session: Callable[..., PerfSession]
    ) -> None:
        """``--register`` holds the tracepoints; perf starts; the app's own registration reuses them
        and its first event is recorded; on SIGINT the holder exits 0 and the tracepoints go."""
        holder = subprocess.Popen(
            [sys.executable, "-m", "structlog_etw", "tracepoints", provider_name, "-k", "0x4", "--register"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        try:
            assert holder.stdout is not None
            lines = []
            for line in holder.stdout:
                lines.append(line)
                if line.startswith("# Holding"):
                    break
            assert f"{provider_name}_L4K4\n" in lines, (lines, holder.stderr.read() if holder.stderr else "")
            with perf_session([f"{provider_name}_L4K4"]) as session:
                _app_logs_its_first_event(provider_name)
        finally:
            holder.send_signal(signal.SIGINT)
            assert holder.wait(timeout=60) == 0
        (first,) = [e for e in session.events() if e.provider == provider_name]
        assert (first.name, first.fields) == ("first_event", {"n": 1})
        wait_until(lambda: f"{provider_name}_L4K4" not in _status_names(), what="the tracepoint to go")

    def test_register_holds_them_for_the_life_of_a_command(self, provider_name: str) -> None:
        """``--register -- COMMAND``: the tracepoints exist while COMMAND runs; its exit status is ours."""
        name = f"{provider_name}_L4K4"
        status = Path(str(find_tracefs()), "user_events_status")
        probe = ["sh", "-c", 'grep -q "^$1\\( \\|$\\)" "$2" && exit 7; exit 1', "probe", name, str(status)]
        done = _cli(provider_name, "-k", "0x4", "-l", "4", "--register", "--", *probe)
        assert done.returncode == 7, done.stderr
        wait_until(lambda: name not in _status_names(), what="the tracepoint to go")

    def test_persist_outlives_the_command_until_deleted(
        self, provider_name: str, perf_session: Callable[..., PerfSession]
    ) -> None:
        """``--persist`` (6.12 guest, root): the tracepoints stay after the command exits, perf records
        the app's first event on them, and ``--delete`` removes them."""
        name = f"{provider_name}_L4K4"
        done = _cli(provider_name, "-k", "0x4", "-l", "4", "--persist")
        assert done.returncode == 0, done.stderr
        assert "persistent" in done.stdout
        try:
            time.sleep(1.0)  # a non-persistent tracepoint would be deleted by now (delayed work)
            assert name in _status_names()
            with perf_session([name]) as session:
                _app_logs_its_first_event(provider_name)
            (first,) = [e for e in session.events() if e.provider == provider_name]
            assert first.name == "first_event"
        finally:
            deleted = _cli(provider_name, "-k", "0x4", "-l", "4", "--delete")
        assert deleted.returncode == 0, deleted.stderr
        assert f"{name}: deleted" in deleted.stdout
        assert name not in _status_names()

    def test_persist_without_the_privilege_says_what_is_missing(self, provider_name: str) -> None:
        """Without CAP_PERFMON and CAP_SYS_ADMIN (dropped with util-linux's setpriv) ``--persist``
        fails with a message naming the capability, and leaves no tracepoint behind."""
        drop = "-perfmon,-sys_admin"
        done = subprocess.run(
            ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", "--", sys.executable, "-m",
             "structlog_etw", "tracepoints", provider_name, "-l", "4", "--persist"],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=120,
            check=False,
        )  # fmt: skip
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "CAP_PERFMON" in done.stderr
        wait_until(lambda: f"{provider_name}_L4K1" not in _status_names(), what="no tracepoint left")
