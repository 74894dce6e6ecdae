"""The one reporter of ``decode``'s outcome (perf.data and .etl alike): stderr lines and exit status."""

from __future__ import annotations

import pytest

from structlog_etw.cli._report import MAX_REPORTED, Outcome, cannot_open, report
from structlog_etw.etw.etl import EtlError
from structlog_etw.perf.datafile import PerfDataError


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.splitlines()


class TestReport:
    """What a decode did, on stderr, and its exit status."""

    def test_nothing_wrong_is_silent_and_0(self, capsys: pytest.CaptureFixture[str]) -> None:
        """No problem, loss, note or late event: no line, exit status 0."""
        assert report("f", Outcome(5, [])) == 0
        assert _lines(capsys) == []

    def test_every_part_in_its_order_and_1(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Problems (the first ones, then a count), losses, notes, late events, the summary; status 1."""
        problems = [f"p{i}" for i in range(MAX_REPORTED + 3)]
        outcome = Outcome(7, problems, notes=["a note\x1b[31m"], lost=4, lost_by="the session", late=2)
        assert report("f.data", outcome) == 1
        lines = _lines(capsys)
        prog = "structlog-etw decode: f.data: "
        assert lines == [
            *(prog + p for p in problems[:MAX_REPORTED]),
            prog + "... and 3 more problems",
            prog + "the session lost 4 events while recording",
            prog + "a note\\x1b[31m",  # what came from the file is escaped
            prog + "2 events could not be put in time order (written late)",
            prog + f"7 events decoded; {len(problems)} problems (file damaged or truncated?)",
        ]

    def test_a_count_beyond_the_texts_kept(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``count`` problems in all though only some texts were kept: the count is reported."""
        assert report("f", Outcome(0, ["only one kept"], count=250)) == 1
        lines = _lines(capsys)
        assert lines[1] == f"structlog-etw decode: f: ... and {250 - MAX_REPORTED} more problems"
        assert lines[-1].endswith("0 events decoded; 250 problems (file damaged or truncated?)")

    def test_losses_and_notes_alone_are_no_problem(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A recorder's losses and notes are reported, but the status stays 0."""
        assert report("f", Outcome(3, [], notes=["2 samples of cycles: not tracepoints"], lost=1)) == 0
        assert len(_lines(capsys)) == 2


class TestCannotOpen:
    """A file that cannot be opened: one message, exit status 2, never a traceback."""

    @pytest.mark.parametrize(("errors", "kind"), [(PerfDataError, "perf.data"), (EtlError, ".etl")])
    def test_each_kind_of_failure(
        self, capsys: pytest.CaptureFixture[str], errors: type[Exception], kind: str
    ) -> None:
        """The system's reason, the reader's own message, or what a crafted header raised."""
        assert cannot_open("x", FileNotFoundError(2, "No such file or directory"), errors, kind) == 2
        assert cannot_open("x", errors("x: not a file of its kind"), errors, kind) == 2
        assert cannot_open("x", MemoryError("\x1b]0;"), errors, kind) == 2
        assert _lines(capsys) == [
            "structlog-etw decode: x: No such file or directory",
            "structlog-etw decode: x: not a file of its kind",
            f"structlog-etw decode: x: not a readable {kind} file: MemoryError('\\x1b]0;')",
        ]
