"""A format's codec table: a row per value kind, and every table derived from the rows.

:class:`Row` says how a format writes one kind (its metadata, packer, general-path body,
shape-function :class:`~structlog_etw.write.shapes.Step` and compiled op): the one place a kind
becomes bytes.  :class:`Codec` derives the rest (array metadata and packers, the steps and ops
per layout kind, the interpreted route's table, the layouts' functions, the field-metadata
cache).

Stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple

from .._size_policy import NO_LIMIT, Cuttable, Piece, leading_pieces
from ..fields import ARRAY, NULL, TRUNCATION_MARKER
from ._caches import LayoutFunctions, ShapeCache
from ._generate import Step, layout_function
from ._layout import NONE, NULLABLE, SHAPE_KINDS, shape_kind

__all__ = ["BINARY", "FIELD_NAME_MAX", "LEAD", "TEXT", "WHOLE", "Codec", "Packer", "Row"]

#: The names of the parts a shape function writes before the values (:class:`Codec`): the
#: scope's lead and the entry's (:class:`~structlog_etw.write.shapes.ShapeEntry`).
LEAD: Final = ("h", "m")

#: How the general path's size policy treats a row's :attr:`Row.body`: whole (a fixed-size value),
#: cut as text (it ends with the truncation marker) or cut as a binary.
WHOLE: Final = 0
#: See :data:`WHOLE`: a text (u16 length and UTF-8) that ends with the truncation marker when cut.
TEXT: Final = 1
#: See :data:`WHOLE`: a binary (u16 length and bytes), cut to its first bytes.
BINARY: Final = 2
_MARKER: Final = TRUNCATION_MARKER.encode()

#: A function writing one value (raises for a value it does not write).
Packer = Callable[[Any], bytes]


class Row(NamedTuple):
    """How a format writes one value kind: the one place a kind becomes bytes.

    Everything else the format's encoder uses for the kind (field metadata, the typed-field
    packers, the general path's pieces, the shape functions' steps, the interpreted route's
    packers, the compiled packer's op) is derived from its rows by :class:`Codec`.
    """

    #: The kind (:mod:`structlog_etw.write.fields`'s, or a format's own such as a nullable one).
    kind: int
    #: The field metadata after the field's name (encoding and format bytes).
    meta: bytes
    #: The value, whole (a counted value with its u16 length): the typed-field fast path and the
    #: interpreted route; raises for a value it does not write (the general path decides).
    pack: Packer
    #: The value as the general path writes it: whole, or a counted value's body (no length)
    #: that the size policy may cut (:attr:`cut`); raises when the value cannot be written as
    #: the kind (it is then written as its text, :func:`~structlog_etw.write.fields.normalize`).
    body: Packer
    #: :data:`WHOLE`, :data:`TEXT` or :data:`BINARY`.
    cut: int = WHOLE
    #: How a generated shape function writes it, or ``None`` (no shape function takes the kind).
    step: Step | None = None
    #: The compiled packer's op (a name of :data:`OPS`) writing it as :attr:`step` does, or ``None``.
    op: str | None = None
    #: Logical fields a value takes (TraceLogging's 128-field limit counts binaries twice).
    fields: int = 1
    #: The struct format of a fixed-size value packed by ``struct`` (``""`` for any other): an
    #: array of the kind is packed in one call.
    fixed: str = ""


class Codec:
    """A format's codec table (its :class:`Row` s) and the tables derived from it.

    ``array_meta(row)``: the metadata of an array of the row's kind; ``array_pack(codec, kind)``:
    the packer of such an array (whole, u16 count included).  ``env``: the names the steps use.
    ``walk_none``: whether the interpreted route writes ``None`` (else such an event takes the
    general route).  ``null_of``: a kind's form at a key that has been ``None`` (a format with
    nullable forms), see :meth:`ShapeCache.written`.  A layout's function is
    ``f(event, *LEAD)``: :func:`encode_dict` passes the scope's lead and the entry's.
    """

    __slots__ = (
        "env",
        "fields",
        "functions",
        "lead",
        "meta",
        "null_of",
        "ops",
        "packers",
        "rows",
        "steps",
        "walker",
    )

    def __init__(
        self,
        rows: Iterable[Row],
        array_meta: Callable[[Row], bytes],
        array_pack: Callable[[Codec, int], Packer],
        env: Mapping[str, Any] | None = None,
        walk_none: bool = True,
        null_of: Callable[[int], int] | None = None,
    ) -> None:
        self.rows: dict[int, Row] = {row.kind: row for row in rows}
        arrays = [row for row in self.rows.values() if row.kind & NULLABLE == 0]
        #: kind -> field metadata after the name, scalar and array kinds.
        self.meta: dict[int, bytes] = {row.kind: row.meta for row in self.rows.values()}
        self.meta.update({row.kind | ARRAY: array_meta(row) for row in arrays})
        #: kind -> the typed-field fast path's packer, scalar and array kinds.
        self.packers: dict[int, Packer] = {row.kind: row.pack for row in self.rows.values()}
        self.packers.update({row.kind | ARRAY: array_pack(self, row.kind) for row in arrays})
        #: layout kind -> the generated shape functions' :class:`Step`.
        self.steps: dict[int, Step] = {
            shape_kind(row.kind): row.step for row in self.rows.values() if row.step is not None
        }
        #: layout kind -> the compiled packer's op name.
        self.ops: dict[int, str] = {shape_kind(row.kind): row.op for row in self.rows.values() if row.op}
        #: The interpreted route's table (:func:`walk`): the row of each class of :data:`SHAPE_KINDS`.
        self.walker: dict[type, tuple[int, Packer, int]] = {}
        for cls, kind in SHAPE_KINDS.items():
            row = self.rows.get(NULL if kind == NONE else kind)
            if cls is not str and row is not None and (walk_none or kind != NONE):
                self.walker[cls] = (row.kind, row.pack, row.fields)
        self.lead = LEAD
        self.env: dict[str, Any] = dict(env or {})
        self.null_of = null_of
        #: The layouts' shape functions (compiled packer or generated function).
        self.functions = LayoutFunctions(self.layout_function)
        #: (field name, kind) -> a field's whole metadata, shared by every encoder of the format,
        #: filled only from written events (:meth:`remember`).
        self.fields = ShapeCache(8192, 2 << 20)

    def layout_function(self, kinds: tuple[int, ...]) -> Callable[..., bytes | None]:
        """The function of a layout: :func:`layout_function` with this codec's ops and steps."""
        return layout_function(kinds, self.ops, self.steps, self.lead, self.env)

    def piece(self, kind: int, value: Any, limit: int = NO_LIMIT) -> Piece:
        """One value as the general path writes it: fixed bytes, or a cuttable text, binary or array.

        ``limit`` is the event's budget: an array's elements past it are not built, a text or
        binary longer is taken up to ``limit + 1`` characters or bytes (more than can ever be
        kept: the value is cut all the same, only the work follows what is written).  Raises when
        ``value`` cannot be written as ``kind`` (:func:`~structlog_etw.write.fields.normalize` then
        writes its text instead).
        """
        if kind & ARRAY:
            base = kind & ~ARRAY
            if base not in self.rows:
                raise ValueError(f"not an array kind: {kind!r}")
            return Cuttable.array(leading_pieces(value, lambda item: self.piece(base, item, limit), limit))
        row = self.rows[kind]
        if row.cut == TEXT:
            if type(value) is str and len(value) > limit:
                value = value[: limit + 1]
            return Cuttable(row.body(value), marker=_MARKER)
        if row.cut == BINARY:
            body = row.body(value)
            return Cuttable(body if len(body) <= limit else body[: limit + 1])
        return row.body(value)

    def remember(self, fresh: list[tuple[tuple[str, int], bytes]]) -> None:
        """Keep the field metadata of a written event (names up to :data:`FIELD_NAME_MAX`)."""
        for key, meta in fresh:
            if len(key[0]) <= FIELD_NAME_MAX:
                self.fields.put(key, meta, True, len(key[0]), len(meta))


#: The longest field name whose metadata :attr:`Codec.fields` keeps.
FIELD_NAME_MAX: Final = 256
