"""The user_events descriptor is ours or it is not used: the host side of the rule.

``user_events_data`` is faked by a regular file (a fake tracefs directory), so registrations are
refused (``ENOTTY``) but everything about the descriptor itself is real: where it is opened, the
check before every write (``kcmp`` where the kernel has it, the ``fstat`` identity elsewhere;
both are run here), what happens when a daemonizer closes it and the application's next
``open()`` gets the number.  The same cases against the real kernel, with a tracepoint enabled,
are in tests/kernel/test_descriptor_kernel.py.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from structlog_etw import Provider, StatusReason, open_descriptors
from structlog_etw.backends import user_events as ue
from structlog_etw.backends.base import DESCRIPTOR_LOST, Slot
from structlog_etw.backends.user_events import FD_FLOOR, MAX_REOPENS, UserEventsBackend
from tests.helpers.unix import unix_module

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="user_events is Linux only")
unix_module("fcntl")  # the backend's descriptor moves (Windows, and the simulated-Windows run, have none)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["kcmp", "fstat"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with kcmp (where this kernel lets us use it) and with the fstat identity."""
    if request.param == "fstat":
        monkeypatch.setattr(ue, "_kcmp_fn", [None])
    elif ue._kcmp() is None:
        pytest.skip("no kcmp system call number for this machine")
    return str(request.param)


@pytest.fixture
def tracefs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake tracefs whose user_events_data is a regular file (the kernel release says 6.12)."""
    where = tmp_path / "tracing"
    where.mkdir()
    (where / "user_events_data").write_bytes(b"")
    monkeypatch.setattr(platform, "release", lambda: "6.12.0")
    monkeypatch.setattr(ue, "find_tracefs", lambda: str(where))
    return where


@pytest.fixture
def backend(tracefs: Path, mode: str) -> Iterator[UserEventsBackend]:
    """A backend on the fake tracefs (closed at teardown)."""
    b = UserEventsBackend("SlEtw_Descriptor")
    if mode == "kcmp" and b._kcmp is None:
        b.close()
        pytest.skip("this kernel (or sandbox) refuses kcmp")
    yield b
    b.close()


def _slot() -> Slot:
    word = (ctypes.c_uint32 * 1)(1)
    return Slot(4, 1, memoryview(word).cast("B").cast("I"), bytearray(struct.pack("=i", 7)))


def _hide(tracefs: Path) -> None:
    """Make opening user_events_data fail (renamed away: its inode number stays taken)."""
    (tracefs / "user_events_data").rename(tracefs / "hidden")


def _unhide(tracefs: Path) -> None:
    (tracefs / "hidden").rename(tracefs / "user_events_data")


def _steal(backend: UserEventsBackend, path: Path) -> int:
    """What a daemonizer's close-all then the application's next open() do to the backend's
    descriptor: closed behind its back, the number reused for the application's file."""
    numbers = sorted(n for n in (backend._fd, backend._ref) if n >= 0)
    for n in numbers:
        os.close(n)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    assert fd == numbers[0]  # the application's file now has the backend's number
    return fd


def test_the_descriptor_is_opened_above_the_standard_descriptors(tracefs: Path, mode: str) -> None:
    """With fd 0-2 closed (a service started with >&-), user_events_data still gets fd >= 3."""
    script = textwrap.dedent(
        f"""
        import os, platform, sys
        sys.path.insert(0, {str(REPO)!r})
        os.close(0); os.close(1); os.close(2)
        from structlog_etw.backends import user_events as ue
        platform.release = lambda: "6.12.0"
        ue.find_tracefs = lambda: {str(tracefs)!r}
        if {mode!r} == "fstat":
            ue._kcmp_fn[:] = [None]
        b = ue.UserEventsBackend("SlEtw_Low")
        low = [n for n in (0, 1, 2) if os.path.exists(f"/proc/self/fd/{{n}}")]
        out = os.open({str(tracefs / "out")!r}, os.O_WRONLY | os.O_CREAT)
        os.write(out, repr((b._fd, b._ref, low)).encode())
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    fd, ref, low = eval((tracefs / "out").read_text())  # our own repr
    assert fd >= FD_FLOOR
    assert ref == -1 or ref >= FD_FLOOR
    assert low == []  # the low numbers it went through are closed again


def test_a_stolen_descriptor_is_never_written_and_the_event_goes_through_a_new_one(
    backend: UserEventsBackend, tracefs: Path, tmp_path: Path
) -> None:
    """After close-all and the application's open(), the application's file gets no byte; the
    backend opens user_events_data again and the event goes there (counted as reopened)."""
    app = tmp_path / "app.log"
    fd = _steal(backend, app)
    try:
        os.write(fd, b"app line 1\n")
        assert backend.write(_slot(), b"EVENT") == 0
        os.write(fd, b"app line 2\n")
        assert app.read_bytes() == b"app line 1\napp line 2\n"
        assert (tracefs / "user_events_data").read_bytes() == struct.pack("=i", 7) + b"EVENT"
        assert backend.reopened == 1
        assert backend.lost is None
        assert backend._fd not in (fd, -1)
    finally:
        os.close(fd)


def test_a_descriptor_that_cannot_be_reopened_drops_events_as_descriptor_lost(
    backend: UserEventsBackend, tracefs: Path, tmp_path: Path
) -> None:
    """When user_events_data cannot be opened again the event is DESCRIPTOR_LOST, the number
    untouched; a later write reopens once it can."""
    _hide(tracefs)
    app = tmp_path / "app.log"
    fd = _steal(backend, app)
    try:
        assert backend.write(_slot(), b"EVENT") == DESCRIPTOR_LOST
        assert backend.lost is not None and "no longer" in backend.lost
        assert backend.write(_slot(), b"EVENT") == DESCRIPTOR_LOST
        assert app.read_bytes() == b""
        _unhide(tracefs)
        assert backend.write(_slot(), b"LATER") == 0
        assert backend.lost is None and backend.reopened == 1
        assert app.read_bytes() == b""
    finally:
        os.close(fd)


def test_reopening_is_bounded(backend: UserEventsBackend, tracefs: Path, tmp_path: Path) -> None:
    """A backend opens user_events_data again at most MAX_REOPENS times; then it stays lost."""
    _hide(tracefs)
    fd = _steal(backend, tmp_path / "app.log")
    try:
        for _ in range(MAX_REOPENS + 5):
            assert backend.write(_slot(), b"E") == DESCRIPTOR_LOST
        assert backend._tries == MAX_REOPENS
        _unhide(tracefs)
        assert backend.write(_slot(), b"E") == DESCRIPTOR_LOST
    finally:
        os.close(fd)


def test_close_never_dup2s_over_the_applications_descriptor(
    backend: UserEventsBackend, tmp_path: Path
) -> None:
    """close() (close_all at exit) leaves a number that is not ours alone: the application's
    buffered file still flushes (the old code dup2'ed a read-only /dev/null over it)."""
    app = tmp_path / "app.log"
    fd = _steal(backend, app)
    f = os.fdopen(fd, "w")
    try:
        f.write("x" * 280)  # buffered, not flushed yet
        backend.close()
        f.flush()
        assert app.read_text() == "x" * 280
    finally:
        f.close()


def test_collecting_a_backend_never_closes_the_applications_descriptor(
    backend: UserEventsBackend, tmp_path: Path
) -> None:
    """A backend collected after its number was reused does not os.close() the application's."""
    app = tmp_path / "app.log"
    fd = _steal(backend, app)
    try:
        backend.__del__()
        os.write(fd, b"still mine\n")  # EBADF if the backend had closed it
        assert app.read_bytes() == b"still mine\n"
    finally:
        os.close(fd)


def test_a_number_another_backend_of_ours_gets_marks_the_old_owner_lost(
    backend: UserEventsBackend,
) -> None:
    """Another open of user_events_data has the same identity: when this library's own next
    backend gets the closed numbers, the old owner knows at once and never writes through them."""
    for n in (backend._fd, backend._ref):
        if n >= 0:
            os.close(n)
    other = UserEventsBackend("SlEtw_Other")
    try:
        assert backend.lost is not None and "reused" in backend.lost
        assert backend._fd == -1
        assert backend.write(_slot(), b"E") == 0  # through its own new descriptor
        assert backend._fd not in (other._fd, other._ref)
    finally:
        other.close()


def test_backends_that_keep_their_descriptors_leave_each_other_alone(backend: UserEventsBackend) -> None:
    """A second backend of the process (its own numbers) marks nobody lost; both write."""
    other = UserEventsBackend("SlEtw_Second")
    try:
        assert backend.lost is None and other.lost is None
        assert backend.write(_slot(), b"A") == 0 and other.write(_slot(), b"B") == 0
        assert backend.reopened == other.reopened == 0
    finally:
        other.close()


def test_open_descriptors_lists_what_a_daemonizer_must_keep(backend: UserEventsBackend) -> None:
    """open_descriptors() gives the backend's descriptor (and its private duplicate) until close."""
    mine = {n for n in (backend._fd, backend._ref) if n >= 0}
    assert mine <= set(open_descriptors())
    backend.close()
    assert not mine & set(open_descriptors())


def test_the_provider_counts_descriptor_lost_and_reports_it_in_status(
    tracefs: Path, tmp_path: Path, mode: str
) -> None:
    """The provider counts a DESCRIPTOR_LOST write as dropped['descriptor_lost'] (never an
    error, never written) and its status says what happened, then that it reopened."""
    backend = UserEventsBackend("SlEtw_ProvLost")
    provider = Provider("SlEtw_ProvLost", backend=backend)
    provider._base_backend = backend  # as if the OS gave it: status speaks of the OS backend
    slot = provider.slot(4, 1)
    slot.word, slot.handle = _slot().word, _slot().handle
    _hide(tracefs)
    fd = _steal(backend, tmp_path / "app.log")
    try:
        assert provider.write(slot, "ev", [("n", 2, 1)]) is False
        stats = provider.stats()
        assert stats["dropped"] == {"descriptor_lost": 1}
        assert stats["written"] == 0
        status = provider.status
        assert (status.reason, status.available) == (StatusReason.DESCRIPTOR_LOST, False)
        _unhide(tracefs)
        assert provider.write(slot, "ev", [("n", 2, 2)]) is True
        status = provider.status
        assert (status.reason, status.available) == (StatusReason.DESCRIPTOR_REOPENED, True)
        assert (tmp_path / "app.log").read_bytes() == b""
    finally:
        os.close(fd)
        provider.close()


def test_a_closed_backend_still_says_ebadf(backend: UserEventsBackend) -> None:
    """close() is not a loss: later writes return EBADF as before, nothing is reopened."""
    backend.close()
    assert backend.write(_slot(), b"E") == errno.EBADF
    assert backend.reopened == 0
