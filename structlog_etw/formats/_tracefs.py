"""The numbers of a plain tracepoint's tracefs ``format``, here so that the perf.data reader
(:mod:`structlog_etw.perf.tracefs_format`, their public home) and the read side's writers
(:mod:`structlog_etw.read.writers`) share them without the writers importing perf/."""

from __future__ import annotations

from typing import Final

# Field value formats (how perf-decode prints a plain field).
FMT_NONE: Final = 0
FMT_HEX: Final = 1
FMT_UNSIGNED: Final = 2
FMT_SIGNED: Final = 3
FMT_STRING: Final = 4

# Array kinds of a field.
ARRAY_NONE: Final = 0
ARRAY_FIXED: Final = 1
ARRAY_DYNAMIC: Final = 2  # __data_loc
ARRAY_REL: Final = 3  # __rel_loc

#: What :class:`~structlog_etw.perf.tracefs_format.FieldsUnpack` gives for each field: its
#: text's bytes (a ``char[]`` field, up to its end: the text ends at the first NUL), its bytes
#: (structs, byte arrays), an int.
UNPACKED_TEXT: Final = 0
UNPACKED_BYTES: Final = 1
UNPACKED_INT: Final = 2
