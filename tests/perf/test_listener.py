"""The listener's pieces that need no kernel: which tracepoints it takes, how big its rings are."""

from __future__ import annotations

import pytest

from structlog_etw.perf.listener import Listener, ListenError, match_tracepoint


@pytest.mark.parametrize(
    ("name", "kwargs", "expected"),
    [
        ("MyProv_L4K1", {}, (4, 1)),
        ("MyProv_L5K1f", {}, (5, 0x1F)),
        ("MyProv_L4K1Gmygroup", {}, (4, 1)),
        ("MyProv_L4K1Gmygroup", {"group": "mygroup"}, (4, 1)),
        ("MyProv_L4K1", {"group": "mygroup"}, None),
        ("MyProv_L4K1", {"level": 3}, None),
        ("MyProv_L3K1", {"level": 3}, (3, 1)),
        ("MyProv_L4K6", {"keyword": 0x2}, (4, 6)),
        ("MyProv_L4K6", {"keyword": 0x8}, None),
        ("MyProv_L4K0", {"keyword": 0x8}, (4, 0)),  # no keyword: passes every keyword filter (ETW rule)
        ("MyProv_Sub_L4K1", {}, None),  # another provider whose name starts with ours
        ("MyProvX_L4K1", {}, None),
        ("MyProv_L4K1 ", {}, None),
        ("MyProv_L4", {}, None),
        ("MyProv_LAK1", {}, None),  # the name format is lowercase hex
    ],
)
def test_only_the_providers_own_tracepoints_passing_the_filters_match(
    name: str, kwargs: dict[str, object], expected: tuple[int, int] | None
) -> None:
    """match_tracepoint matches only the provider's own tracepoints passing the level, keyword and group."""
    assert match_tracepoint("MyProv", name, **kwargs) == expected  # type: ignore[arg-type]


def test_ring_pages_must_be_a_power_of_two() -> None:
    """A Listener with a page count that is not a power of two raises ListenError saying so."""
    with pytest.raises(ListenError, match="power of two"):
        Listener("MyProv", pages=3)
