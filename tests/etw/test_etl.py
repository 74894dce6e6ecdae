"""Reading .etl files: the real file Windows wrote (PerfView's primitive-types.etl) against PerfView's
own reading of it, crafted files for what that file lacks, and ``decode`` on both.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from structlog_etw.cli import main
from structlog_etw.etw.etl import CLOCK_QPC, EtlError, EtlEvent, EtlFile, is_etl
from tests.helpers import etl as build
from tests.helpers.shared_data import REPO, shared_dir

_FILETIME_UNIX_EPOCH = 116_444_736_000_000_000
_START_TIME = 0x01D7A58B4C3947CE  # the header's StartTime (FILETIME) as the file holds it


def _baseline() -> list[dict[str, Any]]:
    """PerfView's baseline: one dict per EVENT line (``ms``, ``what``, ``PID``, ..., the fields)."""
    path = shared_dir() / "vectors" / "perfview" / "primitive-types.baseline.txt"
    build.primitive_types_etl()  # skip/fail as for the file itself
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"EVENT ([\d,.]+): (.+?) (PID=.*)$", line)
        if not m:
            continue
        pairs = [p.split("=", 1) for p in m.group(3).split("; ") if "=" in p]
        events.append({"ms": m.group(1), "what": m.group(2), **{k: v.rstrip(";") for k, v in pairs}})
    return events


def _perfview_value(value: Any) -> str:
    """A decoded value as PerfView's printer shows it (see the vectors' README for its quirks)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) and value >= 2**63:  # it shows UINT64 as signed
        return str(value - 2**64)
    if isinstance(value, dt.datetime):
        return value.strftime("%y/%m/%d %H:%M:%S.%f")
    return str(value)


def _same(ours: str, theirs: str) -> bool:
    """PerfView cuts long values and ends them with ``...``: compare the part it shows."""
    return ours.startswith(theirs[:-3]) if theirs.endswith("...") else ours == theirs


def _decode_json(path: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[Any], str]:
    code = main(["decode", str(path), *args])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


class TestThePrimitiveTypesFile:
    """``decode --json`` of the real file: PerfView's five events, every field, pid, tid, level, time."""

    def test_decode_json_gives_perfviews_five_events_field_by_field(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Each JSON line has PerfView's provider, name, PID, TID, processor, relative time and fields."""
        code, lines, err = _decode_json(build.primitive_types_etl(), "--json", capsys=capsys)
        assert code == 0, err
        expected = [e for e in _baseline() if e["what"] == "solar_system/PrimitiveTypesTest"]
        assert len(lines) == len(expected) == 5
        with EtlFile.open(build.primitive_types_etl()) as f:
            decoded = [e.decoded for e in f.events() if e.decoded is not None]
        for line, event, theirs in zip(lines, decoded, expected, strict=True):
            assert f"{line['provider']}/{line['name']}" == theirs["what"]
            assert (line["pid"], line["tid"], line["cpu"]) == (
                int(theirs["PID"]),
                int(theirs["TID"]),
                int(theirs["ProceNum"]),
            )
            assert line["level"] == 5 and line["keyword"] == 0 and line["opcode"] == 0
            assert f"{line['time_ns'] / 1e6:,.3f}" == theirs["ms"]  # ms after the session header event
            assert len(event.raw) - int.from_bytes(event.raw[:2], "little") == int(theirs["DataLen"])
            assert list(line["fields"]) == [k for k in theirs if k.endswith("_type")]
            for name, value in event.fields.items():
                if name == "system_time_type":  # PerfView's SYSTEMTIME column is not the milliseconds
                    assert _perfview_value(value)[:17] == theirs[name][:17]
                    continue
                assert _same(_perfview_value(value), theirs[name]), (name, value, theirs[name])
            assert line["fields"]["string_type"] == event.fields["string_type"]

    def test_the_event_times_are_utc_from_the_files_clock(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Time = StartTime + (QPC - the header event's QPC) / PerfFreq, to the nanosecond."""
        code, lines, _err = _decode_json(build.primitive_types_etl(), "--json", capsys=capsys)
        assert code == 0
        with EtlFile.open(build.primitive_types_etl()) as f:
            tl = [e for e in f.events() if e.kind == "tracelogging"]
        start_ns = (_START_TIME - _FILETIME_UNIX_EPOCH) * 100
        assert [e.realtime_ns for e in tl] == [start_ns + e.time_ns for e in tl if e.time_ns is not None]
        assert tl[0].time_ns == 2_942_305_700  # (0x25E33AB9546 - 0x25E31EA9F75) ticks of 100 ns
        assert tl[0].time == dt.datetime(2021, 9, 9, 14, 59, 35, 800156, tzinfo=dt.timezone.utc)
        assert lines[0]["timestamp"] == "2021-09-09T14:59:35.800156700Z"

    def test_the_values_are_what_the_bytes_say(self) -> None:
        """Mercury's values from the bytes: UINT64 2**64 - 204, the char 'M', SYSTEMTIME .799."""
        with EtlFile.open(build.primitive_types_etl()) as f:
            mercury = next(e.decoded for e in f.events() if e.decoded is not None)
        utc = dt.timezone.utc
        assert mercury.fields["int64_type"] == 2**64 - 204
        assert mercury.fields["char_type"] == ord("M")
        assert mercury.fields["guid_type"] == uuid.UUID("0ad614c4-0ef4-4225-8013-f44f37cb0397")
        assert mercury.fields["file_time_type"] == dt.datetime(2021, 9, 9, 14, 59, 35, 799000, tzinfo=utc)
        assert mercury.fields["system_time_type"] == dt.datetime(2021, 9, 9, 14, 59, 35, 799000, tzinfo=utc)
        by_name = {f.name: f for f in mercury.field_list}
        assert struct.unpack("<8H", by_name["system_time_type"].raw)[2] == 4  # Thursday

    def test_the_session_header_is_perfviews_eventtrace_header(self) -> None:
        """The header event's fields as PerfView shows them (the file's own clock description)."""
        (theirs,) = [e for e in _baseline() if e["what"] == "Windows Kernel/EventTrace"]
        with EtlFile.open(build.primitive_types_etl()) as f:
            h = f.header
            header_event = next(f.events())
        number = {k: int(theirs[k].replace(",", "")) for k in theirs if re.fullmatch(r"-?[\d,]+", theirs[k])}
        assert (h.buffer_size, h.version, h.provider_version, h.number_of_processors) == (
            number["BufferSize"],
            number["Version"],
            number["ProviderVersion"],
            number["NumberOfProcessors"],
        )
        assert (h.timer_resolution, h.buffers_written, h.pointer_size, h.events_lost) == (
            number["TimerResolution"],
            number["BuffersWritten"],
            number["PointerSize"],
            number["EventsLost"],
        )
        assert (h.cpu_speed_mhz, h.perf_freq, h.clock_type, h.buffers_lost) == (
            number["CPUSpeed"],
            number["PerfFreq"],
            number["ReservedFlags"],
            number["BuffersLost"],
        )
        assert h.clock_type == CLOCK_QPC
        assert h.time_zone_bias_minutes == number["UtcOffsetMinutes"]
        assert h.session_name == theirs["SessionName"]
        assert _same(h.log_file_name, theirs["LogFileName"])
        for ours, key in ((h.start_time, "StartTime"), (h.end_time, "EndTime"), (h.boot_time, "BootTime")):
            when = dt.datetime(1601, 1, 1) + dt.timedelta(microseconds=ours // 10)
            assert _same(when.strftime("%y/%m/%d %H:%M:%S.%f"), theirs[key]), key
        assert (header_event.kind, header_event.source, header_event.time_ns) == (
            "system",
            "EventTrace/Header",
            0,
        )
        assert (header_event.pid, header_event.tid, header_event.cpu) == (
            int(theirs["PID"]),
            int(theirs["TID"]),
            0,
        )

    def test_the_other_records_are_listed_as_not_tracelogging(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The session's own records are counted on stderr, no problem: exit 0."""
        code = main(["decode", str(build.primitive_types_etl())])
        out, err = capsys.readouterr()
        assert code == 0
        assert out.count("PrimitiveTypesTest") == 5
        assert (
            "2 events not TraceLogging (not decoded): 1 system EventTrace/Header, 1 system EventTrace/80"
            in err
        )
        assert "problem" not in err


class TestTheFormatIsToldByContent:
    """``decode`` picks the .etl reader from the bytes, whatever the file is called."""

    def test_an_etl_file_named_perf_data_is_decoded_as_etl(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A copy named ``perf.data`` gives the same five events."""
        copy = tmp_path / "perf.data"
        copy.write_bytes(build.primitive_types_etl().read_bytes())
        code, lines, _err = _decode_json(copy, "--json", capsys=capsys)
        assert code == 0 and len(lines) == 5

    def test_a_file_named_etl_that_is_not_one_goes_to_the_perf_reader(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Bytes that are no .etl file are not read as one: perf.data's message, exit 2."""
        bogus = tmp_path / "trace.etl"
        bogus.write_bytes(b"\0" * 200)
        assert main(["decode", str(bogus)]) == 2
        assert "perf.data" in capsys.readouterr().err

    def test_is_etl_wants_the_session_header_record(self) -> None:
        """The first record must be a system record of hook 0; a short head is no .etl file."""
        head = build.header_buffer()[:128]
        assert is_etl(head)
        assert not is_etl(head[:79])
        assert not is_etl(head[:0x4E] + b"\x01\x00" + head[0x50:])  # hook 1, not the header

    def test_perf_json_is_refused_for_an_etl_file(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--perf-json`` is perf-decode's format of perf samples: exit 2 with a reason."""
        assert main(["decode", str(build.primitive_types_etl()), "--perf-json"]) == 2
        assert "--perf-json is for perf.data files" in capsys.readouterr().err


class TestFiltersAndOutputs:
    """The .etl events go through decode's filters and writers like perf.data's."""

    def _file(self, tmp_path: Path) -> Path:
        records = [
            build.tl_event("Alpha", "a1", 1, level=4, keyword=0x1, timestamp=build.START_TIMESTAMP + 100),
            build.tl_event("Alpha", "a2", 2, level=2, keyword=0x4, timestamp=build.START_TIMESTAMP + 200),
            build.tl_event("Beta", "b1", 3, level=5, keyword=0x2, timestamp=build.START_TIMESTAMP + 300),
        ]
        path = tmp_path / "crafted.etl"
        path.write_bytes(build.etl_file(build.buffer(records, cpu=1)))
        return path

    def _names(self, path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
        code, lines, err = _decode_json(path, "--json", *args, capsys=capsys)
        assert code == 0, err
        return [line["name"] for line in lines]

    def test_level_keyword_provider_and_event_filters(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--level, --keyword, --provider and --event select as for perf.data."""
        path = self._file(tmp_path)
        assert self._names(path, capsys) == ["a1", "a2", "b1"]
        assert self._names(path, capsys, "--level", "warning") == ["a2"]
        assert self._names(path, capsys, "--keyword", "0x6") == ["a2", "b1"]
        assert self._names(path, capsys, "--provider", "Beta") == ["b1"]
        assert self._names(path, capsys, "--event", "a1", "--event", "b1") == ["a1", "b1"]

    def test_text_and_chrome_trace_outputs(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Text lines name provider and event; the timeline has one instant per event."""
        path = self._file(tmp_path)
        assert main(["decode", str(path)]) == 0
        text = capsys.readouterr().out.splitlines()
        assert len(text) == 3 and "a1" in text[0] and "Alpha" in text[0] and "n=1" in text[0]
        assert main(["decode", str(path), "--format", "chrome-trace"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert [e["name"] for e in doc["traceEvents"]] == ["a1", "a2", "b1"]
        assert [e["ts"] for e in doc["traceEvents"]] == [10.0, 20.0, 30.0]  # microseconds since the start

    def test_activity_and_related_ids(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The header's ActivityId and the RELATED_ACTIVITYID item become the event's ids."""
        activity, related = uuid.uuid4(), uuid.uuid4()
        rec = build.tl_event(activity=activity.bytes_le, related=related.bytes_le, opcode=1)
        path = tmp_path / "ids.etl"
        path.write_bytes(build.etl_file(build.buffer([rec])))
        code, (line,), _err = _decode_json(path, "--json", capsys=capsys)
        assert code == 0
        assert (line["activity_id"], line["related_id"], line["opcode"]) == (str(activity), str(related), 1)

    def test_time_order_merges_the_cpus_buffers(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Buffers of two CPUs interleave by time; --order file keeps the stored order."""
        t = build.START_TIMESTAMP
        cpu0 = build.buffer(
            [build.tl_event(name="x1", timestamp=t + 10), build.tl_event(name="x3", timestamp=t + 30)]
        )
        cpu1 = build.buffer(
            [build.tl_event(name="y2", timestamp=t + 20), build.tl_event(name="y4", timestamp=t + 40)], cpu=1
        )
        path = tmp_path / "two-cpus.etl"
        path.write_bytes(build.etl_file(cpu0, cpu1))
        assert self._names(path, capsys) == ["x1", "y2", "x3", "y4"]
        assert self._names(path, capsys, "--order", "file") == ["x1", "x3", "y2", "y4"]
        _code, lines, _err = _decode_json(path, "--json", capsys=capsys)
        assert [line["cpu"] for line in lines] == [0, 1, 0, 1]

    def test_manifest_events_are_not_tracelogging(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An EVENT_HEADER event without a schema item is counted by provider, never an error."""
        guid = uuid.UUID("11111111-2222-3333-4444-555555555555")
        manifest = build.event_record(b"", b"\1\2\3\4", provider_id=guid, channel=16)
        path = tmp_path / "mixed.etl"
        path.write_bytes(build.etl_file(build.buffer([manifest, build.tl_event(), manifest])))
        code = main(["decode", str(path)])
        err = capsys.readouterr().err
        assert code == 0, err
        assert f"2 manifest {guid}" in err

    def test_the_python_reader_yields_every_record(self, tmp_path: Path) -> None:
        """``EtlFile.events`` yields the header records, then the TraceLogging event with its place."""
        data = build.etl_file(build.buffer([build.tl_event(pid=7, tid=8)], cpu=3))
        f = EtlFile(io.BytesIO(data), "mem")
        events: list[EtlEvent] = list(f.events())
        assert [e.kind for e in events] == ["system", "system", "tracelogging"]
        last = events[-1]
        assert (last.pid, last.tid, last.cpu, last.offset) == (
            7,
            8,
            3,
            build.HEADER_BUFFER_SIZE + build.BUFFER_HEADER,
        )
        assert last.decoded is not None and last.decoded.fields == {"n": 7}
        assert f.problems == [] and f.problem_count == 0

    def test_a_file_that_is_not_etl_raises_etl_error(self) -> None:
        """``EtlFile`` on other bytes: EtlError naming the file."""
        with pytest.raises(EtlError, match=r"mem: not an \.etl file"):
            EtlFile(io.BytesIO(b"PERFILE2" + bytes(200)), "mem")


class TestTheSessionClock:
    """The header's layout for 32- and 64-bit sessions, and each clock type's time."""

    def _file(self, **kwargs: Any) -> EtlFile:
        stamp = kwargs.get("start_timestamp", build.START_TIMESTAMP)
        head = build.session_header_buffer(**kwargs)
        event = build.tl_event(timestamp=stamp + 3_000_000)
        return EtlFile(io.BytesIO(head + build.buffer([event])), "mem")

    def test_a_32_bit_session_header(self) -> None:
        """4-byte name pointers: the clock and the names still found (the header is 8 bytes shorter)."""
        f = self._file(pointer_size=4, session="thirty-two")
        assert (f.header.pointer_size, f.header.session_name, f.header.log_file_name) == (
            4,
            "thirty-two",
            "C:\\crafted.etl",
        )
        assert (f.header.perf_freq, f.header.start_time, f.header.time_zone_bias_minutes) == (
            10_000_000,
            _START_TIME,
            -60,
        )
        assert [e.kind for e in f.events()] == ["system", "tracelogging"]

    def test_qpc_at_another_frequency(self) -> None:
        """QPC at 3 MHz: 3,000,000 ticks after the header event is one second later."""
        f = self._file(perf_freq=3_000_000)
        event = list(f.events())[-1]
        assert event.time_ns == 1_000_000_000
        assert event.realtime_ns == (_START_TIME - _FILETIME_UNIX_EPOCH) * 100 + 1_000_000_000

    def test_system_time_clock(self) -> None:
        """Clock type 2: the raw values are FILETIMEs, taken as they are."""
        f = self._file(clock_type=2, start_timestamp=_START_TIME)
        event = list(f.events())[-1]
        assert event.realtime_ns == (_START_TIME + 3_000_000 - _FILETIME_UNIX_EPOCH) * 100
        assert event.time_ns == 300_000_000

    def test_cpu_cycle_clock(self) -> None:
        """Clock type 3: cycles at CpuSpeedInMHz (3 MHz here: one second)."""
        f = self._file(clock_type=3, cpu_speed_mhz=3)
        assert list(f.events())[-1].time_ns == 1_000_000_000

    def test_a_clock_without_frequency_gives_no_time(self) -> None:
        """PerfFreq 0 with the QPC clock: events have no time rather than a division by zero."""
        event = list(self._file(perf_freq=0).events())[-1]
        assert (event.realtime_ns, event.time_ns, event.time) == (None, None, None)
        assert event.decoded is not None


class TestPipesAreNotSniffed:
    """Telling an .etl file by content never reads from a pipe (its bytes would be lost to perf's reader)."""

    @pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
    def test_a_named_pipe_goes_to_the_perf_reader_unread(self, tmp_path: Path) -> None:
        """``_is_etl`` of a FIFO is False without opening it (opening would block with no writer)."""
        from structlog_etw.cli.decode import _is_etl  # noqa: PLC0415 - the hook itself

        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        assert _is_etl(str(fifo)) is False
        assert _is_etl(str(build.primitive_types_etl())) is True


class TestPerfDataIsNeverEtl:
    """No perf.data file reads as an .etl file, whatever its header's bytes at the .etl marker."""

    @pytest.mark.parametrize("magic", [b"PERFILE2", b"2ELIFREP"])
    def test_perf_magic_with_etl_bytes_where_the_session_header_would_be(self, magic: bytes) -> None:
        """The .etl session-record bytes at offset 72, but perf's magic as the buffer size: not .etl."""
        head = bytearray(build.header_buffer()[:128])
        head[:8] = magic
        assert not is_etl(bytes(head))


_MODULES_AFTER_DECODE = """
import contextlib, io, sys
from structlog_etw.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(["decode", "--json", sys.argv[1]])
loaded = sorted(m for m in sys.modules if m.startswith("structlog_etw"))
print(code, [m for m in loaded if m.endswith("encoder") or m.endswith("consumer")])
"""


class TestReadSideImports:
    """Decoding an .etl file loads no encoder and not the ctypes session consumer."""

    def test_decode_of_an_etl_loads_no_encoder(self) -> None:
        """``decode --json FILE.etl`` in a fresh interpreter: no encoder, no etw.consumer imported."""
        run = subprocess.run(
            [sys.executable, "-c", _MODULES_AFTER_DECODE, str(build.primitive_types_etl())],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=120,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.split(maxsplit=1) == ["0", "[]\n"]
