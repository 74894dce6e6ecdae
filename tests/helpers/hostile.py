"""Hostile inputs for the readers (decoder bombs, quadratic perf.data, backtracking bait) and a
runner that executes code under a memory limit and a hang timeout.

The bombs are built here from the formats' byte layouts (shared/spec), independent of the
project's encoders, so that a test can hand the same bytes to the library in-process and to a
bounded subprocess (:func:`run_bounded`): a regression then fails fast with MemoryError or a
timeout instead of eating the CI machine's memory or hanging.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from dataclasses import dataclass

from tests.helpers.shared_data import REPO
from tests.helpers.unix import unix_module

#: Address-space limit of the bounded subprocess: far above what Python and the package need
#: (about 100 MB), far below what a bomb takes.
MEMORY_LIMIT = 1 << 30
#: Seconds before the bounded subprocess counts as hung.  Generous: it only tells a hang from a
#: finished run on a loaded machine; it is not a speed assertion.
HANG_TIMEOUT = 60


@dataclass(frozen=True)
class Bounded:
    """What a bounded run did."""

    returncode: int
    stdout: str
    stderr: str
    hung: bool


def run_bounded(code: str, *args: str, stdin: bytes | None = None, timeout: float = HANG_TIMEOUT) -> Bounded:
    """Run ``python -c code args`` (PYTHONPATH = the work tree) with ``RLIMIT_AS`` = :data:`MEMORY_LIMIT`.

    A run still going after ``timeout`` seconds is killed and reported as ``hung``.  Windows has
    no ``RLIMIT_AS`` (nor ``preexec_fn``): there the calling test is skipped.
    """
    resource = unix_module("resource")

    def limit() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8:surrogateescape"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            input=stdin,
            capture_output=True,
            env=env,
            cwd=REPO,
            preexec_fn=limit,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or b""
        err = exc.stderr or b""
        return Bounded(-9, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), True)
    return Bounded(
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
        False,
    )


# --- EventHeader ---------------------------------------------------------------------------------


def eventheader_event(
    meta_fields: bytes, payload: bytes = b"", *, name: bytes = b"", level: int = 4
) -> bytes:
    """A little-endian EventHeader event with one Metadata extension (name NUL ``meta_fields``)."""
    header = struct.pack("<BBHHBB", 0x07, 0, 0, 0, 0, level)
    meta = name + b"\0" + meta_fields
    return header + struct.pack("<HH", len(meta), 1) + meta + payload


def eventheader_struct_array(name: bytes, count: int, members: int) -> bytes:
    """Metadata of a CArray of ``count`` structs declaring ``members`` members (which follow)."""
    return name + b"\0" + bytes([0x01 | 0x20 | 0x80, members]) + struct.pack("<H", count)


#: 29 bytes: an array of 65535 structs, each holding an array of 65535 structs whose one
#: declared member never comes (the metadata ends).  Before the fix: 4.3e9 empty structs.
EVENTHEADER_BOMB = eventheader_event(
    eventheader_struct_array(b"a", 0xFFFF, 1) + eventheader_struct_array(b"b", 0xFFFF, 1), b"\0\0\0\0"
)

#: The same nesting with real members (Value8): well-formed metadata that needs 4.3e9 payload
#: bytes, sent with none.
EVENTHEADER_BIG_ARRAYS = eventheader_event(
    eventheader_struct_array(b"a", 0xFFFF, 1) + eventheader_struct_array(b"b", 0xFFFF, 1) + b"c\0\x02"
)


# --- TraceLogging --------------------------------------------------------------------------------


def tracelogging_metadata(fields: bytes, name: bytes = b"") -> bytes:
    """Event metadata: u16 size, one tag byte (0), name NUL, then ``fields``."""
    body = b"\0" + name + b"\0" + fields
    return struct.pack("<H", len(body) + 2) + body


#: 19 bytes of metadata: a CCount array of 65535 structs, each a CCount array of 65535 NULLs
#: (a NULL value takes no data bytes).  Before the fix: 4.3e9 values from an empty payload.
TRACELOGGING_BOMB = tracelogging_metadata(
    b"a\0"
    + bytes([0x18 | 0x20 | 0x80, 1])
    + struct.pack("<H", 0xFFFF)
    + b"b\0\x20"
    + struct.pack("<H", 0xFFFF)
)


# --- perf.data -----------------------------------------------------------------------------------

_ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER7


def perf_data_shared_ids(n_attrs: int, n_ids: int) -> bytes:
    """A file-mode perf.data whose ``n_attrs`` attr entries all point at one section of ``n_ids`` ids.

    About ``8 * n_ids + 144 * n_attrs`` bytes; a reader that reads the ids once per attr does
    ``n_attrs * n_ids`` work.
    """
    entry = _ATTR_SIZE + 16
    attrs_off = 104
    ids_off = attrs_off + n_attrs * entry
    data_off = ids_off + 8 * n_ids
    header = b"PERFILE2" + struct.pack("<QQQQQQQQ", 104, entry, attrs_off, n_attrs * entry, data_off, 0, 0, 0)
    header += bytes(32)  # no feature sections
    attr = struct.pack("<IIQQQQQ", 1, _ATTR_SIZE, 0, 1, 0x10000, 0, 0).ljust(_ATTR_SIZE, b"\0")
    attr += struct.pack("<QQ", ids_off, 8 * n_ids)
    ids = b"".join(struct.pack("<Q", i) for i in range(n_ids))
    return header + attr * n_attrs + ids


# --- tracefs format ------------------------------------------------------------------------------


def format_text_without_colons(n: int) -> str:
    """A tracefs ``format`` whose one field line is ``n`` characters with no ``:`` in it."""
    return "name: x\nID: 1\nformat:\n\tfield:int a;\toffset:0;\tsize:4;\tsigned:1;\n\n\t" + "a" * n + "\n"
