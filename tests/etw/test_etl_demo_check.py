"""The Windows job's .etl check (tests/helpers/windows_etl_demo.py) accepts what the demo logged, only that.

The job itself needs Windows (logman, a real session, ``structlog-etw decode`` of the .etl); here
the comparison is held to its word with decoded lines made from the demo's own capture: a
faithful file passes, every kind of difference fails.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from structlog_etw.cli.demo import PROVIDER
from structlog_etw.read.decoded import EventMeta
from structlog_etw.read.writers.json_lines import event_json
from structlog_etw.testing import capture_etw_events
from tests.helpers import windows_etl_demo as check
from tests.helpers.shared_data import REPO

PID, TID = 4242, 777


def _as_decoded_from_the_file() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The demo logged once more (fresh activity ids), as ``decode --json`` prints it, and its sidecar."""
    start = time.time_ns()
    with capture_etw_events("tracelogging") as capture:
        log, provider = check._logger()
        from structlog_etw.cli.demo import log_sequence  # noqa: PLC0415

        count = log_sequence(log)
        provider.close()
    end = time.time_ns()
    lines = []
    for i, event in enumerate(capture.events):
        assert event.decoded is not None
        meta = EventMeta(realtime_ns=start + i, cpu=1, pid=PID, tid=TID)
        lines.append(json.loads(event_json(event.decoded, meta)))
    done = {"pid": PID, "tid": TID, "start_ns": start, "end_ns": end, "count": count}
    return lines, done


class TestTheEtlCheck:
    """What the Windows job's comparison accepts and refuses."""

    def test_what_the_demo_logged_passes(self) -> None:
        """The demo's events (other activity ids, other providers' lines around them) compare equal."""
        lines, done = _as_decoded_from_the_file()
        other = {**lines[0], "provider": "SomeoneElse", "name": "noise"}
        assert check.compare([other, *lines], check.expected_events(), done) == []

    @pytest.mark.parametrize(
        ("change", "problem"),
        [
            (lambda ls: ls[3]["fields"].__setitem__("order_id", 43), "fields"),
            (lambda ls: ls[4].__setitem__("level", 4), "level"),
            (lambda ls: ls[3].__setitem__("keyword", 1), "keyword"),
            (lambda ls: ls[0].__setitem__("opcode", 0), "opcode"),
            (lambda ls: ls[1].__setitem__("name", "request_begun"), "name"),
            (lambda ls: ls.pop(2), "events of"),
            (lambda ls: ls.append(copy.deepcopy(ls[-1])), "events of"),
            (lambda ls: ls.__setitem__(slice(2, 4), [ls[3], ls[2]]), "name"),
            (lambda ls: ls[5].__setitem__("pid", 1), "pid/tid"),
            (lambda ls: ls[5].__setitem__("tid", 1), "pid/tid"),
            (lambda ls: ls[6].__setitem__("timestamp", "2020-01-01T00:00:00.000000000Z"), "logging window"),
            (lambda ls: ls[7].__setitem__("activity_id", ls[0]["activity_id"]), "activity_id"),
            (lambda ls: ls[2].__setitem__("activity_id", None), "activity_id"),
            (
                lambda ls: ls[2].__setitem__("activity_id", "00000000-0000-0000-0000-000000000001"),
                "activity_id",
            ),
            (lambda ls: ls.append({"error": "truncated record", "raw": ""}), "undecodable"),
            (lambda ls: ls[6]["fields"].__setitem__("duration_ns", -1), "duration_ns"),
            (lambda ls: ls[6]["fields"].pop("duration_ns"), "duration_ns"),
            (lambda ls: ls[6]["fields"].__setitem__("status", 500), "fields"),
        ],
    )
    def test_every_difference_fails(self, change: Any, problem: str) -> None:
        """A changed value, a missing, extra or reordered event, another process or thread, a time outside
        the logging window, a broken activity pattern or an undecodable line is reported."""
        lines, done = _as_decoded_from_the_file()
        change(lines)
        problems = check.compare(lines, check.expected_events(), done)
        assert any(problem in p for p in problems), problems

    def test_check_exits_non_zero_on_a_difference(self, tmp_path: Any) -> None:
        """``check`` reads the sidecar and the JSON lines; a difference is exit status 1, a match 0."""
        lines, done = _as_decoded_from_the_file()
        etl = tmp_path / "demo.etl"
        (tmp_path / "demo.etl.json").write_text(json.dumps(done))
        decoded = tmp_path / "demo.jsonl"
        decoded.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        assert check.main(["check", str(etl), str(decoded)]) == 0
        lines[0]["fields"]["path"] = "/orders/41"
        decoded.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        assert check.main(["check", str(etl), str(decoded)]) == 1
        assert PROVIDER == "StructlogEtw_Demo"


class TestTheWindowsJob:
    """The Windows job runs the .etl proof after the ETW tests; nothing in it may fail quietly."""

    def test_record_decode_and_check_run_in_order_after_the_etw_tests(self) -> None:
        """record, ``structlog-etw decode --json``, check, by logman then by WPR with the ``wprp``
        profile: in order, after the no-skip ETW test step."""
        workflow = (REPO / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
        windows = workflow[workflow.index("\n  windows:") : workflow.index("\n  macos:")]
        steps = [
            "Every ETW end-to-end test ran (no skips)",
            "run: python -m tests.helpers.windows_etl_demo record demo.etl",
            "run: structlog-etw decode --json demo.etl > demo.jsonl",
            "run: python -m tests.helpers.windows_etl_demo check demo.etl demo.jsonl",
            "run: python -m tests.helpers.windows_etl_demo record-wpr demo-wpr.etl",
            "run: structlog-etw decode --json demo-wpr.etl > demo-wpr.jsonl",
            "run: python -m tests.helpers.windows_etl_demo check demo-wpr.etl demo-wpr.jsonl",
            "listen smoke test",
        ]
        where = [windows.find(step) for step in steps]
        assert -1 not in where and where == sorted(where), dict(zip(steps, where, strict=True))
        assert "continue-on-error" not in windows


@pytest.mark.skipif(sys.platform == "win32", reason="on Windows these steps really record (the Windows job)")
class TestTheRecordingRefusesToPretend:
    """Where the recording cannot be real, its steps fail (exit 1): the job cannot pass on a skip."""

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PATH": "", "PYTHONPATH": str(REPO)}  # no logman on the (empty) PATH
        return subprocess.run(
            [sys.executable, "-m", "tests.helpers.windows_etl_demo", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def test_logging_without_etw_fails(self, tmp_path: Any) -> None:
        """The logging step on a provider that is not on ETW exits 1 and writes no sidecar."""
        run = self._run("log", str(tmp_path / "demo.etl.json"))
        assert run.returncode == 1 and "does not write to ETW" in run.stderr, run.stderr
        assert not (tmp_path / "demo.etl.json").exists()

    def test_recording_without_logman_fails(self, tmp_path: Any) -> None:
        """The record step without logman exits 1 and says so."""
        run = self._run("record", str(tmp_path / "demo.etl"))
        assert run.returncode == 1 and "logman is not on PATH" in run.stderr, run.stderr

    def test_recording_without_wpr_fails(self, tmp_path: Any) -> None:
        """The WPR record step without wpr exits 1 and says so."""
        run = self._run("record-wpr", str(tmp_path / "demo-wpr.etl"))
        assert run.returncode == 1 and "wpr is not on PATH" in run.stderr, run.stderr
