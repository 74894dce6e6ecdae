"""The user_events descriptor under daemonizers, against the real kernel (marker ``kernel``).

Each case runs an application in a subprocess (a daemonizer's ``closerange`` in the test
process would close pytest's own files) with the provider's tracepoint enabled for real:
``echo 1 > /sys/kernel/tracing/events/user_events/<tp>/enable`` (ftrace), or a ``perf record``
session of the test where the case also checks what a listening perf receives.  Each checks the
application's file byte for byte, the provider's ``stats()`` and its status reason.

1. close-all then the application's ``open()`` reuses the number: no event byte in the file;
   the provider reopens and re-registers (perf keeps getting the events written afterwards),
   and an event that cannot be written meanwhile is ``dropped["descriptor_lost"]``;
2. ``close_all()`` at exit never ``dup2``'s over the application's buffered file;
3. a collected constructor-made provider never ``os.close()``'s the application's descriptor;
4. a service started with fd 1 closed: ``user_events_data`` is not fd 1, so the daemonizer's
   ``dup2`` of its log file onto fd 1 gets no event bytes;

plus a fork child (the daemonizer's double fork, a pre-fork server's worker) logging through
the descriptor and registrations it inherited.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import PerfSession, wait_until

from structlog_etw import Provider
from structlog_etw.backends.user_events import UserEventsBackend

pytestmark = pytest.mark.kernel

PerfFactory = Callable[..., PerfSession]
REPO = Path(__file__).resolve().parents[2]

_PRELUDE = """
import gc, json, os, resource, sys, time
sys.path.insert(0, {repo!r})
import structlog
from structlog_etw import EtwRenderer, Provider, get_provider
NAME, OUT, APP = sys.argv[1], sys.argv[2], sys.argv[3]
TRACEFS = "/sys/kernel/tracing/events/user_events"

def enable(tp, value="1"):
    path = f"{{TRACEFS}}/{{tp}}/enable"
    deadline = time.monotonic() + 60
    while not os.path.exists(path):  # eventfs may show a new tracepoint after a while
        if time.monotonic() > deadline:
            raise SystemExit("no " + path)
        time.sleep(0.05)
    with open(path, "w") as f:
        f.write(value)

def logger(prov):
    return structlog.wrap_logger(structlog.ReturnLogger(), processors=[EtwRenderer(prov.name, provider=prov)])

def take_number(number):
    # the application's next open()s: until one of them gets the number the provider had
    while True:
        fd = os.open(APP, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if fd == number:
            return fd
        if fd > number:
            raise SystemExit(f"the number {{number}} was not reused (got {{fd}})")

def report(prov, **extra):
    s = prov.stats()
    st = prov.status
    with open(OUT, "w") as f:
        json.dump(dict(written=s["written"], dropped=s["dropped"], errors=s["errors"],
                       reason=st.reason.value, available=st.available, **extra), f)
"""


def _run(tmp_path: Path, name: str, body: str, **popen: Any) -> tuple[dict[str, Any], Path, str]:
    """Run ``body`` as the application; its report, its file and its stderr."""
    script = tmp_path / "app.py"
    script.write_text(_PRELUDE.format(repo=str(REPO)) + textwrap.dedent(body))
    out, app = tmp_path / "out.json", tmp_path / "app.data"
    proc = subprocess.run(
        [sys.executable, str(script), name, str(out), str(app)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        **popen,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    return json.loads(out.read_text()), app, proc.stderr


def test_closerange_then_open_gets_no_event_bytes_and_perf_keeps_the_events(
    tmp_path: Path, provider_name: str, perf_session: PerfFactory
) -> None:
    """Case 1: the application's file reusing the number gets only its own lines; the event
    logged while user_events_data cannot be opened again is dropped['descriptor_lost'] (status
    descriptor_lost); then the provider reopens, re-registers, and perf records what follows."""
    tp = f"{provider_name}_L4K1"
    owner = Provider(provider_name)  # the tracepoints exist before perf starts
    try:
        assert isinstance(owner.backend, UserEventsBackend)
        with perf_session([tp], label="closerange") as session:
            wait_until(lambda: owner.enabled(4, 1), what="perf to enable the tracepoint")
            report, app, stderr = _run(
                tmp_path,
                provider_name,
                """
                prov = get_provider(NAME)
                log = logger(prov)
                log.info("before_daemonize", n=0)
                old = prov.backend._fd
                soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                os.closerange(3, soft)  # python-daemon's close_all_open_files
                fd = take_number(old)
                os.write(fd, b"app line 1\\n")
                # out of descriptors: user_events_data cannot be opened again yet
                fillers = []
                while True:
                    try:
                        fillers.append(os.open(os.devnull, os.O_RDONLY))
                    except OSError:
                        break
                log.info("while_lost", n=1)
                lost = (prov.status.reason.value, prov.stats()["dropped"])
                for f in fillers:
                    os.close(f)
                os.write(fd, b"app line 2\\n")
                for n in (2, 3, 4):
                    log.info("after_reopen", n=n)
                os.write(fd, b"app line 3\\n")
                report(prov, lost=lost, old=old, new=prov.backend._fd)
                """,
            )
        assert app.read_bytes() == b"app line 1\napp line 2\napp line 3\n"  # not one event byte
        assert report["lost"] == ["descriptor_lost", {"descriptor_lost": 1}]
        assert report["written"] == 4
        assert report["dropped"] == {"descriptor_lost": 1}
        assert report["errors"] == {}
        assert (report["reason"], report["available"]) == ("descriptor_reopened", True)
        assert report["new"] != report["old"]
        assert stderr == ""
        names = [(ev.name, ev.fields.get("n")) for ev in session.events()]
        assert names == [("before_daemonize", 0), *(("after_reopen", n) for n in (2, 3, 4))]
    finally:
        owner.close()


def test_close_all_at_exit_never_dup2s_over_the_applications_file(tmp_path: Path, provider_name: str) -> None:
    """Case 2: a module-level file holding the reused number, with 280 unflushed bytes, still
    flushes them at exit (the old close_all dup2'ed a read-only /dev/null over it)."""
    report, app, stderr = _run(
        tmp_path,
        provider_name,
        """
        prov = get_provider(NAME)
        enable(f"{NAME}_L4K1")
        log = logger(prov)
        log.info("before_daemonize")
        old = prov.backend._fd
        os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        DATA = os.fdopen(take_number(old), "w")  # the application's module-level file
        DATA.write("d" * 280)  # buffered: flushed at interpreter exit, after close_all
        log.info("one_more")
        report(prov, old=old)
        enable(f"{NAME}_L4K1", "0")
        """,
    )
    assert app.read_bytes() == b"d" * 280
    assert stderr == ""
    assert report["written"] == 2  # the second through the reopened descriptor
    assert report["reason"] == "descriptor_reopened"


def test_a_collected_provider_never_closes_the_applications_descriptor(
    tmp_path: Path, provider_name: str
) -> None:
    """Case 3: dropping a constructor-made provider after the reuse leaves the application's
    descriptor open (the old backend's __del__ os.close()'d it: the next write failed EBADF)."""
    report, app, stderr = _run(
        tmp_path,
        provider_name,
        """
        prov = Provider(NAME)
        enable(f"{NAME}_L4K1")
        logger(prov).info("before_daemonize")
        old = prov.backend._fd
        os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        fd = take_number(old)
        report(prov, old=old)
        del prov
        gc.collect()
        os.write(fd, b"written after the provider was collected\\n")
        enable(f"{NAME}_L4K1", "0")
        """,
    )
    assert app.read_bytes() == b"written after the provider was collected\n"
    assert stderr == ""
    assert report["written"] == 1


def test_a_service_started_without_fd_1_keeps_events_out_of_its_log(
    tmp_path: Path, provider_name: str
) -> None:
    """Case 4: started with fd 1 closed, the provider's descriptor is not fd 1; the daemonizer's
    dup2 of its log file onto fd 1 (python-daemon's redirect_stream) gets the application's
    lines only, and every event reaches the kernel."""
    report, app, stderr = _run(
        tmp_path,
        provider_name,
        """
        prov = get_provider(NAME)
        enable(f"{NAME}_L4K1")
        mine = prov.backend._fd
        log_file = os.open(APP, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log_file, 1)  # redirect_stream(sys.stdout, log_file)
        log = logger(prov)
        for n in range(3):
            os.write(1, f"app line {n}\\n".encode())
            log.info("service_event", n=n)
        report(prov, mine=mine)
        enable(f"{NAME}_L4K1", "0")
        """,
        preexec_fn=lambda: os.close(1),
    )
    assert app.read_bytes() == b"app line 0\napp line 1\napp line 2\n"
    assert report["mine"] >= 3
    assert report["written"] == 3
    assert report["dropped"] == {} and report["errors"] == {}
    assert report["reason"] == "os"
    assert stderr == ""


def test_a_fork_child_logs_through_what_it_inherited(
    tmp_path: Path, provider_name: str, perf_session: PerfFactory
) -> None:
    """A fork child (double fork, pre-fork worker) writes through the inherited descriptor and
    registrations: the check passes in the child (its own pid for kcmp), perf records both."""
    tp = f"{provider_name}_L4K1"
    owner = Provider(provider_name)
    try:
        with perf_session([tp], label="fork") as session:
            wait_until(lambda: owner.enabled(4, 1), what="perf to enable the tracepoint")
            report, _, stderr = _run(
                tmp_path,
                provider_name,
                """
                prov = get_provider(NAME)
                log = logger(prov)
                log.info("parent", n=0)
                pid = os.fork()
                if pid == 0:
                    log.info("child", n=1)
                    s = prov.stats()
                    os._exit(0 if (s["written"], s["dropped"], s["errors"]) == (2, {}, {}) else 3)
                _, status = os.waitpid(pid, 0)
                log.info("parent", n=2)
                report(prov, child_status=status)
                """,
            )
        assert report["child_status"] == 0
        assert report["written"] == 2 and report["dropped"] == {} and report["reason"] == "os"
        assert stderr == ""
        assert sorted((ev.name, ev.fields.get("n")) for ev in session.events()) == [
            ("child", 1),
            ("parent", 0),
            ("parent", 2),
        ]
    finally:
        owner.close()
