"""The Windows CI job's .etl proof: ``logman`` records the demo's provider, ``structlog-etw decode`` shows it.

Run from the repository root on Windows, elevated (the ``windows`` job of .github/workflows/ci.yml)::

    python -m tests.helpers.windows_etl_demo record demo.etl      # logman session around a logging process
    structlog-etw decode --json demo.etl > demo.jsonl
    python -m tests.helpers.windows_etl_demo check demo.etl demo.jsonl
    python -m tests.helpers.windows_etl_demo record-wpr demo-wpr.etl  # the same, recorded by WPR

``record`` starts a real ETW session with ``logman`` (the demo provider's GUID, every level and
keyword, 64 KB buffers, into ``FILE.etl``), runs a second process that logs the demo's sequence
(:func:`structlog_etw.cli.demo.log_sequence`) through ``EtwRenderer`` on the real ETW backend and
writes what it did into ``FILE.etl.json`` (pid, thread id, time window, the provider's counters),
and stops the session.  ``check`` compares the JSON lines of ``decode`` with what the same
sequence becomes in a TraceLogging capture (the bytes the ETW backend hands EventWriteTransfer):
the same events in the same order, each with the same name, level, keyword, opcode, tag, id,
version and fields (after the JSON conventions of ``decode --json``; the activity's
``duration_ns`` only has to fit the logging window), the activity and related ids in the same
pattern, the logging process' pid and thread id, and a time inside its window.
``record-wpr`` records the same way with Windows Performance Recorder instead: the profile is
the one ``structlog-etw wprp`` prints for the demo provider (``wpr -start FILE.wprp -filemode``,
``wpr -stop FILE.etl``), so the job shows a user's WPR recording decoded exactly.
Any difference, an undecodable line, a missing tool, a provider that is not on ETW or that
counted an error exits non-zero: the job fails, nothing is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SESSION = "structlog-etw-ci-demo"
#: The keys of a ``decode --json`` line that must equal the capture's.
COMPARED = ("provider", "name", "level", "keyword", "tag", "opcode", "id", "version", "fields")
#: Fields whose value differs from run to run: the activity's duration (in its Stop event),
#: checked to lie inside the logging window instead.
VARYING = ("duration_ns",)
#: How far (ns) an event's time may lie outside the logging process' own clock readings.
TIME_SLACK_NS = 2_000_000_000


class CheckFailed(Exception):
    """The recording or the comparison failed (the message says what)."""


def _logger() -> Any:
    """The demo's logger: ``EtwRenderer`` for the demo provider, every level (as ``demo`` builds it)."""
    import structlog  # noqa: PLC0415

    from structlog_etw import EtwRenderer  # noqa: PLC0415
    from structlog_etw.cli.demo import ORDERS_KEYWORD, PROVIDER  # noqa: PLC0415

    renderer = EtwRenderer(PROVIDER, keywords=(ORDERS_KEYWORD,))
    log = structlog.wrap_logger(
        None, processors=[renderer], wrapper_class=structlog.make_filtering_bound_logger(0)
    )
    return log, renderer.provider


def log_demo(sidecar: Path) -> None:
    """In the logging process: log the demo sequence through real ETW; write what was done to ``sidecar``."""
    from structlog_etw.cli.demo import log_sequence  # noqa: PLC0415

    log, provider = _logger()
    status = provider.status
    if not status.available or provider.stats()["format"] != "tracelogging":
        raise CheckFailed(f"the demo provider does not write to ETW: {status} {provider.stats()}")
    if not provider.slot(5, 1).enabled:
        raise CheckFailed("the logman session did not enable the demo provider (no enable callback)")
    start = time.time_ns()
    count = log_sequence(log)
    end = time.time_ns()
    stats = provider.stats()
    provider.close()
    if stats["written"] != count or stats["dropped"] or stats["errors"] or stats["truncated"]:
        raise CheckFailed(f"the provider did not write every event: {stats}")
    sidecar.write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "tid": threading.get_native_id(),
                "start_ns": start,
                "end_ns": end,
                "count": count,
                "stats": {
                    k: v for k, v in stats.items() if k in ("written", "dropped", "errors", "truncated")
                },
            }
        )
    )


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(argv), flush=True)
    run = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if run.stdout.strip():
        print(run.stdout.rstrip(), flush=True)
    if run.stderr.strip():
        print(run.stderr.rstrip(), file=sys.stderr, flush=True)
    if check and run.returncode != 0:
        raise CheckFailed(f"{argv[0]} exited with {run.returncode}")
    return run


def record(etl: Path) -> None:
    """``logman`` session for the demo provider into ``etl`` around a process that logs the demo."""
    from structlog_etw.cli.demo import PROVIDER  # noqa: PLC0415
    from structlog_etw.formats.tracelogging import provider_id  # noqa: PLC0415

    logman = shutil.which("logman")
    if logman is None:
        raise CheckFailed("logman is not on PATH")
    _run(logman, "stop", SESSION, "-ets", check=False)  # a session left by an earlier run
    etl.unlink(missing_ok=True)
    guid = "{" + str(provider_id(PROVIDER)) + "}"
    _run(logman, "start", SESSION, "-p", guid, "0xffffffffffffffff", "5", "-o", str(etl), "-bs", "64", "-ets")
    try:
        sidecar = Path(str(etl) + ".json")
        sidecar.unlink(missing_ok=True)
        _run(sys.executable, "-m", "tests.helpers.windows_etl_demo", "log", str(sidecar))
    finally:
        _run(logman, "stop", SESSION, "-ets")
    if not etl.is_file() or etl.stat().st_size == 0:
        raise CheckFailed(f"logman wrote no {etl}")
    print(f"recorded {etl} ({etl.stat().st_size} bytes)")


def record_wpr(etl: Path) -> None:
    """``wpr`` with the profile ``structlog-etw wprp`` writes, around a process that logs the demo."""
    from structlog_etw.cli.demo import PROVIDER  # noqa: PLC0415

    wpr = shutil.which("wpr")
    if wpr is None:
        raise CheckFailed("wpr is not on PATH")
    profile = etl.with_suffix(".wprp")
    made = _run(sys.executable, "-m", "structlog_etw", "wprp", PROVIDER)
    profile.write_text(made.stdout, encoding="utf-8")
    _run(wpr, "-cancel", check=False)  # a recording left by an earlier run
    etl.unlink(missing_ok=True)
    _run(wpr, "-start", str(profile), "-filemode")
    try:
        sidecar = Path(str(etl) + ".json")
        sidecar.unlink(missing_ok=True)
        _run(sys.executable, "-m", "tests.helpers.windows_etl_demo", "log", str(sidecar))
    finally:
        _run(wpr, "-stop", str(etl))
    if not etl.is_file() or etl.stat().st_size == 0:
        raise CheckFailed(f"wpr wrote no {etl}")
    print(f"recorded {etl} ({etl.stat().st_size} bytes) with {profile}")


def expected_events() -> list[dict[str, Any]]:
    """What the demo sequence becomes, as ``decode --json`` lines without the capture metadata."""
    from structlog_etw.cli.demo import log_sequence  # noqa: PLC0415
    from structlog_etw.read.writers.json_lines import event_json  # noqa: PLC0415
    from structlog_etw.testing import capture_etw_events  # noqa: PLC0415

    with capture_etw_events("tracelogging") as capture:
        log, provider = _logger()
        log_sequence(log)
        provider.close()
    lines = []
    for event in capture.events:
        assert event.decoded is not None
        lines.append(json.loads(event_json(event.decoded)))
    return lines


def _time_ns(stamp: str) -> int:
    """``2026-12-01T10:11:12.123456789Z`` -> ns since the Unix epoch (UTC)."""
    import datetime as dt  # noqa: PLC0415

    whole, _, frac = stamp.rstrip("Z").partition(".")
    base = dt.datetime.fromisoformat(whole).replace(tzinfo=dt.timezone.utc)
    return int(base.timestamp()) * 1_000_000_000 + int((frac + "000000000")[:9])


def _same_pattern(name: str, got: Sequence[str | None], want: Sequence[str | None]) -> list[str]:
    """Ids differ between runs; their pattern (which events share one, which have none) may not."""
    problems = []
    mapping: dict[str, str] = {}
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if (g is None) != (w is None):
            problems.append(f"event {i}: {name} {g!r}, the capture has {'one' if w else 'none'}")
        elif g is not None and w is not None and mapping.setdefault(w, g) != g:
            problems.append(f"event {i}: {name} {g} where the capture repeats the id of an earlier event")
    if len(set(mapping.values())) != len(mapping):
        problems.append(f"{name}s that differ in the capture are equal in the file")
    return problems


def compare(
    lines: Sequence[dict[str, Any]], expected: Sequence[dict[str, Any]], done: dict[str, Any]
) -> list[str]:
    """Every difference between the decoded lines and the expected events (empty: the same)."""
    from structlog_etw.cli.demo import PROVIDER  # noqa: PLC0415

    problems = [f"an undecodable line: {line}" for line in lines if "error" in line]
    ours = [line for line in lines if line.get("provider") == PROVIDER]
    if len(ours) != len(expected) or len(expected) != done["count"]:
        problems.append(f"{len(ours)} events of {PROVIDER} in the file, {len(expected)} in the capture")
        return problems
    for i, (got, want) in enumerate(zip(ours, expected, strict=True)):
        got_fields, want_fields = dict(got.get("fields") or {}), dict(want.get("fields") or {})
        for name in VARYING:
            if name in want_fields:
                value = got_fields.pop(name, None)
                want_fields.pop(name)
                if (
                    not isinstance(value, int)
                    or not 0 <= value <= done["end_ns"] - done["start_ns"] + TIME_SLACK_NS
                ):
                    problems.append(
                        f"event {i} ({want['name']}): {name} {value!r} does not fit the logging window"
                    )
        seen, logged = {**got, "fields": got_fields}, {**want, "fields": want_fields}
        for key in COMPARED:
            if seen.get(key) != logged.get(key):
                problems.append(
                    f"event {i} ({want['name']}): {key} is {seen.get(key)!r}, logged {logged.get(key)!r}"
                )
        if (got.get("pid"), got.get("tid")) != (done["pid"], done["tid"]):
            problems.append(
                f"event {i}: pid/tid {got.get('pid')}/{got.get('tid')}, logged by {done['pid']}/{done['tid']}"
            )
        stamp = got.get("timestamp")
        when = _time_ns(stamp) if isinstance(stamp, str) else None
        if when is None or not done["start_ns"] - TIME_SLACK_NS <= when <= done["end_ns"] + TIME_SLACK_NS:
            problems.append(f"event {i}: time {stamp!r} outside the logging window")
        if not isinstance(got.get("cpu"), int):
            problems.append(f"event {i}: no cpu")
    for key in ("activity_id", "related_id"):
        problems += _same_pattern(key, [g.get(key) for g in ours], [w.get(key) for w in expected])
    return problems


def check(etl: Path, decoded: Path) -> None:
    """Compare ``decode --json`` of ``etl`` (in ``decoded``) with the demo's events; raise on a difference."""
    done = json.loads(Path(str(etl) + ".json").read_text())
    text = decoded.read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    problems = compare(lines, expected_events(), done)
    if problems:
        raise CheckFailed(
            "structlog-etw decode does not show what the demo logged:\n  " + "\n  ".join(problems)
        )
    print(f"{len(lines)} decoded lines: the {done['count']} demo events, exactly as logged")


def main(argv: Sequence[str]) -> int:
    """``record``/``record-wpr FILE.etl`` | ``log SIDECAR.json`` | ``check FILE.etl DECODED.jsonl``"""
    try:
        if len(argv) == 2 and argv[0] == "record":
            record(Path(argv[1]))
        elif len(argv) == 2 and argv[0] == "record-wpr":
            record_wpr(Path(argv[1]))
        elif len(argv) == 2 and argv[0] == "log":
            log_demo(Path(argv[1]))
        elif len(argv) == 3 and argv[0] == "check":
            check(Path(argv[1]), Path(argv[2]))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except CheckFailed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
