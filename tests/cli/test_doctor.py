"""``structlog-etw doctor`` against prepared machines: a /proc, /boot and tracefs tree per test, and
this user as the tree's ``proc/self/status`` says (the real kernel's answers are in
tests/kernel/test_doctor_kernel.py)."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

import structlog_etw.cli._doctor_windows as win
import structlog_etw.cli.doctor as doc
from structlog_etw.cli import main
from structlog_etw.cli._doctor_linux import Roots, linux_checks, parse_status, parse_user_events_status
from structlog_etw.cli._doctor_windows import parse_session_names, session_has_provider, windows_checks
from structlog_etw.cli.doctor import FAIL, NOTE, OK, Check
from structlog_etw.formats.tracelogging import provider_id

PROVIDER = "MyCompany_MyService"
STATUS_TEXT = (
    "MyCompany_MyService_L4K1 u8 eventheader_flags; u8 version # Used by perf\n"
    "MyCompany_MyService_L2K1 u8 eventheader_flags\n"
    "Other_L4K1 u8 eventheader_flags # Used by ftrace\n"
    "\nActive: 3\nBusy: 1\n"
)
#: A user that owns no file of the tree (the tree's files belong to whoever runs the tests).
UID = 54321


def make_machine(
    root: Path,
    *,
    release: str = "6.12.1",
    user_events: bool = True,
    uid: int = 0,
    caps: int = 0x1FFFFFFFFFF,
    groups: tuple[int, ...] = (),
    paranoid: int = 2,
    modes: bool = False,
) -> list[str]:
    """A machine under ``root``; returns doctor's root options.  ``modes``: tracefs as the kernel
    makes it (dir 0700, files 0640/0440/0600), else everything open."""
    proc, boot, tracefs = root / "proc", root / "boot", root / "tracing"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "self").mkdir()
    boot.mkdir()
    (proc / "sys" / "kernel" / "osrelease").write_text(release + "\n")
    (proc / "sys" / "kernel" / "perf_event_paranoid").write_text(f"{paranoid}\n")
    status = f"Name:\tpython\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
    status += f"Groups:\t{' '.join(map(str, groups))}\nCapEff:\t{caps:016x}\n"
    (proc / "self" / "status").write_text(status)
    config = "CONFIG_TRACING=y\n" + (
        "CONFIG_USER_EVENTS=y\n" if user_events else "# CONFIG_USER_EVENTS is not set\n"
    )
    with gzip.open(proc / "config.gz", "wt") as f:
        f.write(config)
    events = tracefs / "events"
    (events / "user_events").mkdir(parents=True)
    (events / "header_page").write_text("\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n")
    (events / "header_event").write_text("# compressed entry header\n")
    if user_events:
        (tracefs / "user_events_data").write_bytes(b"")
        (tracefs / "user_events_status").write_text(STATUS_TEXT)
        for name, tp_id in (("MyCompany_MyService_L4K1", 1500), ("MyCompany_MyService_L2K1", 1501)):
            d = events / "user_events" / name
            d.mkdir()
            (d / "id").write_text(f"{tp_id}\n")
            (d / "format").write_text(f"name: {name}\nID: {tp_id}\nformat:\n")
    if modes:
        for path in [tracefs, events, events / "user_events", *(events / "user_events").iterdir()]:
            path.chmod(0o700 if path == tracefs else 0o750)
        for path in tracefs.rglob("*"):
            if path.is_file():
                path.chmod(0o600 if path.name == "user_events_data" else 0o440)
    return ["--tracefs", str(tracefs), "--proc", str(proc), "--boot", str(boot)]


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run ``structlog-etw doctor ARGS``: exit status and stdout."""
    rc = main(["doctor", *args])
    return rc, capsys.readouterr().out


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_root_on_a_user_events_kernel_passes_every_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Root on Linux 6.12 with user_events: every check ok, exit 0, the provider's tracepoints and
    who enables them."""
    opts = make_machine(tmp_path)
    rc, out = doctor(capsys, PROVIDER, *opts)
    assert rc == 0, out
    assert "[FAIL]" not in out
    assert "[ ok ] kernel " in out and "Linux 6.12.1" in out
    assert "CONFIG_USER_EVENTS=y" in out
    assert "2 registered (user_events_status): MyCompany_MyService_L2K1, MyCompany_MyService_L4K1" in out
    assert "MyCompany_MyService_L4K1 by perf; not enabled: MyCompany_MyService_L2K1" in out
    assert "This user can write and record these events." in out


def test_a_kernel_without_user_events_fails_naming_the_kernel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Linux 6.1 without CONFIG_USER_EVENTS: kernel, config and user_events fail, the fix names the kernel."""
    opts = make_machine(tmp_path, release="6.1.0-13-amd64", user_events=False)
    rc, out = doctor(capsys, *opts)
    assert rc == 1
    assert "[FAIL] kernel " in out
    checks = by_name(linux_checks(Roots(opts[1], opts[3], opts[5])))
    assert checks["kernel"].state == FAIL
    assert "Linux 6.1.0-13-amd64: user_events needs Linux 6.4 or later" in checks["kernel"].detail
    assert checks["kernel config"].state == FAIL
    assert checks["user_events"].state == FAIL
    assert "no user_events in this kernel (6.1.0-13-amd64)" in checks["user_events"].detail
    assert "CONFIG_USER_EVENTS=y" in checks["user_events"].fix
    assert "write access" not in checks  # nothing to write to


def _tracing_gid() -> int:
    """A group this test may give a file (stands for the recipe's 'tracing' group)."""
    if os.geteuid() == 0:
        return 54322
    others = [g for g in os.getgroups() if g != os.getgid()]
    if not others:
        pytest.skip("needs root or a supplementary group to give user_events_data a group of its own")
    return others[0]


def test_an_unprivileged_user_fails_with_fixes_that_make_it_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user without capabilities on tracefs's default modes: write access, perf_event_paranoid and tracefs
    read fail; after the fixes' commands (chmod as written; chgrp and usermod with a numeric group standing
    for 'tracing'; the paranoid level the fix names) the same doctor passes."""
    gid = _tracing_gid()
    opts = make_machine(tmp_path, uid=UID, caps=0, modes=True)
    rc, out = doctor(capsys, PROVIDER, *opts)
    assert rc == 1, out
    checks = by_name(linux_checks(Roots(opts[1], opts[3], opts[5]), PROVIDER))
    assert checks["write access"].state == FAIL
    assert checks["perf_event_paranoid"].state == FAIL
    assert checks["tracefs read"].state == FAIL
    assert "sudo sysctl -w kernel.perf_event_paranoid=-1" in checks["perf_event_paranoid"].fix
    tracefs = opts[1]
    assert f"sudo chmod o+x {tracefs}" in checks["write access"].fix
    assert f"sudo chgrp tracing {tracefs}/user_events_data" in checks["write access"].fix
    assert f"sudo usermod -aG tracing {UID}" in checks["write access"].fix
    for check in (checks["write access"], checks["tracefs read"]):
        for line in check.fix.splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] in (["sudo", "chmod"], ["sudo", "sh"]):
                subprocess.run(words[1:], check=True)
            elif words[:3] == ["sudo", "chgrp", "tracing"]:
                os.chown(words[3], -1, gid)
            elif words[:3] == ["sudo", "usermod", "-aG"]:
                status = tmp_path / "proc" / "self" / "status"
                status.write_text(status.read_text().replace("Groups:\t", f"Groups:\t{gid} "))
    (tmp_path / "proc" / "sys" / "kernel" / "perf_event_paranoid").write_text("-1\n")
    rc, out = doctor(capsys, PROVIDER, *opts)
    assert rc == 0, out
    assert "user_events_status is closed" in out  # still root's: a note


def test_no_perf_binary_is_a_note_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without perf on PATH doctor still passes: record does the job."""
    opts = make_machine(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    rc, out = doctor(capsys, *opts)
    assert rc == 0
    assert "[note] perf" in out and "structlog-etw record records without it" in out


def test_tracefs_not_mounted_names_the_mount_command_and_containers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No tracefs in the mounts: the fix is the mount command, and the volume for Docker and Kubernetes."""
    opts = make_machine(tmp_path)
    (tmp_path / "proc" / "self" / "mounts").write_text("proc /proc proc rw 0 0\n")
    checks = by_name(linux_checks(Roots(None, opts[3], opts[5])))
    assert checks["tracefs"].state == FAIL
    assert "sudo mount -t tracefs nodev /sys/kernel/tracing" in checks["tracefs"].fix
    assert "-v /sys/kernel/tracing:/sys/kernel/tracing" in checks["tracefs"].fix
    assert "hostPath" in checks["tracefs"].fix


def test_json_output_for_scripts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--json``: {ok, checks: [{name, state, detail, fix}]} in the order of the lines."""
    opts = make_machine(tmp_path, paranoid=2, uid=UID, caps=0)
    rc, out = doctor(capsys, "--json", *opts)
    doc = json.loads(out)
    assert rc == 1 and doc["ok"] is False
    names = [c["name"] for c in doc["checks"]]
    assert names[:4] == ["kernel", "kernel config", "tracefs", "user_events"]
    assert {c["state"] for c in doc["checks"]} <= {OK, FAIL, NOTE}
    assert next(c for c in doc["checks"] if c["name"] == "perf_event_paranoid")["fix"]


def test_a_provider_without_tracepoints_yet_is_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A provider that registered nothing yet does not fail: the app (or record) registers them."""
    opts = make_machine(tmp_path)
    rc, out = doctor(capsys, "Nobody_Here", *opts)
    assert rc == 0
    assert "none of Nobody_Here's tracepoints is registered now" in out


def test_keywords_narrow_the_provider_check(tmp_path: Path) -> None:
    """``-k 2``: only keyword-2 tracepoints count."""
    opts = make_machine(tmp_path)
    checks = by_name(linux_checks(Roots(opts[1], opts[3], opts[5]), PROVIDER, [2]))
    assert "none of" in checks["tracepoints"].detail


def test_status_and_user_events_status_parsers() -> None:
    """proc status -> uid, groups, capabilities; user_events_status -> name -> users (no summary lines)."""
    ident = parse_status(
        "Uid:\t1000\t1001\t1001\t1001\nGid:\t5\t6\t6\t6\nGroups:\t7 8\nCapEff:\t0000004000000000\n"
    )
    assert (ident.uid, ident.gid, ident.groups) == (1001, 6, {7, 8})
    assert ident.has(38) and not ident.has(21)
    assert parse_user_events_status(STATUS_TEXT) == {
        "MyCompany_MyService_L4K1": ["perf"],
        "MyCompany_MyService_L2K1": [],
        "Other_L4K1": ["ftrace"],
    }


def test_bad_provider_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A name that cannot be a tracepoint's: exit 2 and why."""
    assert main(["doctor", "bad name"]) == 2
    assert "structlog-etw doctor:" in capsys.readouterr().err


LOGMAN_SESSIONS = """
Data Collector Set                      Type                          Status
-------------------------------------------------------------------------------
Circular Kernel Context Logger          Trace                         Running
Eventlog-Security                       Trace                         Running
mytrace                                 Trace                         Running

The command completed successfully.
"""


def logman_detail(guid: str) -> str:
    return (
        "Name:                 mytrace\nStatus:               Running\nRoot Path:            C:\\\n\n"
        "Provider:\nName:                 MyCompany-MyService\n"
        f"Provider Guid:        {{{guid.upper()}}}\nLevel:                255\n"
    )


def test_windows_checks_with_a_session_enabling_the_provider() -> None:
    """Elevated, the provider's GUID, and the session logman lists with it enabled."""
    guid = str(provider_id(PROVIDER))
    calls: list[list[str]] = []

    def fake_logman(args: list[str]) -> tuple[int, str]:
        calls.append(args)
        if args == ["query", "-ets"]:
            return 0, LOGMAN_SESSIONS
        return 0, logman_detail(guid) if args[1] == "mytrace" else "Name: other\n"

    checks = by_name(windows_checks(PROVIDER, admin=lambda: True, run_logman=fake_logman))
    assert checks["administrator"].state == OK
    assert guid in checks["provider"].detail
    assert checks["sessions"].state == OK and checks["sessions"].detail.endswith("mytrace")
    assert ["query", "Circular Kernel Context Logger", "-ets"] in calls


def test_windows_checks_unelevated_and_no_session() -> None:
    """Not elevated: a failure naming 'Run as administrator' and Performance Log Users; no session: a note."""

    def fake_logman(args: list[str]) -> tuple[int, str]:
        return (0, LOGMAN_SESSIONS) if args == ["query", "-ets"] else (0, "Name: x\n")

    checks = by_name(windows_checks(PROVIDER, [4], admin=lambda: False, run_logman=fake_logman))
    assert checks["administrator"].state == FAIL
    assert "Run as administrator" in checks["administrator"].fix
    assert "Performance Log Users" in checks["administrator"].fix
    assert checks["sessions"].state == NOTE and "logman start" in checks["sessions"].detail
    assert " 0x4 " in checks["sessions"].detail


def test_logman_parsers() -> None:
    """Session names with spaces from the table; provider GUIDs matched braced or not, any case."""
    assert parse_session_names(LOGMAN_SESSIONS) == [
        "Circular Kernel Context Logger",
        "Eventlog-Security",
        "mytrace",
    ]
    guid = "6f1c2a9e-8c1d-4f3e-9a57-1b2c3d4e5f60"
    assert session_has_provider(logman_detail(guid), guid)
    assert not session_has_provider(logman_detail(guid), "00000000-0000-0000-0000-000000000000")


def test_doctor_runs_the_windows_checks_on_windows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On win32 the command runs the Windows checks (logman failing there is a note)."""
    monkeypatch.setattr(doc, "_PLATFORM", "win32")
    monkeypatch.setattr(win, "is_admin", lambda: True)
    monkeypatch.setattr(win, "logman", lambda args: (127, "logman not found"))
    monkeypatch.setattr(
        win.windows_checks, "__kwdefaults__", {"admin": win.is_admin, "run_logman": win.logman}
    )
    rc, out = doctor(capsys, PROVIDER)
    assert rc == 0, out
    assert "[ ok ] administrator" in out and "[note] sessions" in out


def test_a_kernel_without_sysctl_keeps_the_default_paranoid_level(tmp_path: Path) -> None:
    """No /proc/sys/kernel/perf_event_paranoid (no sysctl): root passes, another user fails with the
    fix that works there (root or CAP_PERFMON), not a sysctl that does not exist."""
    opts = make_machine(tmp_path)
    (tmp_path / "proc" / "sys" / "kernel" / "perf_event_paranoid").unlink()
    assert by_name(linux_checks(Roots(opts[1], opts[3], opts[5])))["perf_event_paranoid"].state == OK
    (tmp_path / "proc" / "self" / "status").write_text(f"Uid:\t{UID}\t{UID}\t{UID}\t{UID}\nCapEff:\t0\n")
    check = by_name(linux_checks(Roots(opts[1], opts[3], opts[5])))["perf_event_paranoid"]
    assert check.state == FAIL
    assert "CAP_PERFMON" in check.fix and "sysctl" not in check.fix
