"""The tier dispatcher: both encoders' ``encode_dict``, and the one kind of shape-cache entry.

An event dict whose shape has an entry is written by the entry's function (compiled packer or
generated function).  One whose shape has no entry is written by the interpreted route
(:func:`~structlog_etw.write.shapes.walk`) when its values are of the classes shape functions
take, else by the general route (typed fields, the encoder's non-generated packers): neither
compiles anything.  When that route wrote the event, the shape is *seen*
(:meth:`~structlog_etw.write.shapes.ShapeCache.written`).  :func:`encode_dict` speaks to a format
through the small :class:`TieredEncoder` protocol; :class:`BaseEncoder` gives it to both encoders.

Stdlib only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, TypeVar

from ...formats.header import INFO_HEADER, Header, HeaderValue
from ..fields import dict_fields
from ._caches import ShapeCache
from ._codec_table import Codec

__all__ = ["GENERAL", "BaseEncoder", "ShapeEntry", "TieredEncoder", "encode_dict", "shape_entry"]


class ShapeEntry:
    """A shape's entry in an encoder's :class:`ShapeCache`, the one kind of entry of both formats.

    ``fn(event, scope lead, lead)`` is the layout's function; ``lead`` the bytes it writes after
    the scope's (EventHeader: the metadata after the head, the result is the whole event;
    TraceLogging: none, the result is the data); ``metadata`` the event's metadata (TraceLogging:
    the blob beside the data); ``room`` the most bytes the result may take (past it: the general
    route).
    """

    __slots__ = ("fn", "lead", "metadata", "room")

    def __init__(self, fn: Callable[..., bytes | None], lead: bytes, metadata: bytes, room: int) -> None:
        self.fn = fn
        self.lead = lead
        self.metadata = metadata
        self.room = room


#: The entry of a shape that has no shape function (its events take the general route).
GENERAL: Final = ShapeEntry(lambda *args: None, b"", b"", -1)

R_co = TypeVar("R_co", covariant=True)


class TieredEncoder(Protocol[R_co]):
    """What :func:`encode_dict` needs of an encoder: its caches, its codec and five format rules.

    ``_scopes`` maps a header to its *scope*, a pair: the bytes a shape function writes first and
    the part of the shape the header is (EventHeader: the head bytes, ``None``; TraceLogging:
    ``b""``, the tag, which the metadata holds, ``None`` for tag 0).  ``_traits``: ``None`` for a
    format whose event is one blob, else the traits blob that starts the format's three (traits,
    metadata, data).
    """

    _shapes: ShapeCache
    _recent: dict[object, tuple[Any, ...]]
    _by_keys: dict[tuple[Any, ...], ShapeEntry]
    _by_classes: dict[tuple[Any, ...], ShapeEntry]

    @property
    def _codec(self) -> Codec: ...

    @property
    def _scopes(self) -> Mapping[HeaderValue, tuple[bytes, Any]]: ...

    @property
    def _traits(self) -> bytes | None: ...

    def _new_scope(self, header: HeaderValue, /) -> tuple[bytes, Any]:
        """The scope of a header not in ``_scopes`` (kept there when worth it); ``ValueError``
        when it is out of its ranges."""

    def _interpreted(
        self, name: str, event: Mapping[Any, Any], skip: str | None, scope: tuple[bytes, Any], /
    ) -> tuple[R_co | None, list[tuple[tuple[str, int], bytes]] | None]:
        """:func:`walk` and the format's limits: the event (``None``: the general route) and the
        field metadata it built."""

    def _entry_parts(
        self, name: str, template: list[tuple[str, int, None]], scope: tuple[bytes, Any], /
    ) -> tuple[bytes, bytes, int] | None:
        """A hot shape's entry but its function (:class:`ShapeEntry`'s lead, metadata and room)
        for these typed fields, ``None`` when they break the format's limits (:data:`GENERAL`)."""

    def _none_kinds(self, name: str, /) -> Mapping[str, int] | None:
        """The keys of ``name`` written in a nullable form, with the kind of their ``None``
        (:meth:`ShapeCache.written`); ``None``: no such key."""

    def encode_fields(self, name: str, fields: list[Any], header: HeaderValue = ..., /) -> R_co | None:
        """The general route."""


def encode_dict(
    self: TieredEncoder[R_co],
    name: str,
    event: Mapping[Any, Any],
    skip: str | None,
    header: HeaderValue = INFO_HEADER,
) -> R_co | None:
    """``encode_fields(name, dict_fields(event.items(), skip), header)``, byte for byte, faster.

    ``event``'s items are the fields, except ``exc_info`` and the key ``skip`` (``None``: none
    skipped).  A hot shape (``str`` keys, values of the classes of
    :data:`structlog_etw.write.shapes.SHAPE_KINDS`, written :data:`~structlog_etw.write.shapes.SHAPE_HOT`
    times) is written by its layout's function straight from the dict's values, with the
    metadata cached with it; a shape without an entry yet by the interpreted route
    (:func:`~structlog_etw.write.shapes.walk`).  Anything else (another value class, a value the
    function cannot write, an event past its budget) takes the route of ``encode_fields``,
    which compiles nothing.  Same error contract as ``encode_fields``.
    """
    try:
        scope = self._scopes.get(header)  # a known header's (plain ones and recent others)
    except TypeError:  # an id of an unhashable type
        scope = None
    if scope is None:
        scope = self._new_scope(header)  # ValueError outside its ranges
    lead, part = scope  # the bytes a function writes first; the header's part of the shape
    key: tuple[Any, ...] | None = None
    entry: ShapeEntry | None = None
    try:
        # the name's last shape: no key to build and hash (kept for headers of no part only)
        recent = self._recent.get(name) if part is None else None
        if recent is not None and recent[0] == skip and list(event) == recent[1]:
            key, entry = recent[2], recent[3]
        else:
            key = (name, part, skip, *event)
            entry = self._by_keys.get(key)
            if entry is not None and entry is not GENERAL and part is None:
                self._shapes.remember(name, key, entry, list(event))
        if entry is not None:
            fn = entry.fn  # (a call of a local: an attribute called directly is not specialised)
            out = fn(event, lead, entry.lead)
            if out is None:  # the values' classes are not the ones of the first entry
                entry = self._by_classes.get((*key, *map(type, event.values())))
                if entry is not None:
                    fn = entry.fn
                    out = fn(event, lead, entry.lead)
            if out is not None and len(out) <= entry.room:  # type: ignore[union-attr]
                if self._traits is None:  # one blob per event
                    return out  # type: ignore[return-value]
                return (self._traits, entry.metadata, out)  # type: ignore[union-attr,return-value]
    except Exception:  # a value the shape function does not write: the general route decides
        pass
    return _general_routes(self, name, event, skip, header, scope, key, entry)


class BaseEncoder:
    """What both encoders share: :func:`encode_dict` (the tier dispatcher) with the tables it
    reads, and :meth:`encode`, the five-argument form of ``encode_fields``.

    The tables are slots (read on every event; a class attribute read through an instance costs
    more on 3.11): the shape entries (``_shapes`` and its dicts), the format's header -> scope
    table and its traits blob (``None``: one blob per event), see :class:`TieredEncoder`.
    """

    __slots__ = ("_by_classes", "_by_keys", "_recent", "_scopes", "_shapes", "_traits")

    def __init__(
        self, shapes: ShapeCache, scopes: Mapping[HeaderValue, tuple[bytes, Any]], traits: bytes | None
    ) -> None:
        # (name, scope part, skip, *keys) -> the entry built for the value classes seen first;
        # (name, scope part, skip, *keys, *classes) -> the entries of other classes
        self._shapes = shapes
        self._by_keys: dict[tuple[Any, ...], ShapeEntry] = self._shapes.first
        self._by_classes: dict[tuple[Any, ...], ShapeEntry] = self._shapes.by_class
        self._recent = self._shapes.recent  # event name -> its last shape entry (ShapeCache.remember)
        self._scopes = scopes
        self._traits = traits

    encode_dict = encode_dict

    def encode(
        self: TieredEncoder[R_co],
        name: str,
        fields: list[Any],
        level: int = 4,
        opcode: int = 0,
        tag: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> R_co | None:
        """``encode_fields(name, fields, Header(level, opcode, tag, activity_id, related_id))``."""
        return self.encode_fields(name, fields, Header(level, opcode, tag, activity_id, related_id))


def _general_routes(
    self: TieredEncoder[R_co],
    name: str,
    event: Mapping[Any, Any],
    skip: str | None,
    header: HeaderValue,
    scope: tuple[bytes, Any],
    key: tuple[Any, ...] | None,
    entry: ShapeEntry | None,
) -> R_co | None:
    """:func:`encode_dict` of an event no entry wrote: the interpreted route, else the general
    one; a written event counts its shape towards an entry (:meth:`ShapeCache.written`)."""
    out: R_co | None = None
    fresh: list[tuple[tuple[str, int], bytes]] | None = None
    if entry is not GENERAL and type(name) is str:  # no function for this shape yet
        try:
            out, fresh = self._interpreted(name, event, skip, scope)
        except Exception:  # a value it does not write: the general route decides
            out = None
    if out is None:
        out = self.encode_fields(name, dict_fields(event.items(), skip), header)
    if out is not None and key is not None:  # written: count the shape towards an entry
        codec = self._codec
        codec.functions.earn()
        with contextlib.suppress(Exception):
            hot = self._shapes.written(
                key, name, event, skip, fresh, codec.remember, GENERAL, codec.functions,
                self._none_kinds(name), codec.null_of,
            )  # fmt: skip
            if hot is not None:
                made = GENERAL
                parts = None if hot.fn is None else self._entry_parts(name, hot.template, scope)
                if parts is not None and hot.fn is not None:
                    made = ShapeEntry(hot.fn, *parts)
                self._shapes.put(hot.key, made, hot.first, hot.chars, len(made.metadata))
    return out


def shape_entry(
    encoder: TieredEncoder[object],
    name: str,
    event: Mapping[Any, Any],
    skip: str | None = None,
    *,
    header: HeaderValue = INFO_HEADER,
) -> ShapeEntry | None:
    """The entry :func:`encode_dict` writes this event with: its shape's entry for the values'
    classes, :data:`GENERAL` for a shape it writes by the general route, ``None`` when the shape
    has no entry (yet).  For tests and diagnostics: it reads the caches and changes nothing."""
    scope = encoder._scopes.get(header)
    if scope is None:
        scope = encoder._new_scope(header)
    key = (name, scope[1], skip, *event)
    entry = encoder._by_keys.get(key)
    if entry is not None and entry.fn(event, scope[0], entry.lead) is None:
        other = encoder._by_classes.get((*key, *map(type, event.values())))
        if other is not None or entry is not GENERAL:  # GENERAL: the general route, no other entry
            return other
    return entry
