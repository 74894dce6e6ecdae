"""Activities: Start/Stop events and activity ids that follow threads' contexts and asyncio tasks.

``etw_activity(target, "DownloadFile", url=u)`` is a context manager, an async
context manager and a decorator (for plain and ``async def`` functions).  On
entry it makes a fresh activity id, writes a *Start* event (opcode 1) carrying
that id and, as related id, the id of the activity it is nested in (if any),
and makes it the current activity (:data:`CURRENT_ACTIVITY`), so that
the renderer stamps every event logged inside with it.  On exit it writes a
*Stop* event (opcode 2) with the same id and name, the fields as last updated
by :meth:`Activity.record`, ``duration_ns`` and ``outcome``, then restores the
previous activity with the ContextVar token.

The ``target`` is a structlog logger (anything with an ``info`` method; the
Start/Stop events then go through its processor chain, so bound keys and
``etw_keyword`` apply and the :class:`~structlog_etw.EtwRenderer` writes them), a
stdlib ``logging.Logger`` / ``LoggerAdapter`` (fields and control keys go in
``extra=``, for an :class:`~structlog_etw.EtwHandler`), or a provider
(:class:`~structlog_etw.Provider`, written to directly; its control keys are checked
as the renderer checks them: an invalid one is counted and replaced by its default).

Activity ids (:func:`new_activity_id`) are 16 bytes in RFC 4122 byte order::

    bytes 0..7    per-process random (os.urandom), version nibble 4 in byte 6
    bytes 8..15   (per-process random 62-bit value XOR a per-process counter),
                  variant bits 10 in the top of byte 8

Every id of one process differs from every other (the counter); two processes
share the first 58 random bits with probability ~2**-58 per pair.  The seed and
counter are renewed in a fork child (``os.register_at_fork``), so a child never
repeats its parent's ids.  Making one id is a counter step, an XOR and two
``int.to_bytes``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, Final, TypeVar, cast

from ..formats._levels import Level, Opcode
from ..provider._provider import Provider
from ..write.fields import to_fields
from . import _correlation as _otel
from ._resolve import CONTROL_KEYS, event_header, event_name, keyword_or, level_or

__all__ = ["CURRENT_ACTIVITY", "Activity", "current_activity_id", "etw_activity", "new_activity_id"]

#: ``(activity_id, related_id)`` of the innermost activity (16 raw bytes each, RFC 4122 order),
#: or ``None`` outside any activity.  Set and reset only here; read by the renderer.
#: Its name must not start with ``structlog_``: ``structlog.contextvars.merge_contextvars`` copies
#: every such variable into the event dict (the ids would become an ``etw_activity`` field).
CURRENT_ACTIVITY: ContextVar[tuple[bytes, bytes | None] | None] = ContextVar(
    "structlog-etw.current-activity", default=None
)

#: The opcodes of an activity's first and last event, as plain ints (what ``etw_opcode`` takes).
_START: Final = int(Opcode.ACTIVITY_START)
_STOP: Final = int(Opcode.ACTIVITY_STOP)

_VERSION_4: Final = 0x0000_0000_0000_4000  # version nibble in byte 6 of the high half
_HI_MASK: Final = 0xFFFF_FFFF_FFFF_0FFF
_VARIANT: Final = 0x8000_0000_0000_0000  # 10xx.... in byte 8
_LO_MASK: Final = 0x3FFF_FFFF_FFFF_FFFF

_F = TypeVar("_F", bound=Callable[..., Any])


def _seed() -> tuple[bytes, int, Iterator[int]]:
    rnd = int.from_bytes(os.urandom(16), "big")
    hi = ((rnd >> 64) & _HI_MASK) | _VERSION_4
    lo = rnd & _LO_MASK
    return hi.to_bytes(8, "big"), lo, itertools.count(1)


# One tuple, replaced as a whole, so a reader never sees a half-renewed state.
_state: tuple[bytes, int, Iterator[int]] = _seed()


def _reseed() -> None:
    global _state
    _state = _seed()


if hasattr(os, "register_at_fork"):  # pragma: no branch (absent on Windows)
    os.register_at_fork(after_in_child=_reseed)


def new_activity_id() -> bytes:
    """A fresh 16-byte activity id (RFC 4122 byte order), unique within and across processes.

    See the module docstring for the layout.  Cheap (no system call) and thread-safe.
    """
    hi, lo, counter = _state
    return hi + (((lo ^ next(counter)) & _LO_MASK) | _VARIANT).to_bytes(8, "big")


def current_activity_id() -> uuid.UUID | None:
    """The id of the innermost activity of the current context, or ``None`` outside any activity."""
    cur = CURRENT_ACTIVITY.get()
    return None if cur is None else uuid.UUID(bytes=cur[0])


class _Scope:
    """One entered activity: its ids, token, start time and the fields the Stop event will carry."""

    __slots__ = ("activity_id", "fields", "otel_token", "related_id", "stack_token", "start_ns", "token")

    def __init__(
        self,
        activity_id: bytes,
        related_id: bytes | None,
        fields: dict[str, Any],
        token: Token[tuple[bytes, bytes | None] | None],
    ) -> None:
        self.activity_id = activity_id
        self.related_id = related_id
        self.fields = fields
        self.token = token
        self.otel_token: Token[bytes | None] | None = None
        self.stack_token: Token[tuple[_Scope, ...]] | None = None
        self.start_ns = time.perf_counter_ns()


class Activity:
    """An activity: see :func:`etw_activity`, which makes these.

    Entered with ``with`` / ``async with`` it is the running activity: :attr:`id`,
    :attr:`related_id` and :meth:`record` refer to it.  Used as a decorator,
    each call of the decorated function runs its own fresh activity (with the
    decorator's name and fields), so a decorated function may run concurrently
    in many threads and tasks.

    One object may also be entered by several threads or asyncio tasks at once: what it is
    running is kept per context (a ``ContextVar`` of its own), so each ``with``/``async with``
    gets its own id, and its Stop event carries its own id and the fields its own code recorded.
    Nested re-entry of the same object in one context works (LIFO) and starts a new activity
    nested in the first.  Outside a running activity, :attr:`id` is the last one finished in any
    context.
    """

    __slots__ = ("_controls", "_fields", "_last", "_name", "_otel", "_running", "_scopes", "_target")

    def __init__(
        self,
        target: object,
        name: str,
        controls: dict[str, Any],
        fields: dict[str, Any],
        otel: bool | None = None,
    ) -> None:
        self._target = target
        self._otel = otel
        self._name = name
        self._controls = controls
        self._fields = fields
        #: The scopes this object runs in the current context, innermost last.
        self._scopes: ContextVar[tuple[_Scope, ...]] = ContextVar("structlog-etw.activity", default=())
        #: Every scope running in any context, oldest first: the exit of a context that never
        #: entered (a context manager handed to another context) stops the newest of them.
        self._running: list[_Scope] = []
        self._last: _Scope | None = None

    # -- the running activity -------------------------------------------------------------------

    def _scope(self) -> _Scope | None:
        """The innermost scope of this object in the current context, else the last finished."""
        scopes = self._scopes.get()
        return scopes[-1] if scopes else self._last

    @property
    def id(self) -> uuid.UUID | None:
        """The running (else the last finished) activity's id; ``None`` before the first entry."""
        scope = self._scope()
        return None if scope is None else uuid.UUID(bytes=scope.activity_id)

    @property
    def related_id(self) -> uuid.UUID | None:
        """The id of the activity this one is nested in (``None`` at top level or before entry)."""
        scope = self._scope()
        if scope is None or scope.related_id is None:
            return None
        return uuid.UUID(bytes=scope.related_id)

    @property
    def name(self) -> str:
        """The activity's name: the name of its Start and Stop events."""
        return self._name

    def record(self, **fields: Any) -> None:
        """Add or update fields that the Stop event will carry (like OpenTelemetry's ``span.record``).

        Outside a running activity this updates the fields the next Start event will carry.
        """
        scopes = self._scopes.get()
        (scopes[-1].fields if scopes else self._fields).update(fields)

    # -- context manager ----------------------------------------------------------------------------

    def __enter__(self) -> Activity:
        from_span = _otel.span_activity_id(self._otel)
        activity_id = new_activity_id() if from_span is None else from_span
        parent = CURRENT_ACTIVITY.get()
        related_id = None if parent is None else parent[0]
        token = CURRENT_ACTIVITY.set((activity_id, related_id))
        scope = _Scope(activity_id, related_id, dict(self._fields), token)
        if from_span is not None:
            scope.otel_token = _otel.SPAN_ID_TAKEN.set(from_span)
        scope.stack_token = self._scopes.set((*self._scopes.get(), scope))
        self._running.append(scope)
        self._emit(_START, scope, scope.fields)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        scopes = self._scopes.get()
        if scopes:
            scope = scopes[-1]
            try:
                self._scopes.reset(scope.stack_token)  # type: ignore[arg-type]  # set on entry
            except ValueError:  # a copy of the entering context: drop it here too
                self._scopes.set(scopes[:-1])
        elif self._running:  # entered in another context only: stop the newest running scope
            scope = self._running[-1]
        else:  # exit without enter: nothing to stop
            return
        with contextlib.suppress(ValueError):
            self._running.remove(scope)
        self._last = scope
        try:
            duration = time.perf_counter_ns() - scope.start_ns
            outcome = "ok" if exc_type is None else exc_type.__name__
            stop_fields = dict(scope.fields)
            stop_fields["duration_ns"] = duration
            stop_fields["outcome"] = outcome
        except Exception:  # pragma: no cover - defensive
            stop_fields = {}
        self._emit(_STOP, scope, stop_fields)
        # ValueError: exited in another context than the one it was entered in (e.g. a
        # context manager handed between tasks); this context never saw the activity set.
        with contextlib.suppress(ValueError):
            CURRENT_ACTIVITY.reset(scope.token)
        if scope.otel_token is not None:
            with contextlib.suppress(ValueError):
                _otel.SPAN_ID_TAKEN.reset(scope.otel_token)

    async def __aenter__(self) -> Activity:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- decorator ----------------------------------------------------------------------------------

    def _fresh(self) -> Activity:
        return Activity(self._target, self._name, self._controls, self._fields, self._otel)

    def __call__(self, func: _F) -> _F:
        """Decorate ``func`` (plain or ``async def``): every call runs inside its own fresh activity."""
        if inspect.iscoroutinefunction(func):
            afunc = cast(Callable[..., Awaitable[Any]], func)

            @functools.wraps(func)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                async with self._fresh():
                    return await afunc(*args, **kwargs)

            return cast(_F, awrapper)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return func(*args, **kwargs)

        return cast(_F, wrapper)

    # -- writing --------------------------------------------------------------------------------------

    def _emit(self, opcode: int, scope: _Scope, fields: dict[str, Any]) -> None:
        """Write a Start/Stop event; never raises (a failure is the provider's to count)."""
        try:
            target = self._target
            if isinstance(target, Provider):
                self._write_provider(target, opcode, scope, fields)
                return
            # Through the logger's chain: the renderer takes the ids from CURRENT_ACTIVITY
            # (set to (id, parent) for the whole activity) and the opcode from etw_opcode.
            kw = {**fields, **self._controls, "etw_opcode": opcode}
            if isinstance(target, (logging.Logger, logging.LoggerAdapter)):
                target.info(self._name, extra=kw)  # EtwHandler: extra= keys are fields/controls
            else:
                kw.pop("event", None)  # structlog's positional event argument is the name
                target.info(self._name, **kw)  # type: ignore[attr-defined]
        except Exception:
            pass

    def _write_provider(self, provider: Provider, opcode: int, scope: _Scope, fields: dict[str, Any]) -> None:
        """Write straight to *provider*, with the control keys checked as the renderer checks them."""
        controls = self._controls
        invalid = provider.count_invalid
        slot = provider.slot(
            level_or(controls.get("etw_level"), Level.INFORMATIONAL, invalid),
            keyword_or(controls.get("etw_keyword"), provider.default_keyword, invalid),
        )
        if not slot.word[0]:
            return
        _, tags, name = event_header(
            None, controls.get("etw_tags"), controls.get("etw_name"), provider.format, invalid
        )
        provider.write(
            slot,
            event_name(self._name) if name is None else name,
            to_fields(fields.items()),
            opcode=opcode,
            tag=tags,
            activity_id=scope.activity_id,
            related_id=scope.related_id if opcode == _START else None,
        )

    def __repr__(self) -> str:
        return f"<Activity {self._name!r} id={self.id}>"


#: The control keys ``etw_activity`` takes (the opcode is the activity's own: Start 1, Stop 2).
_CONTROLS: Final = frozenset(CONTROL_KEYS) - {"etw_opcode"}


def etw_activity(target: object, name: str, /, **fields: Any) -> Activity:
    """An activity named ``name`` written through ``target`` (a structlog logger or a provider).

    Usable as ``with``, ``async with`` and as a decorator of plain or ``async def`` functions::

        with etw_activity(log, "DownloadFile", url=url) as act:
            log.info("chunk", n=1)          # carries act's activity id
            act.record(bytes=123)           # the Stop event carries bytes=123

    Start event: opcode 1, the fields given here, a fresh activity id and as related id the
    enclosing activity's id.  Stop event: opcode 2, same name and id, the fields (updated by
    :meth:`Activity.record`) plus ``duration_ns`` (int, nanoseconds on the monotonic
    ``time.perf_counter_ns`` clock) and ``outcome`` (``"ok"``, or the exception type's
    ``__name__`` when the body raised; the exception propagates unchanged).

    Level and keyword: through a logger, both events are logged with ``info`` and so get the
    bound ``etw_keyword`` (else the renderer's default keyword) and level 4; through a provider,
    level 4 and the provider's default keyword.  The control keys ``etw_keyword``,
    ``etw_level``, ``etw_tags`` and ``etw_name`` may be passed here to override them.
    ``etw_otel=True``/``False`` decides for this activity whether it takes its id from the
    current OpenTelemetry span (default: ``structlog_etw.use_otel_activity_ids``, off; see
    docs/otel.md); any other value means the default (counted ``invalid["etw_otel"]`` when
    ``target`` is a provider).  Nothing here raises at log time.
    """
    otel = fields.pop("etw_otel", None)
    controls = {k: fields.pop(k) for k in list(fields) if k in _CONTROLS}
    if otel is not None and type(otel) is not bool:  # e.g. from data: never asked for its truth
        if isinstance(target, Provider):
            target.count_invalid("etw_otel")
        otel = None  # the default (structlog_etw.use_otel_activity_ids)
    return Activity(target, name, controls, fields, otel)
