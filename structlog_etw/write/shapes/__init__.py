"""What both encoders share to go from an event dict to bytes: codec tables, tiers, shape functions.

The general route of an event is ``dict_fields(event.items(), skip)`` (one typed field per key)
and then the encoder.  For the keys and value classes nearly every log call has, an encoder can
skip the typed fields: it builds, once per *shape*, a function that takes the event dict itself,
checks each value's class, and packs the values with straight-line code (a ``struct`` call per run
of fixed-size values, the UTF-8 bytes of each string), writing the same bytes the general route
writes.  This package holds the parts both formats share, one private module per role (this module
re-exports their names):

* ``_codec_table``: :class:`Row` and :class:`Codec`, a format's **codec table**, a row per value
  kind (its metadata, packer, general-path body, shape-function :class:`Step` and compiled op),
  and every table derived from the rows (array metadata and packers, the steps and ops per layout
  kind, the interpreted route's table, the layouts' functions, the field-metadata cache);
* ``_tiers``: :func:`encode_dict`, the **tier dispatcher**, both encoders' ``encode_dict``
  (through :class:`BaseEncoder`), speaking to a format through the small :class:`TieredEncoder`
  protocol; :class:`ShapeEntry`: the one kind of shape-cache entry;
* ``_layout``: :data:`SHAPE_KINDS`, the value classes a shape function takes, with the kind the
  type table gives them (``None`` is :data:`NONE`, a null; any other class, a key that is not a
  ``str`` and a dict that is not flat sends the event down the general route), and
  :func:`layout`: the kinds of an event dict's values in order (``SKIP`` for ``exc_info`` and the
  skipped key), or ``None`` when the shape has no shape function;
* ``_generate``: :func:`compile_shape_function`, the generated function for a layout, given how a
  format writes each kind (:class:`Step`).  Its source is built only from the format's step table
  and positions, never from keys or values.  The write side's one code generator (the package's
  one ``exec``); and :func:`compiled_packer`, where the optional compiled module is built
  (:data:`SPEEDUPS`, ``structlog_etw/write/shapes/_speedups.c``, the extension module
  ``structlog_etw.write.shapes._speedups``), a layout's packer in C instead of its generated
  function: the same bytes, ``None`` and errors, for layouts of ``str``/``int``/``float``/
  ``bool``/``None``/``bytes`` values (nothing compiled: a program is the layout's op string; the
  ops are :data:`OPS`, the C module's enum, held equal to it by
  tests/write/shapes/test_speedups.py);
* ``_caches``: :class:`LayoutFunctions`, a format's generated functions, one per layout, compiled
  only once the layout is hot and a compile budget allows it, and :class:`ShapeCache`, an
  encoder's shape entries (shape key -> :class:`ShapeEntry`), made only for shapes written
  :data:`SHAPE_HOT` times, never for a key longer than :data:`MAX_KEY_CHARS`; both bounded by
  count and by bytes;
* ``_walk``: :func:`walk`, the interpreted shape function (a loop, no code compiled) both formats
  run for a layout that has no generated function yet.

**Tiers** (:func:`encode_dict`).  An event dict whose shape has an entry is written by the entry's
function (compiled packer or generated function).  One whose shape has no entry is written by
:func:`walk` when its values are of the classes above, else by the general route (typed fields,
the encoder's non-generated packers): neither compiles anything.  When that route wrote the event,
the shape is *seen*; at its :data:`SHAPE_HOT`-th written event it gets an entry, if its layout has a
function.  A layout gets its function after :data:`LAYOUT_HOT` such promotions were asked for
it, and only if the compile budget has the credit: every general-route event earns one credit
(up to :data:`CREDIT_CAP`), a compile spends :data:`COMPILE_COST`.  A stream of new layouts thus
spends at most about one compile per :data:`COMPILE_COST` general-route events, a bounded share
of its time; a fixed shape is compiled within its first few dozen events and runs at full speed.

Shapes are found by the event's keys compared by equality, as a dict compares them: a key of a
``str`` subclass that equals a ``str`` key shares that key's shape and is written under that name
(the general route writes ``str(key)``, the same text unless the subclass overrides ``__str__``).

A shape function returns ``None`` when a value's class is not the one its shape was built for
(the caller then looks the shape up with the classes in the key) and raises when a value of the
right class cannot be written by the straight-line code (an int past int64, a string with lone
surrogates, a length past u16, a datetime whose ``isoformat`` fails): the caller then takes the
general route, which decides what is written (:func:`~structlog_etw.write.fields.normalize`).

**Threads.**  No change to a shared table here leans on the GIL: the caches keep their books as
every bounded cache does (``_caches``' *Threads*), and lookups are single dict reads, safe on
every build.  docs/reliability.md lists every such place.

Stdlib only (next to :mod:`structlog_etw.write.fields`).
"""

from ._caches import (
    COMPILE_COST,
    CREDIT_CAP,
    LAYOUT_HOT,
    MAX_KEY_CHARS,
    SHAPE_HOT,
    HotShape,
    LayoutFunctions,
    ShapeCache,
    key_chars,
)
from ._codec_table import BINARY, FIELD_NAME_MAX, LEAD, TEXT, WHOLE, Codec, Packer, Row
from ._generate import (
    OPS,
    SPEEDUPS,
    Op,
    Step,
    compile_shape_function,
    compiled_packer,
    layout_function,
)
from ._layout import NONE, NULLABLE, SHAPE_KINDS, SKIP, U16_BYTES, layout, shape_kind
from ._tiers import GENERAL, BaseEncoder, ShapeEntry, TieredEncoder, encode_dict, shape_entry
from ._walk import Walker, walk

__all__ = [
    "BINARY",
    "COMPILE_COST",
    "CREDIT_CAP",
    "FIELD_NAME_MAX",
    "GENERAL",
    "LAYOUT_HOT",
    "LEAD",
    "MAX_KEY_CHARS",
    "NONE",
    "NULLABLE",
    "OPS",
    "SHAPE_HOT",
    "SHAPE_KINDS",
    "SKIP",
    "SPEEDUPS",
    "TEXT",
    "U16_BYTES",
    "WHOLE",
    "BaseEncoder",
    "Codec",
    "HotShape",
    "LayoutFunctions",
    "Op",
    "Packer",
    "Row",
    "ShapeCache",
    "ShapeEntry",
    "Step",
    "TieredEncoder",
    "Walker",
    "compile_shape_function",
    "compiled_packer",
    "encode_dict",
    "key_chars",
    "layout",
    "layout_function",
    "shape_entry",
    "shape_kind",
    "walk",
]
