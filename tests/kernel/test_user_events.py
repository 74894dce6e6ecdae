"""The user_events backend against a real kernel, captured by real perf (marker ``kernel``).

These tests run in the virtme-ng guest (``python tests/kernel/run_in_guest.py``).  Events here
are built by hand (one Value32 field) so the backend is proven byte-exact on its own; the
structlog path is proven in ``test_structlog_kernel.py``.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import os
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import PerfSession, wait_until

from structlog_etw.backends.base import BackendUnavailable
from structlog_etw.backends.user_events import DIAG_IOCSREG, DIAG_IOCSUNREG, UserEventsBackend, find_tracefs
from tests.helpers.forking import fork_child, wait_child
from tests.helpers.unix import unix_module

fcntl = unix_module("fcntl")  # Linux-only tests; on Windows the module is skipped, not an import error

pytestmark = pytest.mark.kernel

BackendFactory = Callable[..., UserEventsBackend]
PerfFactory = Callable[..., PerfSession]


def raw_event(level: int, name: str, n: int) -> bytes:
    """A minimal valid EventHeader event: header, Metadata extension, one u32 field ``n``."""
    meta = name.encode() + b"\0" + b"n\0" + bytes([4])  # Value32, default format
    header = struct.pack("<BBHHBB", 0x07, 0, 0, 0, 0, level)
    ext = struct.pack("<HH", len(meta), 0x0001)
    return header + ext + meta + struct.pack("<I", n)


def _payload_n(data: bytes) -> int:
    """The ``n`` of a :func:`raw_event` (perf may have padded the data)."""
    (meta_size,) = struct.unpack_from("<H", data, 8)
    return int(struct.unpack_from("<I", data, 12 + meta_size)[0])


def _exact(sample_data: bytes, event: bytes) -> bool:
    # perf pads the raw record: the event is a prefix, the rest is zero padding.
    return sample_data[: len(event)] == event and not any(sample_data[len(event) :])


def test_open_slot_registers_a_tracepoint_visible_in_tracefs(
    user_events_backend: BackendFactory, provider_name: str
) -> None:
    """open_slot registers <provider>_L4K1 with EventHeader fields in tracefs, once, disabled at first."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    name = f"{provider_name}_L4K1"
    assert backend.tracepoint_name(4, 1) == name
    tracefs = find_tracefs()
    assert tracefs is not None
    assert os.path.isdir(os.path.join(tracefs, "events", "user_events", name))
    with open(os.path.join(tracefs, "user_events_status")) as f:
        status = f.read()
    assert name in status
    with open(os.path.join(tracefs, "events", "user_events", name, "format")) as f:
        assert "eventheader_flags" in f.read()  # registered with the EventHeader field list
    assert slot.word[0] == 0  # nobody listens yet
    assert backend.open_slot(4, 1) is slot  # cached: registered once


def test_group_becomes_part_of_the_tracepoint_name(
    user_events_backend: BackendFactory, provider_name: str
) -> None:
    """A provider group is appended as the G<group> suffix of the registered tracepoint name."""
    backend = user_events_backend(provider_name, "grp1")
    backend.open_slot(5, 0x10)
    tracefs = find_tracefs()
    assert tracefs is not None
    assert os.path.isdir(os.path.join(tracefs, "events", "user_events", f"{provider_name}_L5K10Ggrp1"))


def test_enable_word_flips_when_perf_attaches_and_back_when_it_leaves(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
) -> None:
    """The slot's enable word is 1 while perf records the tracepoint and 0 after, for two sessions."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    assert slot.word[0] == 0
    with perf_session([f"{provider_name}_L4K1"]):
        assert slot.word[0] == 1
        assert slot.enabled
    wait_until(lambda: slot.word[0] == 0, what="the enable word to clear after perf exits")
    # and again: a second session flips it again
    with perf_session([f"{provider_name}_L4K1"], label="second"):
        assert slot.word[0] == 1
    wait_until(lambda: slot.word[0] == 0, what="the enable word to clear after the second session")


def test_written_events_arrive_byte_exact_in_perf_with_pid_and_tid(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
) -> None:
    """20 written events arrive in perf byte for byte, with this process's pid and thread id."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    events = [raw_event(4, f"ev{i}", i) for i in range(20)]
    with perf_session([f"{provider_name}_L4K1"]) as session:
        results = [backend.write(slot, e) for e in events]
    assert results == [0] * 20
    samples = [s for s in session.samples() if s.name == f"user_events:{provider_name}_L4K1"]
    assert len(samples) == 20
    for sample, event in zip(samples, events, strict=True):
        assert _exact(sample.data, event)
        assert sample.pid == os.getpid()
        assert sample.tid == threading.get_native_id()


def test_write_without_a_listener_returns_ebadf_and_nothing_reaches_a_later_session(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
) -> None:
    """A write while nobody listens returns EBADF, and only the event written during the session arrives."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    assert slot.word[0] == 0
    assert backend.write(slot, raw_event(4, "before", 1)) == errno.EBADF
    with perf_session([f"{provider_name}_L4K1"]) as session:
        assert backend.write(slot, raw_event(4, "during", 2)) == 0
    wait_until(lambda: slot.word[0] == 0, what="the session to end")
    assert backend.write(slot, raw_event(4, "after", 3)) == errno.EBADF
    assert [_payload_n(s.data) for s in session.samples()] == [2]


def test_a_level_and_keyword_the_session_did_not_name_stays_disabled(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
) -> None:
    """Slots of a level or keyword perf did not name stay disabled (EBADF), and only the named one arrives."""
    backend = user_events_backend(provider_name)
    wanted = backend.open_slot(4, 1)
    other_keyword = backend.open_slot(4, 2)
    other_level = backend.open_slot(5, 1)
    with perf_session([f"{provider_name}_L4K1"]) as session:
        assert wanted.word[0] == 1
        assert other_keyword.word[0] == 0
        assert other_level.word[0] == 0
        assert backend.write(wanted, raw_event(4, "wanted", 1)) == 0
        assert backend.write(other_keyword, raw_event(4, "other", 2)) == errno.EBADF
    names = {s.name for s in session.samples()}
    assert names == {f"user_events:{provider_name}_L4K1"}


def test_two_providers_and_several_tracepoints_in_one_session(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
) -> None:
    """Events of two providers' tracepoints recorded in one session arrive in order under their names."""
    a = user_events_backend(provider_name + "A")
    b = user_events_backend(provider_name + "B")
    sa, sb = a.open_slot(3, 1), b.open_slot(2, 0x80)
    tps = [f"{provider_name}A_L3K1", f"{provider_name}B_L2K80"]
    with perf_session(tps) as session:
        assert a.write(sa, raw_event(3, "a", 1)) == 0
        assert b.write(sb, raw_event(2, "b", 2)) == 0
        assert a.write(sa, raw_event(3, "a", 3)) == 0
    got = [(s.name.split(":", 1)[1], _payload_n(s.data)) for s in session.samples()]
    assert got == [(tps[0], 1), (tps[1], 2), (tps[0], 3)]


# -- faults: every error comes back as an errno, never as an exception -------------------------


def test_unknown_write_index_returns_enoent(user_events_backend: BackendFactory, provider_name: str) -> None:
    """A write through a write index the kernel never gave returns ENOENT."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    forged = type(slot)(4, 1, slot.word, struct.pack("=i", 4000))
    assert backend.write(forged, raw_event(4, "x", 1)) == errno.ENOENT


def test_event_shorter_than_an_eventheader_returns_einval(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
) -> None:
    """An event shorter than an EventHeader returns EINVAL and writes nothing; the next write arrives."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    with perf_session([f"{provider_name}_L4K1"]) as session:
        assert backend.write(slot, b"\x07\x00\x00") == errno.EINVAL
        assert backend.write(slot, raw_event(4, "ok", 7)) == 0
    assert [_exact(s.data, raw_event(4, "ok", 7)) for s in session.samples()] == [True]


def test_write_shorter_than_the_index_returns_efault(
    user_events_backend: BackendFactory, provider_name: str
) -> None:
    """A write whose index is shorter than 4 bytes returns EFAULT."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    short = type(slot)(4, 1, slot.word, b"\0\0")
    assert backend.write(short, b"") == errno.EFAULT


def test_write_with_an_unusable_event_object_returns_an_errno(
    user_events_backend: BackendFactory, provider_name: str
) -> None:
    """A write of None instead of bytes returns EINVAL, not an exception."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    assert backend.write(slot, None) == errno.EINVAL  # type: ignore[arg-type]


def test_write_after_close_returns_ebadf_and_never_touches_a_reused_descriptor(
    user_events_backend: BackendFactory, provider_name: str, tmp_path: Path
) -> None:
    """After close() writes return EBADF and the old descriptor number is never reused by a new file."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    fd = backend._fd
    backend.close()
    backend.close()  # idempotent
    assert backend.write(slot, raw_event(4, "late", 1)) == errno.EBADF
    with pytest.raises(OSError) as exc:
        backend.open_slot(4, 2)
    assert exc.value.errno == errno.EBADF
    # The old number stays taken by a read-only placeholder: a new file never gets it ...
    target = tmp_path / "victim"
    new_fd = os.open(target, os.O_WRONLY | os.O_CREAT)
    try:
        assert new_fd != fd
        # ... and even a write through the stale number cannot reach anything.
        with pytest.raises(OSError) as raw:
            os.writev(fd, [slot.handle, raw_event(4, "late", 1)])
        assert raw.value.errno == errno.EBADF
    finally:
        os.close(new_fd)
    assert target.read_bytes() == b""


def test_close_unregisters_so_the_word_reads_zero_even_while_perf_records(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
) -> None:
    """close() while perf records clears the enable word, later writes return EBADF, nothing arrives."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    with perf_session([f"{provider_name}_L4K1"]) as session:
        assert slot.word[0] == 1
        backend.close()
        assert slot.word[0] == 0
        assert backend.write(slot, raw_event(4, "closed", 1)) == errno.EBADF
    assert session.samples() == []


def test_registration_the_kernel_refuses_raises_oserror_and_the_backend_keeps_working(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
) -> None:
    """A name another process registered differently raises EADDRINUSE; other slots still write."""
    backend = user_events_backend(provider_name)
    # Somebody else registered this provider's L4K2 name with another field list first:
    # the kernel refuses our EventHeader registration of the same name (EADDRINUSE).
    word = (ctypes.c_uint32 * 1)()
    cmd = ctypes.create_string_buffer(f"{provider_name}_L4K2 u32 other".encode())
    clash_fd = os.open(os.path.join(str(find_tracefs()), "user_events_data"), os.O_WRONLY)
    reg = bytearray(struct.pack("=IBBHQQI", 28, 0, 4, 0, ctypes.addressof(word), ctypes.addressof(cmd), 0))
    fcntl.ioctl(clash_fd, DIAG_IOCSREG, reg, True)
    try:
        with pytest.raises(OSError) as exc:
            backend.open_slot(4, 2)
        assert exc.value.errno == errno.EADDRINUSE
        slot = backend.open_slot(4, 1)  # other slots still register and write
        with perf_session([f"{provider_name}_L4K1"]) as session:
            assert backend.write(slot, raw_event(4, "fine", 5)) == 0
        assert [_payload_n(s.data) for s in session.samples()] == [5]
    finally:
        unreg = struct.pack("=IBBHQ", 16, 0, 0, 0, ctypes.addressof(word))
        fcntl.ioctl(clash_fd, DIAG_IOCSUNREG, unreg)
        os.close(clash_fd)


# -- fork ----------------------------------------------------------------------------------------


def test_forked_child_writes_through_inherited_slots_and_registers_new_ones(
    user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
) -> None:
    """A child forked while another thread holds the lock writes through inherited slots, registers more."""
    backend = user_events_backend(provider_name)
    slot = backend.open_slot(4, 1)
    child_slot_tp = f"{provider_name}_L3K1"
    backend.open_slot(3, 1)  # registered so perf can name it; the child re-uses the cache
    with perf_session([f"{provider_name}_L4K1", child_slot_tp]) as session:
        assert slot.word[0] == 1
        # Hold the registration lock in another thread while forking: the child must not
        # inherit it locked.
        held = threading.Event()
        release = threading.Event()

        def hold() -> None:
            with backend._lock:
                held.set()
                release.wait(30)

        t = threading.Thread(target=hold)
        t.start()
        held.wait(30)

        def child() -> bool:
            signal.alarm(20)  # a deadlock fails the test instead of hanging it
            ok = slot.word[0] == 1  # the kernel duplicated the enabler into the child
            r1 = backend.write(slot, raw_event(4, "child", 1))
            s2 = backend.open_slot(4, 8)  # takes the (re-initialised) lock
            r2 = backend.write(backend.open_slot(3, 1), raw_event(3, "child3", 2))
            return ok and r1 == 0 and r2 == 0 and s2.word[0] == 0

        pid = fork_child(child)
        release.set()
        t.join(30)
        assert wait_child(pid) == 0
        assert backend.write(slot, raw_event(4, "parent", 3)) == 0
    got = sorted((s.pid == pid, s.name, _payload_n(s.data)) for s in session.samples())
    assert got == [
        (False, f"user_events:{provider_name}_L4K1", 3),
        (True, f"user_events:{child_slot_tp}", 2),
        (True, f"user_events:{provider_name}_L4K1", 1),
    ]


def test_constructor_reports_permission_problems_as_backend_unavailable(provider_name: str) -> None:
    """Without rights to user_events_data the constructor raises BackendUnavailable "permission denied"."""
    if os.getuid() != 0:
        pytest.fail("this test drops privileges and needs root (the guest runs as root)")

    def child() -> bool:
        os.setgid(65534)
        os.setuid(65534)
        try:
            UserEventsBackend(provider_name)
        except BackendUnavailable as e:
            return "permission denied" in str(e)
        return False

    assert wait_child(fork_child(child)) == 0


# -- registration interrupted ----------------------------------------------------------------------

#: struct user_reg and struct user_unreg (include/uapi/linux/user_events.h), packed.
_USER_REG = struct.Struct("=IBBHQQI")
_USER_UNREG = struct.Struct("=IBBHQ")


class TestRegistrationInterrupted:
    """A KeyboardInterrupt (a signal handler's exception) arriving right after DIAG_IOCSREG
    succeeded never leaves the kernel an enable word that nothing references or unregisters."""

    def test_interrupt_right_after_the_kernel_registered_the_word_leaves_no_enabler(
        self, user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
    ) -> None:
        """A KeyboardInterrupt after the register ioctl leaves no kernel enabler; the slot re-registers."""
        backend = user_events_backend(provider_name)
        seen: dict[str, int] = {}

        def interrupt_after_ioctl(frame: Any, event: str, arg: object) -> None:
            # The profile hook runs when fcntl.ioctl returns to open_slot: the kernel has the
            # word's address now.  Read it from the struct user_reg the kernel was given.
            if event == "c_return" and arg is fcntl.ioctl:
                sys.setprofile(None)
                seen["addr"] = _USER_REG.unpack(bytes(frame.f_locals["reg"]))[4]
                raise KeyboardInterrupt

        sys.setprofile(interrupt_after_ioctl)
        try:
            with pytest.raises(KeyboardInterrupt):
                backend.open_slot(4, 1)
        finally:
            sys.setprofile(None)
        gc.collect()  # an array nothing references would be freed here
        # The kernel keeps no enabler at that address (DIAG_IOCSUNREG: ENOENT when it has none).
        fd = os.open(os.path.join(str(find_tracefs()), "user_events_data"), os.O_WRONLY)
        try:
            unreg = _USER_UNREG.pack(_USER_UNREG.size, 0, 0, 0, seen["addr"])
            with pytest.raises(OSError) as exc:
                fcntl.ioctl(fd, DIAG_IOCSUNREG, unreg)
            assert exc.value.errno == errno.ENOENT
        finally:
            os.close(fd)
        # The pair registers again and works.
        slot = backend.open_slot(4, 1)
        with perf_session([f"{provider_name}_L4K1"]) as session:
            assert slot.word[0] == 1
            assert backend.write(slot, raw_event(4, "after", 7)) == 0
        assert [_payload_n(s.data) for s in session.samples()] == [7]


# -- the permission recipe of docs/linux.md ---------------------------------------------------------

_DOCS_LINUX = Path(__file__).resolve().parents[2] / "docs" / "linux.md"
_TRACING_GID = 4242  # stands for the 'tracing' group of the recipe


def _recipe_commands(tracefs: str) -> list[list[str]]:
    """The chgrp/chmod lines of docs/linux.md's permission recipe, group 'tracing' as a number."""
    text = _DOCS_LINUX.read_text(encoding="utf-8")
    block = text.split("<!-- permission-recipe -->", 2)[1]
    commands = []
    for line in block.splitlines():
        words = line.split("#", 1)[0].split()
        if words[:2] in (["sudo", "chgrp"], ["sudo", "chmod"]):
            args = [w.replace("/sys/kernel/tracing", tracefs) for w in words[1:]]
            commands.append([str(_TRACING_GID) if w == "tracing" else w for w in args])
    return commands


class TestPermissionRecipe:
    """docs/linux.md's recipe lets a member of the group register and write events, and gives it
    nothing else of tracefs (no listing, no trace buffer, no probes, no tracer control); a user
    outside the group still cannot open ``user_events_data``."""

    @staticmethod
    def _as_user(tracefs: str, groups: list[int], forbidden: list[tuple[str, int]], provider: str) -> str:
        """Fork a child with uid/gid 65534 and supplementary *groups*; what it could do, as text."""
        report_r, report_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            report = "child failed before reporting"
            try:
                signal.alarm(20)
                os.setgroups(groups)
                os.setgid(65534)
                os.setuid(65534)
                opened = []
                for name, flags in forbidden:
                    try:
                        os.close(os.open(os.path.join(tracefs, name), flags))
                        opened.append(name)
                    except PermissionError:
                        pass
                try:
                    os.listdir(tracefs)
                    opened.append("(listing)")
                except PermissionError:
                    pass
                try:
                    backend = UserEventsBackend(provider)
                except BackendUnavailable as exc:
                    report = f"opened={opened} unavailable={'permission denied' in str(exc)}"
                else:
                    rc = backend.write(backend.open_slot(4, 1), raw_event(4, "member", 42))
                    report = f"opened={opened} write={rc}"
            except BaseException as exc:  # reported to the parent, which fails the test
                report = f"{type(exc).__name__}: {exc}"
            finally:
                os.write(report_w, report.encode())
                os._exit(0)
        os.close(report_w)
        code = wait_child(pid)  # the report's write end closes when the child exits (or is killed)
        with os.fdopen(report_r, "rb") as f:
            report = f.read().decode()
        assert code == 0
        return f"pid={pid} {report}"

    def test_a_group_member_registers_and_writes_and_cannot_touch_the_rest_of_tracefs(
        self, user_events_backend: BackendFactory, provider_name: str, perf_session: PerfFactory
    ) -> None:
        """After the recipe a group member writes events but opens nothing else in tracefs; others cannot."""
        if os.getuid() != 0:
            pytest.fail("this test applies the recipe and drops privileges: it needs root (as in the guest)")
        tracefs = str(find_tracefs())
        data = os.path.join(tracefs, "user_events_data")
        commands = _recipe_commands(tracefs)
        assert sorted(c[0] for c in commands) == ["chgrp", "chmod", "chmod"], commands
        saved = {p: os.stat(p) for p in (tracefs, data)}
        # What a member must not touch (kprobe_events exists only with CONFIG_KPROBE_EVENTS).
        forbidden = [
            (name, flags)
            for name, flags in (
                ("kprobe_events", os.O_WRONLY),
                ("uprobe_events", os.O_WRONLY),
                ("current_tracer", os.O_WRONLY),
                ("set_event", os.O_WRONLY),
                ("trace", os.O_RDONLY),
                ("trace_pipe", os.O_RDONLY | os.O_NONBLOCK),
                ("user_events_status", os.O_RDONLY),
            )
            if os.path.exists(os.path.join(tracefs, name))
        ]
        always = {"uprobe_events", "current_tracer", "set_event", "trace", "trace_pipe"}
        assert {n for n, _ in forbidden} >= always
        user_events_backend(provider_name).open_slot(4, 1)  # perf needs the tracepoint to exist
        try:
            for command in commands:
                subprocess.run(command, check=True)
            with perf_session([f"{provider_name}_L4K1"]) as session:
                member = self._as_user(tracefs, [_TRACING_GID], forbidden, provider_name)
            outsider = self._as_user(tracefs, [], forbidden, provider_name)
        finally:
            for path, st in saved.items():
                os.chown(path, st.st_uid, st.st_gid)
                os.chmod(path, st.st_mode & 0o7777)
        pid = int(member.split()[0].removeprefix("pid="))
        assert member.split(" ", 1)[1] == "opened=[] write=0"
        assert outsider.split(" ", 1)[1] == "opened=[] unavailable=True"
        assert [(s.pid == pid, _payload_n(s.data)) for s in session.samples()] == [(True, 42)]
