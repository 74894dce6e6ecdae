"""The decoded form of one event: what every decoder returns and every renderer reads.

The decoders (:func:`structlog_etw.read.decode.eventheader.decode_event`,
:func:`structlog_etw.read.decode.tracelogging.decode`,
:func:`structlog_etw.perf.samples.decode_sample`) parse an event once into a
:class:`DecodedEvent`; everything that shows an event (perf-decode's JSON, the CLI's JSON lines
and console text, the testing helpers) renders from it and never parses the bytes again.  So a
:class:`DecodedEvent` carries, next to the Python values, what a faithful renderer needs: each
field's wire types and value bytes, the event's byte order and its name as the wire spells it.

Every decoder refuses malformed bytes with the one :class:`DecodeError` (a :class:`ValueError`)
and follows structs nested at most :data:`MAX_DECODE_NESTING` deep.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from .._util.lazy import LazyModule
from ..formats._errors import DecodeError

if TYPE_CHECKING:
    import uuid
else:  # imported on first use (an event's activity ids): a reader's start loads no uuid
    uuid = LazyModule("uuid", globals())

__all__ = ["MAX_DECODE_NESTING", "DecodeError", "DecodedEvent", "DecodedField", "EventMeta", "plain_fields"]

#: How deep the decoders follow structs inside structs (both formats): a struct at this depth
#: (top-level fields are at depth 0) is refused with :class:`DecodeError`.  Our encoders write at
#: most :data:`structlog_etw.write.fields.MAX_NESTING` levels; perf-decode keeps an 8-deep stack.
MAX_DECODE_NESTING: Final = 32


@dataclass(frozen=True)
class DecodedField:
    """One decoded field.

    ``encoding``/``format`` are the wire numbers of the field's format: EventHeader encoding
    and format, or TraceLogging InType and OutType (:attr:`DecodedEvent.format` says which;
    plain tracepoint fields, format ``"tracefs"``, have their array kind and print style:
    :meth:`structlog_etw.perf.tracefs_format.FormatField.decoded`).  ``value`` is the Python
    value: for a struct (``is_struct``) the list of its member :class:`DecodedField` objects,
    for an array (``is_array``) a ``list`` of element values (of member lists for an array of
    structs).

    ``raw`` is the value's bytes as the event carries them, without a length prefix or a
    terminator (``b""`` for structs and arrays); ``raw_elements`` holds the bytes of each
    element of an array of non-struct values (empty otherwise).  Renderers that must reproduce
    a tool's exact text (perf-decode's hex integers, errno names, invalid UTF-8) work from these.
    """

    name: str
    value: Any
    encoding: int
    format: int = 0
    tag: int = 0
    is_array: bool = False
    is_struct: bool = False
    raw: bytes = b""
    raw_elements: tuple[bytes, ...] = ()

    def plain_value(self) -> Any:
        """The value as :attr:`DecodedEvent.fields` holds it: structs as ``dict``, arrays as ``list``."""
        if not self.is_struct:
            return self.value
        if self.is_array:
            return [plain_fields(element) for element in self.value]
        return plain_fields(self.value)


def plain_fields(fields: Iterable[DecodedField]) -> dict[str, Any]:
    """``{name: plain value}`` of ``fields`` (for a duplicated name the last one wins)."""
    return {f.name: f.plain_value() for f in fields}


@dataclass(frozen=True)
class DecodedEvent:
    """One decoded event: what a trace consumer sees.

    ``fields`` maps each top-level field name to its Python value (structs become ``dict``,
    arrays ``list``; on duplicate names the last wins); ``field_list`` keeps every field in
    order with its wire types and bytes.

    ``format`` names the encoding the event came in, and so what the fields' wire numbers
    mean: ``"eventheader"`` (Linux user_events), ``"tracelogging"`` (Windows ETW) or
    ``"tracefs"`` (a plain kernel tracepoint decoded by its tracefs format); ``""`` when
    unknown.  ``byte_order`` is the byte order of the event's values (``"little"`` or
    ``"big"``: EventHeader events say which in their header).  ``raw_name`` is the event name
    as the wire carries it (EventHeader: with its ``;attr=value`` suffix and ``;;`` escapes,
    which ``name`` and ``attributes`` hold decoded); ``raw`` is the whole event's bytes
    (TraceLogging: metadata followed by data).
    """

    provider: str
    name: str
    level: int
    keyword: int
    opcode: int = 0
    tag: int = 0
    activity_id: uuid.UUID | None = None
    related_id: uuid.UUID | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    field_list: tuple[DecodedField, ...] = ()
    attributes: dict[str, str] = field(default_factory=dict)
    version: int = 0
    id: int = 0
    raw: bytes = b""
    format: str = ""
    byte_order: Literal["little", "big"] = "little"
    raw_name: bytes = b""


@dataclass(frozen=True)
class EventMeta:
    """Where and when an event was captured (all optional): what a writer shows beside a
    :class:`DecodedEvent` (perf's sample time, wall-clock time, cpu, pid, tid, tracepoint name)."""

    time_ns: int | None = None
    realtime_ns: int | None = None
    cpu: int | None = None
    pid: int | None = None
    tid: int | None = None
    tracepoint: str | None = None
