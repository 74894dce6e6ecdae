"""The interpreted shape function: a loop over an event dict's values, no code compiled.

What both formats run for a layout that has no generated function yet: it writes what the
generated function writes (and so what the general route writes), at the cost of a loop.

Stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ..fields import STR
from ._layout import U16_BYTES

__all__ = ["Walker", "walk"]

#: How the interpreted route writes a value of one class (``str`` aside: written inline): its
#: kind (the type table's), the function that packs it (u16 prefix included for counted values)
#: and its logical field count.
Walker = Mapping[type, tuple[int, Callable[[Any], bytes], int]]
_U16_MAX: Final = 0xFFFF


def walk(
    event: Mapping[Any, Any],
    skip: str | None,
    classes: Walker,
    known: Mapping[tuple[str, int], bytes],
    field_meta: Callable[[str, int], bytes],
    fresh: list[tuple[tuple[str, int], bytes]],
    keyed: Mapping[str, Walker] | None = None,
) -> tuple[list[bytes], list[bytes], int]:
    """The interpreted shape function: an event dict of ``str`` keys and values of ``classes``
    -> (field metadata, packed values, logical field count), no code compiled.

    ``keyed`` (a format's keys written in another kind, e.g. EventHeader's nullable keys) maps a
    key to the table (by value class, every class of ``classes``) used instead of ``classes`` for
    it (``str`` aside).

    It writes what a generated shape function writes (and so what the general route writes) for
    a layout that has no function yet: a new layout costs a loop over the values, not a compile.
    ``known`` maps (name, kind) to field metadata; ``field_meta`` builds a missing one (added to
    ``fresh``).  Raises (``KeyError`` for another class, ``TypeError`` for a key that is no
    ``str``, or what a packer raises) when the event needs the general route.
    """
    metas: list[bytes] = []
    values: list[bytes] = []
    add_meta, add_value, get_meta = metas.append, values.append, known.get
    u16 = U16_BYTES
    count = 0
    skipped = ("exc_info", skip)
    for key, value in event.items():
        if type(key) is not str:
            raise TypeError("a key that is no str")
        if key in skipped:
            continue
        cls = type(value)
        if cls is str:  # the common case inline: both formats write a u16 length and UTF-8
            if len(value) > _U16_MAX:
                raise OverflowError("text past u16")  # never whole: the general route cuts it
            body = value.encode()  # lone surrogates raise: the general route replaces them
            add_value(u16[len(body)])
            add_value(body)
            kind = STR
            count += 1
        else:
            kind, pack, n = (classes if keyed is None else keyed.get(key, classes))[cls]
            add_value(pack(value))
            count += n
        meta = get_meta((key, kind))
        if meta is None:
            meta = field_meta(key, kind)
            fresh.append(((key, kind), meta))
        add_meta(meta)
    return metas, values, count
