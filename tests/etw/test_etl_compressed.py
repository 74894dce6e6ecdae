"""Compressed and 32-bit .etl files: PerfView's real compressed recording read whole (every one of
its 168,298 events, as dissect.etl counts them), crafted compressed buffers of TraceLogging events,
and pointer-sized fields read at each event's own width.
"""

from __future__ import annotations

import dataclasses
import io
import json
import struct
from collections import Counter
from pathlib import Path

import pytest

from structlog_etw.cli import main
from structlog_etw.etw.etl import EtlEvent, EtlFile
from tests.etw.test_lzxpress import net_x86_etl
from tests.helpers import etl as build
from tests.helpers.shared_data import import_or_skip

#: dissect.etl 3.14's count of the event records of net.4.5.2.x86.etl (the vectors' README).
NET_X86_EVENTS = 168_298


class TestTheRealCompressedFile:
    """PerfView's compressed recording of a 32-bit .NET process (../shared/vectors/perfview)."""

    def test_decode_json_accounts_for_every_event(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``decode --json``: exit 0, no problem, all 168,298 records counted as not TraceLogging."""
        code = main(["decode", str(net_x86_etl(tmp_path)), "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert out == ""  # no TraceLogging events in it
        assert f"{NET_X86_EVENTS} events not TraceLogging (not decoded)" in err
        assert "problem" not in err

    def test_every_record_by_kind_and_width(self, tmp_path: Path) -> None:
        """The reader's records: kernel, manifest (CLR) and classic, 32-bit ones among them, no problem."""
        with EtlFile.open(net_x86_etl(tmp_path)) as f:
            kinds = Counter((e.kind, e.pointer_size) for e in f.events_by_time())
            assert f.problem_count == 0, f.problems
            assert f.header.pointer_size == 8  # a 64-bit kernel's session; the process was 32-bit
        assert sum(kinds.values()) == NET_X86_EVENTS
        assert kinds[("manifest", 4)] == 39_425  # EVENT_HEADER32: the 32-bit process's CLR events
        assert kinds[("manifest", 8)] == 1_073
        assert {kind for kind, _ in kinds} == {"system", "manifest", "classic"}

    def test_the_same_records_as_dissect_etl(self, tmp_path: Path) -> None:
        """dissect.etl (pinned) frames the same number of records, with the same timestamps in file order."""
        etl = import_or_skip("dissect.etl.etl")
        path = net_x86_etl(tmp_path)
        with path.open("rb") as fh:
            theirs = [r.header.time_delta for r in _dissect_records(etl.ETL(fh))]
        with EtlFile.open(path) as f:
            ours = [e.timestamp for e in f.events()]
        assert len(ours) == len(theirs) == NET_X86_EVENTS
        assert ours == theirs

    def test_time_order_is_by_time(self, tmp_path: Path) -> None:
        """``events_by_time`` of the compressed file: each CPU's records merged, times never go back."""
        with EtlFile.open(net_x86_etl(tmp_path)) as f:
            stamps = [e.timestamp for e in f.events_by_time() if e.timestamp is not None]
        assert len(stamps) == NET_X86_EVENTS
        assert stamps == sorted(stamps)


def _dissect_records(etl: object) -> list[object]:
    """Every record dissect.etl frames, buffer by buffer (its iteration, without parsing payloads)."""
    return [record for buffer in etl.buffers() for record in buffer]  # type: ignore[attr-defined]


class TestCraftedCompressedBuffers:
    """TraceLogging events in buffers compressed as ETW compresses them (tests/helpers/etl.py)."""

    def test_compressed_and_plain_buffers_side_by_side(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Events of a compressed buffer are decoded like a plain one's, in time order across both."""
        t = build.START_TIMESTAMP
        packed = build.compressed_buffer(
            [build.tl_event(name=f"c{i}", value=i, timestamp=t + 10 * i) for i in range(0, 60, 2)], cpu=0
        )
        plain = build.buffer(
            [build.tl_event(name=f"p{i}", value=i, timestamp=t + 10 * i) for i in range(1, 60, 2)], cpu=1
        )
        assert len(packed) < 0x2000 // 4  # really compressed
        path = tmp_path / "mixed.etl"
        path.write_bytes(build.etl_file(packed, plain))
        code = main(["decode", str(path), "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert [line["fields"]["n"] for line in lines] == list(range(60))
        assert [line["cpu"] for line in lines] == [i % 2 for i in range(60)]

    def test_a_compressed_buffer_as_the_python_reader_sees_it(self) -> None:
        """``EtlFile.events``: the records of a compressed buffer, offsets past its header."""
        data = build.etl_file(build.compressed_buffer([build.tl_event(name="z", pid=7)], cpu=2))
        f = EtlFile(io.BytesIO(data), "mem")
        (event,) = [e for e in f.events() if e.kind == "tracelogging"]
        assert f.problem_count == 0
        assert event.decoded is not None and event.decoded.name == "z"
        assert (event.cpu, event.pid, event.offset) == (2, 7, build.HEADER_BUFFER_SIZE + build.BUFFER_HEADER)


_POINTER_FIELD = b"p\0\x10"  # one field "p", InType POINTER (16)


def _pointer_event(header_type: int, value: bytes, header_flags: int = 0) -> bytes:
    items = build.ext_item(build.EXT_PROV_TRAITS, build.traits("Ptr"), more=True)
    items += build.ext_item(build.EXT_EVENT_SCHEMA_TL, build.metadata("ptr", _POINTER_FIELD), more=False)
    return build.event_record(items, value, header_type=header_type, header_flags=header_flags)


class TestPointerWidths:
    """A POINTER field is as wide as its event's pointers: 4 bytes in a 32-bit process's event."""

    def _events(self, *records: bytes, pointer_size: int = 8) -> list[object]:
        head = build.session_header_buffer(pointer_size=pointer_size)
        f = EtlFile(io.BytesIO(head + build.buffer(list(records))), "mem")
        return [e for e in f.events() if e.kind == "tracelogging"]

    @pytest.mark.parametrize("session_pointers", [4, 8])
    def test_event_header32_reads_4_bytes(self, session_pointers: int) -> None:
        """An EVENT_HEADER32 record (type 0x12): the POINTER field is 4 bytes, whatever the session's."""
        (event,) = self._events(
            _pointer_event(0x12, struct.pack("<I", 0xDEADBEEF)), pointer_size=session_pointers
        )
        assert event.error is None, event.error  # type: ignore[attr-defined]
        assert event.decoded.fields == {"p": 0xDEADBEEF}  # type: ignore[attr-defined]
        assert event.pointer_size == 4  # type: ignore[attr-defined]

    def test_event_header64_reads_8_bytes(self) -> None:
        """An EVENT_HEADER64 record: 8 bytes, in a 32-bit session's file too."""
        value = 0x0000_7FF6_1234_5678
        (event,) = self._events(_pointer_event(0x13, struct.pack("<Q", value)), pointer_size=4)
        assert event.decoded.fields == {"p": value}  # type: ignore[attr-defined]

    def test_the_32_bit_flag_wins(self) -> None:
        """EVENT_HEADER_FLAG_32_BIT_HEADER on a 64-bit record type: 4 bytes."""
        (event,) = self._events(_pointer_event(0x13, struct.pack("<I", 42), header_flags=0x20))
        assert event.decoded.fields == {"p": 42}  # type: ignore[attr-defined]

    def test_a_4_byte_pointer_in_a_64_bit_event_is_an_error(self) -> None:
        """The width is not guessed: 4 bytes where 8 are due is a decode error, reported."""
        (event,) = self._events(_pointer_event(0x13, struct.pack("<I", 42)))
        assert event.decoded is None and "truncated" in (event.error or "")  # type: ignore[attr-defined]

    def test_a_32_bit_session_with_a_compressed_buffer(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """A 32-bit session (PointerSize 4) whose buffer is compressed: decoded, exit 0."""
        head = build.session_header_buffer(pointer_size=4)
        rec = _pointer_event(0x12, struct.pack("<I", 7))
        path = tmp_path / "x86.etl"
        path.write_bytes(head + build.compressed_buffer([rec, rec]))
        code = main(["decode", str(path), "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert [json.loads(line)["fields"] for line in out.splitlines()] == [{"p": 7}, {"p": 7}]


class TestTheReadersEvents:
    """The reader builds each :class:`EtlEvent` from one dict of its fields: the same events."""

    def test_equal_to_the_constructors(self, tmp_path: Path) -> None:
        """Every record of the real file equals ``EtlEvent(**its fields)``; frozen, hashable, replaceable."""
        with EtlFile.open(net_x86_etl(tmp_path)) as f:
            for i, event in enumerate(f.events()):
                again = EtlEvent(
                    **{field.name: getattr(event, field.name) for field in dataclasses.fields(EtlEvent)}
                )
                assert event == again and hash(event) == hash(again) and repr(event) == repr(again)
                if i == 20_000:
                    break
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.cpu = 9  # type: ignore[misc]
        assert dataclasses.replace(event, cpu=9).cpu == 9
