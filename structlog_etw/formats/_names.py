"""The one NUL rule of every name written, which both formats' name rules start from.

:func:`clean_name` is re-exported by :mod:`structlog_etw.write.fields`, its public home.
"""

from __future__ import annotations

__all__ = ["clean_name"]


def clean_name(name: str) -> str:
    """``name`` with each NUL replaced by ``_``: the one NUL rule of every name written.

    NUL ends a name in both formats' metadata, so no event or field name may hold one; ``_``
    (EventHeader's replacement for ``;`` too) keeps the name the same in both formats and plain
    text in every trace tool.  The formats' other rules follow it (EventHeader: ``;`` -> ``_``;
    both: lone surrogates -> U+FFFD when encoded).
    """
    return name.replace("\0", "_") if "\0" in name else name
