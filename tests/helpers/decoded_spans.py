"""Invariants of whatever a decoder returns for bytes it was handed, hostile ones included.

A decoder enumerates what the bytes hold; it never makes values up.  So every decoded field's
bytes (:attr:`~structlog_etw.read.decoded.DecodedField.raw` and each of ``raw_elements``, members of
structs and of arrays of structs too) occur in the bytes the values were read from, the event's
``raw`` is exactly its input, and an event has no more top-level fields than its metadata has
room for (each field takes at least two metadata bytes: its name's terminator and its type),
whose bytes also hold the event's name.
"""

from __future__ import annotations

from collections.abc import Iterable

from structlog_etw.read.decoded import DecodedEvent, DecodedField

#: The smallest field definition in EventHeader or TraceLogging metadata: an empty name's NUL
#: and one type byte.
MIN_FIELD_METADATA = 2


def _fields(fields: Iterable[DecodedField]) -> Iterable[DecodedField]:
    """Every field of *fields*, members of structs and of arrays of structs included."""
    for f in fields:
        yield f
        if f.is_struct and f.is_array:
            for element in f.value:
                yield from _fields(element)
        elif f.is_struct:
            yield from _fields(f.value)


def assert_read_from(event: DecodedEvent, values: bytes, metadata: bytes | None, whole: bytes) -> None:
    """*event* was decoded from *whole*: its values come from *values*, its fields from *metadata*.

    EventHeader: all three are the event's bytes; TraceLogging: the data blob, the metadata blob
    and their concatenation; a plain tracepoint (its fields defined by its tracefs format, not by
    bytes of the event): the sample's raw bytes, ``None``, the same raw bytes.
    """
    assert event.raw == whole, "the event's raw bytes are not its input"
    if metadata is not None:
        assert MIN_FIELD_METADATA * len(event.field_list) <= len(metadata), "more fields than metadata"
        assert event.raw_name in metadata, "the event name's bytes are not in the metadata"
    for f in _fields(event.field_list):
        assert f.raw in values, f"field {f.name!r}: bytes {f.raw!r} are not in the input"
        for element in f.raw_elements:
            assert element in values, f"field {f.name!r}: element bytes {element!r} are not in the input"
