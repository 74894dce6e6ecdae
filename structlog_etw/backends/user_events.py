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
"""

from __future__ import annotations

import ctypes
import errno
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
from .base import UNKNOWN_WORD, BackendUnavailable, Slot, fork_safe_lock

__all__ = [
    "DIAG_IOCSDEL",
    "DIAG_IOCSREG",
    "DIAG_IOCSUNREG",
    "USER_EVENT_REG_PERSIST",
    "UserEventsBackend",
    "delete_tracepoint",
    "find_tracefs",
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
    """One registration: the word the kernel writes (kept alive here), its bit, the write index."""

    __slots__ = ("array", "bit", "index", "name")

    def __init__(self, name: str, array: ctypes.Array[Any], index: int, bit: int = _ENABLE_BIT) -> None:
        self.name = name
        self.array = array
        self.index = index
        self.bit = bit


class UserEventsBackend:
    """EventHeader events through Linux user_events (``format == "eventheader"``).

    ``UserEventsBackend("MyCompany_MyService")`` opens ``user_events_data`` or raises
    :class:`~structlog_etw.backends.base.BackendUnavailable` with the reason (not
    Linux, kernel older than 6.4, no tracefs / no user_events, permission denied).

    :meth:`open_slot` registers ``<provider>_L<level>K<keyword>[G<group>]`` and
    returns a :class:`~structlog_etw.backends.base.Slot` whose ``word[0]`` is the enable word
    the kernel updates; it raises :class:`OSError` when the kernel refuses the
    registration.  ``persist=True`` registers with :data:`USER_EVENT_REG_PERSIST`: tracepoints
    it creates outlive the backend (``structlog-etw tracepoints --persist``).  :meth:`write`
    never raises.  :meth:`close` unregisters every enable word and closes the descriptor; it is
    idempotent.
    """

    format: Final = "eventheader"

    __slots__ = (
        "__weakref__",
        "_any_array",
        "_any_bits",
        "_fd",
        "_flags",
        "_lock",
        "_regs",
        "_slots",
        "any_word",
        "group",
        "provider_name",
        "tracefs",
    )

    def __init__(self, provider_name: str, group: str | None = None, *, persist: bool = False) -> None:
        self.provider_name = provider_name
        self.group = group
        self._flags = USER_EVENT_REG_PERSIST if persist else 0
        self._fd = -1
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
            self._fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        except PermissionError as e:
            raise BackendUnavailable(
                f"permission denied opening {path} (run as root, or give this user write access "
                "to user_events_data and search access to its directory only; see docs/linux.md)",
                "permission_denied",
            ) from e
        except OSError as e:
            raise BackendUnavailable(f"cannot open {path}: {os.strerror(e.errno or 0)}", "open_failed") from e

    # -- registration ---------------------------------------------------------------

    def tracepoint_name(self, level: int, keyword: int) -> str:
        """The tracepoint name of (level, keyword) for this provider (without ``user_events:``)."""
        return tracepoint_name(self.provider_name, level, keyword, self.group)

    def open_slot(self, level: int, keyword: int) -> Slot:
        """Register (level, keyword) on first use and return its slot (cached).

        Raises :class:`OSError` (with the kernel's errno) when the registration is
        refused, e.g. ``EBADF`` after :meth:`close`, ``EMFILE``, ``EPERM``.
        """
        key = (level, keyword)
        slot = self._slots.get(key)
        if slot is not None:
            return slot
        with self._lock:
            slot = self._slots.get(key)
            if slot is not None:
                return slot
            if self._fd < 0:
                raise OSError(errno.EBADF, "user_events backend is closed")
            name = self.tracepoint_name(level, keyword)
            command = register_command(name).encode("utf-8") + b"\0"
            if len(command) > _MAX_COMMAND:
                raise OSError(errno.E2BIG, f"user_events command longer than {_MAX_COMMAND} bytes: {name}")
            array = (ctypes.c_uint32 * 1)()
            cmd_buf = ctypes.create_string_buffer(command, len(command))
            reg = bytearray(
                _USER_REG.pack(
                    _USER_REG.size,
                    _ENABLE_BIT,
                    _ENABLE_SIZE,
                    self._flags,
                    ctypes.addressof(array),
                    ctypes.addressof(cmd_buf),
                    0,
                )
            )
            # The word is in the bookkeeping before the kernel learns its address: whatever
            # interrupts us after DIAG_IOCSREG (a KeyboardInterrupt from a signal handler, a
            # MemoryError), the array stays referenced until it is unregistered, never freed
            # while the kernel may still write into it.
            registration = _Registration(name, array, -1)
            self._regs.append(registration)
            done = False
            try:
                try:
                    fcntl.ioctl(self._fd, DIAG_IOCSREG, reg, True)
                except OSError as e:
                    self._regs.remove(registration)  # refused: the kernel never had the address
                    done = True
                    raise OSError(
                        e.errno, f"user_events registration of {name!r} failed: {e.strerror}"
                    ) from None
                registration.index = index = _USER_REG.unpack(reg)[6]
                # A memoryview over the ctypes array: the cheapest word[0] read, and it
                # keeps the array (the memory the kernel writes) alive.
                word = memoryview(array).cast("B").cast("I")
                slot = Slot(level, keyword, word, _WRITE_INDEX.pack(index))
                self._slots[key] = slot
                done = True
            finally:
                if not done:
                    self._abandon(registration)
            self._register_any_bit(name, cmd_buf)
            return slot

    def _register_any_bit(self, name: str, cmd_buf: Any) -> None:
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
        reg = bytearray(
            _USER_REG.pack(
                _USER_REG.size,
                bit,
                _ANY_SIZE,
                0,
                ctypes.addressof(self._any_array),
                ctypes.addressof(cmd_buf),
                0,
            )
        )
        registration = _Registration(name, self._any_array, -1, bit)
        self._regs.append(registration)  # before the kernel has the address (see open_slot)
        done = False
        try:
            try:
                fcntl.ioctl(self._fd, DIAG_IOCSREG, reg, True)
            except OSError:
                self._regs.remove(registration)
                self.any_word = UNKNOWN_WORD
                done = True
                return
            registration.index = _USER_REG.unpack(reg)[6]
            self._any_bits = bit + 1
            done = True
        finally:
            if not done:
                self.any_word = UNKNOWN_WORD
                self._abandon(registration)

    def _abandon(self, registration: _Registration) -> None:
        """Unregister a word whose registration was interrupted (the lock is held).

        When the kernel no longer has the word (it never registered it: ``ENOENT``; or the
        unregistration worked) it leaves the bookkeeping; otherwise it stays there, so that
        :meth:`close` tries again and keeps it alive if that fails too.
        """
        unreg = _USER_UNREG.pack(
            _USER_UNREG.size, registration.bit, 0, 0, ctypes.addressof(registration.array)
        )
        try:
            fcntl.ioctl(self._fd, DIAG_IOCSUNREG, unreg)
        except OSError as e:
            if e.errno != errno.ENOENT:
                return
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
        """Write one EventHeader event for *slot*: 0, or the errno.  Never raises.

        One ``write`` of one buffer, the slot's write index followed by the event: the kernel
        reads the same bytes as from ``writev(fd, (index, event))``, and a single buffer is the
        cheaper system call (the copy of the event costs less than ``writev``'s vector).
        ``opcode`` and the activity ids are already in the event's header and extension.
        """
        fd = self._fd
        if fd < 0:
            return errno.EBADF
        try:
            os.write(fd, slot.handle + event)
        except OSError as e:
            return e.errno or errno.EIO
        except Exception:
            return errno.EINVAL
        return 0

    # -- shutdown -------------------------------------------------------------------

    def close(self) -> None:
        """Unregister every enable word and close the descriptor (idempotent).

        Later writes return ``EBADF``.  The descriptor is first replaced (dup2) by a
        read-only ``/dev/null`` so that a write racing with close fails with
        ``EBADF`` instead of reaching a file that reused the descriptor number; that
        placeholder is closed when the backend object is collected.
        """
        self._close(collected=False)

    def _close(self, collected: bool) -> None:
        with self._lock:
            fd = self._fd
            if fd < 0:
                return
            self._fd = -1
            retired = set()
            for reg in self._regs:
                unreg = _USER_UNREG.pack(_USER_UNREG.size, reg.bit, 0, 0, ctypes.addressof(reg.array))
                try:
                    fcntl.ioctl(fd, DIAG_IOCSUNREG, unreg)
                except OSError:
                    _RETIRED_WORDS.append(reg.array)  # the kernel may still write it
                    retired.add(id(reg.array))
            for reg in self._regs:
                if id(reg.array) not in retired:
                    reg.array[0] = 0  # the word now reads "disabled" for good
            self._regs.clear()
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
            except OSError:
                os.close(fd)
            else:
                weakref.finalize(self, os.close, fd)
            finally:
                os.close(null)

    def __del__(self) -> None:
        # Never leave the kernel writing into enable words that are about to be freed.
        try:
            if self._fd >= 0:
                self._close(collected=True)
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._fd < 0 else f"fd={self._fd}"
        return f"UserEventsBackend({self.provider_name!r}, group={self.group!r}, {state})"


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
