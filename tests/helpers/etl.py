""".etl files built from the documented layouts (WMI_BUFFER_HEADER, EVENT_HEADER and its extended
items), independent of the reader, for tests that need files Windows did not write: lying sizes,
many buffers, other CPUs.  The session header buffer is the real one of PerfView's file
(``../shared/vectors/perfview/primitive-types.etl``), so the clock and the session are Windows'.
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

from tests.helpers.lzxpress import compress
from tests.helpers.shared_data import shared_dir, skip_or_fail

BUFFER_HEADER = 72
#: The real file's first buffer: the session header event (and one EventTrace record).
HEADER_BUFFER_SIZE = 0x2000
#: The real file's raw clock value of its header event; 10 MHz QPC.
START_TIMESTAMP = 0x25E31EA9F75
EXT_RELATED_ACTIVITYID = 1
EXT_EVENT_SCHEMA_TL = 11
EXT_PROV_TRAITS = 12
#: The provider GUID of the crafted events.
PROVIDER_ID = uuid.UUID(int=1)


def primitive_types_etl() -> Path:
    """The real .etl file of ../shared/vectors/perfview (skip locally, fail in CI when absent)."""
    path = shared_dir() / "vectors" / "perfview" / "primitive-types.etl"
    if not path.exists():
        skip_or_fail(f"{path} is missing (the PerfView vectors in ../shared/vectors/perfview)")
    return path


def header_buffer() -> bytes:
    """The real file's header buffer (8 KB)."""
    return primitive_types_etl().read_bytes()[:HEADER_BUFFER_SIZE]


def ext_item(item_type: int, data: bytes, *, more: bool) -> bytes:
    """An extended item as an .etl file holds it: u16 size (8-aligned), type, linkage, data size."""
    size = (8 + len(data) + 7) & ~7
    return struct.pack("<HHHH", size, item_type, 1 if more else 0, len(data)) + data.ljust(size - 8, b"\0")


def traits(provider: str) -> bytes:
    """A provider traits blob: u16 size, the name, NUL."""
    name = provider.encode() + b"\0"
    return struct.pack("<H", len(name) + 2) + name


def metadata(name: str, fields: bytes) -> bytes:
    """TraceLogging event metadata: u16 size, tag byte 0, name NUL, ``fields``."""
    body = b"\0" + name.encode() + b"\0" + fields
    return struct.pack("<H", len(body) + 2) + body


def event_record(
    items: bytes,
    user_data: bytes,
    *,
    timestamp: int = START_TIMESTAMP + 10_000,
    level: int = 4,
    keyword: int = 1,
    opcode: int = 0,
    channel: int = 11,
    pid: int = 100,
    tid: int = 101,
    provider_id: uuid.UUID = PROVIDER_ID,
    activity: bytes = bytes(16),
    size: int | None = None,
    header_type: int = 0x13,
    header_flags: int = 0,
) -> bytes:
    """An EVENT_HEADER record (80 bytes, then ``items``, then ``user_data``); ``size`` overrides its Size.

    ``header_type``: 0x13 (EVENT_HEADER64) or 0x12 (EVENT_HEADER32, a 32-bit process's event);
    ``header_flags`` are added to the header's Flags.
    """
    flags = (0x0001 if items else 0) | header_flags
    body_size = 80 + len(items) + len(user_data)
    head = struct.pack(
        "<HBBHHIIQ16sHBBBBHQQ16s",
        body_size if size is None else size,
        header_type,
        0xC0,
        flags,
        0,
        tid,
        pid,
        timestamp,
        provider_id.bytes_le,
        0,
        0,
        channel,
        level,
        opcode,
        0,
        keyword,
        0,
        activity,
    )
    return head + items + user_data


def tl_event(
    provider: str = "Crafted",
    name: str = "ev",
    value: int = 7,
    *,
    related: bytes | None = None,
    **kwargs: object,
) -> bytes:
    """A TraceLogging event with one INT32 field ``n`` = ``value``."""
    meta = metadata(name, b"n\0\x07")
    items = ext_item(EXT_PROV_TRAITS, traits(provider), more=True)
    if related is not None:
        items += ext_item(EXT_RELATED_ACTIVITYID, related, more=True)
    items += ext_item(EXT_EVENT_SCHEMA_TL, meta, more=False)
    return event_record(items, struct.pack("<i", value), **kwargs)  # type: ignore[arg-type]


def buffer(records: list[bytes], *, cpu: int = 0, size: int = 0x2000, filled: int | None = None) -> bytes:
    """A WMI buffer of ``size`` bytes holding ``records`` (8-aligned), on processor ``cpu``."""
    body = b"".join(r.ljust((len(r) + 7) & ~7, b"\xff") for r in records)
    used = BUFFER_HEADER + len(body)
    if used > size:
        raise ValueError(f"{len(records)} records do not fit a buffer of {size} bytes")
    head = struct.pack(
        "<IIIIqqQHHIIHH", size, used if filled is None else filled, used, 0, 0, 0, 0, cpu, 0, 2, used, 0x21, 0
    )
    return (head.ljust(BUFFER_HEADER, b"\0") + body).ljust(size, b"\xff")


def compressed_buffer(records: list[bytes], *, cpu: int = 0, size: int = 0x2000) -> bytes:
    """:func:`buffer` as ETW compresses it: its header with the compressed flag, BufferSize the
    bytes in the file, the filled size the buffer's once decompressed; then the LZXpress data."""
    plain = buffer(records, cpu=cpu, size=size)
    filled = struct.unpack_from("<I", plain, 4)[0]
    stream = compress(plain[BUFFER_HEADER:filled])
    head = bytearray(plain[:BUFFER_HEADER])
    struct.pack_into("<I", head, 0, BUFFER_HEADER + len(stream))
    struct.pack_into("<H", head, 0x34, struct.unpack_from("<H", head, 0x34)[0] | 0x40)
    struct.pack_into("<I", head, 0x30, filled)
    return bytes(head) + stream


def etl_file(*buffers: bytes) -> bytes:
    """The real header buffer followed by ``buffers``."""
    return header_buffer() + b"".join(buffers)


def session_header_buffer(
    *,
    pointer_size: int = 8,
    clock_type: int = 1,
    perf_freq: int = 10_000_000,
    cpu_speed_mhz: int = 2304,
    start_time: int = 0x01D7A58B4C3947CE,
    start_timestamp: int = START_TIMESTAMP,
    buffers_written: int = 2,
    session: str = "crafted",
    log_file: str = "C:\\crafted.etl",
) -> bytes:
    """A header buffer built from the layouts: a system record (32- or 64-bit) holding a
    TRACE_LOGFILE_HEADER with ``pointer_size``-byte name pointers and the given clock."""
    fixed = struct.pack(
        "<IIIIqIIIIIIII",
        0x2000,
        0x0501000A,
        19043,
        8,
        start_time + 10**8,
        156250,
        0,
        0,
        buffers_written,
        1,
        pointer_size,
        0,
        cpu_speed_mhz,
    )
    pointers = bytes(2 * pointer_size)
    time_zone = struct.pack("<i", -60).ljust(172, b"\0")
    body = fixed + pointers + time_zone
    body = body.ljust((len(body) + 7) & ~7, b"\0")
    body += struct.pack("<qqqII", start_time - 10**9, perf_freq, start_time, clock_type, 0)
    body += (session + "\0").encode("utf-16-le") + (log_file + "\0").encode("utf-16-le")
    header_type = 0x02 if pointer_size == 8 else 0x01
    record = (
        struct.pack("<HBBHHIIQQ", 2, header_type, 0xC0, 32 + len(body), 0, 1, 2, start_timestamp, 0) + body
    )
    return buffer([record], size=HEADER_BUFFER_SIZE)
