"""The size policy both encoders share: how the values of an event too large for its budget are cut.

An encoder's general path turns every leaf value of an event into a *piece*: ``bytes`` for a
value of fixed size (an int, a GUID, an address) or a :class:`Cuttable` for a value the policy
may shorten: a string, a binary, an array.  Both formats write such a value the same way, a
little-endian u16 (the byte length of a string or binary, the element count of an array)
followed by its body, so one algorithm serves both (docs/limits.md):

* :func:`water_level` picks **one cap**: the largest cap such that every cuttable value cut to
  ``max(cap, its floor)`` bytes fits the room left by the fixed part (:meth:`Cuttable.size_at`:
  an array counts the whole leading elements it keeps).  Values shorter than the cap stay whole;
  only the longest ones are cut down to it.  A string's floor is the length of the truncation
  marker: a cut string always ends with the marker, at worst it *is* the marker, so it is never
  written emptied.  Binaries and arrays have floor 0.
* :func:`joined` writes the pieces with every value cut to that cap (whole when it fits).

Stdlib only; the encoders pass the marker bytes (``fields.TRUNCATION_MARKER``) in.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from typing import Any, Final

__all__ = [
    "NO_LIMIT",
    "U16_MAX",
    "Cuttable",
    "Piece",
    "joined",
    "leading_pieces",
    "water_level",
    "whole_size",
]

#: The ``limit`` of a piece built without an event budget (a value's pieces built whole).
NO_LIMIT: Final = 1 << 62

#: Largest length or element count a u16 prefix can hold.
U16_MAX: Final = 0xFFFF
_U16: Final = struct.Struct("<H")


def _kept(ends: list[int], cap: int) -> int:
    """Elements of an array (``ends``: their end offsets) kept for ``cap``: the leading ones that fit."""
    return min(bisect_right(ends, cap), U16_MAX)


class Cuttable:
    """A variable-size value: a u16 prefix and a body the size policy may shorten.

    ``body`` is what follows the prefix.  A string has a ``marker`` (the truncation marker, its
    floor): a cut string ends with it.  An array has ``ends``, the end offset of each encoded
    element in ``body``; its prefix counts elements.
    """

    __slots__ = ("body", "ends", "marker")

    def __init__(self, body: bytes, marker: bytes = b"", ends: list[int] | None = None) -> None:
        self.body = body
        self.marker = marker
        self.ends = ends

    @classmethod
    def array(cls, items: Sequence[Piece]) -> Cuttable:
        """An array of the pieces ``items``: its elements are the items written whole, except that
        an item longer than its own u16 prefix allows is cut to 65535 bytes (strings keep the
        marker); such an element can never fit an event, the array is cut before it."""
        elems = [i.cut(U16_MAX) if isinstance(i, Cuttable) else i for i in items]
        return cls(b"".join(elems), ends=list(accumulate(map(len, elems))))

    def whole(self) -> bytes:
        """The prefix and the whole body."""
        count = len(self.body) if self.ends is None else len(self.ends)
        return _U16.pack(count) + self.body

    def size_at(self, cap: int) -> int:
        """Body bytes :meth:`cut` writes for ``cap`` (for a string: at most that many).

        An array keeps its leading elements that fit ``cap`` whole, a binary ``cap`` bytes, a
        string ``max(cap, len(marker))`` bytes (cut on a character boundary, it may be up to 3
        bytes shorter; a string no longer than the marker is never cut).  Grows with ``cap``.
        """
        ends = self.ends
        if ends is not None:
            n = _kept(ends, cap)
            return ends[n - 1] if n else 0
        return min(len(self.body), max(cap, len(self.marker)))

    def is_cut(self, cap: int) -> bool:
        """Whether :meth:`cut` shortens this value for ``cap``."""
        if self.ends is not None:
            return _kept(self.ends, cap) < len(self.ends)
        return self.size_at(cap) < len(self.body)

    def cut(self, cap: int) -> bytes:
        """The prefix and the body cut to :meth:`size_at` bytes: always well-formed.

        A cut string is valid UTF-8 (cut on a character boundary) ending with the marker (at
        worst it is the marker alone); an array keeps its first whole elements (at most 65535);
        a binary is cut.
        """
        body, ends = self.body, self.ends
        if ends is not None:
            n = _kept(ends, cap)
            return _U16.pack(n) + body[: ends[n - 1] if n else 0]
        size = self.size_at(cap)
        if size < len(body):
            if self.marker:
                keep = body[: size - len(self.marker)].decode("utf-8", "ignore").encode("utf-8")
                body = keep + self.marker
            else:
                body = body[:size]
        return _U16.pack(len(body)) + body


#: A value as the general path of an encoder writes it: fixed bytes, or a cuttable value.
Piece = bytes | Cuttable


def leading_pieces(items: Iterable[Any], piece: Callable[[Any], Piece], limit: int) -> list[Piece]:
    """``piece(item)`` of the leading ``items`` until their whole size passes ``limit`` bytes.

    The elements past that point can never be written (an event holds at most ``limit`` bytes,
    and a cut array keeps its leading elements), so they are never built: the cost of a huge
    container follows what fits, not its length.
    """
    out: list[Piece] = []
    append = out.append
    total = 0
    for item in items:
        p = piece(item)
        append(p)
        total += 2 + len(p.body) if isinstance(p, Cuttable) else len(p)
        if total > limit:
            break
    return out


def whole_size(pieces: Sequence[Piece]) -> int:
    """Bytes of the pieces written whole."""
    return sum([2 + len(p.body) if isinstance(p, Cuttable) else len(p) for p in pieces])


def water_level(pieces: Sequence[Piece], room: int) -> int | None:
    """The largest cap with which the pieces fit ``room`` bytes, or ``None`` if none does.

    The size of the pieces at cap ``c`` is the fixed bytes, a u16 prefix per cuttable value and
    ``sum(v.size_at(c))``; it grows with ``c``, so a binary search finds the largest cap that fits.
    ``None`` when even cap 0 does not fit: the fixed part leaves less room than the markers of the
    strings that must be cut (the encoder then drops the event as too large).
    """
    values = [p for p in pieces if isinstance(p, Cuttable)]
    room -= whole_size(pieces) - sum([len(v.body) for v in values])  # the fixed part and the prefixes
    if room < 0 or sum(v.size_at(0) for v in values) > room:
        return None
    lo, hi = 0, max((len(v.body) for v in values), default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(v.size_at(mid) for v in values) <= room:
            lo = mid
        else:
            hi = mid - 1
    return min(lo, U16_MAX)


def joined(pieces: Sequence[Piece], cap: int | None = None) -> bytes:
    """The pieces written one after the other: whole (``cap`` None) or cut to ``cap``."""
    if cap is None:
        return b"".join([p.whole() if isinstance(p, Cuttable) else p for p in pieces])
    return b"".join([p.cut(cap) if isinstance(p, Cuttable) else p for p in pieces])
