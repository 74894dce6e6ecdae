"""Linux user_events: register tracepoints through tracefs and write EventHeader events.

The kernel ABI (``include/uapi/linux/user_events.h``, Linux 6.4+):

* ``<tracefs>/user_events_data`` is opened write-only.
* ``ioctl(fd, DIAG_IOCSREG, struct user_reg *)`` registers a tracepoint from a
  command string and an *enable word*: memory in this process whose bit the
  kernel sets while at least one consumer (``perf record``, ftrace) has the
  tracepoint enabled, and clears when the last one leaves.  The kernel hands
  back a *write index*.
* ``write(fd, write_index (native int32) + event bytes)`` emits one event (``writev`` with the
  two as separate buffers does the same; one buffer is the cheaper call).
* ``ioctl(fd, DIAG_IOCSUNREG, struct user_unreg *)`` stops the kernel from
  updating an enable word.  Until that call the kernel may write into the word
  at any time, so its memory must stay allocated and at the same address for the
  whole registration; a word whose unregistration failed is kept alive for the
  rest of the process (:data:`_RETIRED_WORDS`).
* Several registrations may share one word, each with its own ``enable_bit``; the same
  tracepoint may be registered more than once (one enabler per registration, one write index).
  Each tracepoint is registered twice here: bit 0 of its own word (the slot's ``word[0]``) and
  one bit of the provider word (:attr:`UserEventsBackend.any_word`, a pointer-sized word), so
  that ``any_word[0]`` is non-zero iff a consumer has any tracepoint of the provider enabled.
  A provider with more tracepoints than the word has bits (64; 32 on a 32-bit build) gets
  :data:`~structlog_etw.backends.base.UNKNOWN_WORD` from then on (reads non-zero: the fast
  paths look at each call's slot, as without a provider word).

Nothing here imports structlog.  :meth:`UserEventsBackend.write` never raises:
it returns 0 or the errno (``EBADF`` once closed, or when no consumer listens on
Linux 6.5+; ``ENOENT`` for an unknown index; ``EFAULT``/``EINVAL`` for a short
event; ...); the provider counts non-zero results by reason.

``fork()``: the kernel duplicates every enable-word registration into the child
(same addresses, now in the child's copy of memory) and the child inherits the
descriptor, so a child keeps logging with the same slots.  The registration lock
is replaced in the child (:func:`os.register_at_fork`) because another thread
might have held it at the moment of the fork.  ``execve`` drops the enablers.

**The descriptor is ours or it is not used.**  ``user_events_data`` is opened at
:data:`FD_FLOOR` or above (never 0, 1 or 2, which a daemonizer points at its log file).
A daemonizer's ``closerange(3, ...)`` closes it behind our back, and the application's next
``open()`` gets the number; so before any byte is written, and before the number is closed
or ``dup2``'ed, the backend checks that it is still the open file it opened:

* where the kernel has ``kcmp`` (``CONFIG_KCMP``; not in most seccomp sandboxes), a private
  duplicate is kept beside it and ``kcmp(KCMP_FILE)`` must say both numbers are one open
  file (the exact test: another open of ``user_events_data`` is a different open file);
* elsewhere the identity ``(st_dev, st_ino)`` of :func:`os.fstat` must be the one
  ``user_events_data`` had: every other file fails it; another open of ``user_events_data``
  passes it, which only matters if code other than this library opens ``user_events_data``
  itself after closing ours (this library's own opens are told apart: a backend whose number
  another backend of the process gets is marked lost at once).

One system call per enabled event (the figure is in docs/performance.md).  On a mismatch
the number is left alone for good (never written, closed or ``dup2``'ed): :attr:`UserEventsBackend.lost` says
what happened, the provider counts the event as ``dropped["descriptor_lost"]``, and the
backend opens ``user_events_data`` again, unregisters its enable words (they belong to the
process's memory, not to the file, so the kernel would answer ``EADDRINUSE``) and registers
them again at the same addresses, then writes the event through the new descriptor
(:attr:`UserEventsBackend.reopened` counts it).  At most :data:`MAX_REOPENS` times per backend.
:func:`open_descriptors` lists the descriptors to keep for daemonizers.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import re
import struct
import sys
import weakref
from typing import Any, Final

try:
    import fcntl
except ImportError:  # Windows: the module still imports; UserEventsBackend() says "needs Linux" first
    fcntl = None  # type: ignore[assignment]

from ..formats.eventheader import register_command, tracepoint_name, validate_provider_name
from .base import DESCRIPTOR_LOST, TRANSIENT_ERRNOS, UNKNOWN_WORD, BackendUnavailable, Slot, fork_safe_lock

__all__ = [
    "DESCRIPTOR_LOST",
    "DIAG_IOCSDEL",
    "DIAG_IOCSREG",
    "DIAG_IOCSUNREG",
    "FD_FLOOR",
    "MAX_REOPENS",
    "USER_EVENT_REG_PERSIST",
    "UserEventsBackend",
    "delete_tracepoint",
    "find_tracefs",
    "open_descriptors",
]

#: ``_IOWR('*', 0, struct user_reg *)`` on 64-bit Linux.
DIAG_IOCSREG: Final = 0xC0082A00
#: ``_IOW('*', 1, char *)`` on 64-bit Linux: delete a tracepoint nobody uses (argument: its name).
DIAG_IOCSDEL: Final = 0x40082A01
#: ``struct user_reg`` flag: the tracepoint is not deleted when its last registration goes away
#: (kernel 6.7+; needs CAP_PERFMON or CAP_SYS_ADMIN, else ``EPERM``; older kernels: ``EINVAL``).
#: The kernel reuses an existing tracepoint of that name as it is: the flag only counts when the
#: registration creates it.
USER_EVENT_REG_PERSIST: Final = 1
#: ``_IOW('*', 2, struct user_unreg *)`` on 64-bit Linux.
DIAG_IOCSUNREG: Final = 0x40082A02

#: struct user_reg (packed, 28 bytes): size, enable_bit, enable_size, flags,
#: enable_addr, name_args, write_index (out).
_USER_REG: Final = struct.Struct("=IBBHQQI")
#: struct user_unreg (packed, 16 bytes): size, disable_bit, reserved, reserved2, disable_addr.
_USER_UNREG: Final = struct.Struct("=IBBHQ")
_WRITE_INDEX: Final = struct.Struct("=i")
_ENABLE_BIT: Final = 0  # bit 0 of a 32-bit word: word[0] is 1 while enabled
_ENABLE_SIZE: Final = 4
#: The provider word: pointer-sized (the kernel takes enable_size 8 only on 64-bit builds).
_ANY_TYPE: Final = ctypes.c_uint64 if ctypes.sizeof(ctypes.c_void_p) == 8 else ctypes.c_uint32
_ANY_SIZE: Final = ctypes.sizeof(_ANY_TYPE)
_ANY_FORMAT: Final = "Q" if _ANY_SIZE == 8 else "I"
_MIN_KERNEL: Final = (6, 4)
_MAX_COMMAND: Final = 512  # bytes, including the terminating NUL

#: Enable words whose unregistration failed: the kernel may still write into them,
#: so their memory must never be freed.
_RETIRED_WORDS: list[object] = []

#: The lowest number ``user_events_data`` (and its private duplicate) may get: 0, 1 and 2 are
#: where a daemonizer puts ``/dev/null`` and its log file (``dup2``).
FD_FLOOR: Final = 3
#: How often one backend opens ``user_events_data`` again after losing its descriptor.
MAX_REOPENS: Final = 16
_KCMP_FILE: Final = 0
_fstat = os.fstat
#: ``kcmp``'s system call number per machine (absent: the fstat identity check is used).
_KCMP_NR: Final = {
    "x86_64": 312,
    "amd64": 312,
    "aarch64": 272,
    "arm64": 272,
    "riscv64": 272,
    "loongarch64": 272,
    "i386": 349,
    "i686": 349,
    "armv7l": 378,
    "ppc64le": 354,
    "ppc64": 354,
    "s390x": 343,
}
#: Every open backend of this interpreter (see :func:`open_descriptors`).
_LIVE: weakref.WeakSet[UserEventsBackend] = weakref.WeakSet()
_kcmp_fn: list[Any] = []  # [callable or None], resolved on first use
#: This process's id, renewed in a fork child (kcmp compares descriptors of one process).
_PID = [os.getpid()]


def _kcmp() -> Any:
    """``kcmp(pid1, pid2, KCMP_FILE, fd1, fd2)`` (``syscall(SYS_kcmp, ...)`` through ctypes: a
    C-level partial, no Python frame), or None where this machine has no number for it."""
    if not _kcmp_fn:
        fn = None
        nr = _KCMP_NR.get(platform.machine().lower())
        if nr is not None:
            try:
                fn = functools.partial(ctypes.CDLL(None, use_errno=True).syscall, nr)
            except (OSError, AttributeError):
                fn = None
        _kcmp_fn.append(fn)
    return _kcmp_fn[0]


def open_descriptors() -> list[int]:
    """The descriptors every open user_events backend of this process holds, sorted.

    Hand them to a daemonizer that closes every other descriptor, e.g.
    ``daemon.DaemonContext(files_preserve=structlog_etw.open_descriptors())``; a backend whose
    descriptor was closed anyway never writes to the number again and opens a new one.
    """
    fds: set[int] = set()
    for backend in list(_LIVE):
        fds.update(n for n in (backend._fd, backend._ref) if n >= 0)
    return sorted(fds)


def _above_floor(fd: int) -> int:
    """``fd`` moved to :data:`FD_FLOOR` or above (``F_DUPFD_CLOEXEC``); the low number is closed."""
    if fd >= FD_FLOOR or fcntl is None:  # no fcntl: not Linux, nothing is opened here anyway
        return fd
    try:
        return int(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, FD_FLOOR))
    finally:
        os.close(fd)


class _Opened:
    """One open of ``user_events_data``: its number, the private duplicate kcmp compares it
    with (-1 without kcmp) and the identity fstat compares it with."""

    __slots__ = ("dev", "fd", "ino", "kcmp", "ref")

    def __init__(self, path: str) -> None:
        self.fd = self.ref = -1
        fd = _above_floor(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
        self.fd = fd
        st = os.fstat(fd)
        self.dev, self.ino = st.st_dev, st.st_ino
        self.kcmp = None
        kcmp = _kcmp()
        if kcmp is None or fcntl is None:
            return
        try:
            ref = int(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, FD_FLOOR))
        except OSError:
            return
        pid = _PID[0]
        if kcmp(pid, pid, _KCMP_FILE, fd, ref) == 0:  # the kernel has kcmp and lets us use it
            self.ref, self.kcmp = ref, kcmp
        else:
            os.close(ref)

    def ours(self, fd: int, ref: int) -> bool:
        """Whether ``fd`` is still this open file (slow paths: close, registration)."""
        if self.kcmp is not None:
            pid = _PID[0]
            return bool(self.kcmp(pid, pid, _KCMP_FILE, fd, ref) == 0)
        try:
            st = os.fstat(fd)
        except OSError:
            return False
        return st.st_ino == self.ino and st.st_dev == self.dev

    def close(self) -> None:
        """Close both numbers (only while they are known to be ours)."""
        for n in (self.ref, self.fd):
            if n >= 0:
                with contextlib.suppress(OSError):
                    os.close(n)
        self.fd = self.ref = -1


def _kernel_version(release: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _unescape_mount(path: str) -> str:
    # /proc/mounts escapes space, tab, newline and backslash as \ooo.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def find_tracefs(
    mounts: str = "/proc/mounts", first: tuple[str, ...] = ("/sys/kernel/tracing",)
) -> str | None:
    """Return the tracefs directory that holds ``user_events_data``, or None.

    Looks at *first* (``/sys/kernel/tracing``), then at every tracefs mount (and
    ``<debugfs>/tracing``) listed in *mounts*.  A directory this process may not
    search (tracefs is mode 0700 by default) counts as found, so that opening
    ``user_events_data`` then reports the permission problem.
    """
    candidates = list(first)
    try:
        with open(mounts, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        where, fstype = _unescape_mount(parts[1]), parts[2]
        if fstype == "tracefs":
            candidates.append(where)
        elif fstype == "debugfs":
            candidates.append(os.path.join(where, "tracing"))
    for c in candidates:
        try:
            os.stat(os.path.join(c, "user_events_data"))
        except PermissionError:
            return c  # tracefs is there but closed to us: opening it reports why
        except OSError:
            continue
        return c
    return None


class _Registration:
    """One registration: the word the kernel writes (kept alive here), its bit and size, the
    write index, and the slot's handle it is written into (None for a provider-word bit)."""

    __slots__ = ("array", "bit", "handle", "index", "name", "size")

    def __init__(
        self,
        name: str,
        array: ctypes.Array[Any],
        index: int,
        bit: int = _ENABLE_BIT,
        size: int = _ENABLE_SIZE,
        handle: bytearray | None = None,
    ) -> None:
        self.name = name
        self.array = array
        self.index = index
        self.bit = bit
        self.size = size
        self.handle = handle


class UserEventsBackend:
    """EventHeader events through Linux user_events (``format == "eventheader"``).

    ``UserEventsBackend("MyCompany_MyService")`` opens ``user_events_data`` (at descriptor
    :data:`FD_FLOOR` or above) or raises
    :class:`~structlog_etw.backends.base.BackendUnavailable` with the reason (not
    Linux, kernel older than 6.4, no tracefs / no user_events, permission denied, out of
    descriptors or memory: ``resources_exhausted``, worth trying again later).

    :meth:`open_slot` registers ``<provider>_L<level>K<keyword>[G<group>]`` and
    returns a :class:`~structlog_etw.backends.base.Slot` whose ``word[0]`` is the enable word
    the kernel updates; it raises :class:`OSError` when the kernel refuses the
    registration.  ``persist=True`` registers with :data:`USER_EVENT_REG_PERSIST`: tracepoints
    it creates outlive the backend (``structlog-etw tracepoints --persist``).  ``tracefs`` names
    the directory holding ``user_events_data`` (default: :func:`find_tracefs`).  :meth:`write`
    never raises, and never writes through a descriptor that is no longer the one it opened
    (see the module docstring; :attr:`lost`, :attr:`reopened`).  :meth:`close` unregisters
    every enable word and closes the descriptor; it is idempotent.
    """

    format: Final = "eventheader"

    __slots__ = (
        "__weakref__",
        "_any_array",
        "_any_bits",
        "_dev",
        "_fd",
        "_flags",
        "_ino",
        "_kcmp",
        "_lock",
        "_opened",
        "_ref",
        "_regs",
        "_slots",
        "_tries",
        "any_word",
        "group",
        "lost",
        "provider_name",
        "reopened",
        "tracefs",
    )

    def __init__(
        self,
        provider_name: str,
        group: str | None = None,
        *,
        persist: bool = False,
        tracefs: str | None = None,
    ) -> None:
        self.provider_name = provider_name
        self.group = group
        self._flags = USER_EVENT_REG_PERSIST if persist else 0
        self._fd = self._ref = -1
        self._opened: _Opened | None = None
        self._kcmp: Any = None
        self._dev = self._ino = 0
        #: Why the descriptor was given up (None while it is ours): what :attr:`structlog_etw.Provider.status`
        #: reports until a new one is open.
        self.lost: str | None = None
        #: How often ``user_events_data`` was opened again after the descriptor was lost.
        self.reopened = 0
        self._tries = 0
        self._lock = fork_safe_lock(self)  # a fork child gets a fresh one
        self._slots: dict[tuple[int, int], Slot] = {}
        self._regs: list[_Registration] = []
        self._any_array = (_ANY_TYPE * 1)()
        self._any_bits = 0  # bits of the provider word given to tracepoints so far
        #: The provider word: non-zero iff a consumer has any tracepoint of this backend enabled
        #: (see the module docstring); ``UNKNOWN_WORD`` once it cannot tell.
        self.any_word: Any = memoryview(self._any_array).cast("B").cast(_ANY_FORMAT)
        if not sys.platform.startswith("linux"):
            raise BackendUnavailable(
                f"user_events needs Linux (this is {sys.platform})", "unsupported_platform"
            )
        release = platform.release()
        version = _kernel_version(release)
        if version is not None and version < _MIN_KERNEL:
            raise BackendUnavailable(
                f"user_events needs Linux 6.4 or later (this kernel is {release})", "kernel_too_old"
            )
        # A bad provider or group name is a setup error (ValueError), wherever we run.
        validate_provider_name(provider_name, group)
        if tracefs is None:
            tracefs = find_tracefs()
        if tracefs is None:
            raise BackendUnavailable(
                f"no user_events on this kernel ({release}): no tracefs with user_events_data "
                "(needs CONFIG_USER_EVENTS=y and tracefs mounted at /sys/kernel/tracing)",
                "no_user_events",
            )
        self.tracefs = tracefs
        path = os.path.join(tracefs, "user_events_data")
        try:
            opened = _Opened(path)
        except PermissionError as e:
            raise BackendUnavailable(
                f"permission denied opening {path} (run as root, or give this user write access "
                "to user_events_data and search access to its directory only; see docs/linux.md)",
                "permission_denied",
            ) from e
        except OSError as e:
            code = "resources_exhausted" if e.errno in TRANSIENT_ERRNOS else "open_failed"
            raise BackendUnavailable(f"cannot open {path}: {os.strerror(e.errno or 0)}", code) from e
        self._use(opened)

    def _use(self, opened: _Opened) -> None:
        """Write through ``opened`` from now on; a backend of this interpreter that held one of
        its numbers lost it (its number was closed behind its back and reused here)."""
        mine = {n for n in (opened.fd, opened.ref) if n >= 0}
        for other in list(_LIVE):
            if other is not self and (other._fd in mine or other._ref in mine):
                other._lose(
                    f"its user_events_data descriptor {other._fd} was closed by other code and reused"
                )
        self._opened = opened
        self._kcmp, self._ref = opened.kcmp, opened.ref
        self._dev, self._ino = opened.dev, opened.ino
        self._fd = opened.fd
        _LIVE.add(self)

    # -- registration ---------------------------------------------------------------

    def tracepoint_name(self, level: int, keyword: int) -> str:
        """The tracepoint name of (level, keyword) for this provider (without ``user_events:``)."""
        return tracepoint_name(self.provider_name, level, keyword, self.group)

    def _usable_fd(self) -> int:
        """The descriptor, checked to be ours (the lock is held), or -1."""
        fd, opened = self._fd, self._opened
        if fd < 0 or opened is None:
            return -1
        if not opened.ours(fd, self._ref):
            self._lose(f"user_events_data descriptor {fd} is no longer the file this backend opened")
            return -1
        return fd

    def open_slot(self, level: int, keyword: int) -> Slot:
        """Register (level, keyword) on first use and return its slot (cached).

        Raises :class:`OSError` (with the kernel's errno) when the registration is
        refused, e.g. ``EBADF`` after :meth:`close` (or while the descriptor is lost),
        ``EMFILE``, ``EPERM``.
        """
        key = (level, keyword)
        slot = self._slots.get(key)
        if slot is not None:
            return slot
        with self._lock:
            slot = self._slots.get(key)
            if slot is not None:
                return slot
            fd = self._usable_fd()
            if fd < 0 and self.lost is not None:
                self._reopen()
                fd = self._usable_fd()
            if fd < 0:
                why = "user_events backend is closed" if self.lost is None else self.lost
                raise OSError(errno.EBADF, why)
            name = self.tracepoint_name(level, keyword)
            command = register_command(name).encode("utf-8") + b"\0"
            if len(command) > _MAX_COMMAND:
                raise OSError(errno.E2BIG, f"user_events command longer than {_MAX_COMMAND} bytes: {name}")
            array = (ctypes.c_uint32 * 1)()
            # The word is in the bookkeeping before the kernel learns its address: whatever
            # interrupts us after DIAG_IOCSREG (a KeyboardInterrupt from a signal handler, a
            # MemoryError), the array stays referenced until it is unregistered, never freed
            # while the kernel may still write into it.
            handle = bytearray(_WRITE_INDEX.size)
            registration = _Registration(name, array, -1, handle=handle)
            self._regs.append(registration)
            done = False
            try:
                try:
                    self._register(fd, registration)
                except OSError as e:
                    self._regs.remove(registration)  # refused: the kernel never had the address
                    done = True
                    raise OSError(
                        e.errno, f"user_events registration of {name!r} failed: {e.strerror}"
                    ) from None
                # A memoryview over the ctypes array: the cheapest word[0] read, and it
                # keeps the array (the memory the kernel writes) alive.  The handle is the
                # write index, rewritten in place when the registration is renewed.
                word = memoryview(array).cast("B").cast("I")
                slot = Slot(level, keyword, word, handle)
                self._slots[key] = slot
                done = True
            finally:
                if not done:
                    self._abandon(fd, registration)
            self._register_any_bit(fd, name)
            return slot

    def _register(self, fd: int, registration: _Registration) -> None:
        """``DIAG_IOCSREG`` of ``registration`` through ``fd``: its write index (and handle) set;
        raises the kernel's :class:`OSError`."""
        command = register_command(registration.name).encode("utf-8") + b"\0"
        cmd_buf = ctypes.create_string_buffer(command, len(command))
        flags = self._flags if registration.handle is not None else 0
        reg = bytearray(
            _USER_REG.pack(
                _USER_REG.size,
                registration.bit,
                registration.size,
                flags,
                ctypes.addressof(registration.array),
                ctypes.addressof(cmd_buf),
                0,
            )
        )
        fcntl.ioctl(fd, DIAG_IOCSREG, reg, True)
        registration.index = index = _USER_REG.unpack(reg)[6]
        if registration.handle is not None:
            _WRITE_INDEX.pack_into(registration.handle, 0, index)

    def _register_any_bit(self, fd: int, name: str) -> None:
        """Register tracepoint *name* once more, as the next bit of the provider word (lock held).

        When the word has no bit left, or the kernel refuses, the provider word becomes
        ``UNKNOWN_WORD`` for good: it must never read zero while this tracepoint is enabled.
        """
        if self.any_word is UNKNOWN_WORD:
            return
        bit = self._any_bits
        if bit >= _ANY_SIZE * 8:
            self.any_word = UNKNOWN_WORD
            return
        registration = _Registration(name, self._any_array, -1, bit, _ANY_SIZE)
        self._regs.append(registration)  # before the kernel has the address (see open_slot)
        done = False
        try:
            try:
                self._register(fd, registration)
            except OSError:
                self._regs.remove(registration)
                self.any_word = UNKNOWN_WORD
                done = True
                return
            self._any_bits = bit + 1
            done = True
        finally:
            if not done:
                self.any_word = UNKNOWN_WORD
                self._abandon(fd, registration)

    def _unregister(self, fd: int, registration: _Registration) -> bool:
        """``DIAG_IOCSUNREG`` of ``registration``'s word and bit: whether the kernel no longer has
        it (unregistered now, or never registered: ``ENOENT``)."""
        unreg = _USER_UNREG.pack(
            _USER_UNREG.size, registration.bit, 0, 0, ctypes.addressof(registration.array)
        )
        try:
            fcntl.ioctl(fd, DIAG_IOCSUNREG, unreg)
        except OSError as e:
            return e.errno == errno.ENOENT
        return True

    def _abandon(self, fd: int, registration: _Registration) -> None:
        """Unregister a word whose registration was interrupted (the lock is held).

        When the kernel no longer has the word (it never registered it: ``ENOENT``; or the
        unregistration worked) it leaves the bookkeeping; otherwise it stays there, so that
        :meth:`close` tries again and keeps it alive if that fails too.
        """
        if self._unregister(fd, registration):
            self._regs.remove(registration)

    # -- writing --------------------------------------------------------------------

    def write(
        self,
        slot: Slot,
        event: bytes,
        opcode: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> int:
        """Write one EventHeader event for *slot*: 0, or the errno, or
        :data:`~structlog_etw.backends.base.DESCRIPTOR_LOST`.  Never raises.

        The descriptor is checked first (``kcmp`` against the private duplicate, else the
        ``fstat`` identity: one system call); a descriptor that is no longer ours is never
        written (see the module docstring).  Then one ``write`` of one buffer, the slot's write
        index followed by the event: the kernel reads the same bytes as from
        ``writev(fd, (index, event))``, and a single buffer is the cheaper system call (the
        copy of the event costs less than ``writev``'s vector).  ``opcode`` and the activity
        ids are already in the event's header and extension.
        """
        fd = self._fd
        if fd < 0:
            return self._unusable(slot, event)
        kcmp = self._kcmp
        try:
            if kcmp is not None:
                pid = _PID[0]
                if kcmp(pid, pid, _KCMP_FILE, fd, self._ref):
                    return self._taken(fd, slot, event)
            else:
                st = _fstat(fd)
                if st.st_ino != self._ino or st.st_dev != self._dev:
                    return self._taken(fd, slot, event)
        except Exception:
            return self._taken(fd, slot, event)
        try:
            os.write(fd, slot.handle + event)
        except OSError as e:
            return e.errno or errno.EIO
        except Exception:
            return errno.EINVAL
        return 0

    def _unusable(self, slot: Slot, event: bytes) -> int:
        """A write while there is no descriptor: closed (``EBADF``) or lost (open a new one)."""
        if self.lost is None:
            return errno.EBADF
        return self._taken(-1, slot, event)

    def _taken(self, fd: int, slot: Slot, event: bytes) -> int:
        """The descriptor ``fd`` is not ours any more: never use it again, open a new one and
        write the event through it if that works; else :data:`DESCRIPTOR_LOST`.  Never waits:
        a write that finds the lock held (another thread renews, or a signal handler
        interrupted it) drops its event."""
        try:
            if not self._lock.acquire(False):
                return DESCRIPTOR_LOST
            try:
                if fd >= 0 and self._fd == fd:
                    self._lose(f"user_events_data descriptor {fd} is no longer the file this backend opened")
                if self.lost is not None:
                    self._reopen()
                fd = self._usable_fd()
            finally:
                self._lock.release()
            if fd < 0 or self.lost is not None:
                return DESCRIPTOR_LOST
            os.write(fd, slot.handle + event)
        except OSError as e:
            return e.errno or errno.EIO
        except Exception:
            return DESCRIPTOR_LOST
        return 0

    def _lose(self, why: str) -> None:
        """Never use the current numbers again (neither written, closed nor ``dup2``'ed)."""
        if self._fd < 0 and self.lost is not None:
            return
        self._fd = -1
        self._opened = None
        self._ref = -1
        self._kcmp = None
        self.lost = why
        _LIVE.discard(self)

    def _reopen(self) -> None:
        """Open ``user_events_data`` again and renew every registration through it (lock held;
        at most :data:`MAX_REOPENS` times).  The words keep their addresses, so the slots the
        provider holds stay valid; their handles (write indexes) are rewritten in place."""
        if self._tries >= MAX_REOPENS:
            return
        self._tries += 1
        try:
            opened = _Opened(os.path.join(self.tracefs, "user_events_data"))
        except OSError:
            return
        fd = opened.fd
        for registration in self._regs:
            # the registrations outlive the descriptor (they belong to our memory): the kernel
            # answers EADDRINUSE to a new one at the same word and bit until they are gone
            gone = self._unregister(fd, registration)
            if gone and registration.handle is not None:
                registration.array[0] = 0
            try:
                if not gone:
                    raise OSError(errno.EADDRINUSE, "still registered")
                self._register(fd, registration)
            except OSError:
                if registration.handle is not None:
                    # no tracepoint behind this slot's index on the new file: its events are
                    # refused by the kernel and counted, never written elsewhere
                    _WRITE_INDEX.pack_into(registration.handle, 0, -1)
                else:
                    registration.array[0] |= 1 << registration.bit  # reads "maybe enabled"
        self._use(opened)
        self.reopened += 1
        self.lost = None

    # -- shutdown -------------------------------------------------------------------

    def close(self) -> None:
        """Unregister every enable word and close the descriptor (idempotent).

        Later writes return ``EBADF``.  The descriptor is first replaced (dup2) by a
        read-only ``/dev/null`` so that a write racing with close fails with
        ``EBADF`` instead of reaching a file that reused the descriptor number; that
        placeholder is closed when the backend object is collected (if it is still there).
        A descriptor that is no longer ours is left alone: the enable words are unregistered
        through a new open of ``user_events_data`` instead.
        """
        self._close(collected=False)

    def _close(self, collected: bool) -> None:
        with self._lock:
            fd = self._usable_fd()
            opened = self._opened
            lost = self.lost is not None
            self._fd = self._ref = -1
            self._opened = None
            self.lost = None
            _LIVE.discard(self)
            if fd < 0 and not lost:
                return  # closed before
            temporary = None
            through = fd
            if fd < 0 and self._regs:
                try:
                    temporary = _Opened(os.path.join(self.tracefs, "user_events_data"))
                    through = temporary.fd
                except OSError:
                    through = -1
            retired = set()
            for reg in self._regs:
                if through < 0 or not self._unregister(through, reg):
                    _RETIRED_WORDS.append(reg.array)  # the kernel may still write it
                    retired.add(id(reg.array))
            for reg in self._regs:
                if id(reg.array) not in retired:
                    reg.array[0] = 0  # the word now reads "disabled" for good
            self._regs.clear()
            if temporary is not None:
                temporary.close()
            if opened is None or fd < 0:
                return
            if opened.ref >= 0:
                with contextlib.suppress(OSError):
                    os.close(opened.ref)  # kcmp just said it is the same open file as fd
            if collected:
                os.close(fd)  # nobody can be inside write(): nothing references us
                return
            try:
                null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                os.close(fd)
                return
            try:
                os.dup2(null, fd, inheritable=False)
                st = os.fstat(null)
            except OSError:
                os.close(fd)
            else:
                weakref.finalize(self, _close_placeholder, fd, st.st_dev, st.st_ino)
            finally:
                os.close(null)

    def __del__(self) -> None:
        # Never leave the kernel writing into enable words that are about to be freed.
        try:
            if self._fd >= 0 or self.lost is not None:
                self._close(collected=True)
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._fd < 0 else f"fd={self._fd}"
        if self.lost is not None:
            state = "descriptor lost"
        return f"UserEventsBackend({self.provider_name!r}, group={self.group!r}, {state})"


def _close_placeholder(fd: int, dev: int, ino: int) -> None:
    """Close the read-only ``/dev/null`` a closed backend left at ``fd``, if it is still there
    (a read-only ``/dev/null``): a number somebody else opened since is left alone."""
    try:
        st = os.fstat(fd)
        read_only = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
        if st.st_dev == dev and st.st_ino == ino and read_only:
            os.close(fd)
    except OSError:
        pass


def _after_fork_in_child() -> None:
    _PID[0] = os.getpid()


if hasattr(os, "register_at_fork"):  # pragma: no branch (absent on Windows)
    os.register_at_fork(after_in_child=_after_fork_in_child)


def delete_tracepoint(name: str, tracefs: str | None = None) -> None:
    """Delete the user_events tracepoint ``name`` (``DIAG_IOCSDEL``), e.g. a persistent one.

    Raises :class:`OSError` with the kernel's errno: ``EBUSY`` while a process has it registered
    or a session records it, ``ENOENT`` when there is none of that name, ``EPERM`` for a
    persistent one without CAP_PERFMON; ``ENODEV`` when this kernel has no user_events.
    """
    where = find_tracefs() if tracefs is None else tracefs
    if where is None:
        raise OSError(errno.ENODEV, "no tracefs with user_events_data on this kernel")
    fd = os.open(os.path.join(where, "user_events_data"), os.O_WRONLY | os.O_CLOEXEC)
    try:
        # the argument is the name's address: a mutable buffer is passed by pointer
        fcntl.ioctl(fd, DIAG_IOCSDEL, bytearray(name.encode("utf-8") + b"\0"), True)
    finally:
        os.close(fd)
