"""The compiled stand-in of the Windows ETW provider API (tests/csrc/fake_eventing.c), and a reader of
what it recorded.  The fixtures ``fake_library`` and ``fake`` (tests/conftest.py) build and reset it.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from structlog_etw.etw import abi
from structlog_etw.read.decode.tracelogging import decode, decode_traits
from structlog_etw.read.decoded import DecodedEvent

from .shared_data import skip_or_fail

CSRC = Path(__file__).resolve().parents[1] / "csrc" / "fake_eventing.c"
APISET_CSRC = CSRC.with_name("fake_apiset.c")
_CFLAGS = ("-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread")
HANDLE_BASE = 0xA5A5000000000000


def build_fake_library(directory: Path) -> str:
    """Compile tests/csrc/fake_eventing.c into ``directory``; skip (locally) or fail (CI) without gcc.

    On Windows the stand-in has no place: the real advapi32 runs there (tests/etw with
    ``etw_os``, tests/backends/test_etw_real_windows.py), so the stand-in's tests are skipped.
    """
    if sys.platform == "win32":
        pytest.skip("the C stand-in of advapi32 is for hosts without Windows; here the real API runs")
    out = directory / "libfake_eventing.so"
    subprocess.run([_gcc(), *_CFLAGS, "-o", str(out), str(CSRC)], check=True, timeout=300)
    return str(out)


def _gcc() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        skip_or_fail("gcc not found: cannot build the fake ETW library tests/csrc/fake_eventing.c")
    return gcc


def build_apiset_library(directory: Path, full: str) -> str:
    """Compile tests/csrc/fake_apiset.c: an API-set DLL stand-in exporting part of ``full``'s functions.

    It forwards what it exports to the library at ``full`` (the same instance the tests load, so
    one state); the rest must come from the next library of the loader's chain.
    """
    out = directory / "libfake_apiset.so"
    define = "-DFULL_LIBRARY=" + '"' + full.replace("\\", "\\\\").replace('"', '\\"') + '"'
    subprocess.run(
        [_gcc(), *_CFLAGS, define, "-o", str(out), str(APISET_CSRC), "-ldl"], check=True, timeout=300
    )
    return str(out)


@dataclass
class Descriptor:
    type: int
    reserved1: int
    reserved2: int
    data: bytes


@dataclass
class Record:
    handle: int
    descriptor: bytes
    activity: bytes | None
    related: bytes | None
    result: int
    data: list[Descriptor]

    def decoded(self) -> DecodedEvent:
        traits, meta = self.data[0].data, self.data[1].data
        payload = self.data[2].data if len(self.data) > 2 else b""
        return decode(
            meta,
            payload,
            provider=decode_traits(traits)[0],
            descriptor=self.descriptor,
            activity_id=uuid.UUID(bytes_le=self.activity) if self.activity else None,
            related_id=uuid.UUID(bytes_le=self.related) if self.related else None,
        )


class Fake:
    """Reads what the C library recorded and drives its session state."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.lib.fake_enable.argtypes = [ctypes.c_uint8, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32]
        self.lib.fake_get_data.restype = ctypes.c_int64
        self.lib.fake_get_setinfo.restype = ctypes.c_int64
        self.lib.fake_set_write_result.argtypes = [ctypes.c_uint32]
        self.lib.fake_set_start_result.argtypes = [ctypes.c_uint32]
        self.lib.fake_set_session_queue_max.argtypes = [ctypes.c_uint32]
        self.lib.fake_session_info.argtypes = [ctypes.c_char_p] + [ctypes.POINTER(ctypes.c_uint32)] * 3

    def session_info(self, name: str) -> dict[str, int] | None:
        """A running session's lost count and the ENABLE_TRACE_PARAMETERS it got; None if none runs."""
        lost, version, prop = ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_uint32()
        wide = name.encode("utf-16-le") + b"\0\0"
        rc = self.lib.fake_session_info(wide, ctypes.byref(lost), ctypes.byref(version), ctypes.byref(prop))
        if rc != 0:
            return None
        return {"lost": lost.value, "params_version": version.value, "enable_property": prop.value}

    def start_session(self, name: str) -> int:
        """Start a real-time session the way a process that then dies would (StartTraceW only)."""
        size = ctypes.sizeof(abi.EVENT_TRACE_PROPERTIES) + 2 * 1025
        buf = ctypes.create_string_buffer(size)
        props = abi.EVENT_TRACE_PROPERTIES.from_buffer(buf)
        props.Wnode.BufferSize = size
        props.Wnode.Flags = abi.WNODE_FLAG_TRACED_GUID
        props.LogFileMode = abi.EVENT_TRACE_REAL_TIME_MODE
        props.LoggerNameOffset = ctypes.sizeof(abi.EVENT_TRACE_PROPERTIES)
        handle = ctypes.c_uint64()
        rc = self.lib.StartTraceW(ctypes.byref(handle), abi.wide(name), ctypes.byref(props))
        assert rc == 0, rc
        return handle.value

    def enable(self, level: int, any_kw: int = 0, all_kw: int = 0, is_enabled: int = 1) -> None:
        self.lib.fake_enable(level, any_kw, all_kw, is_enabled)

    def records(self) -> list[Record]:
        out = []
        for i in range(self.lib.fake_record_count()):
            handle = ctypes.c_uint64()
            desc = ctypes.create_string_buffer(16)
            has_a, has_r = ctypes.c_int(), ctypes.c_int()
            act, rel = ctypes.create_string_buffer(16), ctypes.create_string_buffer(16)
            count, result = ctypes.c_uint32(), ctypes.c_uint32()
            rc = self.lib.fake_get_record(
                i,
                ctypes.byref(handle),
                desc,
                ctypes.byref(has_a),
                act,
                ctypes.byref(has_r),
                rel,
                ctypes.byref(count),
                ctypes.byref(result),
            )
            assert rc == 0
            data = []
            for j in range(count.value):
                t, r1, r2 = ctypes.c_uint8(), ctypes.c_uint8(), ctypes.c_uint16()
                size = self.lib.fake_get_data(
                    i, j, ctypes.byref(t), ctypes.byref(r1), ctypes.byref(r2), None, 0
                )
                buf = ctypes.create_string_buffer(max(size, 1))
                self.lib.fake_get_data(i, j, ctypes.byref(t), ctypes.byref(r1), ctypes.byref(r2), buf, size)
                data.append(Descriptor(t.value, r1.value, r2.value, buf.raw[:size]))
            out.append(
                Record(
                    handle.value,
                    desc.raw,
                    act.raw if has_a.value else None,
                    rel.raw if has_r.value else None,
                    result.value,
                    data,
                )
            )
        return out

    def setinfos(self) -> list[tuple[int, int, bytes]]:
        out = []
        for i in range(self.lib.fake_setinfo_count()):
            handle, cls = ctypes.c_uint64(), ctypes.c_uint32()
            size = self.lib.fake_get_setinfo(i, ctypes.byref(handle), ctypes.byref(cls), None, 0)
            buf = ctypes.create_string_buffer(max(size, 1))
            self.lib.fake_get_setinfo(i, ctypes.byref(handle), ctypes.byref(cls), buf, size)
            out.append((handle.value, cls.value, buf.raw[:size]))
        return out

    def provider_guid(self, handle: int) -> uuid.UUID:
        buf = ctypes.create_string_buffer(16)
        assert self.lib.fake_provider_guid(ctypes.c_uint64(handle), buf) == 0
        return uuid.UUID(bytes_le=buf.raw)
