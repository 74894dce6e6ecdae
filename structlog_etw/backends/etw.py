"""ETW through ctypes: EventRegister, EventSetInformation, EventWriteTransfer, EventUnregister.

One :class:`EtwBackend` per provider.  ETW tells the provider which sessions listen through the
enable callback (level, MatchAnyKeyword, MatchAllKeyword); the callback rewrites ``word[0]`` of
every open :class:`~structlog_etw.backends.base.Slot`, so the per-event enabled check is reading
``slot.word[0]``: no API call.

The functions come from ``api-ms-win-eventing-provider-l1-1-0.dll``, each one missing there from
``advapi32.dll`` (``backends._dll``).  The internal ``library`` parameter loads given shared
libraries (``ctypes.CDLL``, a path or a chain of paths) instead of the Windows DLLs: the tests run
this module's real ctypes calls on Linux against a small C library with the same entry points
(``tests/csrc/fake_eventing.c``).
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
import uuid
from collections.abc import Sequence
from typing import Any, Final

from .._util.bounded import BoundedCache
from ..formats.tracelogging import (
    TraceLoggingEvent,
    Win32Error,
    event_descriptor,
    group_guid,
    provider_traits,
)
from ..formats.tracelogging import provider_id as _provider_id
from . import _dll
from .base import BackendUnavailable, Slot, fork_safe_lock

__all__ = ["EtwBackend"]

#: EventSetInformation class: provider traits.
EVENT_PROVIDER_SET_TRAITS: Final = 2
ERROR_INVALID_HANDLE: Final = int(Win32Error.ERROR_INVALID_HANDLE)
ERROR_INVALID_PARAMETER: Final = int(Win32Error.ERROR_INVALID_PARAMETER)

#: EVENT_DATA_DESCRIPTOR: Ptr (u64), Size (u32), Type (u8), Reserved1 (u8), Reserved2 (u16).
_DESCRIPTOR: Final = struct.Struct("<QIBBH")
_TYPE_DATA: Final = 0
_TYPE_EVENT_METADATA: Final = 1
_TYPE_PROVIDER_METADATA: Final = 2

_CALLBACK_ARGS: Final = (
    ctypes.c_void_p,  # LPCGUID SourceId
    ctypes.c_uint32,  # ULONG IsEnabled
    ctypes.c_uint8,  # UCHAR Level
    ctypes.c_uint64,  # ULONGLONG MatchAnyKeyword
    ctypes.c_uint64,  # ULONGLONG MatchAllKeyword
    ctypes.c_void_p,  # PEVENT_FILTER_DESCRIPTOR FilterData
    ctypes.c_void_p,  # PVOID CallbackContext
)


def _address(buf: bytes) -> int | None:
    """The address of a bytes object's buffer (valid while ``buf`` is referenced)."""
    return ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value


def _bytes_offset() -> int | None:
    """Where CPython keeps an exact ``bytes`` object's buffer from its ``id()``, if probing agrees.

    ``id(b) + offset`` is what ``_address`` computes through ctypes (one C call instead of four
    ctypes conversions, ~20x cheaper); checked on bytes of several sizes at import, else ``None``
    (another interpreter: ``_address`` is used).
    """
    offset = bytes.__basicsize__ - 1
    for probe in (b"ab", bytes(100), b"x" * 5000):
        if _address(probe) != id(probe) + offset:
            return None
    return offset


_BYTES_OFFSET: Final = _bytes_offset()
#: Metadata descriptors prepared per event shape, kept per backend: at most this many, and at most
#: :data:`_PREFIX_BYTES` of metadata (an event's metadata holds its field names: up to 64 KB).
_PREFIX_LIMIT: Final = 1024
_PREFIX_BYTES: Final = 4 << 20


def _bind(dlls: _dll.Dlls, name: str, restype: Any, argtypes: list[Any]) -> Any:
    try:
        return dlls.bind(name, restype, argtypes)
    except _dll.DllError as e:
        raise BackendUnavailable(str(e)) from None


class EtwBackend:
    """A registered ETW provider (see the module docstring).  ``write`` never raises.

    ``provider_id`` is the GUID passed to EventRegister (default: derived from the name, see
    :func:`~structlog_etw.formats.tracelogging.provider_id`); ``traits`` the provider traits blob from the
    encoder (default: the name alone), given to EventSetInformation(EventProviderSetTraits) and as
    the first data descriptor of every event.  ``EtwBackend(name, group)`` with a ``str`` group (how
    the provider builds OS backends) derives the GUID from the name and puts the provider group
    (:func:`~structlog_etw.formats.tracelogging.group_guid`) into the traits.  Activity ids are 16 raw
    bytes (RFC 4122 order) and are passed as GUID structures.
    """

    format = "tracelogging"

    __slots__ = (
        "__weakref__",
        "_callback",
        "_closed",
        "_event_write",
        "_handle",
        "_level_plus1",
        "_lock",
        "_match_all",
        "_match_any",
        "_prefixes",
        "_prepared",
        "_provider_enabled",
        "_set_information",
        "_slots",
        "_traits",
        "_traits_ptr",
        "_unregister",
        "_words",
        "any_word",
        "provider_id",
        "provider_name",
        "set_traits_result",
    )

    def __init__(
        self,
        provider_name: str,
        provider_id: uuid.UUID | str | None = None,
        traits: bytes | None = None,
        *,
        library: str | Sequence[str] | None = None,
    ) -> None:
        group = None
        if isinstance(provider_id, str):  # EtwBackend(name, group), as the provider builds backends
            group = group_guid(provider_id)
            provider_id = None
        if provider_id is None:
            provider_id = _provider_id(provider_name)
        elif not isinstance(provider_id, uuid.UUID):
            raise TypeError("provider_id must be a uuid.UUID, a provider group name (str) or None")
        if traits is None:
            traits = provider_traits(provider_name, group)
        try:
            lib = _dll.Dlls(library, _dll.PROVIDER_DLLS)
        except _dll.DllError as e:
            raise BackendUnavailable(str(e)) from None
        callback_type = lib.callback_type(None, *_CALLBACK_ARGS)
        register = _bind(
            lib,
            "EventRegister",
            ctypes.c_uint32,
            [ctypes.c_char_p, callback_type, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)],
        )
        set_information = _bind(
            lib,
            "EventSetInformation",
            ctypes.c_uint32,
            [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_uint32],
        )
        self._event_write = _bind(
            lib,
            "EventWriteTransfer",
            ctypes.c_uint32,
            [
                ctypes.c_uint64,  # REGHANDLE
                ctypes.c_char_p,  # PCEVENT_DESCRIPTOR
                ctypes.c_char_p,  # LPCGUID ActivityId or NULL
                ctypes.c_char_p,  # LPCGUID RelatedActivityId or NULL
                ctypes.c_uint32,  # ULONG UserDataCount
                ctypes.c_char_p,  # PEVENT_DATA_DESCRIPTOR
            ],
        )
        self._unregister = _bind(lib, "EventUnregister", ctypes.c_uint32, [ctypes.c_uint64])
        self._provider_enabled = _bind(
            lib, "EventProviderEnabled", ctypes.c_uint8, [ctypes.c_uint64, ctypes.c_uint8, ctypes.c_uint64]
        )

        self.provider_name = provider_name
        self.provider_id = provider_id
        self._traits: list[Any] = []  # every traits buffer ever used stays alive (writes may hold one)
        self._traits_ptr = (0, 0)
        # metadata -> (metadata, the traits and metadata EVENT_DATA_DESCRIPTORs): per event shape
        self._prepared: BoundedCache[bytes, tuple[bytes, bytes]] = BoundedCache(_PREFIX_LIMIT, _PREFIX_BYTES)
        self._prefixes = self._prepared.entries
        self._set_information = set_information
        self._lock = fork_safe_lock(self)  # a fork child gets a fresh one
        self._slots: dict[tuple[int, int], Slot] = {}
        self._words: dict[tuple[int, int], list[int]] = {}
        #: The provider word: ``any_word[0]`` is 1 while a session has this provider enabled (at
        #: any level and keywords: some (level, keyword) pair is then enabled), 0 while none has;
        #: rewritten by the enable callback with the slots' words.
        self.any_word = [0]
        self._level_plus1 = 0
        self._match_any = 0
        self._match_all = 0
        self._handle = 0
        self._closed = False
        # Kept alive on the backend for as long as the registration (ETW calls it from any thread).
        self._callback = callback_type(self._on_enable)
        handle = ctypes.c_uint64(0)
        rc = register(provider_id.bytes_le, self._callback, None, ctypes.byref(handle))
        if rc != 0:
            raise BackendUnavailable(f"EventRegister failed with error {rc}")
        self._handle = handle.value
        self.set_traits_result = 0
        self.traits = traits

    @property
    def traits(self) -> bytes:
        """The provider traits blob.  Setting it calls EventSetInformation(EventProviderSetTraits) again."""
        return bytes(self._traits[-1].raw) if self._traits else b""

    @traits.setter
    def traits(self, blob: bytes) -> None:
        buf = ctypes.create_string_buffer(bytes(blob), len(blob))
        self._traits.append(buf)
        self._traits_ptr = (ctypes.addressof(buf), len(blob))
        self._prepared.clear()  # the prepared descriptors point at the old traits
        handle = self._handle
        if handle:
            try:
                self.set_traits_result = int(
                    self._set_information(handle, EVENT_PROVIDER_SET_TRAITS, bytes(blob), len(blob))
                )
            except Exception:
                self.set_traits_result = ERROR_INVALID_PARAMETER

    # -- enablement --------------------------------------------------------------------------

    def _enabled(self, level: int, keyword: int) -> int:
        if level >= self._level_plus1:
            return 0
        if keyword == 0:
            return 1
        if self._match_any and not keyword & self._match_any:
            return 0
        return 1 if keyword & self._match_all == self._match_all else 0

    def _on_enable(
        self,
        source_id: int | None,
        is_enabled: int,
        level: int,
        match_any: int,
        match_all: int,
        filter_data: int | None,
        context: int | None,
    ) -> None:
        """The ETW enable callback: remember the session state, rewrite every slot's word."""
        try:
            with self._lock:
                if self._closed:
                    return
                if is_enabled == 0:
                    self._level_plus1 = 0
                    self._match_any = self._match_all = 0
                elif is_enabled == 1:
                    self._level_plus1 = level + 1 if level else 256
                    self._match_any = match_any
                    self._match_all = match_all
                else:  # 2 = capture state, others: reserved; the enable state does not change
                    return
                for (lv, kw), word in self._words.items():
                    word[0] = self._enabled(lv, kw)
                self.any_word[0] = 1 if self._level_plus1 else 0
        except Exception:  # never let an exception escape into the OS's thread
            pass

    def open_slot(self, level: int, keyword: int) -> Slot:
        """The slot for (level, keyword); its ``word[0]`` follows the sessions' enable state."""
        key = (level, keyword)
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                word = [self._enabled(level, keyword)]
                # the handle: this slot's EVENT_DESCRIPTOR for opcode 0, prepared once
                slot = Slot(level, keyword, word, event_descriptor(level, 0, keyword))
                self._slots[key] = slot
                self._words[key] = word  # ours to rewrite, even if a user re-points slot.word
            return slot

    def provider_enabled(self, level: int, keyword: int) -> bool:
        """What ETW itself says (EventProviderEnabled); for diagnostics, not the per-event check."""
        if not self._handle:
            return False
        try:
            return bool(self._provider_enabled(self._handle, level, keyword))
        except Exception:
            return False

    # -- writing -----------------------------------------------------------------------------

    def write(
        self,
        slot: Slot,
        event: TraceLoggingEvent,
        opcode: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> int:
        """EventWriteTransfer with [traits, metadata, data]: 0 or the Win32 error code. Never raises.

        The traits descriptor is this backend's own blob (registered with EventSetInformation),
        which equals the event's first element.  Prepared once, not per event: the event
        descriptor of opcode 0 per slot (the slot's handle) and the traits and metadata data
        descriptors per metadata blob (per event shape: the encoders cache it); per event only the
        data descriptor is packed, with the data's address read from its ``id()`` where CPython's
        layout was confirmed at import.
        """
        handle = self._handle
        if not handle:
            return ERROR_INVALID_HANDLE
        try:
            _traits, metadata, data = event
            desc = slot.handle
            if opcode or type(desc) is not bytes:
                desc = event_descriptor(slot.level, opcode, slot.keyword)
            prepared = self._prefixes.get(metadata)
            if prepared is None:
                prepared = self._prepare(metadata)
            # EVENT_DATA_DESCRIPTORs: the provider traits, the event metadata, then the data if any.
            if data:
                offset = _BYTES_OFFSET
                if offset is not None and type(data) is bytes:
                    address: int | None = id(data) + offset
                else:
                    address = _address(data)
                descriptors = prepared[1] + _DESCRIPTOR.pack(address or 0, len(data), _TYPE_DATA, 0, 0)
                count = 3
            else:
                descriptors = prepared[1]
                count = 2
            activity = None if activity_id is None else uuid.UUID(bytes=activity_id).bytes_le
            related = None if related_id is None else uuid.UUID(bytes=related_id).bytes_le
            # metadata (held by ``prepared`` too), data and descriptors stay referenced by this
            # frame until the call returns.
            rc: int = self._event_write(handle, desc, activity, related, count, descriptors)
            return rc
        except Exception:
            return ERROR_INVALID_PARAMETER

    def _prepare(self, metadata: bytes) -> tuple[bytes, bytes]:
        """``(metadata, traits + metadata data descriptors)``, kept while the entry lives (the
        metadata object is referenced by the entry, so the address in it stays valid)."""
        metadata = bytes(metadata)
        traits_ptr, traits_len = self._traits_ptr
        prefix = _DESCRIPTOR.pack(traits_ptr, traits_len, _TYPE_PROVIDER_METADATA, 0, 0) + _DESCRIPTOR.pack(
            _address(metadata) or 0, len(metadata), _TYPE_EVENT_METADATA, 0, 0
        )
        prepared = (metadata, prefix)
        self._prepared.store(metadata, prepared, len(metadata) + 2 * len(prefix) + 100)
        return prepared

    def __del__(self) -> None:
        # A registration must not outlive the callback object ETW would call: unregister first.
        with contextlib.suppress(Exception):
            self.close()

    def close(self) -> None:
        """EventUnregister (once); every slot reads disabled afterwards and writes return 6."""
        with self._lock:
            handle, self._handle = self._handle, 0
            self._closed = True
            self._level_plus1 = 0
            for word in self._words.values():
                word[0] = 0
            self.any_word[0] = 0
        if handle:
            with contextlib.suppress(Exception):
                self._unregister(handle)
