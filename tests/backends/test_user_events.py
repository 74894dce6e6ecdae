"""The Linux backend's host-side logic: finding tracefs and refusing to run with a clear reason.

Registration, writes, enable words and fork are proven against a real kernel in
tests/kernel/test_user_events.py (run in the virtme-ng guest).
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
import sys
from pathlib import Path

import pytest
import structlog

from structlog_etw import EtwRenderer, Provider
from structlog_etw.backends import user_events as _backend_linux
from structlog_etw.backends.base import BackendUnavailable
from structlog_etw.backends.user_events import UserEventsBackend, find_tracefs
from tests.helpers.unix import unix_module

#: Tests of what the backend does on Linux itself (elsewhere it refuses before any of it).
LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="user_events exists on Linux only")


def _fake_tracefs(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "user_events_data").write_bytes(b"")
    return root


def test_find_tracefs_reads_tracefs_mounts_with_escaped_spaces(tmp_path: Path) -> None:
    """find_tracefs finds a tracefs mount in the mounts file, its \040-escaped space unescaped."""
    where = _fake_tracefs(tmp_path / "my tracing")
    mounts = tmp_path / "mounts"
    escaped = str(where).replace(" ", "\\040")
    mounts.write_text(f"proc /proc proc rw 0 0\nnone {escaped} tracefs rw,relatime 0 0\n")
    assert find_tracefs(str(mounts), first=()) == str(where)


def test_find_tracefs_falls_back_to_debugfs_tracing(tmp_path: Path) -> None:
    """Without a tracefs mount, find_tracefs finds the tracing directory under a debugfs mount."""
    debugfs = tmp_path / "debug"
    _fake_tracefs(debugfs / "tracing")
    mounts = tmp_path / "mounts"
    mounts.write_text(f"debugfs {debugfs} debugfs rw 0 0\n")
    assert find_tracefs(str(mounts), first=()) == str(debugfs / "tracing")


def test_find_tracefs_without_user_events_is_none(tmp_path: Path) -> None:
    """A tracefs without user_events, a malformed line or no mounts file gives None."""
    (tmp_path / "t").mkdir()
    mounts = tmp_path / "mounts"
    mounts.write_text(f"none {tmp_path / 't'} tracefs rw 0 0\nbroken line\n")
    assert find_tracefs(str(mounts), first=()) is None
    assert find_tracefs(str(tmp_path / "no-such-mounts"), first=()) is None


def test_not_linux_is_unavailable_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """On another platform the constructor raises BackendUnavailable saying it needs Linux."""
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(BackendUnavailable, match="needs Linux"):
        UserEventsBackend("MyCompany_MyService")


@LINUX
def test_kernel_older_than_6_4_is_unavailable_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a kernel before 6.4 BackendUnavailable names 6.4 and the running kernel's release."""
    monkeypatch.setattr(platform, "release", lambda: "6.1.0-28-amd64")
    with pytest.raises(BackendUnavailable, match=r"6\.4 or later.*6\.1\.0-28-amd64"):
        UserEventsBackend("MyCompany_MyService")


def test_no_user_events_is_unavailable_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a tracefs with user_events BackendUnavailable names CONFIG_USER_EVENTS."""
    monkeypatch.setattr(platform, "release", lambda: "6.12.0")
    monkeypatch.setattr(_backend_linux, "find_tracefs", lambda: None)
    with pytest.raises(BackendUnavailable, match="CONFIG_USER_EVENTS"):
        UserEventsBackend("MyCompany_MyService")


def test_invalid_provider_name_is_a_setup_error_everywhere() -> None:
    """An invalid provider name raises ValueError on any platform."""
    with pytest.raises(ValueError):
        UserEventsBackend("bad name:with colon")


def test_kernel_version_parsing() -> None:
    """_kernel_version reads major and minor from a release string, and None from one without them."""
    assert _backend_linux._kernel_version("6.18.44-fc-v669") == (6, 18)
    assert _backend_linux._kernel_version("5.15.0") == (5, 15)
    assert _backend_linux._kernel_version("weird") is None


@LINUX
def test_writev_enospc_is_counted_by_a_provider_and_never_raised_from_a_log_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real UserEventsBackend writes into /dev/full, whose every write fails with ENOSPC."""
    unix_module("fcntl")  # the backend's registration ioctl
    tracefs = tmp_path / "tracing"
    tracefs.mkdir()
    (tracefs / "user_events_data").symlink_to("/dev/full")
    monkeypatch.setattr(platform, "release", lambda: "6.12.0")
    monkeypatch.setattr(_backend_linux, "find_tracefs", lambda: str(tracefs))
    backend = UserEventsBackend("SlEtw_EnospcHost")  # the real constructor opens /dev/full O_WRONLY
    provider = Provider("SlEtw_EnospcHost", backend=backend)
    try:
        # /dev/full is no user_events_data: every up-front registration is refused and counted.
        assert provider.stats()["errors"] == {"register:ENOTTY": 5}
        # A session listens at L4K1: an enable word reading 1 and the write index the kernel
        # would have handed back (what the backend's open_slot stores in a slot).
        slot = provider.slot(4, 1)
        word = (ctypes.c_uint32 * 1)(1)
        slot.word, slot.handle = memoryview(word).cast("B").cast("I"), struct.pack("=i", 0)
        assert backend.write(slot, b"\x07" + bytes(7)) == errno.ENOSPC  # the real writev
        log = structlog.wrap_logger(None, processors=[EtwRenderer(provider.name, provider=provider)])
        for i in range(3):
            assert log.info("disk_full", n=i) is None  # returns normally, no exception
        log.debug("not_listened")  # L5K1 stays disabled: nothing attempted, nothing counted
        stats = provider.stats()
        assert stats["errors"] == {"register:ENOTTY": 5, "ENOSPC": 3}
        assert stats["written"] == 0
        assert stats["dropped"] == {}
    finally:
        provider.close()
