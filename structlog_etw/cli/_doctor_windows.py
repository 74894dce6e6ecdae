"""The Windows checks of ``structlog-etw doctor``, in order (docs/cli/doctor.md).

Writing ETW events needs no privilege; controlling a session (wpr, logman, tracelog,
``structlog-etw listen``) needs an administrator or a member of "Performance Log Users".  Which
sessions have the provider enabled comes from ``logman query -ets`` (the running sessions) and
``logman query NAME -ets`` (each one's providers).  The administrator test and the logman runner
are parameters, so the tests run these checks with recorded logman output on any OS.
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Callable

from ._checks import FAIL, NOTE, OK, Check

__all__ = ["is_admin", "logman", "parse_session_names", "session_has_provider", "windows_checks"]

#: Runs logman with these arguments: (exit code, output).
Logman = Callable[[list[str]], tuple[int, str]]


def is_admin() -> bool:
    """Whether this process runs elevated (shell32's IsUserAnAdmin)."""
    import ctypes  # noqa: PLC0415

    try:
        return bool(ctypes.windll.shell32.IsUserAnAdmin())  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return False


def logman(args: list[str]) -> tuple[int, str]:
    """Run ``logman ARGS`` (exit code, stdout and stderr); 127 when it cannot run."""
    try:
        proc = subprocess.run(["logman", *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)
    return proc.returncode, (proc.stdout or "") + (proc.stderr or "")


def parse_session_names(text: str) -> list[str]:
    """The session names of ``logman query -ets`` (the first column of its table)."""
    lines = text.splitlines()
    names: list[str] = []
    column = None
    for i, line in enumerate(lines):
        if column is None:
            if i + 1 < len(lines) and lines[i + 1].startswith("----") and "Type" in line:
                column = line.index("Type")
            continue
        if line.startswith("----"):
            continue
        if not line.strip():
            if names:
                break
            continue
        name = line[:column].strip()
        if name:
            names.append(name)
    return names


def session_has_provider(text: str, guid: str) -> bool:
    """Whether ``logman query NAME -ets`` output lists provider ``guid``."""
    want = guid.strip("{}").lower()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("provider guid", "guid") and value.strip().strip("{}").lower() == want:
            return True
    return False


def windows_checks(
    provider: str | None,
    keywords: list[int] | None = None,
    *,
    admin: Callable[[], bool] = is_admin,
    run_logman: Logman = logman,
) -> list[Check]:
    """Every Windows check, in order."""
    checks = [
        Check("os", OK, f"Windows {platform.version()}: events are written with ETW (no privilege needed)")
    ]
    elevated = admin()
    if elevated:
        checks.append(Check("administrator", OK, "elevated: may start and stop ETW sessions"))
    else:
        checks.append(
            Check(
                "administrator",
                FAIL,
                "not elevated: recording (wpr, logman, tracelog, structlog-etw listen) needs a session",
                'run the recorder from an elevated prompt ("Run as administrator"), or add the user to '
                '"Performance Log Users": net localgroup "Performance Log Users" %USERNAME% /add '
                "(then log in again)",
            )
        )
    if provider is None:
        return checks
    from ..formats.tracelogging import provider_id  # noqa: PLC0415

    guid = str(provider_id(provider))
    checks.append(Check("provider", OK, f"{provider} is {{{guid}}} (WPR, PerfView, tracelog: *{provider})"))
    code, text = run_logman(["query", "-ets"])
    if code != 0:
        reason = text.strip().splitlines()[-1] if text.strip() else f"exit {code}"
        checks.append(Check("sessions", NOTE, f"logman query -ets failed ({reason}): cannot list sessions"))
        return checks
    enabled = []
    for name in parse_session_names(text):
        code, detail = run_logman(["query", name, "-ets"])
        if code == 0 and session_has_provider(detail, guid):
            enabled.append(name)
    if enabled:
        checks.append(Check("sessions", OK, f"enabled now by: {', '.join(enabled)}"))
    else:
        mask = 0
        for k in keywords or []:
            mask |= k
        kw = f" 0x{mask:x}" if mask else ""
        checks.append(
            Check(
                "sessions",
                NOTE,
                "no running session has it enabled; start one, e.g. "
                f'logman start mytrace -p "{{{guid}}}"{kw} -o trace.etl -ets '
                "(stop: logman stop mytrace -ets)",
            )
        )
    return checks
