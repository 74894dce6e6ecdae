"""The Linux checks of ``structlog-etw doctor``, in order (docs/cli/doctor.md).

Everything is read below :class:`Roots` (procfs, /boot, tracefs), and who "this user" is comes
from ``<proc>/self/status`` (uid, groups, effective capabilities), so a prepared tree describes a
whole machine and user.  On the real /proc the access answers come from :func:`os.access` (ACLs,
read-only mounts); in a prepared tree from the files' mode bits against that identity.
"""

from __future__ import annotations

import gzip
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

from ._checks import FAIL, NOTE, OK, Check

__all__ = ["Identity", "Roots", "linux_checks", "parse_status"]

_CAP_DAC_OVERRIDE = 1
_CAP_DAC_READ_SEARCH = 2
_CAP_SYS_ADMIN = 21
_CAP_PERFMON = 38
_DEFAULT_TRACEFS = "/sys/kernel/tracing"
_READ_MAX = 1 << 22
#: A sysctl file is read with a small count: procfs refuses a read larger than kmalloc can allocate.
_SYSCTL_MAX = 4096
_CONTAINERS = (
    "in a container, mount the host's tracefs: docker run -v /sys/kernel/tracing:/sys/kernel/tracing ...; "
    "Kubernetes: a hostPath volume of /sys/kernel/tracing (docs/linux.md)"
)


@dataclass
class Roots:
    """Where the checks read the machine: ``tracefs`` (None: found in ``<proc>/self/mounts``),
    ``proc`` and ``boot``."""

    tracefs: str | None = None
    proc: str = "/proc"
    boot: str = "/boot"

    @property
    def real(self) -> bool:
        """Whether these are the running machine's roots (then :func:`os.access` answers)."""
        return os.path.realpath(self.proc) == "/proc"


@dataclass
class Identity:
    """This user, from ``<proc>/self/status``: effective uid/gid, groups, effective capabilities."""

    uid: int = 0
    gid: int = 0
    groups: set[int] = field(default_factory=set)
    caps: int = 0

    def has(self, cap: int) -> bool:
        """Whether capability number ``cap`` is effective."""
        return bool(self.caps >> cap & 1)

    @property
    def root(self) -> bool:
        """uid 0."""
        return self.uid == 0

    @property
    def name(self) -> str:
        """The user's name (its uid when it has none)."""
        import pwd  # noqa: PLC0415 - Unix only: this module imports on every OS

        try:
            return pwd.getpwuid(self.uid).pw_name
        except (KeyError, OverflowError):
            return str(self.uid)


def _read(path: str, limit: int = _READ_MAX) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def parse_status(text: str) -> Identity:
    """The :class:`Identity` in a ``/proc/<pid>/status`` text."""
    ident = Identity()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        try:
            if key == "Uid" and len(parts) > 1:
                ident.uid = int(parts[1])
            elif key == "Gid" and len(parts) > 1:
                ident.gid = int(parts[1])
            elif key == "Groups":
                ident.groups = {int(p) for p in parts}
            elif key == "CapEff" and parts:
                ident.caps = int(parts[0], 16)
        except ValueError:
            continue
    return ident


class _Machine:
    """The roots and this user, and the access rules between them."""

    def __init__(self, roots: Roots) -> None:
        self.roots = roots
        status = _read(os.path.join(roots.proc, "self", "status"))
        if status is not None:
            self.ident = parse_status(status)
        else:
            self.ident = Identity(os.geteuid(), os.getegid(), set(os.getgroups()), 0)

    def may(self, path: str, mode: int) -> bool:
        """Whether this user may access ``path`` with ``mode`` (os.R_OK | os.W_OK | os.X_OK)."""
        if self.roots.real:
            return os.access(path, mode)
        try:
            st = os.stat(path)
        except OSError:
            return False
        ident = self.ident
        if ident.root or ident.has(_CAP_DAC_OVERRIDE):
            return True
        if ident.has(_CAP_DAC_READ_SEARCH) and not mode & os.W_OK:
            return True
        if st.st_uid == ident.uid:
            bits = st.st_mode >> 6
        elif st.st_gid == ident.gid or st.st_gid in ident.groups:
            bits = st.st_mode >> 3
        else:
            bits = st.st_mode
        want = (4 if mode & os.R_OK else 0) | (2 if mode & os.W_OK else 0) | (1 if mode & os.X_OK else 0)
        return bits & want == want

    @property
    def privileged_perf(self) -> bool:
        """Root, CAP_PERFMON or CAP_SYS_ADMIN: perf_event_paranoid does not apply."""
        i = self.ident
        return i.root or i.has(_CAP_PERFMON) or i.has(_CAP_SYS_ADMIN)


def _release(m: _Machine) -> str:
    text = _read(os.path.join(m.roots.proc, "sys", "kernel", "osrelease"), _SYSCTL_MAX)
    return text.strip() if text else os.uname().release


def _version(release: str) -> tuple[int, int] | None:
    head = release.split("-", 1)[0].split(".")
    try:
        return int(head[0]), int(head[1])
    except (IndexError, ValueError):
        return None


def _kernel(release: str) -> Check:
    v = _version(release)
    if v is None:
        return Check("kernel", NOTE, f"Linux {release} (version not understood)")
    if v < (6, 4):
        return Check(
            "kernel",
            FAIL,
            f"Linux {release}: user_events needs Linux 6.4 or later",
            "boot Linux 6.4+ built with CONFIG_USER_EVENTS=y (upgrade the kernel or the distribution)",
        )
    return Check("kernel", OK, f"Linux {release}")


def _config(m: _Machine, release: str) -> tuple[Check, bool | None]:
    """CONFIG_USER_EVENTS from /proc/config.gz or /boot/config-<release>: (check, built in?)."""
    sources = [os.path.join(m.roots.proc, "config.gz"), os.path.join(m.roots.boot, f"config-{release}")]
    for path in sources:
        try:
            if path.endswith(".gz"):
                with gzip.open(path, "rb") as f:
                    text = f.read(_READ_MAX).decode("utf-8", "replace")
            else:
                with open(path, "rb") as f:
                    text = f.read(_READ_MAX).decode("utf-8", "replace")
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        for line in text.splitlines():
            if line.startswith("CONFIG_USER_EVENTS="):
                value = line.split("=", 1)[1]
                if value == "y":
                    return Check("kernel config", OK, f"CONFIG_USER_EVENTS=y ({path})"), True
        return (
            Check(
                "kernel config",
                FAIL,
                f"this kernel ({release}) is built without user_events: no CONFIG_USER_EVENTS=y in {path}",
                "boot a kernel built with CONFIG_USER_EVENTS=y (Linux 6.4+)",
            ),
            False,
        )
    return (
        Check("kernel config", NOTE, "no readable /proc/config.gz or /boot/config-*: tracefs below tells"),
        None,
    )


def _mounts(m: _Machine) -> list[str]:
    text = (
        _read(os.path.join(m.roots.proc, "self", "mounts"))
        or _read(os.path.join(m.roots.proc, "mounts"))
        or ""
    )
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "tracefs":
            out.append(parts[1].replace("\\040", " "))
    return out


def _present(directory: str, name: str) -> bool:
    """Whether ``directory/name`` exists, counting a directory closed to this user as holding it."""
    try:
        os.stat(os.path.join(directory, name))
    except PermissionError:
        return os.path.isdir(directory)
    except OSError:
        return False
    return True


def _tracefs(m: _Machine) -> tuple[Check, str | None]:
    given = m.roots.tracefs
    if given is not None:
        if os.path.isdir(given):
            return Check("tracefs", OK, f"{given} (given)"), given
        return Check("tracefs", FAIL, f"{given} (given) is no directory", "give the tracefs directory"), None
    mounts = _mounts(m)
    if not mounts and m.roots.real:  # not listed (a container's view, an automount): where the backend looks
        mounts = [
            p for p in (_DEFAULT_TRACEFS, "/sys/kernel/debug/tracing") if _present(p, "user_events_data")
        ]
    if not mounts:
        return (
            Check(
                "tracefs",
                FAIL,
                "tracefs is not mounted",
                f"sudo mount -t tracefs nodev {_DEFAULT_TRACEFS}\n{_CONTAINERS}",
            ),
            None,
        )
    where = _DEFAULT_TRACEFS if _DEFAULT_TRACEFS in mounts else mounts[0]
    others = [p for p in mounts if p != where]
    also = f" (also at {', '.join(others)})" if others else ""
    return Check("tracefs", OK, f"mounted at {where}{also}"), where


def _user_events(m: _Machine, tracefs: str, release: str, built_in: bool | None) -> Check:
    data = os.path.join(tracefs, "user_events_data")
    try:
        os.stat(data)
    except FileNotFoundError:
        return Check(
            "user_events",
            FAIL,
            f"no user_events in this kernel ({release}): {tracefs} has no user_events_data",
            "boot Linux 6.4+ built with CONFIG_USER_EVENTS=y",
        )
    except OSError:
        if built_in:
            return Check("user_events", OK, f"built in (kernel config); {tracefs} is closed to this user")
        return Check("user_events", NOTE, f"cannot look into {tracefs} as this user: see write access")
    return Check("user_events", OK, data)


def _write_access(m: _Machine, tracefs: str) -> Check:
    data = os.path.join(tracefs, "user_events_data")
    if m.may(data, os.W_OK) and m.may(tracefs, os.X_OK):
        return Check("write access", OK, f"{m.ident.name} may write {data}")
    lines = ["sudo groupadd --system tracing   # once"]
    if not m.may(tracefs, os.X_OK):
        lines.append(f"sudo chmod o+x {tracefs}")
    lines += [
        f"sudo chgrp tracing {data}",
        f"sudo chmod g+w {data}",
        f"sudo usermod -aG tracing {m.ident.name}   # then log in again / restart the app",
        "(tracefs forgets modes at reboot: apply them at boot, docs/linux.md)",
    ]
    return Check(
        "write access", FAIL, f"{m.ident.name} (uid {m.ident.uid}) may not write {data}", "\n".join(lines)
    )


def _paranoid(m: _Machine) -> Check:
    text = _read(os.path.join(m.roots.proc, "sys", "kernel", "perf_event_paranoid"), _SYSCTL_MAX)
    try:
        value = int(text.strip()) if text else None
    except ValueError:
        value = None
    who = _privilege(m)
    if value is None:  # a kernel without sysctl: the default level (2) holds and cannot be lowered
        if m.privileged_perf:
            return Check(
                "perf_event_paranoid", OK, f"no sysctl to read (the default, 2, does not limit {who})"
            )
        return Check(
            "perf_event_paranoid",
            FAIL,
            f"no /proc/sys/kernel/perf_event_paranoid: the default (2) holds, {who} may not record",
            "record as root (sudo structlog-etw record ...) or with CAP_PERFMON",
        )
    if m.privileged_perf:
        return Check("perf_event_paranoid", OK, f"{value} (does not limit {who})")
    if value <= -1:
        return Check("perf_event_paranoid", OK, f"{value}: unprivileged users may record tracepoints")
    return Check(
        "perf_event_paranoid",
        FAIL,
        f"{value}: {who} may not record tracepoints system-wide (needs -1, or CAP_PERFMON)",
        "sudo sysctl -w kernel.perf_event_paranoid=-1\n"
        "(keep it: echo kernel.perf_event_paranoid=-1 | sudo tee /etc/sysctl.d/99-perf.conf),\n"
        "or record as root (sudo structlog-etw record ...) or with CAP_PERFMON",
    )


def _privilege(m: _Machine) -> str:
    i = m.ident
    if i.root:
        return "root"
    if i.has(_CAP_PERFMON):
        return f"{i.name} (CAP_PERFMON)"
    if i.has(_CAP_SYS_ADMIN):
        return f"{i.name} (CAP_SYS_ADMIN)"
    return f"{i.name} (no CAP_PERFMON)"


def _tracepoint_dirs(tracefs: str, names: list[str]) -> list[str]:
    return [os.path.join(tracefs, "events", "user_events", n) for n in names]


def _tracefs_read(m: _Machine, tracefs: str, names: list[str] | None, provider: str | None) -> Check:
    """What record reads in tracefs: the ring headers, the tracepoint list, each tracepoint's id/format."""
    events = os.path.join(tracefs, "events")
    user = os.path.join(events, "user_events")
    heads = [os.path.join(events, "header_page"), os.path.join(events, "header_event")]
    missing: list[str] = []
    if not m.may(tracefs, os.X_OK):
        missing.append(f"sudo chmod o+x {tracefs}")
    if not m.may(events, os.X_OK):
        missing.append(f"sudo chmod o+x {events}")
    if not m.may(events, os.X_OK) or (os.path.lexists(user) and not m.may(user, os.R_OK | os.X_OK)):
        missing.append(f"sudo chmod o+rx {user}")
    unread = [h for h in heads if not m.may(h, os.R_OK)]
    if unread:
        missing.append(f"sudo chmod o+r {' '.join(unread)}")
    closed = [
        d
        for d in _tracepoint_dirs(tracefs, names or [])
        if not (
            m.may(d, os.X_OK)
            and m.may(os.path.join(d, "id"), os.R_OK)
            and m.may(os.path.join(d, "format"), os.R_OK)
        )
    ]
    if provider is not None and (closed or names is None):
        tps = shlex.quote(os.path.join(user, provider)) + "_*"
        missing.append(f"sudo sh -c 'chmod o+x {tps}; chmod o+r {tps}/id {tps}/format'")
    if not missing:
        return Check("tracefs read", OK, f"{m.ident.name} may read the tracepoints' ids and formats")
    return Check(
        "tracefs read",
        FAIL,
        f"record reads each tracepoint's id and format in {events}: closed to {m.ident.name}",
        "\n".join(
            [
                *missing,
                "(tracepoints registered later get root-only files again: run doctor again),",
                "or record as root: sudo structlog-etw record ...",
            ]
        ),
    )


def _perf_binary() -> Check:
    path = shutil.which("perf")
    if path is None:
        return Check(
            "perf",
            NOTE,
            "no perf binary: structlog-etw record records without it (perf script needs one: "
            "install linux-perf or linux-tools matching the kernel)",
        )
    try:
        proc = subprocess.run([path, "version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("perf", NOTE, f"{path} does not run ({e}): structlog-etw record records without it")
    out = (proc.stdout or proc.stderr).strip().splitlines()
    first = out[0] if out else ""
    if proc.returncode != 0:
        return Check("perf", NOTE, f"{path} fails ({first}): structlog-etw record records without it")
    return Check("perf", OK, f"{first} ({path})")


def parse_user_events_status(text: str) -> dict[str, list[str]]:
    """``user_events_status`` -> tracepoint name -> what has it enabled (ftrace, perf, other)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith((" ", "\t")) or ":" in line.split(" ", 1)[0]:
            continue  # the summary lines: "Active: 3", "Busy: 1", "Max: ..."
        name, _, rest = line.partition(" ")
        users = rest.split("Used by", 1)[1].split() if "Used by" in rest else []
        out[name] = users
    return out


def _provider_checks(
    m: _Machine, tracefs: str, provider: str, keywords: list[int] | None, group: str | None
) -> tuple[list[Check], list[str] | None]:
    """The provider's checks, and its tracepoints' names (None: this user cannot see them)."""
    from ..perf.listener import match_tracepoint  # noqa: PLC0415

    status_path = os.path.join(tracefs, "user_events_status")
    text = _read(status_path) if m.may(status_path, os.R_OK) else None
    where = "user_events_status"
    if text is None:
        listing = os.path.join(tracefs, "events", "user_events")
        try:
            if not m.may(listing, os.R_OK | os.X_OK):
                raise PermissionError(listing)
            text = "\n".join(os.listdir(listing))
            where = "events/user_events"
        except OSError:
            return [
                Check(
                    "tracepoints",
                    NOTE,
                    f"cannot read {status_path} as {m.ident.name}: run doctor as root to see "
                    f"{provider}'s tracepoints",
                )
            ], None
    table = parse_user_events_status(text)
    mine = {}
    for name, users in table.items():
        lk = match_tracepoint(provider, name, None, None, group)
        if lk is None or (keywords and lk[1] not in keywords):
            continue
        mine[name] = users
    names = sorted(mine)
    if not names:
        return [
            Check(
                "tracepoints",
                NOTE,
                f"none of {provider}'s tracepoints is registered now: the application registers them as "
                "it logs (structlog-etw record and tracepoints --register do it beforehand)",
            )
        ], []
    checks = [Check("tracepoints", OK, f"{len(names)} registered ({where}): {', '.join(names)}")]
    if where == "user_events_status":
        enabled = [f"{n} by {', '.join(mine[n])}" for n in names if mine[n]]
        idle = [n for n in names if not mine[n]]
        detail = "; ".join(enabled) if enabled else "none enabled: no session records them now"
        if enabled and idle:
            detail += f"; not enabled: {', '.join(idle)}"
        checks.append(Check("enabled", OK, detail))
    else:
        checks.append(
            Check("enabled", NOTE, f"user_events_status is closed to {m.ident.name}: run doctor as root")
        )
    return checks, names


def linux_checks(
    roots: Roots, provider: str | None = None, keywords: list[int] | None = None, group: str | None = None
) -> list[Check]:
    """Every Linux check, in order (later checks that need an earlier one's answer are left out
    when it failed)."""
    m = _Machine(roots)
    release = _release(m)
    checks = [_kernel(release)]
    config, built_in = _config(m, release)
    checks.append(config)
    tracefs_check, tracefs = _tracefs(m)
    checks.append(tracefs_check)
    if tracefs is not None:
        ue = _user_events(m, tracefs, release, built_in)
        checks.append(ue)
        if ue.state != FAIL:
            checks.append(_write_access(m, tracefs))
    checks.append(_paranoid(m))
    names: list[str] | None = []
    provider_checks: list[Check] = []
    if tracefs is not None and provider is not None:
        provider_checks, names = _provider_checks(m, tracefs, provider, keywords, group)
    if tracefs is not None:
        checks.append(_tracefs_read(m, tracefs, names, provider))
    checks.append(_perf_binary())
    checks += provider_checks
    return checks
