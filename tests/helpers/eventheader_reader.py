"""A strict, independent EventHeader reader used by the encoder tests.

It rejects anything a conforming decoder would reject (bad flags, extension sizes, metadata
that does not parse, payload shorter or longer than the metadata says, invalid UTF-8, struct
counts of 0, u16 overflows) so tests can prove the encoder's output is well-formed.  Values
come back as simple Python objects: ``[(name, encoding, format, value)]``, structs as nested
lists, arrays as lists.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any


class Malformed(ValueError):
    """The bytes are not a well-formed EventHeader event."""


@dataclass
class Parsed:
    flags: int
    version: int
    id: int
    tag: int
    opcode: int
    level: int
    activity: bytes | None
    related: bytes | None
    name: str
    fields: list[tuple[str, int, int, Any]] = field(default_factory=list)

    def values(self) -> dict[str, Any]:
        return {n: _plain(v) for n, _e, _f, v in self.fields}


def _plain(v: Any) -> Any:
    if isinstance(v, list) and v and isinstance(v[0], tuple) and len(v[0]) == 4:
        return {n: _plain(x) for n, _e, _f, x in v}
    return v


_FIXED = {2: 1, 3: 2, 4: 4, 5: 8, 6: 16}


def parse(data: bytes, *, trailing_ok: bool = False) -> Parsed:
    """Parse one event; ``trailing_ok`` accepts bytes after the last field (perf pads a sample's
    raw data to 8 bytes, and tracepoint_decode's enumerator stops at the last field)."""
    if len(data) < 8:
        raise Malformed("short header")
    flags, version, eid, tag, opcode, level = struct.unpack_from("<BBHHBB", data, 0)
    if flags != 0x07:
        raise Malformed(f"flags {flags:#x}")
    pos = 8
    activity = related = None
    meta: bytes | None = None
    while True:
        if pos + 4 > len(data):
            raise Malformed("short extension")
        size, kind = struct.unpack_from("<HH", data, pos)
        pos += 4
        body = data[pos : pos + size]
        if len(body) != size:
            raise Malformed("extension past end")
        pos += size
        k = kind & 0x7FFF
        if k == 2:
            if size not in (16, 32):
                raise Malformed("activity size")
            activity = body[:16]
            related = body[16:] or None
        elif k == 1:
            meta = body
        else:
            raise Malformed(f"extension kind {k}")
        if not kind & 0x8000:
            break
    if meta is None:
        raise Malformed("no metadata")
    end = meta.index(b"\0")
    name = meta[:end].decode("utf-8")
    defs = []
    m = end + 1
    while m < len(meta):
        nend = meta.index(b"\0", m)
        fname = meta[m:nend].decode("utf-8")
        m = nend + 1
        enc = meta[m]
        m += 1
        fmt = 0
        ftag = 0
        if enc & 0x80:
            fmt = meta[m]
            m += 1
            if fmt & 0x80:
                ftag = struct.unpack_from("<H", meta, m)[0]
                m += 2
        if enc & 0x20:
            raise Malformed("carray unexpected")
        defs.append((fname, enc & 0x7F, fmt & 0x7F, ftag))
    p = Parsed(flags, version, eid, tag, opcode, level, activity, related, name)
    state = [pos]
    p.fields = _read_fields(defs, [0], data, state, None)
    if state[0] != len(data) and not trailing_ok:
        raise Malformed(f"{len(data) - state[0]} trailing payload bytes")
    return p


def _read_fields(defs: list[Any], di: list[int], data: bytes, pos: list[int], count: int | None) -> list[Any]:
    out = []
    while count is None or len(out) < count:
        if count is None and di[0] == len(defs):
            break
        if di[0] >= len(defs):
            raise Malformed("struct count past metadata")
        fname, enc, fmt, _tag = defs[di[0]]
        di[0] += 1
        base = enc & 0x1F
        if base == 1:
            if fmt == 0:
                raise Malformed("empty struct")
            out.append((fname, enc, fmt, _read_fields(defs, di, data, pos, fmt)))
            continue
        if enc & 0x40:
            n = _u16(data, pos)
            out.append((fname, enc, fmt, [_read_value(base, fmt, data, pos) for _ in range(n)]))
        else:
            out.append((fname, enc, fmt, _read_value(base, fmt, data, pos)))
    return out


def _u16(data: bytes, pos: list[int]) -> int:
    if pos[0] + 2 > len(data):
        raise Malformed("payload short (u16)")
    v: int = struct.unpack_from("<H", data, pos[0])[0]
    pos[0] += 2
    return v


def _take(data: bytes, pos: list[int], n: int) -> bytes:
    b = data[pos[0] : pos[0] + n]
    if len(b) != n:
        raise Malformed("payload short")
    pos[0] += n
    return b


def _read_value(base: int, fmt: int, data: bytes, pos: list[int]) -> Any:
    if base in _FIXED:
        b = _take(data, pos, _FIXED[base])
        if fmt == 7:
            v = int.from_bytes(b, "little")
            if v not in (0, 1):
                raise Malformed("bool not 0/1")
            return bool(v)
        if fmt == 2:
            return int.from_bytes(b, "little", signed=True)
        if fmt == 8:
            return struct.unpack("<d" if len(b) == 8 else "<f", b)[0]
        if fmt in (9, 15, 17):
            return b
        return int.from_bytes(b, "little")
    if base in (10, 13):
        n = _u16(data, pos)
        b = _take(data, pos, n)
        if base == 13 or fmt == 9:
            return b
        return b.decode("utf-8")  # strict: invalid UTF-8 is malformed
    raise Malformed(f"encoding {base} unexpected")
