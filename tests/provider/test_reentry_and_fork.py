"""A log call re-entered by a signal handler or a ``__del__``, a fork child of a threaded parent,
providers made with the constructor: no hang, no count lost, every provider seen by the registry.

Each scenario runs in a bounded subprocess (tests/helpers/hostile.py): a regression hangs there
and fails fast with a timeout instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from tests.helpers.hostile import run_bounded

needs_itimer = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer (POSIX)")
needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")

_SIGNALS = r"""
import gc, itertools, json, signal, sys, time
import structlog
from structlog_etw import EtwRenderer, Provider
from structlog_etw.backends.capture import CaptureBackend

fmt = sys.argv[1]
backend = CaptureBackend("Reentry_P", format=fmt)
provider = Provider("Reentry_P", backend=backend)
log = structlog.wrap_logger(None, processors=[EtwRenderer("Reentry_P", provider=provider)])
in_handler = itertools.count()
in_del = itertools.count()


busy = []


def handler(signum, frame):
    if busy:  # a timer signal inside this handler: Python nests handlers; one at a time logs
        return
    busy.append(1)
    try:
        next(in_handler)
        log.info("tick", etw_level="loud", n=1)  # invalid level: counted, written at the method's level
        provider.stats()
    finally:
        busy.clear()


class LogsWhenCollected:
    def __del__(self):
        if busy:  # collected inside the handler: not counted twice, not logged
            return
        next(in_del)
        log.warning("collected", etw_level="loud")


signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
main = 0
deadline = time.process_time() + 5
i = 0
while time.process_time() < deadline:
    i += 1
    a = LogsWhenCollected()
    a.cycle = a  # freed by the collector, in the middle of whatever runs then
    del a
    # new keywords register slots while the timer fires (up to max_slots), new layouts too
    log.info("main", etw_level="loud", etw_keyword=2 + i % 300, k=i, s="x" * (i % 7))
    main += 1
    if i % 500 == 0:
        gc.collect()
        provider.stats()
signal.setitimer(signal.ITIMER_REAL, 0, 0)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
gc.collect()
stats = provider.stats()
calls = main + next(in_handler) + next(in_del)
print(json.dumps({"stats": stats, "calls": calls, "handler": next(in_handler) - 1,
                  "records": len(backend.records)}))
"""


class TestSignalHandlersAndDelThatLog:
    """A 0.2 ms interval timer whose handler logs, and ``__del__`` methods that log, while the main
    thread logs: nothing waits on a lock the interrupted code holds, and no count is lost."""

    @needs_itimer
    @pytest.mark.parametrize("fmt", ["eventheader", "tracelogging"])
    def test_five_seconds_of_reentrant_logging_finish_with_exact_counts(self, fmt: str) -> None:
        """5 s of a 0.2 ms timer logging etw_level="loud" into a main loop that does the same (and
        registers slots, collects cycles whose __del__ logs): no hang; ``invalid`` counts every call,
        every event is written or counted dropped, every written one recorded."""
        run = run_bounded(_SIGNALS, fmt, timeout=120)
        assert not run.hung, "a log call re-entered by a signal handler or __del__ deadlocked"
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        stats = out["stats"]
        assert out["handler"] > 100  # the timer did fire into the loop
        assert stats["invalid"] == {"etw_level": out["calls"]}
        assert stats["written"] == out["records"]
        assert stats["written"] + sum(stats["dropped"].values()) == out["calls"]
        assert set(stats["dropped"]) <= {"reentrant", "slot_limit"}
        assert stats["errors"] == {}


_FORKS = r"""
import json, sys, threading
import structlog
from structlog_etw import EtwRenderer, Provider, get_provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.testing import capture_etw_events, decode_record
from tests.helpers.forking import fork_child, wait_child

CHILDREN = int(sys.argv[1])
own = Provider("Fork_Own", backend=CaptureBackend("Fork_Own"))
own_log = structlog.wrap_logger(None, processors=[EtwRenderer("Fork_Own", provider=own)])
stop = threading.Event()
hung = 0
failed = 0
with capture_etw_events() as capture:
    captured_log = structlog.wrap_logger(None, processors=[EtwRenderer("Fork_Captured")])

    def spin(n):
        i = 0
        while not stop.is_set():
            i += 1
            own_log.info("thread", n=n, i=i, etw_keyword=1 << (i % 9))  # registers slots too
            captured_log.info("thread", n=n, i=i, etw_keyword=1 << (i % 9))
            if i % 50 == 0:
                own.stats()
                own.backend.clear()
                capture.clear()

    threads = [threading.Thread(target=spin, args=(n,), daemon=True) for n in range(2)]
    for t in threads:
        t.start()

    def child_logs(child):
        ok = own_log.info("child", c=child, etw_keyword=0x4000) is None
        captured_log.info("child", c=child, etw_keyword=0x4000)
        ok = ok and own.stats()["written"] > 0 and get_provider("Fork_Captured").stats()["written"] > 0
        return ok and any(decode_record(r).name == "child" for r in capture.records[-3:])

    for child in range(CHILDREN):
        code = wait_child(fork_child(lambda: child_logs(child)), timeout=20)  # None: killed, hung
        hung += code is None
        failed += code is not None and code != 0
    stop.set()
    for t in threads:
        t.join()
print(json.dumps({"hung": hung, "failed": failed}))
"""


class TestForkOfAThreadedParent:
    """Fork children of a parent whose threads log (through a constructor-made provider with its
    own backend, and inside a capture) log, register and read stats without hanging."""

    @needs_fork
    def test_a_hundred_children_all_finish(self) -> None:
        """100 children forked while two threads log and register slots: every child finishes,
        writes through both providers and sees its event in the capture."""
        run = run_bounded(_FORKS, "100", timeout=600)
        assert not run.hung, run.stderr
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout) == {"hung": 0, "failed": 0}


_MODULE_LEVEL = r"""
import json
import structlog
from structlog_etw import EtwRenderer, Provider, close_all, get_provider
from structlog_etw.testing import capture_etw_events

MODULE_PROVIDER = Provider("Module_Level")  # as a module of the application would make it
log = structlog.wrap_logger(None, processors=[EtwRenderer("Module_Level", provider=MODULE_PROVIDER)])
same = get_provider("Module_Level") is MODULE_PROVIDER
with capture_etw_events() as capture:
    log.info("inside", n=1)
captured = [e.name for e in capture.events]
close_all()
print(json.dumps({"same": same, "captured": captured, "closed": MODULE_PROVIDER.closed,
                  "after": get_provider("Module_Level") is MODULE_PROVIDER}))
"""


class TestConstructorMadeProvidersAreInTheRegistry:
    """A provider made with ``Provider(name)`` is one of the process's providers like any other."""

    def test_a_module_level_provider_is_captured_closed_and_found_by_name(self) -> None:
        """``capture_etw_events()`` routes a module-level ``Provider("P")``, ``close_all()`` closes
        it, and ``get_provider("P")`` gives that provider rather than making a second one."""
        run = run_bounded(_MODULE_LEVEL)
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        assert out == {"same": True, "captured": ["inside"], "closed": True, "after": True}

    def test_a_dropped_provider_leaves_the_registry(self) -> None:
        """The registry holds providers weakly: one nobody references any more is collected."""
        import gc  # noqa: PLC0415
        import weakref  # noqa: PLC0415

        from structlog_etw import Provider  # noqa: PLC0415
        from structlog_etw.backends.capture import CaptureBackend  # noqa: PLC0415

        provider = Provider("Weakly_Held", backend=CaptureBackend("Weakly_Held"))
        ref = weakref.ref(provider)
        del provider
        gc.collect()
        assert ref() is None


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
class TestReentryIsCountedNotWaitedFor:
    """A registration re-entered on the same thread hands out a counted slot instead of waiting."""

    def test_a_slot_asked_for_inside_a_registration_is_counted_reentrant(self) -> None:
        """A backend whose ``open_slot`` logs at a new pair (as a signal handler would): the inner
        event is counted ``dropped["reentrant"]``, the outer registration completes."""
        from structlog_etw import Provider  # noqa: PLC0415
        from structlog_etw.backends.capture import CaptureBackend  # noqa: PLC0415

        class Reenters(CaptureBackend):
            provider: Provider | None = None

            def open_slot(self, level: int, keyword: int):  # type: ignore[no-untyped-def]
                if self.provider is not None and keyword == 0x10:
                    p = self.provider
                    assert p.write(p.slot(2, 0x20), "inner", []) is False
                return super().open_slot(level, keyword)

        backend = Reenters("Reenter_Slot")
        p = Provider("Reenter_Slot", backend=backend)
        backend.provider = p
        assert p.write(p.slot(4, 0x10), "outer", []) is True
        assert p.stats()["dropped"] == {"reentrant": 1}
        assert (2, 0x20) not in p.slots and (4, 0x10) in p.slots
        assert p.write(p.slot(2, 0x20), "later", []) is True  # registered on the next ask


_START_UP = r"""
import json, sys
import structlog
from structlog_etw import EtwRenderer, Provider
from structlog_etw.backends.capture import CaptureBackend

fmt = sys.argv[1]
provider = Provider("StartUp", backend=CaptureBackend("StartUp", format=fmt))
log = structlog.wrap_logger(None, processors=[EtwRenderer("StartUp", provider=provider)])
log.info("x", a=1, b="text")
assert provider.stats()["written"] == 1
print(json.dumps(sorted(m for m in sys.modules if m.endswith("._encoder") and m.startswith("structlog_etw"))))
"""


class TestStartUpLoadsOneEncoder:
    """A provider loads the encoder of its own format only."""

    @pytest.mark.parametrize(
        ("fmt", "encoder"),
        [
            ("eventheader", "structlog_etw.write.eventheader._encoder"),
            ("tracelogging", "structlog_etw.write.tracelogging._encoder"),
        ],
    )
    def test_a_provider_and_a_log_call_load_only_their_format_s_encoder(self, fmt: str, encoder: str) -> None:
        """In a fresh interpreter, an EventHeader provider that writes an event has not imported
        the TraceLogging encoder, and the other way round."""
        run = run_bounded(_START_UP, fmt)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout) == [encoder]
