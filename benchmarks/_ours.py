"""structlog-etw set up for the benchmarks: loggers, encoders and two backends.

:class:`WritevBackend` does per event what the Linux user_events backend does: one
``os.write(fd, write_index + event)`` system call (TraceLogging: ``os.writev(fd, (write_index,
traits, metadata, data))``), here into ``/dev/null``, and its enable words are what the user_events backend
hands out: a ``memoryview`` over a ctypes ``uint32``.  The enabled rows use it, so our side pays a
system call per event as the JSON baselines (which write to ``/dev/null``) do.

:class:`SinkBackend` accepts the encoded event and returns 0: the library's own cost without the
system call (the "sink" rows).  The real user_events backend with a perf session attached is
measured in the guest by ``benchmarks/guest.py``.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import struct
import sys
import tempfile
from typing import Any

import structlog
from _baselines import FIVE_FIELDS

from structlog_etw.backends.base import Slot
from structlog_etw.formats.eventheader import tracepoint_name
from structlog_etw.provider._provider import Provider
from structlog_etw.surface._renderer import EtwRenderer
from structlog_etw.write.fields import to_fields

__all__ = [
    "SinkBackend",
    "WritevBackend",
    "early_drop_logger",
    "encoder_namespace",
    "fast_path_logger",
    "provider",
    "renderer_logger",
]

_ids = itertools.count()
_WRITE_INDEX = struct.Struct("=i")


def _enable_word(enabled: bool) -> memoryview:
    """An enable word as the user_events backend makes it: a memoryview over a ctypes uint32."""
    array = (ctypes.c_uint32 * 1)(1 if enabled else 0)
    return memoryview(array).cast("B").cast("I")


def _provider_word(enabled: bool) -> memoryview:
    """The provider word as the user_events backend makes it: a memoryview over a ctypes uint64
    (one bit per tracepoint; here all of them follow *enabled*)."""
    array = (ctypes.c_uint64 * 1)(1 if enabled else 0)
    return memoryview(array).cast("B").cast("Q")


def _devnull_tracefs() -> str:
    """A directory whose ``user_events_data`` is /dev/null (for the real backend's write)."""
    where = tempfile.mkdtemp(prefix="bench-tracefs-")
    os.symlink(os.devnull, os.path.join(where, "user_events_data"))
    return where


class WritevBackend:
    """One system call per event into /dev/null, as user_events does: ``os.write(fd, write_index +
    event)`` (TraceLogging: ``os.writev(fd, (write_index, traits, metadata, data))``).

    EventHeader on Linux: ``write`` IS :meth:`UserEventsBackend.write` of a real backend whose
    ``user_events_data`` is /dev/null, so the enabled rows pay the descriptor check before every
    write as production does (``checked=False``: the write as it was before that check, the base
    its cost is measured against)."""

    def __init__(self, name: str, fmt: str, enabled: bool, checked: bool = True) -> None:
        self.format = fmt
        self.name = name
        self._word = _enable_word(enabled)
        self.any_word = _provider_word(enabled)
        self._fd = os.open(os.devnull, os.O_WRONLY)
        self._next = itertools.count(1)
        if checked and fmt == "eventheader" and sys.platform.startswith("linux"):
            from structlog_etw.backends.user_events import UserEventsBackend  # noqa: PLC0415

            self._real = UserEventsBackend(name, tracefs=_devnull_tracefs())
            self.write = self._real.write  # type: ignore[method-assign]  # the production write, bound

    def open_slot(self, level: int, keyword: int) -> Slot:
        return Slot(level, keyword, self._word, _WRITE_INDEX.pack(next(self._next)))

    def write(
        self,
        slot: Slot,
        event: Any,
        opcode: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> int:
        try:
            if type(event) is bytes:  # EventHeader: one buffer, as UserEventsBackend.write
                os.write(self._fd, slot.handle + event)
            else:  # TraceLogging: (traits, metadata, data), the EventWriteTransfer descriptors
                os.writev(self._fd, (slot.handle, *event))
        except OSError as e:
            return e.errno or 5
        return 0

    def close(self) -> None:
        self._word[0] = 0
        self.any_word[0] = 0


class SinkBackend:
    """Accepts every event and returns 0 (no system call); slots are enabled or not, forever."""

    def __init__(self, name: str, fmt: str, enabled: bool) -> None:
        self.format = fmt
        self.name = name
        self._word = _enable_word(enabled)
        self.any_word = _provider_word(enabled)

    def open_slot(self, level: int, keyword: int) -> Slot:
        return Slot(level, keyword, self._word, tracepoint_name(self.name, level, keyword))

    def write(
        self,
        slot: Slot,
        event: object,
        opcode: int = 0,
        activity_id: bytes | None = None,
        related_id: bytes | None = None,
    ) -> int:
        return 0

    def close(self) -> None:
        self._word[0] = 0
        self.any_word[0] = 0


class UncheckedWritevBackend(WritevBackend):
    """:class:`WritevBackend` without the descriptor check (the base of its cost)."""

    def __init__(self, name: str, fmt: str, enabled: bool) -> None:
        super().__init__(name, fmt, enabled, checked=False)


_BACKENDS = {"writev": WritevBackend, "writev_unchecked": UncheckedWritevBackend, "sink": SinkBackend}


def provider(enabled: bool, fmt: str = "eventheader", backend: str = "writev") -> Provider:
    """A fresh provider (unique name) with a :class:`WritevBackend` (or ``backend="sink"``)."""
    name = f"Bench{next(_ids)}"
    return Provider(name, backend=_BACKENDS[backend](name, fmt, enabled))


def fast_path_logger(enabled: bool, fmt: str = "eventheader", backend: str = "writev") -> Any:
    """A held logger of ``make_etw_bound_logger`` with ``[merge_contextvars, EtwRenderer]``."""
    from structlog_etw.surface._bound_logger import make_etw_bound_logger  # noqa: PLC0415 (lands separately)

    prov = provider(enabled, fmt, backend)
    wrapper = make_etw_bound_logger(prov, min_level=logging.DEBUG)
    return structlog.wrap_logger(
        None,
        wrapper_class=wrapper,
        processors=[structlog.contextvars.merge_contextvars, EtwRenderer(prov.name, provider=prov)],
    ).bind()


def early_drop_logger(enabled: bool, fmt: str = "eventheader", backend: str = "writev") -> Any:
    """A plain structlog BoundLogger whose first processor drops events nobody listens to."""
    from structlog_etw.surface._early_drop import EtwEarlyDrop  # noqa: PLC0415 (lands separately)

    prov = provider(enabled, fmt, backend)
    return structlog.wrap_logger(
        None,
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        processors=[
            EtwEarlyDrop(prov),
            structlog.contextvars.merge_contextvars,
            EtwRenderer(prov.name, provider=prov),
        ],
    ).bind()


def renderer_logger(enabled: bool, fmt: str = "eventheader", backend: str = "writev") -> Any:
    """structlog's filtering bound logger + merge_contextvars + EtwRenderer (no wrapper, no early drop)."""
    prov = provider(enabled, fmt, backend)
    return structlog.wrap_logger(
        None,
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        processors=[structlog.contextvars.merge_contextvars, EtwRenderer(prov.name, provider=prov)],
    ).bind()


def encoder_namespace(fmt: str) -> dict[str, Any]:
    """An encoder of ``fmt`` and the 5 typical fields, typed (for encoding-only figures)."""
    if fmt == "tracelogging":
        from structlog_etw.write.tracelogging import TraceLoggingEncoder  # noqa: PLC0415

        enc: Any = TraceLoggingEncoder("BenchEncoder")
    else:
        from structlog_etw.write.eventheader import EventHeaderEncoder  # noqa: PLC0415

        enc = EventHeaderEncoder()
    return {
        "enc": enc,
        "fields": to_fields(FIVE_FIELDS.items()),
        "kw": dict(FIVE_FIELDS),
        "to_fields": to_fields,
    }


def console_beside_tracing_logger(enabled: bool, stream: Any) -> Any:
    """The console-beside-tracing composition (docs/console-and-tracing.md): trace events at
    every level, JSON lines to *stream* at info and above."""
    from structlog_etw.surface._bound_logger import make_etw_bound_logger  # noqa: PLC0415

    prov = provider(enabled)
    renderer = EtwRenderer(prov.name, provider=prov, passthrough="info")
    return structlog.wrap_logger(
        structlog.WriteLogger(stream),
        wrapper_class=make_etw_bound_logger(renderer, min_level=logging.DEBUG),
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
            structlog.processors.JSONRenderer(),
        ],
    ).bind()


#: The steps of the disabled path measured one by one (docs/performance.md's attribution table).
DISABLED_STEPS = ("signature", "method", "provider_word", "chain_check")


def disabled_step_logger(step: str) -> Any:
    """The fast-path logger of :func:`fast_path_logger` (nobody listening) whose ``info`` stops
    after *step* of the disabled path: ``signature`` returns at once with structlog's signature
    (``self, event, *args, **kw``: every keyword of the call compared with the parameter names),
    ``method`` returns at once with ours (``self`` and ``event`` positional-only),
    ``provider_word`` after reading the provider word, ``chain_check`` after the chain's identity
    test too (the real method's disabled path, without its ``try``)."""
    log = fast_path_logger(enabled=False)
    plan = type(log)._etw_plan
    provider_word, at, renderer = plan.any, plan.at, plan.renderer

    def signature(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
        return None

    def method(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
        return None

    def word(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
        if not provider_word.word[0]:
            return None
        return True

    def chain(self: Any, event: Any = None, /, *args: Any, **kw: Any) -> Any:
        if not provider_word.word[0] and self._etw_chain[at] is renderer:
            return None
        return True

    body = {"signature": signature, "method": method, "provider_word": word, "chain_check": chain}[step]
    cls = type(type(log).__name__, (type(log),), {"info": body})
    stepped = object.__new__(cls)  # the logger's own state, set as __init__ sets it (inline values)
    stepped.__init__(log._logger, log._processors, log._context)
    return stepped
