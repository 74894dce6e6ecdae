"""The kinds of an event dict's values as shape functions see them, and the u16 lengths table.

:data:`SHAPE_KINDS` maps the value classes a shape function takes to the kind the type table gives
them (``None`` is :data:`NONE`, a null); :func:`layout` gives an event dict's kinds in order
(:data:`SKIP` for ``exc_info`` and the skipped key), or ``None`` when the shape has no shape
function (another class, a key that is no ``str``).  :data:`U16_BYTES` holds the packed u16 of
each length a counted value may have, what generated functions and the interpreted route write
before such a value.

Stdlib only (next to :mod:`structlog_etw.write.fields`).
"""

from __future__ import annotations

import datetime as _dt
import struct
import uuid
from collections.abc import Iterable, Mapping
from typing import Final

from ..fields import BOOL, BYTES, F64, I64, NULL, STR, TIME, UUID

__all__ = ["NONE", "NULLABLE", "SHAPE_KINDS", "SKIP", "U16_BYTES", "layout", "shape_kind"]

_U16: Final = struct.Struct("<H")

#: The kind of a ``None`` value in a layout (the type table's NULL: each format writes its null).
NONE: Final = -2
#: The kind of a position a shape function does not write (``exc_info``, the skipped key).
SKIP: Final = -1
#: Or-ed into a layout's kind by a format that writes a key in a nullable form (EventHeader: a
#: key that has been ``None``): the value's class is the kind's, its step the format's own.
NULLABLE: Final = 0x100

#: Value class -> kind, for the classes a shape function writes (exact classes: a subclass takes
#: the general route, as it does in the type table).  ``int`` is int64: a larger int makes the
#: shape function raise, and the general route writes it as uint64 or text.
SHAPE_KINDS: Final[dict[type, int]] = {
    str: STR,
    int: I64,
    float: F64,
    bool: BOOL,
    type(None): NONE,
    bytes: BYTES,
    uuid.UUID: UUID,
    _dt.datetime: TIME,
}
CLASS_OF_KIND: Final[dict[int, type]] = {kind: cls for cls, kind in SHAPE_KINDS.items()}


def layout(keys: Iterable[object], classes: Iterable[type], skip: str | None) -> tuple[int, ...] | None:
    """The kinds of an event's values in order, or ``None`` if a shape function cannot write it.

    ``keys``/``classes``: the event dict's keys and the classes of its values.  ``exc_info`` and
    ``skip`` are :data:`SKIP`; a key that is not a ``str``, or a value class outside
    :data:`SHAPE_KINDS`, means ``None``.
    """
    out: list[int] = []
    for key, cls in zip(keys, classes, strict=True):
        if type(key) is not str:
            return None
        if key in ("exc_info", skip):
            out.append(SKIP)
            continue
        kind = SHAPE_KINDS.get(cls)
        if kind is None:
            return None
        out.append(kind)
    return tuple(out)


class _U16Bytes(dict[int, bytes]):
    """``n -> struct.pack("<H", n)``: prebuilt for ``0..1023``, packed (not kept) past that; a
    number past u16 raises ``struct.error``, as the packing would."""

    __slots__ = ()

    def __missing__(self, n: int) -> bytes:
        return _U16.pack(n)


#: The little-endian u16 of a length, by the length: what a shape function writes before a
#: counted value that no fixed value precedes (a look-up instead of a ``struct`` call).
U16_BYTES: Final[Mapping[int, bytes]] = _U16Bytes((n, struct.pack("<H", n)) for n in range(1024))
#: :data:`U16_BYTES`'s prebuilt range as a ``list``: the table a shape function indexes first.
#: CPython specialises indexing an exact list by an int (no method call, no hash); a dict subclass
#: gets the generic subscript, about twice the time.  A length past the list raises
#: ``IndexError``: the function then switches to :data:`U16_BYTES` for good (a layout with long
#: strings costs what it cost before the list, not an exception per event) and joins again.
U16_LIST: Final[list[bytes]] = [U16_BYTES[n] for n in range(len(U16_BYTES))]


def shape_kind(kind: int) -> int:
    """A row's kind in a layout: NULL is :data:`NONE` (the class of ``None``), any other itself."""
    return NONE if kind == NULL else kind
