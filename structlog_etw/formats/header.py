"""An event's header value: what both formats write besides the name and the fields.

:class:`Header` carries the level, opcode, tag and activity ids of one event; the provider hands
one to the encoder (``encode_fields(name, fields, header)``, ``encode_dict(name, event, skip,
header)``) instead of five arguments.  The headers of plain events (opcode 0, tag 0, no activity)
are built once per level (:func:`plain_header`), so the common write allocates none; an event
with an activity or an ``etw_opcode``/``etw_tags`` control gets one built for it.

The keyword is not part of it: neither encoding carries it in the event (EventHeader names it in
the tracepoint, ETW in the descriptor the backend prepares per slot).

:func:`header_problem` is the one range check of a header, for both formats (they differ only in
the tag's width).  Standard library only.
"""

from __future__ import annotations

from typing import Final, NamedTuple, TypeAlias

from ._levels import Level

__all__ = ["INFO_HEADER", "Header", "HeaderValue", "header_problem", "plain_header"]


class Header(NamedTuple):
    """The header of one event: level, opcode, tag and the 16-byte activity ids (RFC 4122 order).

    A value (equal headers are interchangeable, and they are dictionary keys: the encoders cache
    what they derive from a header by it).  ``related_id`` is written only with an activity id.
    Out-of-range values are not refused here: the encoder that writes the header raises
    ``ValueError`` (:func:`header_problem`).
    """

    level: int
    opcode: int = 0
    tag: int = 0
    activity_id: bytes | None = None
    related_id: bytes | None = None


#: What the encoders take: a :class:`Header`, or the plain tuple of its five values in its order
#: (the provider builds one for an event with an activity or a control: one tuple, no call).
HeaderValue: TypeAlias = tuple[int, int, int, "bytes | None", "bytes | None"]

#: The header of each level's plain events (opcode 0, tag 0, no activity), built once.
_PLAIN: Final[dict[int, Header]] = {level: Header(level) for level in range(256)}
#: The plain header of :attr:`~structlog_etw.formats._levels.Level.INFORMATIONAL` (the encoders' default).
INFO_HEADER: Final = _PLAIN[Level.INFORMATIONAL]


def plain_header(level: int) -> Header:
    """The header of a plain event at ``level`` (opcode 0, tag 0, no activity): the one built at
    import for levels 0..255, a new one for anything else (which its encoder then refuses)."""
    header = _PLAIN.get(level) if type(level) is int else None
    return Header(level) if header is None else header


def header_problem(header: HeaderValue, tag_bits: int) -> str | None:
    """Why ``header`` is out of range (None when it is fine): the one check of both formats.

    ``level`` and ``opcode`` are 0..255, ``tag`` 0..2**tag_bits-1 (EventHeader 16, TraceLogging
    28), activity and related ids 16 bytes (``related_id`` only with an activity).
    """
    level, opcode, tag, activity_id, related_id = header
    try:
        bad = bool((level | opcode) >> 8 or tag >> tag_bits)  # negative: -1 >> 8 is -1
    except TypeError:
        bad = True
    if bad:
        return (
            f"level and opcode must be in 0..255 and tag in 0..{(1 << tag_bits) - 1:#x}, "
            f"got {level!r}, {opcode!r}, {tag!r}"
        )
    if activity_id is not None:
        try:
            ok = len(activity_id) == 16 and (related_id is None or len(related_id) == 16)
        except TypeError:
            ok = False
        if not ok:
            return "activity ids must be 16 bytes"
    return None
