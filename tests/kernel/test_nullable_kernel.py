"""``None`` through the real kernel: structlog -> user_events -> perf -> null (marker ``kernel``).

perf-decode is not built in the guest (no test here finds it), so perf's capture is read by the
project's decoder and by ``structlog-etw decode --perf-json`` (run in-process), which writes
perf-decode's JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from kernel_harness import PerfSession

from structlog_etw import EtwRenderer
from structlog_etw.backends.user_events import UserEventsBackend
from structlog_etw.cli import main
from structlog_etw.formats.eventheader import ENC_BINARY_LENGTH16_CHAR8, FMT_FLOAT, FMT_SIGNED_INT

pytestmark = pytest.mark.kernel


class TestNullInPerf:
    """A None logged through the real kernel is read back as null, and keeps its key's type."""

    def test_none_and_sometimes_none_numbers_decode_as_null_with_one_field_type(
        self, provider_name: str, perf_session: Callable[..., PerfSession], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """perf's capture decodes None as None, and a key once None keeps one nullable type."""
        renderer = EtwRenderer(provider_name)
        try:
            assert isinstance(renderer.provider.backend, UserEventsBackend), renderer.provider.stats()
            log = structlog.wrap_logger(structlog.PrintLogger(), processors=[renderer])
            values: list[tuple[Any, Any]] = [(None, None), (200, 0.5), (None, None), (404, None), (None, 1.5)]
            with perf_session([f"{provider_name}_L4K1"]) as session:
                for status, ratio in values:
                    log.info("request", status=status, ratio=ratio, path="/x")
            assert renderer.provider.stats()["written"] == len(values)
        finally:
            renderer.provider.close()
        events = session.events()
        assert [(e.fields["status"], e.fields["ratio"], e.fields["path"]) for e in events] == [
            (s, r, "/x") for s, r in values
        ]
        types = {
            (f.name, f.encoding, f.format)
            for e in events
            for f in e.field_list
            if f.name in ("status", "ratio")
        }
        # status: only ints and None -> one nullable int64 type; ratio: None before its first
        # float is a nullable int64 (no other type known), after it a nullable float.
        assert {t for t in types if t[0] == "status"} == {
            ("status", ENC_BINARY_LENGTH16_CHAR8, FMT_SIGNED_INT)
        }
        ratio_types = [next(f.format for f in e.field_list if f.name == "ratio") for e in events]
        assert ratio_types[1:] == [FMT_FLOAT] * 4
        assert main(["decode", "--perf-json", str(session.path)]) == 0
        out = capsys.readouterr().out
        assert '"status":null' in out, out  # perf-decode's compact JSON
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        got = [(r["status"], r["ratio"]) for r in rows if r.get("n", "").endswith(":request")]
        assert got == values
