"""Helpers for tests that need a real kernel with user_events (pytest marker ``kernel``).

Import from a kernel test module as ``from kernel_harness import PerfSession, read_events``
(pytest puts ``tests/kernel`` on ``sys.path``) or use the fixtures of ``tests/kernel/conftest.py``.

:class:`PerfSession` runs ``perf record -a -k monotonic`` in the background on the given
``user_events`` tracepoints.  It starts perf with its events disabled (``-D -1``) and a control
pipe (``--control fd:...``), then sends ``enable`` and waits for perf's ``ack``: when
``__enter__`` returns, every per-CPU perf event is enabled, so nothing written afterwards is
lost to perf's start-up (the kernel sets the tracepoints' enable words as soon as perf
*opens* them, which is earlier: a write between the word flipping and ``__enter__`` returning
is accepted by the kernel but not recorded).  ``enabled_ns``/``stop_ns`` bound the recorded
window on CLOCK_MONOTONIC, the clock of the sample times.  Leaving the block stops perf with
SIGINT and waits for it; :meth:`PerfSession.events` then decodes the capture with the
project's perf.data reader and EventHeader decoder.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from structlog_etw.backends.user_events import find_tracefs
from structlog_etw.perf.datafile import PerfDataFile, Sample
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.read.decoded import DecodedEvent

__all__ = [
    "PerfSession",
    "perf_path",
    "read_events",
    "read_samples",
    "user_events_unavailable_reason",
    "wait_until",
]

#: How long perf may take to start or stop (software-emulated guests are slow).
PERF_TIMEOUT = 120.0


def user_events_unavailable_reason() -> str | None:
    """Why this machine cannot run the kernel tests, or None when it can."""
    tracefs = find_tracefs()
    if tracefs is None:
        return f"no tracefs with user_events_data on this kernel ({os.uname().release})"
    data = os.path.join(tracefs, "user_events_data")
    if not os.access(data, os.W_OK):
        return f"{data} is not writable by uid {os.getuid()}"
    return None


def perf_path() -> str | None:
    """The ``perf`` executable, or None."""
    return shutil.which("perf") or ("/usr/bin/perf" if os.access("/usr/bin/perf", os.X_OK) else None)


def wait_until(cond: Callable[[], object], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll *cond* until it is true; AssertionError after *timeout* seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.01)


class PerfSession:
    """``perf record -a`` on some user_events tracepoints, as a context manager.

    *tracepoints* are names without the ``user_events:`` prefix; they must already be
    registered (perf refuses unknown tracepoints).  *out_dir* receives ``<label>.data`` and
    ``<label>.log`` (perf's own output).
    """

    def __init__(
        self,
        tracepoints: Iterable[str],
        out_dir: Path,
        label: str = "perf",
        extra_args: Sequence[str] = (),
    ) -> None:
        self.tracepoints = list(tracepoints)
        if not self.tracepoints:
            raise ValueError("PerfSession needs at least one tracepoint")
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / f"{label}.data"
        self.log_path = self.out_dir / f"{label}.log"
        self.extra_args = list(extra_args)
        self.returncode: int | None = None
        #: CLOCK_MONOTONIC ns (the clock of ``-k monotonic`` sample times) when perf acknowledged
        #: 'enable' (everything written after it is recorded) and just before SIGINT was sent.
        self.enabled_ns: int | None = None
        self.stop_ns: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl: Any = None
        self._ack: Any = None

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no perf log)"

    def __enter__(self) -> PerfSession:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start perf and return once all its events are enabled."""
        perf = perf_path()
        if perf is None:
            raise AssertionError("perf is not installed (Debian: apt-get install linux-perf)")
        ctl_r, ctl_w = os.pipe()
        ack_r, ack_w = os.pipe()
        cmd = [perf, "record", "-a", "-k", "monotonic", "-D", "-1", "--control", f"fd:{ctl_r},{ack_w}"]
        for tp in self.tracepoints:
            cmd += ["-e", f"user_events:{tp}"]
        cmd += ["-o", str(self.path), *self.extra_args]
        log = open(self.log_path, "wb")  # noqa: SIM115 - handed to the child
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(ctl_r, ack_w)
            )
        finally:
            log.close()
            os.close(ctl_r)
            os.close(ack_w)
        self._ctl = os.fdopen(ctl_w, "w")
        self._ack = os.fdopen(ack_r, "r")
        try:
            self._ctl.write("enable\n")
            self._ctl.flush()
            reply = self._read_ack()
        except BaseException:
            self.stop()
            raise
        self.enabled_ns = time.monotonic_ns()
        if reply != "ack":
            self.stop()
            raise AssertionError(
                f"perf did not acknowledge 'enable' (got {reply!r}); cmd={cmd}\n{self._log_tail()}"
            )

    def _read_ack(self) -> str:
        assert self._proc is not None
        sel = selectors.DefaultSelector()
        sel.register(self._ack, selectors.EVENT_READ)
        deadline = time.monotonic() + PERF_TIMEOUT
        try:
            while time.monotonic() < deadline:
                if sel.select(timeout=0.2):
                    return str(self._ack.readline()).strip()
                if self._proc.poll() is not None:
                    raise AssertionError(
                        f"perf exited with {self._proc.returncode} before recording:\n{self._log_tail()}"
                    )
        finally:
            sel.close()
        raise AssertionError(f"perf did not start within {PERF_TIMEOUT:.0f}s:\n{self._log_tail()}")

    def stop(self) -> None:
        """Stop perf (SIGINT) and wait until it has written the file.  Idempotent."""
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        # Keep the control pipe open until perf has exited: perf 6.1 aborts without writing
        # the file header ("Thread and evlist pollfd index mismatch") when it sees it hang up.
        try:
            self.stop_ns = time.monotonic_ns()
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=PERF_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                msg = f"perf did not stop within {PERF_TIMEOUT:.0f}s:\n{self._log_tail()}"
                raise AssertionError(msg) from None
        finally:
            for f in (self._ctl, self._ack):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()
            self._ctl = self._ack = None
        self.returncode = proc.returncode
        if proc.returncode not in (0, -signal.SIGINT, 128 + signal.SIGINT):
            raise AssertionError(f"perf record failed with {proc.returncode}:\n{self._log_tail()}")

    def samples(self) -> list[Sample]:
        """The raw samples of the capture (see :func:`read_samples`)."""
        return read_samples(self.path)

    def events(self) -> list[DecodedEvent]:
        """Every user_events sample of the capture, decoded (see :func:`read_events`)."""
        return read_events(self.path)


def read_samples(path: Path) -> list[Sample]:
    """The samples of a perf.data file (``structlog_etw.perf.datafile``), in file order.

    Each has ``name`` (``user_events:Prov_L4K1``), ``data`` (the event bytes after the
    tracepoint's common fields), ``time``, ``cpu``, ``pid``, ``tid``.  A file the reader
    reports problems with, or that lost events, fails the test.
    """
    f = PerfDataFile.open(path)
    samples = list(f.samples())
    if f.problems:
        raise AssertionError(f"{path}: perf.data problems: {f.problems}")
    if f.lost:
        raise AssertionError(f"{path}: perf lost {f.lost} events")
    return samples


def read_events(path: Path, tracepoint_prefix: str | None = None) -> list[DecodedEvent]:
    """Decode every ``user_events:`` sample of *path* to a :class:`DecodedEvent` (file order).

    *tracepoint_prefix* keeps only tracepoints whose name starts with it.
    """
    out: list[DecodedEvent] = []
    for s in read_samples(path):
        name: str = s.name
        if name.startswith("user_events:"):
            name = name[len("user_events:") :]
        elif ":" in name:
            continue
        if tracepoint_prefix is not None and not name.startswith(tracepoint_prefix):
            continue
        out.append(decode_event(name, s.data))
    return out
