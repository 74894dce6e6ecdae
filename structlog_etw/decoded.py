"""The decoded form of one event, shared by both decoders, the testing helpers and the CLI."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DecodedEvent", "DecodedField"]


@dataclass(frozen=True)
class DecodedField:
    """One decoded field.

    ``encoding``/``format`` are the wire numbers of the field's format: EventHeader
    encoding and format, or TraceLogging InType and OutType.  ``value`` is the
    Python value (structs: ``list[DecodedField]``; arrays: ``list``).
    """

    name: str
    value: Any
    encoding: int
    format: int = 0
    tag: int = 0
    is_array: bool = False


@dataclass(frozen=True)
class DecodedEvent:
    """One decoded event: what a trace consumer sees.

    ``fields`` maps each top-level field name to its Python value (structs become
    ``dict``, arrays ``list``; on duplicate names the last wins); ``field_list``
    keeps every field in order with its wire types.
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
