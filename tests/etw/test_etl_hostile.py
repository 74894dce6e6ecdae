""".etl files that lie (buffer sizes, filled sizes, record sizes, extended items, metadata): ``decode``
reports each with its offset and exits 1 (2 when the session header itself cannot be read), in
bounded time and memory.

Every file is built in a subprocess under ``RLIMIT_AS`` with a hang timeout
(tests/helpers/hostile.py); what the rest of the file holds is still decoded.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from structlog_etw.cli import main
from structlog_etw.etw.etl import EtlError, EtlFile
from tests.helpers import etl as build

# The child builds the file named by argv[1] (an expression over tests.helpers.etl as `b`), writes
# it to a temporary file and runs `decode --json` on it.
_DECODE_IN_CHILD = """
import struct, sys, tempfile, os
from tests.helpers import etl as b
from tests.helpers.hostile import TRACELOGGING_BOMB
from structlog_etw.cli import main
data = eval(sys.argv[1])
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "hostile.etl")
    with open(path, "wb") as f:
        f.write(data)
    code = main(["decode", path, "--json", *sys.argv[2:]])
sys.stdout.flush()
print("EXIT", code)
"""


def _decode(expr: str, *args: str) -> tuple[int, list[str], str]:
    from tests.helpers.hostile import run_bounded  # noqa: PLC0415 - RLIMIT_AS: not on Windows

    run = run_bounded(_DECODE_IN_CHILD, expr, *args)
    assert not run.hung, f"decode hung on {expr}"
    lines = run.stdout.splitlines()
    assert lines and lines[-1].startswith("EXIT "), (run.returncode, run.stderr[-3000:])
    return int(lines[-1].split()[1]), lines[:-1], run.stderr


def _patched(offset: int, fmt: str, value: int) -> str:
    """An expression: the real file with ``value`` packed at ``offset``."""
    return (
        f"(lambda d: (struct.pack_into({fmt!r}, d, {offset}, {value}), bytes(d))[1])(bytearray(b.etl_file()))"
    )


_GOOD = "b.buffer([b.tl_event(name='good')], cpu=1)"


class TestBufferSizes:
    """A buffer whose size or filled size lies is reported; the buffers before it are decoded."""

    def test_a_buffer_claiming_4_gb(self) -> None:
        """BufferSize 0xFFFFFFF0: nothing allocated for it, its offset named, exit 1."""
        expr = f"b.etl_file({_GOOD}) + (lambda x: struct.pack('<I', 0xFFFFFFF0) + x[4:])({_GOOD})"
        code, lines, err = _decode(expr)
        assert code == 1
        assert len(lines) == 1 and '"name":"good"' in lines[0]
        assert "buffer at offset 16384: size 4294967280 outside 73..16777216" in err

    def test_a_buffer_past_the_end_of_the_file(self) -> None:
        """A buffer cut short: 'truncated at offset', exit 1."""
        code, lines, err = _decode(f"b.etl_file({_GOOD}, {_GOOD}[:5000])")
        assert code == 1 and len(lines) == 1
        assert "truncated at offset 16384: buffer of 8192 bytes, 5000 left in the file" in err

    def test_a_filled_size_past_the_buffer(self) -> None:
        """SavedOffset larger than the buffer: that buffer skipped, the next one read."""
        liar = f"(lambda x: x[:4] + struct.pack('<I', 0x10000) + x[8:])({_GOOD})"
        code, lines, err = _decode(f"b.etl_file({liar}, {_GOOD})")
        assert code == 1 and len(lines) == 1
        assert "buffer at offset 8192: filled size 65536 outside 72..8192" in err
        assert "1 events decoded; 1 problems" in err  # reported once, in time order too

    def test_a_session_header_of_a_lying_size_is_exit_2(self) -> None:
        """The header event's Size past its buffer: the file cannot be read at all, exit 2."""
        code, lines, err = _decode(_patched(72 + 4, "<H", 0xFFF0))
        assert code == 2 and lines == []
        assert "the session header event runs past its buffer" in err

    def test_a_pointer_size_that_cannot_be(self) -> None:
        """PointerSize 3 in the header: exit 2 with the reason."""
        code, _lines, err = _decode(_patched(72 + 32 + 0x2C, "<I", 3))
        assert code == 2
        assert "pointers are 3 bytes" in err

    def test_unused_space_after_the_written_buffers_is_no_damage(self) -> None:
        """Zeros after BuffersWritten buffers (a preallocated file): the end, exit 0."""
        code, lines, err = _decode(f"b.etl_file({_GOOD}) + bytes(3 * 8192)")
        assert code == 0, err
        assert len(lines) == 1

    def test_zeros_before_the_written_buffers_are_reported(self) -> None:
        """The header counts 2 buffers, the second is zeros: a buffer of size 0, exit 1."""
        code, _lines, err = _decode("b.header_buffer() + bytes(8192)")
        assert code == 1
        assert "buffer at offset 8192: size 0 outside 73..16777216" in err

    def test_many_buffers_of_many_cpus_in_time_order(self) -> None:
        """5,000 buffers on 5,000 CPUs (past the merged 4,096): every event, memory bounded."""
        event = "b.tl_event(name='e', value=i, timestamp=10**13 + i)"
        expr = f"b.etl_file(*[b.buffer([{event}], cpu=i, size=4096) for i in range(5000)])"
        code, lines, err = _decode(expr)
        assert code == 0, err[-2000:]
        assert len(lines) == 5000


class TestRecordSizes:
    """A record whose size lies ends its buffer's reading with a problem, never a hang."""

    def test_a_record_of_size_65535_in_a_small_buffer(self) -> None:
        """Size past the filled part: reported with its offset; the next buffer still decoded."""
        liar = "b.buffer([b.tl_event(name='liar', size=0xFFFF)])"
        code, lines, err = _decode(f"b.etl_file({liar}, {_GOOD})")
        assert code == 1
        assert len(lines) == 1 and '"name":"good"' in lines[0]
        assert "record at offset 8264: size 65535 outside 80.." in err

    def test_a_record_of_size_0(self) -> None:
        """Size 0 cannot advance: reported, not looped on."""
        code, lines, err = _decode(f"b.etl_file(b.buffer([b.tl_event(size=0)]), {_GOOD})")
        assert code == 1 and len(lines) == 1
        assert "record at offset 8264: size 0 outside 80.." in err

    def test_a_marker_that_no_etw_writes(self) -> None:
        """A record whose marker flags are not ETW's: the rest of the buffer skipped, exit 1."""
        bad = "b.buffer([bytes(8) + b.tl_event()])"
        code, lines, err = _decode(f"b.etl_file({bad}, {_GOOD})")
        assert code == 1 and len(lines) == 1
        assert "record at offset 8264: unknown marker 0x0000" in err


class TestExtendedItems:
    """Extended items are bounded by their record: lying sizes and endless chains are reported."""

    def test_an_item_of_size_0(self) -> None:
        """Item size 0 (data 15): the event is undecodable, named by offset, exit 1."""
        rec = "b.event_record(struct.pack('<HHHH', 0, 12, 0, 15) + bytes(16), b'')"
        code, lines, err = _decode(f"b.etl_file(b.buffer([{rec}]), {_GOOD})")
        assert code == 1
        assert '"name":"good"' in lines[-1]
        assert "extended item at offset 8344: size 0 (data 15) outside the record" in err

    def test_an_endless_chain_of_items_in_64_kb_records(self) -> None:
        """Records of 8,000 empty items each saying 'more follow': bounded work, each reported."""
        rec = "b.event_record(struct.pack('<HHHH', 8, 5, 1, 0) * 8000, b'')"
        code, lines, err = _decode(f"b.etl_file(b.buffer([{rec}] * 15, size=1 << 20), {_GOOD})")
        assert code == 1 and '"name":"good"' in lines[-1]
        assert "extended item at offset" in err and "runs past the record" in err
        assert "events decoded; 15 problems" in err

    def test_a_metadata_bomb_in_the_schema_item(self) -> None:
        """The TraceLogging bomb (65535 x 65535 NULLs) as an event's schema: bounded, reported."""
        items = "b.ext_item(12, b.traits('P'), more=True) + b.ext_item(11, TRACELOGGING_BOMB, more=False)"
        code, lines, err = _decode(f"b.etl_file(b.buffer([b.event_record({items}, b'')]), {_GOOD})")
        assert code == 1 and '"name":"good"' in lines[-1]
        assert "TraceLogging event at offset 8264: cannot decode" in err

    def test_an_item_size_is_8_aligned_in_the_builder(self) -> None:
        """The builder writes items as Windows does (size rounded up to 8, as in the real file)."""
        assert struct.unpack("<HHHH", build.ext_item(12, build.traits("solar_system"), more=True)[:8]) == (
            24,
            12,
            1,
            15,
        )


class TestManyProblems:
    """Problems are all counted, their texts kept for the first 100 only (memory bounded)."""

    def test_150_damaged_buffers(self) -> None:
        """150 buffers with an impossible filled size: 150 counted, 100 texts kept."""
        liar = build.buffer([build.tl_event()], filled=0x10000)
        f = EtlFile(io.BytesIO(build.etl_file(*[liar] * 150)), "mem")
        assert [e.kind for e in f.events()] == ["system", "system"]
        assert (f.problem_count, len(f.problems)) == (150, 100)

    def test_150_undecodable_events(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """150 events whose data is short for their metadata: 20 printed, all 150 counted, exit 1."""
        bad = build.event_record(
            build.ext_item(build.EXT_EVENT_SCHEMA_TL, build.metadata("e", b"n\0\x07"), more=False), b"\1"
        )
        path = tmp_path / "bad.etl"
        path.write_bytes(build.etl_file(build.buffer([bad] * 150, size=1 << 16)))
        assert main(["decode", str(path)]) == 1
        err = capsys.readouterr().err
        assert err.count("cannot decode") == 20
        assert "... and 130 more problems" in err
        assert "0 events decoded; 150 problems" in err


class TestTheFirstBuffer:
    """A first buffer that cannot hold the session header is no .etl file to read: EtlError."""

    def test_a_first_buffer_whose_filled_size_is_0(self) -> None:
        """SavedOffset 0 in the header buffer: EtlError naming the problem (not a struct error)."""
        data = bytearray(build.etl_file())
        struct.pack_into("<I", data, 4, 0)
        with pytest.raises(EtlError, match="the first buffer holds no session header event"):
            EtlFile(io.BytesIO(bytes(data)), "mem")


_PACKED = "b.compressed_buffer([b.tl_event(name='packed')])"


class TestCompressedBuffers:
    """A compressed buffer that lies is a problem for that buffer (exit 1), never a hang or an OOM."""

    def _patched_buffer(self, offset: int, fmt: str, value: int) -> str:
        patch = f"struct.pack_into({fmt!r}, x, {offset}, {value})"
        return f"(lambda x: ({patch}, bytes(x))[1])(bytearray({_PACKED}))"

    def test_a_good_one_is_read(self) -> None:
        """The crafted compressed buffer itself: its event decoded, exit 0."""
        code, lines, err = _decode(f"b.etl_file({_PACKED}, {_GOOD})")
        assert code == 0, err
        assert len(lines) == 2

    def test_a_filled_size_past_16_mib(self) -> None:
        """A decompressed size of 4 GB: nothing allocated for it, reported, the next buffer read."""
        code, lines, err = _decode(f"b.etl_file({self._patched_buffer(4, '<I', 0xFFFFFFF0)}, {_GOOD})")
        assert code == 1 and len(lines) == 1
        assert "compressed buffer at offset 8192: filled size 4294967280 outside 72..16777216" in err

    def test_a_filled_size_larger_than_the_data_gives(self) -> None:
        """The header says more than the data decompresses to: reported, its events not read."""
        code, lines, err = _decode(f"b.etl_file({self._patched_buffer(4, '<I', 0x4000)}, {_GOOD})")
        assert code == 1 and len(lines) == 1
        assert "compressed buffer at offset 8192: decompressed to " in err
        assert "its header says 16312; its events not read" in err

    def test_a_filled_size_smaller_than_the_data_gives(self) -> None:
        """The data decompresses past the header's size: stopped there, reported."""
        code, lines, err = _decode(f"b.etl_file({self._patched_buffer(4, '<I', 100)}, {_GOOD})")
        assert code == 1 and len(lines) == 1
        assert "compressed buffer at offset 8192: output longer than 28 bytes; its events not read" in err

    def test_a_back_reference_before_the_start(self) -> None:
        """The first item a match reaching before the output: reported with the buffer's offset."""
        bad = "b.compressed_buffer([b.tl_event()])[:72] + struct.pack('<IH', 0x80000000, 5 << 3)"
        fixed = f"(lambda x: x[:0] + struct.pack('<I', 78) + x[4:])({bad})"
        code, lines, err = _decode(f"b.etl_file({fixed}, {_GOOD})")
        assert code == 1 and len(lines) == 1
        assert "compressed buffer at offset 8192: match at input byte 6 refers 6 bytes back, 0 written" in err

    def test_a_2_gb_match_length(self) -> None:
        """A match length of 2 GB in a 64 KB buffer: an error at once, memory bounded."""
        stream = (
            "struct.pack('<I', 0x40000000) + b'a' + struct.pack('<H', 7)"
            " + b'\\x0f\\xff\\x00\\x00\\xff\\xff\\xff\\x7f'"
        )
        head = "b.compressed_buffer([b.tl_event()])[:72]"
        liar = f"(lambda h, s: struct.pack('<I', 72 + len(s)) + h[4:] + s)({head}, {stream})"
        code, lines, err = _decode(f"b.etl_file({liar}, {_GOOD})")
        assert code == 1 and len(lines) == 1
        assert "compressed buffer at offset 8192: output longer than" in err

    def test_garbage_in_every_compressed_buffer(self) -> None:
        """200 compressed buffers of random bytes: each one a problem or records, never a traceback."""
        one = "struct.pack('<I', 72 + 600) + h[4:] + random.Random(i).randbytes(600)"
        garbage = f"(lambda h: [{one} for i in range(200)])(b.compressed_buffer([b.tl_event()])[:72])"
        code, _lines, err = _decode(f"(lambda random: b.etl_file(*{garbage}, {_GOOD}))(__import__('random'))")
        assert code == 1
        assert "Traceback" not in err
        assert "problems (file damaged or truncated?)" in err
