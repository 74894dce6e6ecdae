"""A small LZXpress (plain LZ77, [MS-XCA] 2.3) compressor for the tests, written from the spec.

Independent of the reader's decompressor: greedy matching through a table of the last place
each 3-byte prefix was seen, every length encoding the format has (3 bits, the shared half
byte, one byte, two bytes, four bytes) and the end of the stream as the spec writes it (the
last flag word's unused flags set).  ``max_offset``/``min_match`` shape what it emits, so the
tests reach every encoding: long runs, overlapping matches, literal-only streams.
"""

from __future__ import annotations

import struct

MAX_OFFSET = 8192  # 13 bits of offset, less one


def compress(data: bytes, *, max_offset: int = MAX_OFFSET, min_match: int = 3) -> bytes:
    """``data`` as a plain LZ77 stream."""
    out = bytearray()
    flag_pos = 0
    out += b"\0\0\0\0"
    flags = 0
    count = 0
    half = -1  # the output position of a half byte whose high nibble is still free

    def flag(bit: int) -> None:
        nonlocal flags, count, flag_pos
        flags = (flags << 1) | bit
        count += 1
        if count == 32:
            struct.pack_into("<I", out, flag_pos, flags)
            flag_pos = len(out)
            out.extend(b"\0\0\0\0")
            flags = 0
            count = 0

    last: dict[bytes, int] = {}
    i = 0
    n = len(data)
    while i < n:
        best_len = 0
        best_off = 0
        if i + 3 <= n:
            key = data[i : i + 3]
            j = last.get(key)
            if j is not None and i - j <= max_offset:
                length = 0
                while i + length < n and data[j + length] == data[i + length]:
                    length += 1
                best_len, best_off = length, i - j
            last[key] = i
        if best_len >= max(3, min_match):
            _match(out, best_off, best_len, half_box := [half])
            half = half_box[0]
            flag(1)
            for k in range(i + 1, min(i + best_len, n - 2)):
                last[data[k : k + 3]] = k
            i += best_len
        else:
            out.append(data[i])
            flag(0)
            i += 1
    # The end: the unused flags of the last word are 1s (a match flag where the input ends).
    flags = (flags << (32 - count)) | ((1 << (32 - count)) - 1)
    struct.pack_into("<I", out, flag_pos, flags)
    return bytes(out)


def _match(out: bytearray, offset: int, length: int, half_box: list[int]) -> None:
    """One match's bytes: metadata word, then the length's continuation ([MS-XCA] 2.3.4)."""
    rest = length - 3
    if rest < 7:
        out += struct.pack("<H", (offset - 1) << 3 | rest)
        return
    out += struct.pack("<H", (offset - 1) << 3 | 7)
    rest -= 7
    nibble = min(rest, 15)
    if half_box[0] < 0:
        half_box[0] = len(out)
        out.append(nibble)
    else:
        out[half_box[0]] |= nibble << 4
        half_box[0] = -1
    if rest < 15:
        return
    rest -= 15
    if rest < 255:
        out.append(rest)
        return
    out.append(255)
    rest += 15 + 7
    if rest < 1 << 16:
        out += struct.pack("<H", rest)
    else:
        out += struct.pack("<HI", 0, rest)
