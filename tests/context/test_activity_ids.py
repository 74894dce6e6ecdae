"""Activity ids: layout, uniqueness in a process, across threads, and in a fork child."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid

import pytest

from structlog_etw.context import _activity
from tests.helpers.forking import fork_child, wait_child


def test_activity_id_is_16_bytes_with_rfc4122_version_4_and_variant_bits() -> None:
    """An activity id is 16 bytes with RFC 4122 version-4 and variant bits."""
    raw = _activity.new_activity_id()
    assert type(raw) is bytes
    assert len(raw) == 16
    u = uuid.UUID(bytes=raw)
    assert u.version == 4
    assert u.variant == uuid.RFC_4122


def test_activity_ids_share_the_process_seed_and_differ_by_the_counter() -> None:
    """Two ids of a process share the random first half and differ in the counter half."""
    a = _activity.new_activity_id()
    b = _activity.new_activity_id()
    assert a[:8] == b[:8]  # per-process random half
    assert a != b
    lo_a = int.from_bytes(a[8:], "big") & _activity._LO_MASK
    lo_b = int.from_bytes(b[8:], "big") & _activity._LO_MASK
    # consecutive counter values: the XOR of the two low halves is the XOR of two consecutive counts
    assert lo_a ^ lo_b != 0


def test_many_activity_ids_from_many_threads_are_all_distinct() -> None:
    """40,000 ids made by 8 threads are all distinct."""
    results: list[list[bytes]] = [[] for _ in range(8)]

    def make(out: list[bytes]) -> None:
        for _ in range(5000):
            out.append(_activity.new_activity_id())

    threads = [threading.Thread(target=make, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for r in results for i in r]
    assert len(set(every)) == len(every) == 40000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
def test_fork_child_gets_a_new_seed_and_never_repeats_parent_ids() -> None:
    """A fork child's ids have a new seed and none equals an id the parent makes after the fork."""
    parent_before = _activity.new_activity_id()
    r, w = os.pipe()
    # 1600 bytes fit in the pipe: the child never waits for the parent to read
    pid = fork_child(lambda: os.write(w, b"".join(_activity.new_activity_id() for _ in range(100))))
    os.close(w)
    try:
        assert wait_child(pid) == 0, "the fork child failed or hung"
        data = b""
        while chunk := os.read(r, 4096):
            data += chunk
    finally:
        os.close(r)
    child_ids = [data[i : i + 16] for i in range(0, len(data), 16)]
    assert len(child_ids) == 100
    parent_after = [_activity.new_activity_id() for _ in range(100)]
    assert all(c[:8] != parent_before[:8] for c in child_ids)
    assert not set(child_ids) & set(parent_after)


def test_activity_ids_differ_between_two_processes() -> None:
    """Two processes make different 32-hex-digit first ids."""
    code = "from structlog_etw.context import _activity; print(_activity.new_activity_id().hex())"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(outs) == 2
    assert all(len(o) == 32 for o in outs)
