"""structlog -> EtwRenderer -> user_events -> perf -> our decoder, in a real kernel (marker ``kernel``)."""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from kernel_harness import PerfSession, wait_until

from structlog_etw import EtwRenderer
from structlog_etw.backends.base import Slot
from structlog_etw.backends.user_events import UserEventsBackend

pytestmark = pytest.mark.kernel

PerfFactory = Callable[..., PerfSession]


class Color(enum.Enum):
    RED = 1


class Prio(enum.IntEnum):
    HIGH = 2


class Unprintable:
    """Neither ``str`` nor ``repr`` works: the type table's last resort."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


UID = uuid.UUID("12345678-1234-5678-1234-567812345678")

#: One value of every row of the type table, and (decoded value, encoding, format, is_array)
#: as the project's decoder reads them back from perf's capture.
TYPE_TABLE: dict[str, tuple[Any, Any, int, int, bool]] = {
    "flag": (True, True, 2, 7, False),  # Value8 / Boolean
    "small": (-5, -5, 5, 2, False),  # Value64 / SignedInt
    "i64max": (2**63 - 1, 2**63 - 1, 5, 2, False),
    "u64": (2**64 - 1, 2**64 - 1, 5, 1, False),  # Value64 / UnsignedInt
    "big": (2**70, str(2**70), 10, 0, False),  # decimal string
    "ratio": (0.25, 0.25, 5, 8, False),  # Value64 / Float
    "text": ("héllo wörld", "héllo wörld", 10, 0, False),  # StringLength16Char8, UTF-8
    "raw": (b"\x00\xff\x10", b"\x00\xff\x10", 13, 9, False),  # BinaryLength16Char8 / HexBytes
    "buf": (bytearray(b"ab"), b"ab", 13, 9, False),
    "uid": (UID, UID, 6, 15, False),  # Value128 / Uuid
    "v4": (ipaddress.IPv4Address("10.1.2.3"), ipaddress.IPv4Address("10.1.2.3"), 4, 17, False),
    "v6": (ipaddress.IPv6Address("2001:db8::1"), ipaddress.IPv6Address("2001:db8::1"), 6, 17, False),
    "when": (
        dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc),
        "2024-05-06T07:08:09.123456+00:00",
        10,
        0,
        False,
    ),
    "ints": ([1, -2, 3], [1, -2, 3], 5, 2, True),  # VArray of Value64
    "names": (("a", "b"), ["a", "b"], 10, 0, True),
    "floats": ([0.5, 1.5], [0.5, 1.5], 5, 8, True),
    "bools": ([True, False], [True, False], 2, 7, True),
    "uids": ([UID], [UID], 6, 15, True),
    "nested": ({"a": 1, "b": {"c": "d"}}, {"a": 1, "b": {"c": "d"}}, 1, 2, False),  # Struct (2 fields)
    "mixed": ([1, "a"], '[1, "a"]', 10, 14, False),  # JSON string
    "nothing": (None, None, 13, 2, False),  # BinaryLength16Char8 / SignedInt, length 0: null
    "color": (Color.RED, "Color.RED", 10, 0, False),
    "err": (ValueError("bad"), "ValueError: bad", 10, 0, False),
    # The remaining rows of docs/types.md (and edge cases of the rows above).
    "view": (memoryview(b"mv\x00"), b"mv\x00", 13, 9, False),  # memoryview -> BinaryLength16Char8 / HexBytes
    "naive": (dt.datetime(2024, 5, 6, 7, 8, 9), "2024-05-06T07:08:09", 10, 0, False),  # stays naive
    "day": (dt.date(2024, 5, 6), "2024-05-06", 10, 0, False),
    "clock": (dt.time(7, 8, 9), "07:08:09", 10, 0, False),
    "empty": ([], [], 10, 0, True),  # empty list -> StringLength16Char8 VArray, count 0
    "empty_tuple": ((), [], 10, 0, True),
    "members": ({7}, [7], 5, 2, True),  # a set of one scalar kind -> VArray
    "u64s": ([2**64 - 1, 2**63], [2**64 - 1, 2**63], 5, 1, True),  # VArray of Value64 / UnsignedInt
    "v4s": (
        [ipaddress.IPv4Address("10.0.0.1"), ipaddress.IPv4Address("192.168.1.2")],
        [ipaddress.IPv4Address("10.0.0.1"), ipaddress.IPv4Address("192.168.1.2")],
        4,
        17,
        True,
    ),  # VArray of Value32 / IpAddress
    "v6s": (
        [ipaddress.IPv6Address("::1"), ipaddress.IPv6Address("fe80::2")],
        [ipaddress.IPv6Address("::1"), ipaddress.IPv6Address("fe80::2")],
        6,
        17,
        True,
    ),  # VArray of Value128 / IpAddress
    "nodict": ({}, "{}", 10, 14, False),  # empty dict -> JSON
    "opaque": (Unprintable(), "<unprintable Unprintable>", 10, 0, False),
    "bigneg": (-(2**63) - 1, str(-(2**63) - 1), 10, 0, False),  # below int64 -> decimal string
    "huge": (2**64, str(2**64), 10, 0, False),  # just past uint64 -> decimal string
    "prio": (Prio.HIGH, "Prio.HIGH", 10, 0, False),  # IntEnum members are enums (text), not ints
    "bare_err": (KeyError("k"), "KeyError: 'k'", 10, 0, False),
    "deep": ({"x": {"y": {"z": 1}}}, {"x": {"y": {"z": 1}}}, 1, 1, False),  # nested Struct (1 field)
    "records": ([{"a": 1}, {"b": "x"}], '[{"a": 1}, {"b": "x"}]', 10, 14, False),  # list of dicts -> JSON
}


@pytest.fixture
def renderer_for(provider_name: str) -> Iterator[Callable[..., EtwRenderer]]:
    """Factory for an EtwRenderer on this test's provider (real user_events backend); closed at teardown."""
    made: list[EtwRenderer] = []

    def make(**kwargs: Any) -> EtwRenderer:
        r = EtwRenderer(provider_name, **kwargs)
        assert isinstance(r.provider.backend, UserEventsBackend), r.provider.stats()
        made.append(r)
        return r

    yield make
    for r in made:
        r.provider.close()


def _logger(renderer: EtwRenderer) -> Any:
    return structlog.wrap_logger(structlog.PrintLogger(), processors=[renderer])


def test_structlog_events_reach_perf_and_decode_to_name_level_keyword_and_every_field_type(
    renderer_for: Callable[..., EtwRenderer],
    provider_name: str,
    perf_session: PerfFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """structlog events reach perf with name, level, keyword and each type table row's value and wire type."""
    renderer = renderer_for(keywords=(0x4,))
    log = _logger(renderer)
    tps = [f"{provider_name}_L4K1", f"{provider_name}_L2K4"]
    with perf_session(tps) as session:
        log.info("types_event", **{k: v[0] for k, v in TYPE_TABLE.items()})
        log.bind(etw_keyword=0x4).error("failure happened", code=7)
    assert capsys.readouterr().out == ""  # EtwRenderer drops the event after writing it
    events = session.events()
    assert [(e.provider, e.name, e.level, e.keyword) for e in events] == [
        (provider_name, "types_event", 4, 1),
        (provider_name, "failure happened", 2, 4),
    ]
    ev = events[0]
    assert ev.fields == {k: v[1] for k, v in TYPE_TABLE.items()}
    wire = {f.name: (f.encoding, f.format, f.is_array) for f in ev.field_list}
    assert wire == {k: (v[2], v[3], v[4]) for k, v in TYPE_TABLE.items()}
    assert events[1].fields == {"code": 7}
    stats = renderer.provider.stats()
    assert stats["written"] == 2
    assert stats["errors"] == {}


def test_nothing_is_written_while_no_session_listens(
    renderer_for: Callable[..., EtwRenderer], provider_name: str, perf_session: PerfFactory
) -> None:
    """Nothing is written or dropped while no session listens: only the event during the session arrives."""
    renderer = renderer_for()
    log = _logger(renderer)
    slot = renderer.provider.slot(4, 1)
    log.info("before", n=1)
    assert renderer.provider.stats()["written"] == 0
    assert renderer.provider.stats()["dropped"] == {}  # checked before encoding: costs nothing
    with perf_session([f"{provider_name}_L4K1"]) as session:
        log.info("during", n=2)
    wait_until(lambda: slot.word[0] == 0, what="the enable word to clear")
    log.info("after", n=3)
    assert [(e.name, e.fields) for e in session.events()] == [("during", {"n": 2})]
    stats = renderer.provider.stats()
    assert stats["written"] == 1
    assert stats["errors"] == {}


def test_a_level_or_keyword_the_session_did_not_enable_is_not_written(
    renderer_for: Callable[..., EtwRenderer], provider_name: str, perf_session: PerfFactory
) -> None:
    """Events of a level or keyword the session did not enable are not written; the wanted one is."""
    renderer = renderer_for(keywords=(0x8,))
    log = _logger(renderer)
    with perf_session([f"{provider_name}_L4K1"]) as session:
        log.debug("verbose_one")  # L5K1: not in the session
        log.info("other_keyword", etw_keyword=0x8)  # L4K8: not in the session
        log.info("wanted")  # L4K1
    events = session.events()
    assert [(e.name, e.level, e.keyword) for e in events] == [("wanted", 4, 1)]
    stats = renderer.provider.stats()
    assert stats["written"] == 1


def test_default_keyword_is_registered_at_every_level_before_the_first_event(
    renderer_for: Callable[..., EtwRenderer], provider_name: str, perf_session: PerfFactory
) -> None:
    """The default and configured keywords are registered at all five levels before any event."""
    renderer_for(default_keyword=0x10, keywords=(0x20,))
    tps = [f"{provider_name}_L{level}K{kw:x}" for level in range(1, 6) for kw in (0x10, 0x20)]
    with perf_session(tps) as session:  # perf refuses names that are not registered
        pass
    assert session.returncode is not None  # perf started on all ten names and stopped cleanly
    assert session.events() == []


def test_backend_errors_are_returned_not_raised_and_counted_by_errno_name(
    renderer_for: Callable[..., EtwRenderer], provider_name: str, perf_session: PerfFactory
) -> None:
    """Backend errors (ENOENT, EBADF) make write return False and are counted by errno name."""
    renderer = renderer_for()
    provider = renderer.provider
    slot = provider.slot(4, 1)
    unknown_index = Slot(4, 1, slot.word, struct.pack("=i", 4000))
    with perf_session([f"{provider_name}_L4K1"]) as session:
        assert provider.write(unknown_index, "forged", []) is False  # writev -> ENOENT
        assert provider.write(slot, "fine", []) is True
        provider.backend.close()  # the descriptor is gone under the provider's feet
        assert provider.write(Slot(4, 1, [1], slot.handle), "late", []) is False  # -> EBADF
    assert [e.name for e in session.events()] == ["fine"]
    stats = provider.stats()
    assert stats["written"] == 1
    assert stats["errors"] == {"ENOENT": 1, "EBADF": 1}
