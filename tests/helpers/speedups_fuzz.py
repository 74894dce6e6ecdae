"""Pack random events with the compiled packer, for ``tests/write/shapes/test_speedups.py``'s sanitizer run.

``python -m tests.helpers.speedups_fuzz SEED COUNT`` packs COUNT random events per format (values
of every op's class with their edge cases, other classes, events of other lengths, layouts past
the packer's stack arrays) with ``_shapes.compiled_packer`` and prints ``packed N none N raised N``.
Run under AddressSanitizer, a read or write out of bounds, a use after free or undefined behaviour
in ``structlog_etw/write/shapes/_speedups.c`` ends it with the sanitizer's report instead.
"""

from __future__ import annotations

import math
import random
import sys

from structlog_etw.write import shapes as _shapes
from structlog_etw.write.eventheader._codec import CODEC as EH_CODEC
from structlog_etw.write.fields import BOOL, BYTES, F64, I64, STR
from structlog_etw.write.tracelogging._codec import CODEC as TL_CODEC

#: Edge values of each kind the compiled packer writes: int64's ends and past them, non-finite
#: floats and -0.0, non-ASCII, astral and NUL characters, lone surrogates, counted lengths at and
#: past 65535 bytes (also tests/write/shapes/test_speedups.py's hypothesis strategies draw from these).
EDGES: dict[int, list[object]] = {
    STR: [
        "",
        "abc",
        "\0",
        "€\0",
        "\ud800",
        "a\udfffb",
        "é" * 300,
        "é" * 32767,
        "é" * 32768,
        "x" * 65535,
        "x" * 65536,
        "😀" * 20000,
    ],
    I64: [0, -1, 5, -(2**63), 2**63 - 1, 2**63, -(2**63) - 1, 2**64, -(2**70)],
    F64: [0.0, -0.0, math.inf, -math.inf, math.nan, 1e308],
    BOOL: [True, False],
    BYTES: [b"", b"\0" * 65535, b"y" * 65536],
    _shapes.NONE: [None],
}
EDGES[I64 | _shapes.NULLABLE] = EDGES[I64]
EDGES[F64 | _shapes.NULLABLE] = EDGES[F64]
#: Values of classes no op takes (a position's class check then gives None).
OTHER: list[object] = [[1], object(), 1j, bytearray(b"x")]


def main(seed: int, count: int) -> str:
    """Pack ``count`` random events per format; the tally of outcomes."""
    if _shapes.SPEEDUPS is None:
        raise SystemExit("the compiled packer is not loaded")
    rng = random.Random(seed)
    packed = none = raised = 0
    for ops in (EH_CODEC.ops, TL_CODEC.ops):
        kinds = [*ops, _shapes.SKIP]
        for _ in range(count):
            n = rng.choice([0, 1, 2, 5, 127, 128, 129, 300])
            layout = tuple(rng.choice(kinds) for _ in range(n))
            packer = _shapes.compiled_packer(layout, ops)
            assert packer is not None
            event = {
                f"k{i}": rng.choice(OTHER) if kind == _shapes.SKIP else rng.choice(EDGES[kind])
                for i, kind in enumerate(layout)
            }
            if n and rng.random() < 0.1:
                event[f"k{rng.randrange(n)}"] = rng.choice(OTHER)
            if rng.random() < 0.05:
                event["extra"] = 1
            try:
                out = packer(event, b"head", b"meta")
            except Exception:
                raised += 1
                continue
            if out is None:
                none += 1
            else:
                packed += 1
    return f"packed {packed} none {none} raised {raised}"


if __name__ == "__main__":
    print(main(int(sys.argv[1]), int(sys.argv[2])))
