"""A small perf.data writer (pipe mode, the layout ``perf record -o -`` writes) for crafted files.

Tests that need a perf.data holding chosen event bytes (decoder bombs, names with escape
sequences, activities for the timeline) build it here from the perf ABI: a HEADER_ATTR record
per tracepoint, a HEADER_TRACING_DATA record with each tracepoint's tracefs ``format``, then
SAMPLE records (TID, TIME, CPU, RAW, IDENTIFIER) and optional FINISHED_ROUND records.  Real
captures come from the kernel tests (tests/kernel/) and tests/data/.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_TRACEPOINT = 2
# PERF_SAMPLE_TID | TIME | CPU | RAW | IDENTIFIER
SAMPLE_TYPE = 0x2 | 0x4 | 0x80 | 0x400 | 0x10000
_ATTR_SIZE = 128
_COMMON = (
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
)
#: Bytes of common fields before a tracepoint's own data.
COMMON_SIZE = 8


def eventheader_format(name: str, tp_id: int) -> str:
    """The tracefs ``format`` of a user_events EventHeader tracepoint (as the kernel writes it)."""
    return (
        f"name: {name}\nID: {tp_id}\nformat:\n{_COMMON}\n"
        "\tfield:u8 eventheader_flags;\toffset:8;\tsize:1;\tsigned:0;\n"
        "\tfield:u8 version;\toffset:9;\tsize:1;\tsigned:0;\n"
        "\tfield:u16 id;\toffset:10;\tsize:2;\tsigned:0;\n"
        "\tfield:u16 tag;\toffset:12;\tsize:2;\tsigned:0;\n"
        "\tfield:u8 opcode;\toffset:14;\tsize:1;\tsigned:0;\n"
        "\tfield:u8 level;\toffset:15;\tsize:1;\tsigned:0;\n\n"
        'print fmt: ""\n'
    )


def plain_format(name: str, tp_id: int) -> str:
    """The ``format`` of a plain tracepoint with one own field, ``int value`` (4 bytes at offset 8)."""
    return (
        f"name: {name}\nID: {tp_id}\nformat:\n{_COMMON}\n"
        "\tfield:int value;\toffset:8;\tsize:4;\tsigned:1;\n\n"
        'print fmt: "value=%d", REC->value\n'
    )


@dataclass(frozen=True)
class Tracepoint:
    """One tracepoint of the file: its system, its ``format`` text and its id."""

    system: str
    format: str
    id: int


@dataclass(frozen=True)
class Event:
    """One sample: the tracepoint it belongs to, its data after the common fields, and where/when."""

    tracepoint: Tracepoint
    data: bytes
    time: int
    pid: int = 100
    tid: int = 100
    cpu: int = 0


#: A marker in an event list: write a FINISHED_ROUND record here.
ROUND = None


def _record(rtype: int, body: bytes, misc: int = 0) -> bytes:
    return struct.pack("<IHH", rtype, misc, 8 + len(body)) + body


def _tracing_data(tracepoints: list[Tracepoint]) -> bytes:
    out = bytearray(b"\x17\x08\x44tracing0.6\0")
    out += bytes([0, 8]) + struct.pack("<I", 4096)  # little-endian, 8-byte long, page size
    for section in (b"header_page\0", b"header_event\0"):
        out += section + struct.pack("<Q", 0)
    out += struct.pack("<I", 0)  # no ftrace formats
    systems: dict[str, list[Tracepoint]] = {}
    for tp in tracepoints:
        systems.setdefault(tp.system, []).append(tp)
    out += struct.pack("<I", len(systems))
    for system, tps in systems.items():
        out += system.encode("utf-8", "surrogateescape") + b"\0" + struct.pack("<I", len(tps))
        for tp in tps:
            text = tp.format.encode("utf-8", "surrogateescape")
            out += struct.pack("<Q", len(text)) + text
    return bytes(out)


def perf_data(events: list[Event | None]) -> bytes:
    """A pipe-mode perf.data holding ``events`` (``ROUND`` entries: FINISHED_ROUND records)."""
    tracepoints: list[Tracepoint] = []
    for ev in events:
        if ev is not None and ev.tracepoint not in tracepoints:
            tracepoints.append(ev.tracepoint)
    out = bytearray(b"PERFILE2" + struct.pack("<Q", 16))
    for index, tp in enumerate(tracepoints):
        attr = struct.pack("<IIQQQQQ", _TRACEPOINT, _ATTR_SIZE, tp.id, 1, SAMPLE_TYPE, 0, 1 << 18)
        out += _record(64, attr.ljust(_ATTR_SIZE, b"\0") + struct.pack("<Q", 1000 + index))
    tracing = _tracing_data(tracepoints)
    padded = tracing + b"\0" * (-len(tracing) % 8)
    out += struct.pack("<IHHI", 66, 0, 12, len(padded)) + padded
    for ev in events:
        if ev is None:
            out += _record(68, b"")
            continue
        raw = struct.pack("<HBBi", ev.tracepoint.id & 0xFFFF, 0, 0, ev.pid) + ev.data
        raw += b"\0" * (-(len(raw) + 4) % 8)
        ident = 1000 + tracepoints.index(ev.tracepoint)
        body = struct.pack("<QIIQII", ident, ev.pid, ev.tid, ev.time, ev.cpu, 0)
        body += struct.pack("<I", len(raw)) + raw
        out += _record(9, body)
    return bytes(out)


# --- pieces for hand-made files (mixed events, overruns, many attrs) ------------------------------

#: ``perf_event_attr.type`` of software events (``cpu-clock`` is config 0).
SOFTWARE = 1


def header_pipe() -> bytes:
    """The 16-byte header of a pipe-mode file."""
    return b"PERFILE2" + struct.pack("<Q", 16)


def record(rtype: int, body: bytes, misc: int = 0) -> bytes:
    """One record: ``perf_event_header`` then ``body``."""
    return _record(rtype, body, misc)


def attr_record(etype: int, config: int, ident: int) -> bytes:
    """A HEADER_ATTR record: an attr of ``etype``/``config`` sampling :data:`SAMPLE_TYPE`, id ``ident``."""
    attr = struct.pack("<IIQQQQQ", etype, _ATTR_SIZE, config, 1, SAMPLE_TYPE, 0, 1 << 18)
    return _record(64, attr.ljust(_ATTR_SIZE, b"\0") + struct.pack("<Q", ident))


def tracing_data_record(tracepoints: list[Tracepoint]) -> bytes:
    """A HEADER_TRACING_DATA record holding the formats of ``tracepoints``."""
    tracing = _tracing_data(tracepoints)
    padded = tracing + b"\0" * (-len(tracing) % 8)
    return struct.pack("<IHHI", 66, 0, 12, len(padded)) + padded


def event_desc_record(names: dict[int, str]) -> bytes:
    """A HEADER_FEATURE record of HEADER_EVENT_DESC naming the events of the ids in ``names``."""
    body = struct.pack("<II", len(names), _ATTR_SIZE)
    for ident, name in names.items():
        text = name.encode() + b"\0"
        text += b"\0" * (-len(text) % 8)
        body += b"\0" * _ATTR_SIZE + struct.pack("<II", 1, len(text)) + text + struct.pack("<Q", ident)
    return _record(80, struct.pack("<Q", 12) + body)


def sample_record(ident: int, raw: bytes, time: int, pid: int = 100, cpu: int = 0) -> bytes:
    """A SAMPLE record of :data:`SAMPLE_TYPE` for the attr with id ``ident`` (``raw``: the RAW data)."""
    raw += b"\0" * (-(len(raw) + 4) % 8)
    body = struct.pack("<QIIQII", ident, pid, pid, time, cpu, 0) + struct.pack("<I", len(raw)) + raw
    return _record(9, body)


def tracepoint_raw(tp: Tracepoint, data: bytes, pid: int = 100) -> bytes:
    """A tracepoint sample's RAW data: the common fields, then ``data``."""
    return struct.pack("<HBBi", tp.id & 0xFFFF, 0, 0, pid) + data


def file_mode(records: bytes, tracepoints: list[Tracepoint], attrs: list[tuple[int, int, int]]) -> bytes:
    """A file-mode perf.data: ``attrs`` (type, config, id) in the attrs section, ``records`` as the
    data section, the formats of ``tracepoints`` in the HEADER_TRACING_DATA feature section."""
    entry = _ATTR_SIZE + 16
    attrs_off = 104
    ids_off = attrs_off + entry * len(attrs)
    data_off = ids_off + 8 * len(attrs)
    table_off = data_off + len(records)
    tracing = _tracing_data(tracepoints)
    tracing_off = table_off + 16
    head = b"PERFILE2" + struct.pack("<QQ", 104, entry)
    head += struct.pack("<QQQQQQ", attrs_off, entry * len(attrs), data_off, len(records), 0, 0)
    head += struct.pack("<4Q", 1 << 1, 0, 0, 0)  # features: HEADER_TRACING_DATA
    section = b""
    for index, (etype, config, _ident) in enumerate(attrs):
        attr = struct.pack("<IIQQQQQ", etype, _ATTR_SIZE, config, 1, SAMPLE_TYPE, 0, 1 << 18)
        section += attr.ljust(_ATTR_SIZE, b"\0") + struct.pack("<QQ", ids_off + 8 * index, 8)
    ids = b"".join(struct.pack("<Q", ident) for _, _, ident in attrs)
    table = struct.pack("<QQ", tracing_off, len(tracing))
    return head + section + ids + records + table + tracing


def many_attrs(n: int) -> bytes:
    """A pipe-mode perf.data of ``n`` (HEADER_ATTR, HEADER_TRACING_DATA) pairs, one tracepoint each
    (ids 1000 + i, attr ids 10,000 + i), its format after its attr: no samples."""
    out = bytearray(header_pipe())
    for i in range(n):
        tp = Tracepoint("test", plain_format(f"t{i}", 1000 + i), 1000 + i)
        out += attr_record(_TRACEPOINT, tp.id, 10_000 + i)
        out += tracing_data_record([tp])
    return bytes(out)
