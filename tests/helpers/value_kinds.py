"""The value kinds a shape function writes, one value each: the pool that new-layout streams draw
from, in tests/write/test_write_path_variability.py and in benchmarks/layouts.py (which imports it from
here, as the benchmarks already import test helpers: benchmarks/guest.py uses tests/kernel)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

#: One value of every class a shape function writes (str, int, float, bool, None, bytes, UUID,
#: datetime), in that order.
VALUES: list[Any] = [
    "text",
    7,
    2.5,
    True,
    None,
    b"\x01\x02",
    uuid.UUID(int=3),
    dt.datetime(2024, 1, 2, 3, 4, 5),
]
