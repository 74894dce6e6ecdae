"""The process registry: every provider of the process, the backend factory, ``close_all``, fork.

Every :class:`~structlog_etw.Provider` joins the registry when it is made, by
:func:`~structlog_etw.get_provider` or by its constructor, and leaves it when it is collected
(the registry holds it weakly; a provider :func:`~structlog_etw.get_provider` made is also held
by name, for the process's life, so the same name gives the same provider).  What the registry
does with its members:

* :meth:`Registry.set_factory` routes every member that writes where the OS would (no backend of
  the program's own) to the factory's backends: how ``capture_etw_events()`` captures them all;
* :meth:`Registry.close_all` closes every member (at exit, or when the application asks), for
  good: a provider looked up afterwards is closed from the start;
* after ``fork()`` every member renews its locks in the child (another thread of the parent may
  have held one at the moment of the fork), and so does the registry.

A member is handed in with the callbacks the registry calls (held as weak methods, so the
registry never keeps a member alive); the registry knows nothing else about providers, and the
backend factory is handed to the members it routes, never read from a global by them.

Set-up paths hold a :class:`~structlog_etw._util.counters.Guard`: a signal handler or ``__del__`` that
re-enters them (``close_all()`` in a SIGTERM handler while the main thread makes a provider) runs
without waiting.
"""

from __future__ import annotations

import itertools
import os
import uuid
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .._util.counters import Guard

if TYPE_CHECKING:
    from ..backends.base import Backend

__all__ = ["REGISTRY", "BackendFactory", "Registry", "SetAside"]

#: ``f(provider_name, group, provider_id) -> backend``: how :func:`set_backend_factory` builds
#: backends (``provider_id``: the GUID EventRegister would receive, for TraceLogging backends).
BackendFactory = Callable[[str, "str | None", uuid.UUID], "Backend[Any]"]


class _Member:
    """What the registry keeps of one provider: when it joined, and weak methods to call."""

    __slots__ = ("after_fork", "close", "route", "serial")

    def __init__(
        self,
        serial: int,
        close: Callable[[], None],
        after_fork: Callable[[], None],
        route: Callable[[BackendFactory | None], None] | None,
    ) -> None:
        self.serial = serial
        self.close = weakref.WeakMethod(close)
        self.after_fork = weakref.WeakMethod(after_fork)
        self.route = None if route is None else weakref.WeakMethod(route)


def _call(method: weakref.WeakMethod[Any] | None, *args: Any) -> None:
    fn = None if method is None else method()
    if fn is not None:
        fn(*args)


class SetAside(NamedTuple):
    """What :meth:`Registry.set_aside` took out of the registry (members still held weakly)."""

    named: dict[str, Any]
    members: weakref.WeakKeyDictionary[Any, _Member]
    closed_all: bool
    factory: BackendFactory | None


class Registry:
    """Every provider of the process (weakly), the named ones (strongly), the backend factory."""

    def __init__(self) -> None:
        #: Set-up lock (registration, look-up by name, factory switches, close_all).
        self.guard = Guard()
        #: The providers :func:`get_provider` made or adopted, by name.
        self.named: dict[str, Any] = {}
        #: The backend factory of :func:`set_backend_factory` (None: the OS backends).
        self.factory: BackendFactory | None = None
        #: Set by :meth:`close_all`, for good: providers looked up afterwards are closed from the start.
        self.closed_all = False
        self._members: weakref.WeakKeyDictionary[Any, _Member] = weakref.WeakKeyDictionary()
        self._serial = itertools.count()

    def add(
        self,
        provider: Any,
        close: Callable[[], None],
        after_fork: Callable[[], None],
        route: Callable[[BackendFactory | None], None] | None,
    ) -> None:
        """Make ``provider`` a member (``route`` None: it keeps the backend the program gave it)."""
        member = _Member(next(self._serial), close, after_fork, route)
        self._members[provider] = member  # one C-level dict store: no lock needed

    def members(self) -> list[Any]:
        """Every live provider of the process, in the order they were made."""
        pairs = sorted(self._members.items(), key=lambda item: item[1].serial)
        return [p for p, _ in pairs]

    def open_named(self, name: str) -> Any | None:
        """The open provider called ``name`` that :func:`get_provider` should give, or None:
        the named one, else the first open member made by the constructor (adopted by name)."""
        prov = self.named.get(name)
        if prov is not None and (not prov.closed or self.closed_all):
            return prov
        for prov in self.members():
            if prov.name == name and not prov.closed:
                self.named[name] = prov
                return prov
        return None

    def set_factory(self, factory: BackendFactory | None) -> BackendFactory | None:
        """Route every routable member to ``factory``'s backends; the previous factory."""
        owned = self.guard.enter()
        try:
            previous, self.factory = self.factory, factory
            routes = [m.route for m in self._members.values() if m.route is not None]
        finally:
            if owned:
                self.guard.leave()
        for route in routes:
            _call(route, factory)
        return previous

    def close_all(self) -> None:
        """Close every member, for good (see :func:`structlog_etw.close_all`)."""
        owned = self.guard.enter()
        try:
            self.closed_all = True
            closers = [m.close for m in self._members.values()]
        finally:
            if owned:
                self.guard.leave()
        for close in closers:
            _call(close)

    def set_aside(self) -> SetAside:
        """Empty the registry (names, members, ``close_all``'s mark; the factory stays) and
        return what it held, for :meth:`put_back` (``structlog_etw.testing.isolated_providers``)."""
        owned = self.guard.enter()
        try:
            held = SetAside(dict(self.named), self._members.copy(), self.closed_all, self.factory)
            self.named.clear()
            self._members.clear()
            self.closed_all = False
        finally:
            if owned:
                self.guard.leave()
        return held

    def put_back(self, held: SetAside) -> None:
        """Close every member that joined since :meth:`set_aside`, then hold what *held* holds
        again, the factory included (no member is routed: each kept its backend)."""
        owned = self.guard.enter()
        try:
            # resolved now: the named ones may be held by nothing but ``named``, cleared below
            closers = [m.close() for m in self._members.values()]
            self.named.clear()
            self.named.update(held.named)
            self._members.clear()
            self._members.update(held.members)
            self.closed_all = held.closed_all
            self.factory = held.factory
        finally:
            if owned:
                self.guard.leave()
        for close in closers:
            if close is not None:
                close()

    def after_fork_in_child(self) -> None:
        """Fresh locks for the registry and every member (the child of a fork has one thread)."""
        self.guard.renew()
        for member in list(self._members.values()):
            _call(member.after_fork)


#: The registry of this process.
REGISTRY = Registry()

if hasattr(os, "register_at_fork"):  # pragma: no branch (absent on Windows)
    os.register_at_fork(after_in_child=REGISTRY.after_fork_in_child)
