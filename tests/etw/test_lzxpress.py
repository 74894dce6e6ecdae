"""LZXpress (plain LZ77) decompression: round trips through the tests' own compressor (every length
encoding, overlapping matches), identical output to dissect.util's decompressor on the real
compressed .etl file and on generated streams, and every lie in a crafted stream a bounded
:class:`LzxpressError` where dissect.util returns short output, raises ``struct.error`` or runs
without bound.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlog_etw.etw._lzxpress import LzxpressError, decompress
from tests.helpers.lzxpress import compress
from tests.helpers.shared_data import import_or_skip, shared_dir, skip_or_fail

_FLAGS_MATCH_FIRST = struct.pack("<I", 0x80000000)  # first item a match, the rest literals
_FLAGS_LITERAL_THEN_MATCH = struct.pack("<I", 0x40000000)
_A_THEN_LONG = _FLAGS_LITERAL_THEN_MATCH + b"a" + struct.pack("<H", 7)  # 'a', then a match of length 7+


def net_x86_etl(tmp_path: Path) -> Path:
    """The shared compressed PerfView recording, unzipped into ``tmp_path`` (skip/fail when absent)."""
    archive = shared_dir() / "vectors" / "perfview" / "net.4.5.2.x86.etl.zip"
    if not archive.is_file():
        skip_or_fail(f"{archive} is missing (the PerfView vectors in ../shared/vectors/perfview)")
    with zipfile.ZipFile(archive) as z:
        z.extract("net.4.5.2.x86.etl", tmp_path)
    return tmp_path / "net.4.5.2.x86.etl"


def compressed_buffers(path: Path) -> list[tuple[int, bytes, int]]:
    """``(offset, compressed bytes, decompressed size)`` of each compressed buffer of an .etl file."""
    data = path.read_bytes()
    out = []
    offset = 0
    while offset + 72 <= len(data):
        size, saved = struct.unpack_from("<II", data, offset)
        if struct.unpack_from("<H", data, offset + 0x34)[0] & 0x40:
            out.append((offset, data[offset + 72 : offset + size], saved - 72))
        offset += size
    return out


# Data with structure: runs, repeats near and far, noise, so that matches of every length and
# offset (overlapping ones too) come out of the compressor.
_chunks = st.one_of(
    st.binary(min_size=0, max_size=40),
    st.tuples(st.binary(min_size=1, max_size=4), st.integers(1, 400)).map(lambda t: t[0] * t[1]),
    st.tuples(st.binary(min_size=1, max_size=1), st.integers(250, 70_000)).map(lambda t: t[0] * t[1]),
)
_data = st.lists(_chunks, max_size=12).map(b"".join)


class TestRoundTrips:
    """What the tests' compressor writes decompresses to the input, exactly at its size."""

    @settings(max_examples=150, deadline=None)
    @given(_data, st.sampled_from([8192, 16, 1]), st.sampled_from([3, 5, 40]))
    def test_compress_then_decompress(self, data: bytes, max_offset: int, min_match: int) -> None:
        """Any data, matches near or far, short or long: the same bytes back."""
        stream = compress(data, max_offset=max_offset, min_match=min_match)
        assert decompress(stream, len(data)) == data

    @settings(max_examples=60, deadline=None)
    @given(_data.filter(lambda d: len(d) > 0))
    def test_one_byte_less_room_is_an_error(self, data: bytes) -> None:
        """The output limit holds: one byte less than the data is an error, never a longer result."""
        with pytest.raises(LzxpressError, match="longer than"):
            decompress(compress(data), len(data) - 1)

    @pytest.mark.parametrize(
        "length",
        [3, 9, 10, 24, 25, 279, 280, 65_535 + 3, 65_536 + 3, 200_000],
        ids=lambda n: f"match-{n}",
    )
    def test_every_length_encoding(self, length: int) -> None:
        """3 bits, the half byte, one byte, two bytes and four bytes of match length, around each edge."""
        data = b"ab" + b"a" * length + b"xyz" * 3
        assert decompress(compress(data), len(data)) == data

    def test_two_long_matches_share_a_half_byte(self) -> None:
        """Two matches needing the half byte: the second takes the high nibble of the first's byte."""
        data = b"0123456789abcdef" + b"0123456789abcd" + b"!" + b"0123456789abcde"
        stream = compress(data)
        assert decompress(stream, len(data)) == data

    def test_the_empty_stream(self) -> None:
        """A flag word of unused (set) flags and nothing else: no bytes."""
        assert decompress(compress(b""), 0) == b""


class TestAgainstDissect:
    """dissect.util's LZXpress decompressor (a pinned test dependency) gives the same bytes."""

    def test_every_buffer_of_the_real_file(self, tmp_path: Path) -> None:
        """All 275 compressed buffers of PerfView's recording: identical output, of the header's size."""
        lzxpress = import_or_skip("dissect.util.compression.lzxpress")
        buffers = compressed_buffers(net_x86_etl(tmp_path))
        assert len(buffers) == 275
        for offset, stream, size in buffers:
            ours = decompress(stream, size)
            assert len(ours) == size, offset
            assert ours == lzxpress.decompress(stream), offset

    @settings(max_examples=80, deadline=None)
    @given(_data)
    def test_generated_streams(self, data: bytes) -> None:
        """Both decompress what the tests' compressor wrote to the same bytes."""
        lzxpress = import_or_skip("dissect.util.compression.lzxpress")
        stream = compress(data)
        assert decompress(stream, len(data)) == lzxpress.decompress(stream) == data


#: Crafted streams: (name, bytes, what our error says).
CRAFTED = [
    (
        "a back reference before the start",
        _FLAGS_MATCH_FIRST + struct.pack("<H", 5 << 3),
        "refers 6 bytes back",
    ),
    (
        "a back reference past what was written",
        _FLAGS_LITERAL_THEN_MATCH + b"a" + struct.pack("<H", 1 << 3),
        "refers 2 bytes back",
    ),
    ("literals past the input", struct.pack("<I", 0) + b"ab", "run past the input"),
    ("a match cut short", _FLAGS_LITERAL_THEN_MATCH + b"a" + b"\x00", "runs past the input"),
    ("a flag word cut short", b"\x00\x00", "runs past the input"),
    ("a half byte past the input", _A_THEN_LONG, "runs past the input"),
    (
        "a 2 GB match length",
        _A_THEN_LONG + b"\x0f\xff\x00\x00\xff\xff\xff\x7f",
        "longer than",
    ),
    ("a four-byte length below 22", _A_THEN_LONG + b"\x0f\xff\x05\x00", "below 22"),
]


class TestCraftedStreams:
    """Every lie is an :class:`LzxpressError` naming it, in bounded time and memory."""

    @pytest.mark.parametrize(("stream", "message"), [c[1:] for c in CRAFTED], ids=[c[0] for c in CRAFTED])
    def test_each_lie_is_reported(self, stream: bytes, message: str) -> None:
        """The error says what was wrong; nothing else is raised."""
        with pytest.raises(LzxpressError, match=message):
            decompress(stream, 1 << 16)

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=300), st.integers(0, 5000))
    def test_any_bytes_give_bytes_within_the_limit_or_the_error(self, stream: bytes, limit: int) -> None:
        """Random bytes: a result of at most ``limit`` bytes, or :class:`LzxpressError`."""
        try:
            out = decompress(stream, limit)
        except LzxpressError:
            return
        assert len(out) <= limit

    def test_dissect_on_the_same_streams(self) -> None:
        """What dissect.util does instead (docs/decoding.md): short output without a word, or struct.error.

        The 2 GB length is left out here: dissect.util copies it byte by byte without a limit
        (shown bounded in :meth:`test_dissect_on_a_2_gb_length`).
        """
        lzxpress = import_or_skip("dissect.util.compression.lzxpress")
        seen = {}
        for name, stream, _ in CRAFTED:
            if "2 GB" in name:
                continue
            try:
                seen[name] = len(lzxpress.decompress(stream))
            except Exception as exc:
                seen[name] = type(exc).__name__
        assert seen["a back reference before the start"] == 0
        assert seen["literals past the input"] == 2
        assert seen["a match cut short"] == "error"  # struct.error

    def test_dissect_on_a_2_gb_length(self) -> None:
        """dissect.util on the 2 GB length: still running after 5 s (ours: an error at once)."""
        import_or_skip("dissect.util.compression.lzxpress")
        from tests.helpers.hostile import run_bounded  # noqa: PLC0415 - RLIMIT_AS: not on Windows

        stream = dict((c[0], c[1]) for c in CRAFTED)["a 2 GB match length"]
        code = (
            f"from dissect.util.compression.lzxpress import decompress; decompress({stream!r}); print('done')"
        )
        run = run_bounded(code, timeout=5)
        assert run.hung or "MemoryError" in run.stderr, (run.returncode, run.stdout, run.stderr[-500:])
