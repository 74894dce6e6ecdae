"""``structlog-etw tracepoints NAME``: user_events tracepoint names of a provider, and a perf command line.

``--register`` also registers them and holds them until interrupted (or for the life of
``-- COMMAND``), so ``perf record`` can start before the application; ``--persist`` registers
them with the kernel's persistent registration (they outlive this command); ``--delete``
removes them.
"""

from __future__ import annotations

import argparse
import errno
import os
import shlex
import signal
import subprocess
import sys
import threading
from typing import Any

from ..formats._levels import LEVEL_BY_NAME as LEVELS
from ..formats._levels import valid_keyword
from ..formats.eventheader import NAME_MAX, tracepoint_name, validate_provider_name

__all__ = ["TAKES_COMMAND", "add_arguments", "keyword_arg", "level_arg", "run"]

#: ``structlog-etw tracepoints ... --register -- COMMAND``: the command line splits at ``--`` and
#: hands the rest over as ``args.run_command`` (see :func:`structlog_etw.cli.main`).
TAKES_COMMAND = True


def level_arg(text: str) -> int:
    """argparse type for a tracepoint's level: 1..5 or a level name (critical .. debug, verbose).

    The levels structlog-etw writes (and registers tracepoints for) are 1..5; a tracepoint
    ``_L9K1`` would never receive an event.
    """
    value = LEVELS.get(text.lower())
    if value is None:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid level {text!r} (1-5 or one of {', '.join(LEVELS)})"
            ) from None
    if not 1 <= value <= 5:
        raise argparse.ArgumentTypeError(
            f"level {value} out of range 1..5 (1 critical, 2 error, 3 warning, 4 info, 5 debug)"
        )
    return value


def keyword_arg(text: str) -> int:
    """argparse type for a keyword: a 64-bit integer, decimal or ``0x`` hex."""
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid keyword {text!r} (e.g. 1, 0x4)") from None
    if not valid_keyword(value):
        raise argparse.ArgumentTypeError(f"keyword {text} out of range (64-bit)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``tracepoints``."""
    parser.add_argument("provider", metavar="NAME", help="provider name, e.g. MyCompany_MyService")
    parser.add_argument(
        "-k",
        "--keyword",
        type=keyword_arg,
        action="append",
        metavar="K",
        help="keyword (repeatable; default: 1, the renderer's default keyword)",
    )
    parser.add_argument("-g", "--group", help="provider group (lowercase letters and digits)")
    parser.add_argument(
        "-l",
        "--level",
        type=level_arg,
        action="append",
        metavar="L",
        help="level 1-5 or critical/error/warning/info/debug (repeatable; default: all of 1-5)",
    )
    parser.add_argument(
        "-o", "--output", default="perf.data", help="perf output file in the command line (default perf.data)"
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--register",
        action="store_true",
        help="register the tracepoints and hold them until interrupted, or while '-- COMMAND' runs "
        "(its exit status), so perf can start before the application (Linux)",
    )
    what.add_argument(
        "--persist",
        action="store_true",
        help="register them persistently: they stay after this command exits, until deleted "
        "(kernel 6.7+, needs CAP_PERFMON); '-- COMMAND' runs afterwards",
    )
    what.add_argument(
        "--delete", action="store_true", help="delete the tracepoints (e.g. persistent ones) nobody uses"
    )
    parser.epilog = "With --register or --persist, '-- COMMAND [ARGS...]' at the end runs COMMAND."


def run(args: argparse.Namespace) -> int:
    """Print the tracepoint names and a ``perf record`` command; register, hold or delete them."""
    try:
        validate_provider_name(args.provider, args.group)
    except ValueError as exc:
        print(f"structlog-etw tracepoints: {exc}", file=sys.stderr)
        return 2
    register = bool(getattr(args, "register", False))
    persist = bool(getattr(args, "persist", False))
    delete = bool(getattr(args, "delete", False))
    command = list(getattr(args, "run_command", None) or [])
    if getattr(args, "run_command", None) is not None and not (register or persist):
        return _fail("'-- COMMAND' needs --register or --persist", 2)
    levels = sorted(set(args.level or [1, 2, 3, 4, 5]))
    keywords = list(dict.fromkeys(args.keyword or [1]))
    pairs = [(lv, kw) for kw in keywords for lv in levels]
    names = [tracepoint_name(args.provider, lv, kw, args.group) for lv, kw in pairs]
    too_long = [n for n in names if len(n) >= NAME_MAX]  # NAME_MAX counts the NUL
    if too_long:
        print(f"structlog-etw tracepoints: tracepoint name too long: {too_long[0]}", file=sys.stderr)
        return 2
    if delete:
        return _delete(names)
    cmd = ["perf", "record", "-a", "-k", "monotonic", "-o", args.output]
    for n in names:
        cmd += ["-e", f"user_events:{n}"]
    if not (register or persist):
        _print_names(names, default_keyword=not args.keyword)
        print("# Start the application first (perf refuses tracepoints that are not registered yet), then:")
        print("# (or register them first: add --register, and start perf before the application)")
        print(shlex.join(cmd))
        print(f"# and afterwards: structlog-etw decode {shlex.quote(args.output)}")
        return 0
    plan = (names, not args.keyword, cmd, args.output)
    return _register(args.provider, args.group, pairs, plan, persist, command)


def _print_names(names: list[str], *, default_keyword: bool) -> None:
    for n in names:
        print(n)
    print()
    if default_keyword:
        print(
            "# Keyword 1 only (the renderer's default keyword). Events logged with another keyword "
            "(etw_keyword=K, keywords_by_logger) are on other tracepoints: "
            "add -k K for each, e.g. -k 1 -k 0x4"
        )


def _fail(message: str, status: int = 1) -> int:
    print(f"structlog-etw tracepoints: {message}", file=sys.stderr)
    return status


def _register(
    provider: str,
    group: str | None,
    pairs: list[tuple[int, int]],
    plan: tuple[list[str], bool, list[str], str],
    persist: bool,
    command: list[str],
) -> int:
    """Register ``pairs``; then hold them (``--register``) or leave them to the kernel (``--persist``)."""
    names, default_keyword, cmd, output = plan
    if not sys.platform.startswith("linux"):
        return _fail(f"--register and --persist need Linux user_events (this is {sys.platform})")
    from ..backends.base import BackendUnavailable  # noqa: PLC0415 - Linux only, on demand
    from ..backends.user_events import UserEventsBackend  # noqa: PLC0415

    existing = _registered_names() if persist else set()
    try:
        backend = UserEventsBackend(provider, group, persist=persist)
    except BackendUnavailable as exc:
        return _fail(f"cannot register: {exc}")
    try:
        for level, keyword in pairs:
            try:
                backend.open_slot(level, keyword)
            except OSError as exc:
                return _fail(_register_error(exc, persist))
        _print_names(names, default_keyword=default_keyword)
        if persist:
            backend.close()  # the tracepoints stay: the kernel holds them now
            kept = [n for n in names if n in existing]
            if kept:
                print(
                    "# Already registered before (by a running application or holder): the kernel "
                    f"kept them as they were, so they persist only if they did: {', '.join(kept)}",
                    file=sys.stderr,
                )
            print(f"# Registered {_count(names)}, persistent: they stay until deleted")
            print(f"# (structlog-etw tracepoints {shlex.quote(provider)} ... --delete) or the next boot.")
        else:
            print(f"# Registered {_count(names)}.")
        print("# Start perf now, then the application:")
        print(shlex.join(cmd))
        print(f"# and afterwards: structlog-etw decode {shlex.quote(output)}")
        if command:
            if not persist:
                print(f"# Holding them while {shlex.join(command)} runs.", flush=True)
            sys.stdout.flush()
            return _run_command(command)
        if persist:
            sys.stdout.flush()
            return 0
        return _hold("# Holding them until interrupted (Ctrl-C).")
    finally:
        backend.close()


def _count(names: list[str]) -> str:
    return f"{len(names)} tracepoint" + ("" if len(names) == 1 else "s")


def _register_error(exc: OSError, persist: bool) -> str:
    """The message for a refused registration: what is missing and what to do."""
    if persist and exc.errno == errno.EPERM:
        return (
            "persistent registration needs CAP_PERFMON (or CAP_SYS_ADMIN): run it as root or "
            "give it the capability (e.g. sudo, or setcap cap_perfmon+ep on the interpreter); "
            "without it, --register holds the tracepoints while it runs"
        )
    if persist and exc.errno == errno.EINVAL:
        return (
            "this kernel has no persistent user_events registration (USER_EVENT_REG_PERSIST, "
            "Linux 6.7 or later): use --register, which holds the tracepoints while it runs"
        )
    if exc.errno == errno.EADDRINUSE:
        return f"{exc.strerror}: a tracepoint of that name exists with other fields (not an EventHeader one)"
    return f"cannot register: {exc.strerror or exc}"


def _registered_names() -> set[str]:
    """The names ``user_events_status`` lists (empty when it cannot be read)."""
    from ..backends.user_events import find_tracefs  # noqa: PLC0415

    where = find_tracefs()
    if where is None:
        return set()
    try:
        with open(os.path.join(where, "user_events_status"), encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 22)
    except OSError:
        return set()
    return {line.split(" ", 1)[0] for line in text.splitlines() if line and not line.startswith(" ")}


def _run_command(command: list[str]) -> int:
    """Run ``command`` to its end (Ctrl-C reaches it too, as it shares the terminal); its exit status."""
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        return _fail(f"cannot run {command[0]!r}: {exc.strerror or exc}", 127)
    while True:
        try:
            rc = child.wait()
        except KeyboardInterrupt:
            continue  # the child got the same SIGINT; wait for it to finish
        return rc if rc >= 0 else 128 - rc


def _hold(ready: str) -> int:
    """Print ``ready`` once the signal handlers are in place, then wait for SIGINT or SIGTERM (or a
    closed terminal: SIGHUP); exit status 0."""
    done = threading.Event()

    def stop(signum: int, frame: Any) -> None:
        done.set()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        print(ready, flush=True)
        while not done.wait(3600):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("# Released the tracepoints.", file=sys.stderr)
    return 0


def _delete(names: list[str]) -> int:
    """``--delete``: remove each tracepoint; 0 when all are gone (or were never there)."""
    if not sys.platform.startswith("linux"):
        return _fail(f"--delete needs Linux user_events (this is {sys.platform})")
    from ..backends.user_events import delete_tracepoint, find_tracefs  # noqa: PLC0415

    where = find_tracefs()
    if where is None:
        return _fail("no user_events on this kernel (no tracefs with user_events_data)")
    status = 0
    for name in names:
        try:
            delete_tracepoint(name, where)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                print(f"{name}: not registered")
                continue
            if exc.errno == errno.EBUSY:
                reason = "in use (an application has it registered, or a session records it)"
            elif exc.errno == errno.EPERM:
                reason = "permission denied (a persistent tracepoint needs CAP_PERFMON to delete)"
            elif exc.errno in (errno.EACCES,):
                reason = "permission denied opening user_events_data (run as root; see docs/linux.md)"
            else:
                reason = exc.strerror or str(exc)
            print(f"structlog-etw tracepoints: {name}: {reason}", file=sys.stderr)
            status = 1
        else:
            print(f"{name}: deleted")
    return status
