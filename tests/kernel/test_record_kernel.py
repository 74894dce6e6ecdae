"""``structlog-etw record`` and ``doctor`` against a real kernel (marker ``kernel``; in the virtme-ng guest).

``record`` runs as its own process and writes what another process (``listen_writer.py``,
structlog + EtwRenderer) logs; the file is then read by our ``decode``, by ``perf script`` and
by Microsoft's perf-decode (built by ``nox -s kernel`` into kernel-out/perf-decode, or here).
``doctor`` runs as root and as ``nobody``, before and after the fixes it names.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shlex
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kernel_harness import wait_until
from test_listen_kernel import ENV, REPO, Proc, tracepoints_of, writer

from structlog_etw.backends.user_events import UserEventsBackend, find_tracefs
from structlog_etw.cli import main
from structlog_etw.perf.datafile import PerfDataFile
from tests.cli.test_progress import run_on_pty
from tests.helpers.perf_tools import perf_decode_binary

pytestmark = pytest.mark.kernel

TIMEOUT = 300.0


def record(*args: str) -> Proc:
    """``python -m structlog_etw record ARGS`` as its own process."""
    return Proc([sys.executable, "-m", "structlog_etw", "record", *args])


@contextlib.contextmanager
def recording(provider_name: str, out: Path, stop: signal.Signals = signal.SIGINT) -> Iterator[Proc]:
    """``record PROVIDER -o OUT`` running (its "recording ..." line seen) while the block runs; after
    it, stopped by ``stop`` and its exit status 0 asserted. Killed whatever happens."""
    rec = record(provider_name, "-o", str(out))
    try:
        rec.wait_for("err", "recording ", TIMEOUT)
        yield rec
        rec.p.send_signal(stop)
        assert rec.finish(TIMEOUT) == 0, rec.report()
    finally:
        rec.kill()


def run_app(provider_name: str, *args: str) -> None:
    """``listen_writer.py PROVIDER ARGS`` (structlog + EtwRenderer) run to its end: "done", exit 0."""
    app = writer(provider_name, *args)
    app.wait_for("out", "done", TIMEOUT)
    assert app.finish() == 0, app.report()


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` run to its end in the repository with the guest's environment, its output captured."""
    return subprocess.run(
        argv, capture_output=True, text=True, env=ENV, cwd=REPO, check=False, timeout=TIMEOUT
    )


def decode_json(path: Path) -> list[dict[str, object]]:
    """Our decode's events of ``path``."""
    proc = run([sys.executable, "-m", "structlog_etw", "decode", "--json", str(path)])
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def perf_script(path: Path) -> str:
    """``perf script`` of ``path`` (with the lost-event records)."""
    proc = subprocess.run(
        ["perf", "script", "--show-lost-events", "-i", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def perf_decode_names(path: Path) -> list[str]:
    """The event names perf-decode reads in ``path``, in its order."""
    decoder = perf_decode_binary(
        os.path.join(os.environ.get("STRUCTLOG_ETW_KERNEL_OUT", "/tmp"), "perf-decode")
    )
    proc = subprocess.run([decoder, str(path)], capture_output=True, check=False, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.decode("utf-8-sig", "replace"))
    return [str(e["n"]) for events in doc.values() for e in events if isinstance(e, dict) and "n" in e]


def summary(rec: Proc) -> tuple[int, int]:
    """(events written, lost) from record's last line."""
    line = rec.wait_for("err", " events written, ")
    words = line.split()
    return int(words[2]), int(words[5])


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_record_before_the_app_writes_a_file_every_reader_reads(
    provider_name: str, kernel_out_dir: Path, stop: signal.Signals
) -> None:
    """record started first registers the tracepoints; the app's 6 events are in the file, which our
    decode, perf script and perf-decode read alike, after Ctrl-C or SIGTERM."""
    out = kernel_out_dir / f"record-{stop.name}.data"
    with recording(provider_name, out, stop) as rec:
        assert "registered by record" in rec.wait_for("err", "recording ")
        run_app(provider_name, "log", "5")
    assert summary(rec) == (6, 0), rec.report()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.partial")]
    events = decode_json(out)
    assert [e["name"] for e in events] == ["tick"] * 5 + ["done_logging"]
    assert events[0]["provider"] == provider_name
    text = perf_script(out)
    assert text.count(f"user_events:{provider_name}_L4K1") == 5, text
    assert text.count(f"user_events:{provider_name}_L3K1") == 1, text
    names = perf_decode_names(out)
    assert names == [f"{provider_name}:tick"] * 5 + [f"{provider_name}:done_logging"]
    with PerfDataFile.open(out) as f:
        assert f.clockid == 1  # CLOCK_MONOTONIC, with the clock data for wall-clock times
        assert f.problems == []


def test_record_after_the_app_records_the_keywords_it_registered(
    provider_name: str, kernel_out_dir: Path
) -> None:
    """The app registers keyword 0x4 first; record without -k, started afterwards, records that keyword."""
    app = writer(provider_name, "keyword", "0x4", "3")
    out = kernel_out_dir / "after.data"
    try:
        app.wait_for("out", "ready", TIMEOUT)
        wait_until(
            lambda: f"{provider_name}_L4K4" in tracepoints_of(provider_name), TIMEOUT, "the app's tracepoint"
        )
        with recording(provider_name, out) as rec:
            app.wait_for("out", "done", TIMEOUT)
            assert app.finish() == 0, app.report()
    finally:
        app.kill()
    line = rec.wait_for("err", "recording ")
    assert f"{provider_name}_L4K4" in line and f"{provider_name}_L4K1" in line
    events = decode_json(out)
    assert [(e["name"], e["keyword"]) for e in events] == [("late_keyword", 4)] * 3


def test_record_picks_up_tracepoints_registered_while_it_records(
    provider_name: str, kernel_out_dir: Path
) -> None:
    """record runs; the app then registers keyword 0x4 (absent at the start): its events are recorded."""
    out = kernel_out_dir / "late.data"
    with recording(provider_name, out):
        run_app(provider_name, "keyword", "0x4", "2")  # waits until a session enables (4, 0x4)
    events = decode_json(out)
    assert [(e["name"], e["keyword"]) for e in events] == [("late_keyword", 4)] * 2


def test_record_to_a_pipe_into_decode(provider_name: str) -> None:
    """``record -o - -- COMMAND | decode -``: the pipe format, read as it streams; ends with COMMAND."""
    writer_py = str(Path(__file__).resolve().parent / "listen_writer.py")
    cmd = (
        f"{shlex.quote(sys.executable)} -m structlog_etw record {provider_name} -o - -- "
        f"{shlex.quote(sys.executable)} {shlex.quote(writer_py)} {provider_name} log 3 "
        f"| {shlex.quote(sys.executable)} -m structlog_etw decode --json -"
    )
    proc = run(["bash", "-o", "pipefail", "-c", cmd])
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [e["name"] for e in events] == ["tick"] * 3 + ["done_logging"], proc.stderr
    assert "4 events written, 0 lost" in proc.stderr


def test_a_flood_into_a_small_buffer_is_reported_lost_and_carried_by_lost_records(
    provider_name: str, kernel_out_dir: Path
) -> None:
    """--pages 1 and 20,020 events at full speed: record reports the kernel's losses, the file's LOST records
    add up to them (our reader and perf script), and written + lost is every event."""
    out = kernel_out_dir / "flood.data"
    writer_py = str(Path(__file__).resolve().parent / "listen_writer.py")
    rec = record(
        provider_name,
        "-o",
        str(out),
        "--pages",
        "1",
        "--",
        sys.executable,
        writer_py,
        provider_name,
        "flood",
        "20000",
    )
    try:
        assert rec.finish(TIMEOUT * 2) == 0, rec.report()
    finally:
        rec.kill()
    written, lost = summary(rec)
    assert lost > 0, rec.report()
    assert written + lost == 20020, rec.report()
    assert any("give more --pages" in line for line in rec.err)
    with PerfDataFile.open(out) as f:
        samples = list(f.samples())
        assert f.lost == lost
    assert len(samples) == written
    text = perf_script(out)
    perf_lost = sum(int(line.rsplit(None, 1)[1]) for line in text.splitlines() if "PERF_RECORD_LOST" in line)
    assert perf_lost == lost


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    """``structlog-etw doctor ARGS`` as root."""
    return run([sys.executable, "-m", "structlog_etw", "doctor", *args])


def doctor_as(uid: int, groups: list[int], *args: str) -> tuple[int, str]:
    """``structlog-etw doctor ARGS`` as user ``uid`` with ``groups``: in a forked child that drops root
    (the interpreter lives under /root, which other users cannot reach, so it cannot be started as them)."""
    for module in ("doctor", "_doctor_linux"):
        importlib.import_module(f"structlog_etw.cli.{module}")
    importlib.import_module("structlog_etw.perf.listener")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        rc = 3
        try:
            os.close(r)
            os.setgroups(groups)
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.dup2(w, 1)
            os.dup2(w, 2)
            sys.stdout = sys.stderr = open(1, "w", closefd=False)  # noqa: SIM115
            rc = main(["doctor", *args])
            sys.stdout.flush()
        except BaseException:
            traceback.print_exc()
            sys.stdout.flush()
        os._exit(rc)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace")


NOBODY = 65534
TRACING_GID = 4242  # stands for the recipe's 'tracing' group: the guest's /etc is read-only


def test_doctor_passes_as_root_and_names_the_fixes_an_unprivileged_user_needs(
    provider_name: str, user_events_backend: Callable[..., UserEventsBackend]
) -> None:
    """Root: exit 0. nobody: exit 1 with the write-access, perf_event_paranoid and tracefs fixes; after
    running them (chgrp/usermod with a numeric group), doctor as nobody passes. Modes are restored.
    A kernel without sysctl (the test kernel's) keeps perf_event_paranoid at 2: there the fix is
    root or CAP_PERFMON, and after the other fixes that is the one check left failing."""
    user_events_backend(provider_name).open_slot(4, 1)  # the app, holding its tracepoint
    tracefs = find_tracefs()
    assert tracefs is not None
    root = doctor(provider_name)
    assert root.returncode == 0, root.stdout + root.stderr
    assert f"{provider_name}_L4K1" in root.stdout
    paranoid_path = Path("/proc/sys/kernel/perf_event_paranoid")
    sysctl = paranoid_path.exists()
    paranoid = paranoid_path.read_text() if sysctl else ""
    paths = [
        Path(tracefs),
        Path(tracefs, "user_events_data"),
        Path(tracefs, "events"),
        Path(tracefs, "events", "user_events"),
    ]
    paths += [Path(tracefs, "events", h) for h in ("header_page", "header_event")]
    tp = Path(tracefs, "events", "user_events", f"{provider_name}_L4K1")
    paths += [tp, tp / "id", tp / "format"]
    saved = {p: os.stat(p) for p in paths}
    try:
        if sysctl:
            paranoid_path.write_text("2\n")
        rc, out = doctor_as(NOBODY, [], provider_name, "--json")
        assert rc == 1, out
        checks = {c["name"]: c for c in json.loads(out)["checks"]}
        for name in ("write access", "perf_event_paranoid", "tracefs read"):
            assert checks[name]["state"] == "fail", checks
        wanted = "sudo sysctl -w kernel.perf_event_paranoid=-1" if sysctl else "or with CAP_PERFMON"
        assert wanted in checks["perf_event_paranoid"]["fix"]
        for name in ("write access", "tracefs read", "perf_event_paranoid"):
            for line in checks[name]["fix"].splitlines():
                words = shlex.split(line, comments=True)
                if words[:2] in (["sudo", "chmod"], ["sudo", "sh"], ["sudo", "sysctl"]):
                    subprocess.run(words[1:], check=True)
                elif words[:3] == ["sudo", "chgrp", "tracing"]:
                    os.chown(words[3], -1, TRACING_GID)
        rc, out = doctor_as(NOBODY, [TRACING_GID], provider_name, "--json")
        after = {c["name"]: c["state"] for c in json.loads(out)["checks"]}
        assert after["write access"] == after["tracefs read"] == "ok", out
        if sysctl:
            assert rc == 0, out
        else:
            assert rc == 1 and [n for n, state in after.items() if state == "fail"] == ["perf_event_paranoid"]
    finally:
        if sysctl:
            paranoid_path.write_text(paranoid)
        for p, st in saved.items():
            os.chown(p, st.st_uid, st.st_gid)
            os.chmod(p, st.st_mode & 0o7777)


def test_record_shows_progress_on_a_terminal(provider_name: str, kernel_out_dir: Path) -> None:
    """stderr a pseudo-terminal: record draws its progress line (events, rate, bytes, lost) and erases it."""
    out = kernel_out_dir / "progress.data"
    rc, _stdout, tty = run_on_pty("record", provider_name, "-o", str(out), "--duration", "3")
    text = tty.decode("utf-8", "replace")
    assert rc == 0, text
    assert "\rstructlog-etw record: 0 events (0/s), " in text and " written, 0 lost\x1b[K" in text, text
    assert "\r\x1b[K" in text
    assert "0 events written, 0 lost" in text
