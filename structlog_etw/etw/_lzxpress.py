"""LZXpress (plain LZ77, [MS-XCA] 2.3/2.4) decompression, as ETW compresses its buffers.

Written from the specification's description of the format: 32-bit little-endian flag words
read from their high bit down, a 0 flag for a literal byte, a 1 flag for a two-byte match
(13 bits of offset less one, 3 bits of length less three) whose length may continue in a
shared half byte, a byte, two bytes and four bytes.  The stream ends where the input ends at
a match flag (a compressor sets the unused flags of its last word).

:func:`decompress` does work and holds memory bounded by ``limit`` (the size the caller
expects, at most a buffer) and the input's size, whatever the bytes say: a length that runs
past the input, a back reference before the start of the output and an output longer than
``limit`` each raise :class:`LzxpressError` (a :class:`ValueError`), never anything else.

Speed: runs of literals are found from the flag word's remaining bits and copied as one slice;
a match whose offset is at least its length is one slice copy; an overlapping match (a
repeated pattern) repeats its period.  Each step of the loop therefore consumes at least one
input byte and the loop runs at most ``len(src)`` times.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LzxpressError", "decompress"]

_EXTRA: Final = 15 + 7  # a length in the two- or four-byte field counts from here


class LzxpressError(ValueError):
    """The compressed bytes are not a valid plain LZ77 stream within the expected size."""


def decompress(src: bytes, limit: int) -> bytes:
    """The bytes ``src`` decompresses to, at most ``limit`` of them (:class:`LzxpressError` else)."""
    out = bytearray()
    n = len(src)
    ip = 0
    flags = 0
    count = 0  # flags of the current word not yet used
    half = -1  # where the pending shared half byte is (-1: none)
    while True:
        if count == 0:
            if ip + 4 > n:
                if ip == n:  # the input ends exactly after a full word's items
                    break
                raise LzxpressError(f"flag word at input byte {ip} runs past the input's {n} bytes")
            flags = src[ip] | src[ip + 1] << 8 | src[ip + 2] << 16 | src[ip + 3] << 24
            ip += 4
            count = 32
        rest = flags & ((1 << count) - 1)
        ones = rest.bit_length()  # flags up to and including the next match
        run = count - ones  # literals before it
        if run:
            if ip + run > n:
                raise LzxpressError(f"{run} literals at input byte {ip} run past the input's {n} bytes")
            if len(out) + run > limit:
                raise LzxpressError(f"output longer than {limit} bytes")
            out += src[ip : ip + run]
            ip += run
            count = ones
            if not ones:
                continue
        count -= 1
        if ip + 2 > n:
            if ip == n:  # input ends at a match flag: the end of the stream
                break
            raise LzxpressError(f"match at input byte {ip} runs past the input's {n} bytes")
        m = src[ip] | src[ip + 1] << 8
        ip += 2
        length = m & 7
        if length == 7:
            if half < 0:
                if ip >= n:
                    raise LzxpressError(f"match length at input byte {ip} runs past the input")
                length = src[ip] & 15
                half = ip
                ip += 1
            else:
                length = src[half] >> 4
                half = -1
            if length == 15:
                if ip >= n:
                    raise LzxpressError(f"match length at input byte {ip} runs past the input")
                length = src[ip]
                ip += 1
                if length == 255:
                    if ip + 2 > n:
                        raise LzxpressError(f"match length at input byte {ip} runs past the input")
                    length = src[ip] | src[ip + 1] << 8
                    ip += 2
                    if length == 0:
                        if ip + 4 > n:
                            raise LzxpressError(f"match length at input byte {ip} runs past the input")
                        length = int.from_bytes(src[ip : ip + 4], "little")
                        ip += 4
                    if length < _EXTRA:
                        raise LzxpressError(f"match length field {length} at input byte {ip} below {_EXTRA}")
                    length -= _EXTRA
                length += 15
            length += 7
        length += 3
        offset = (m >> 3) + 1
        pos = len(out)
        start = pos - offset
        if start < 0:
            raise LzxpressError(f"match at input byte {ip} refers {offset} bytes back, {pos} written")
        if pos + length > limit:
            raise LzxpressError(f"output longer than {limit} bytes")
        if offset >= length:
            out += out[start : start + length]
        else:  # overlapping: the last ``offset`` bytes repeat
            period = out[start:]
            whole, part = divmod(length, offset)
            out += period * whole
            out += period[:part]
    return bytes(out)
