"""Fault injection in a real kernel: tracefs disappears, the descriptor fails (marker ``kernel``).

Issue 8 item 6.  An application logs through structlog while, under it, tracefs is unmounted,
the ``user_events_data`` descriptor turns into ``/dev/full`` (a file that is not ours: never
written, ``dropped["descriptor_lost"]``; user_events_data cannot be opened again, tracefs is
gone) and then stops being a descriptor at all.  Every log call returns normally; what the
kernel still accepts reaches perf; what cannot be written is counted by reason in
``provider.stats()``.  (``ENOSPC`` counted by errno: tests/backends/test_user_events.py, where
``user_events_data`` itself is ``/dev/full``.)

The application runs in a subprocess with its own mount namespace (``unshare -m``, private
propagation), so unmounting tracefs there leaves the guest's tracefs - and the perf session
recording from this process - untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from kernel_harness import PerfSession, wait_until

from structlog_etw.backends.user_events import UserEventsBackend

pytestmark = pytest.mark.kernel

REPO = Path(__file__).resolve().parents[2]
BackendFactory = Callable[..., UserEventsBackend]
PerfFactory = Callable[..., PerfSession]

APP = r"""
import json, os, subprocess, sys, warnings

import structlog

from structlog_etw import EtwRenderer
from structlog_etw.backends.user_events import find_tracefs

name = sys.argv[1]
out = {}
renderer = EtwRenderer(name)
provider = renderer.provider
log = structlog.wrap_logger(structlog.ReturnLogger(), processors=[renderer])
slot = provider.slot(4, 1)
out["backend"] = type(provider.backend).__name__
out["word_at_start"] = slot.word[0]  # perf (in the parent) already records L4K1
for i in range(3):
    log.info("before", n=i)
out["before"] = provider.stats()

# tracefs disappears: every tracefs / debugfs mount of this (private) namespace goes away.
tracefs = find_tracefs()
plain = subprocess.run(["umount", tracefs], capture_output=True, text=True)
out["plain_umount"] = [plain.returncode, plain.stderr.strip()]
for _ in range(4):
    with open("/proc/self/mounts") as f:
        mounts = [ln.split()[1] for ln in f if ln.split()[2] in ("tracefs", "debugfs")]
    if not mounts:
        break
    for m in sorted(set(mounts), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True)
out["mounts_left"] = mounts
out["tracefs_after"] = find_tracefs()
out["word_after_umount"] = slot.word[0]
for i in range(3):
    log.info("after_umount", n=i)  # the open descriptor outlives the mount
log.info("new_pair_after_umount", etw_keyword=0x40)  # registers L4K40 through that descriptor
out["new_pair_after_umount_registered"] = provider.slot(4, 0x40).handle is not None
out["after_umount"] = provider.stats()

# A provider created now finds no tracefs: disabled, warned once, log calls return normally.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    late = EtwRenderer(name + "Late")
    structlog.wrap_logger(structlog.ReturnLogger(), processors=[late]).info("late", n=1)
out["late_backend"] = type(late.provider.backend).__name__
out["late_warnings"] = [str(w.message) for w in caught]
out["late_stats"] = late.provider.stats()

# The descriptor becomes a full device: not the file the backend opened, never written to.
fd = provider.backend._fd
full = os.open("/dev/full", os.O_WRONLY)
os.dup2(full, fd)
os.close(full)
out["word_on_full"] = slot.word[0]
for i in range(2):
    log.info("disk_full", n=i)
out["enospc"] = provider.stats()

# The descriptor becomes invalid: still lost (tracefs is gone: no new one), a new registration fails.
os.close(fd)
for i in range(2):
    log.info("fd_gone", n=i)
log.warning("new_pair_after_fd_gone", etw_keyword=0x80)  # registering L3K80 fails: counted
out["ebadf"] = provider.stats()
print("RESULT " + json.dumps(out))
"""


def test_tracefs_unmounted_and_descriptor_failing_while_logging_are_counted_never_raised(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory, tmp_path: Path
) -> None:
    """Unmounting tracefs and a descriptor taken away while logging are counted, never raised."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is needed for a private mount namespace")
    # Register L4K1 here first, so perf can name it before the application starts; the
    # application registers the same tracepoint and finds its enable word set.
    here = user_events_backend(provider_name)
    here_slot = here.open_slot(4, 1)
    script = tmp_path / "tracefs_gone_app.py"
    script.write_text(APP)
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="default")
    with perf_session([f"{provider_name}_L4K1"]) as session:
        wait_until(lambda: here_slot.word[0] == 1, what="perf to enable the tracepoint")
        proc = subprocess.run(
            [unshare, "-m", "--propagation", "private", sys.executable, str(script), provider_name],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    out = json.loads(line[len("RESULT ") :])

    assert out["backend"] == "UserEventsBackend"
    assert out["word_at_start"] == 1
    assert out["before"]["written"] == 3
    # tracefs was busy (our descriptor), went away lazily, and nothing finds it any more ...
    assert out["plain_umount"][0] != 0, out["plain_umount"]
    assert out["mounts_left"] == [] and out["tracefs_after"] is None, out
    # ... but the descriptor and the registrations live on: events keep flowing, a new pair registers.
    assert out["word_after_umount"] == 1
    assert out["after_umount"]["written"] == 6
    assert out["after_umount"]["errors"] == {}
    assert out["new_pair_after_umount_registered"] is True
    # A provider created after tracefs is gone runs disabled, says why once, and drops quietly.
    assert out["late_backend"] == "NullBackend"
    assert len(out["late_warnings"]) == 1 and "no tracefs" in out["late_warnings"][0], out["late_warnings"]
    assert out["late_stats"]["written"] == 0 and out["late_stats"]["errors"] == {}
    # The full device is not our file: nothing written to it, the events counted as
    # descriptor_lost (no tracefs to open user_events_data again), then the same once the
    # number is closed; the new registration fails: counted by reason.
    assert out["word_on_full"] == 1
    assert out["enospc"]["errors"] == {}
    assert out["enospc"]["dropped"] == {"descriptor_lost": 2}
    assert out["ebadf"]["errors"] == {"register:EBADF": 1}
    assert out["ebadf"]["written"] == 6
    assert out["ebadf"]["dropped"] == {"descriptor_lost": 4}
    # What the kernel accepted is exactly what perf captured: before and after the unmount
    # (sorted: perf's per-CPU buffers do not keep the order across CPUs the process ran on).
    got = sorted((e.name, e.fields["n"]) for e in session.events())
    assert got == [("after_umount", i) for i in range(3)] + [("before", i) for i in range(3)]
