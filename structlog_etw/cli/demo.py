"""``structlog-etw demo``: a short, realistic structlog session written as trace events (docs/cli/demo.md).

Where user_events works (and this process may listen: root), it registers the demo
provider, prints the ``perf record`` command that would watch it, and runs
``listen`` in-process (a thread reading the ring buffers) so the events show up
live.  Anywhere else it says why, and shows the same events from an in-process
capture (exactly the bytes the kernel would have received), decoded by the
project's decoder.  It never needs root to run.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import ipaddress
import os
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .output import add_color_arguments, use_color

if TYPE_CHECKING:
    from .. import Provider

__all__ = ["ORDERS_KEYWORD", "PROVIDER", "add_arguments", "demo", "listen_command", "log_sequence", "run"]

#: The demo's provider name (tracepoints ``StructlogEtw_Demo_L<level>K<keyword>``).
PROVIDER = "StructlogEtw_Demo"
#: The keyword the demo's order events use (the rest use the default keyword 1).
ORDERS_KEYWORD = 0x2


def log_sequence(log: Any) -> int:
    """Log the demo's events through ``log`` (a structlog logger); return how many were written.

    One request: an activity (Start and Stop events; every event inside carries its id),
    bound context, fields of every kind, a warning and a logged exception.
    """
    from .. import etw_activity  # noqa: PLC0415

    req = log.bind(
        request_id=uuid.UUID("6f1c2a4e-8d3b-4c5a-9e7f-0123456789ab"),
        client=ipaddress.ip_address("192.0.2.10"),
    )
    with etw_activity(req, "HandleRequest", method="GET", path="/orders/42") as activity:
        req.info("request_started", secure=True, attempt=1)
        req.debug("cache_lookup", key="orders:42", hit=False, elapsed_ms=0.42)
        req.info(
            "order_loaded",
            etw_keyword=ORDERS_KEYWORD,
            order_id=42,
            items=["apple", "pear"],
            quantities=[3, 1],
            total=19.99,
            customer={"name": "ann", "tier": 2},
            signature=b"\x8a\x01\xfe",
            server=ipaddress.ip_address("2001:db8::1"),
            created=_dt.datetime(2026, 11, 29, 9, 30, tzinfo=_dt.timezone.utc),
        )
        req.warning("slow_query", table="orders", duration_ms=812.5, threshold_ms=500)
        discounts: dict[str, float] = {}
        try:
            discounts["spring_sale"]  # the demo's exception
        except KeyError:
            req.exception("discount_lookup_failed", order_id=42)
        activity.record(status=200)
    req.info("request_finished", status=200, bytes_sent=1536)
    return 8


def _make_logger(provider: Provider | None = None) -> Any:
    """A filtering-free structlog logger writing through an :class:`EtwRenderer` for the demo's
    provider: the process-wide one (OS backend), or ``provider``."""
    import structlog  # noqa: PLC0415

    from .. import EtwRenderer  # noqa: PLC0415

    renderer = EtwRenderer(PROVIDER, keywords=(ORDERS_KEYWORD,), provider=provider)
    logger = structlog.wrap_logger(
        None,
        processors=[renderer],
        wrapper_class=structlog.make_filtering_bound_logger(0),
    )
    return logger, renderer.provider


def _perf_command(tracepoints: list[str]) -> str:
    events = " ".join(f"-e user_events:{tp}" for tp in tracepoints)
    return f"perf record -a -k monotonic {events}"


def demo(*, json_lines: bool = False, colors: bool = False, capture: bool = False) -> int:
    """Run the demo, printing to stdout (status lines go to stderr with ``json_lines``); the exit code.

    ``capture``: show the in-process capture even where user_events works.
    """
    from .listen import make_printer  # noqa: PLC0415

    out = sys.stdout
    emit = make_printer(json_lines, colors, out)
    status = sys.stderr if json_lines else out

    def say(text: str) -> None:
        print(text, file=status, flush=True)

    say(f"structlog-etw demo: provider {PROVIDER}")
    reason = _user_events_reason()
    if reason is None and not capture:
        shown = _live(emit, say)
        if shown is not None:
            return shown
    elif reason is not None:
        say(f"user_events is not available here: {reason}")
        say("On Linux 6.4+ with user_events these events become tracepoints; watch them live with")
        say(f"  sudo {listen_command()} {PROVIDER}")
    say("The same events from an in-process capture (the exact bytes the kernel would get), decoded:")
    _captured(emit)
    return 0


def listen_command() -> str:
    """How to run ``structlog-etw listen`` under ``sudo``, whose ``PATH`` has no venv in it.

    The absolute path of the ``structlog-etw`` console script installed beside this interpreter
    (a venv's ``bin/``, where the README's install puts it), else ``<this python> -m structlog_etw``.
    """
    import shlex  # noqa: PLC0415
    import shutil  # noqa: PLC0415

    bindir = os.path.dirname(os.path.abspath(sys.executable))
    script = os.path.join(bindir, "structlog-etw.exe" if sys.platform == "win32" else "structlog-etw")
    if not os.path.isfile(script):
        found = shutil.which("structlog-etw")
        script = os.path.abspath(found) if found else ""
    if script:
        return f"{shlex.quote(script)} listen"
    return f"{shlex.quote(os.path.abspath(sys.executable))} -m structlog_etw listen"


def _user_events_reason() -> str | None:
    from ..backends.base import BackendUnavailable  # noqa: PLC0415

    if not sys.platform.startswith("linux"):
        return f"user_events is Linux-only (this is {sys.platform})"
    try:
        from ..backends.user_events import UserEventsBackend  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover - part of the package
        return f"the user_events backend cannot be imported: {e}"
    try:
        probe = UserEventsBackend(PROVIDER)
    except BackendUnavailable as e:
        return str(e)
    probe.close()
    return None


def _live(emit: Callable[[Any], None], say: Callable[[str], None]) -> int | None:
    """Log with user_events and show the events live; None when listening is impossible (said why)."""
    from ..perf.listener import Listener, ListenError, LostEvents, run  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log, provider = _make_logger()
    tracepoints = sorted(
        provider.backend.tracepoint_name(level, kw) for level in range(1, 6) for kw in (1, ORDERS_KEYWORD)
    )
    say(f"user_events: registered {len(tracepoints)} tracepoints ({tracepoints[0]} ... {tracepoints[-1]})")
    say("Watch them from another terminal (as root) with perf:")
    say(f"  {_perf_command(tracepoints)}")
    say(f"or without perf: sudo {listen_command()} {PROVIDER}")
    try:
        listener = Listener(PROVIDER, register=False)
    except ListenError as e:
        say(f"cannot listen in-process: {e}")
        provider.close()
        return None
    # The kernel may set the enable words a moment after perf attaches: wait (briefly) for them.
    probe = provider.slot(5, 1)
    deadline = time.monotonic() + 5
    while not probe.enabled and time.monotonic() < deadline:
        time.sleep(0.02)
    stop = threading.Event()
    lost: list[LostEvents] = []
    thread = threading.Thread(
        target=run,
        args=(listener, emit, lost.append),
        kwargs={"stop": stop.is_set},
        daemon=True,
        name="listen",
    )
    say(f"Listening in-process (structlog-etw listen {PROVIDER}); logging:")
    thread.start()
    try:
        expected = log_sequence(log)
        deadline = time.monotonic() + 30
        while listener.events < expected and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(10)
        listener.close()
        provider.close()
    shown = listener.events
    say(f"{shown} of {expected} events seen live" + (f", {sum(x.count for x in lost)} lost" if lost else ""))
    return 0 if shown >= expected else 1


def _captured(emit: Callable[[Any], None]) -> None:
    """Log the sequence to a capture backend of a provider of the demo's own (the process-wide
    providers are left alone) and show what was captured, decoded."""
    from .. import Provider  # noqa: PLC0415
    from ..backends.capture import CaptureBackend  # noqa: PLC0415
    from ..perf.listener import ListenedEvent  # noqa: PLC0415
    from ..read.decode.eventheader import decode_event  # noqa: PLC0415

    stamps: list[tuple[int, int]] = []

    class _StampedCapture(CaptureBackend):
        # The kernel stamps time and thread; a capture has to do it itself.
        def write(self, *args: Any, **kwargs: Any) -> int:
            rc = super().write(*args, **kwargs)
            if rc == 0:
                stamps.append((time.time_ns(), threading.get_native_id()))
            return rc

    backend = _StampedCapture(PROVIDER)
    provider = Provider(PROVIDER, keywords=(ORDERS_KEYWORD,), backend=backend)
    try:
        log, _ = _make_logger(provider)
        log_sequence(log)
    finally:
        provider.close()
    pid = os.getpid()
    for rec, (ns, tid) in zip(backend.records, stamps, strict=False):
        try:
            ev = ListenedEvent(
                rec.tracepoint, None, ns, None, pid, tid, decode_event(rec.tracepoint, rec.event)
            )
        except Exception as e:
            ev = ListenedEvent(rec.tracepoint, None, ns, None, pid, tid, None, str(e), rec.event)
        emit(ev)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``demo`` arguments."""
    parser.description = (
        "Log a short, realistic structlog sequence through EtwRenderer and show the events it becomes: "
        "live through user_events where this machine has them (and listening is allowed: root), "
        "else decoded from an in-process capture. Needs no root."
    )
    parser.add_argument("--json", action="store_true", help="events as JSON lines (status goes to stderr)")
    parser.add_argument(
        "--capture", action="store_true", help="show the in-process capture even where user_events works"
    )
    add_color_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the demo; return the exit code."""
    return demo(json_lines=args.json, colors=use_color(args.color, sys.stdout), capture=args.capture)
