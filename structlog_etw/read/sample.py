"""What the read side's writers read of a tracepoint sample and of its tracefs format.

The writers (:mod:`structlog_etw.read.writers`) turn perf.data samples into lines.  They name
what they read of a sample by these protocols, not by the perf.data reader's classes, so that
``read/`` depends on no folder above it (docs/architecture.md, "Folder rules"): the reader's
:class:`structlog_etw.perf.datafile.Sample`,
:class:`structlog_etw.perf.tracefs_format.TracepointFormat`,
:class:`structlog_etw.perf.tracefs_format.FormatField` and
:class:`structlog_etw.perf.tracefs_format.FieldsUnpack` are one each (``mypy --strict`` checks it
where the command line hands them to a writer).  Any other source of samples that has these
attributes is one too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["PerfField", "PerfFormat", "PerfSample", "PerfUnpack"]


class PerfSample(Protocol):
    """One tracepoint sample as a writer reads it: where and when it was captured, its data."""

    @property
    def name(self) -> str:
        """``system:event`` (``""`` when the file does not say)."""

    @property
    def time(self) -> int | None:
        """perf's timestamp in nanoseconds (None: the sample has none)."""

    @property
    def realtime_ns(self) -> int | None:
        """The wall-clock time in nanoseconds, where the file records the clock offset."""

    @property
    def cpu(self) -> int | None:
        """The CPU it was captured on."""

    @property
    def pid(self) -> int | None:
        """The process id."""

    @property
    def tid(self) -> int | None:
        """The thread id."""

    @property
    def raw(self) -> bytes:
        """The whole raw data (the common fields first)."""

    @property
    def data(self) -> bytes:
        """The bytes after the common fields (of an EventHeader tracepoint: the event)."""


class PerfField(Protocol):
    """One field of a tracefs format as a writer reads it."""

    @property
    def name(self) -> str:
        """The field's name."""

    @property
    def format(self) -> int:
        """How its value prints (the number
        :class:`structlog_etw.perf.tracefs_format.FormatField` keeps in ``format``: hex, unsigned,
        signed, string or none)."""


class PerfUnpack(Protocol):
    """One unpack of a format's own fields: ``unpack_from(raw, start)`` gives one value per field
    of the kind ``kinds`` names (``UNPACKED_TEXT``, ``UNPACKED_BYTES``, ``UNPACKED_INT``)."""

    @property
    def unpack_from(self) -> Callable[..., tuple[Any, ...]]:
        """``unpack_from(raw, start)`` (also ``offset=`` by keyword): the fields' values."""

    @property
    def start(self) -> int:
        """Where the own fields start in the raw data."""

    @property
    def kinds(self) -> Sequence[int]:
        """What each value is: its text's bytes, its bytes or an int."""


class PerfFormat(Protocol):
    """A tracepoint's tracefs format as a writer reads it."""

    @property
    def system(self) -> str:
        """The tracepoint's system (``user_events`` for user_events)."""

    @property
    def name(self) -> str:
        """The tracepoint's name."""

    @property
    def full_name(self) -> str:
        """``system:name``."""

    @property
    def is_eventheader(self) -> bool:
        """Whether its samples are EventHeader events."""

    @property
    def own_fields(self) -> Sequence[PerfField]:
        """The event's fields after the common ones."""

    def fields_unpack(self, small_unsigned: bool = False) -> PerfUnpack | None:
        """How the own fields are read in one unpack (None: fields of other layouts)."""
