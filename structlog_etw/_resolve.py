"""Levels and keywords as the structlog surface resolves them (no structlog import).

* :func:`level_from_method` - structlog method name -> ETW level (1 critical .. 5 verbose).
* :func:`level_from_stdlib` - stdlib ``logging`` level number (custom levels too) -> ETW level.
* :func:`valid_keyword` / :func:`valid_level` - the range checks the control keys use.
* :class:`KeywordsByLogger` - logger name (or dotted-name prefix) -> keyword.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "METHOD_LEVELS",
    "KeywordsByLogger",
    "level_from_method",
    "level_from_stdlib",
    "valid_keyword",
    "valid_level",
]

#: structlog method name -> ETW level.
METHOD_LEVELS: Final[Mapping[str, int]] = {
    "critical": 1,
    "fatal": 1,
    "error": 2,
    "exception": 2,
    "err": 2,
    "warning": 3,
    "warn": 3,
    "info": 4,
    "msg": 4,
    "log": 4,
    "debug": 5,
    "notset": 5,
}

_U64: Final = 1 << 64


def level_from_method(method_name: str) -> int:
    """ETW level for a structlog method name (``log``/``msg``/``info`` 4); unknown names -> 5."""
    return METHOD_LEVELS.get(method_name, 5)


def level_from_stdlib(levelno: int) -> int:
    """ETW level for a stdlib ``logging`` level number, custom numeric levels included.

    ``CRITICAL`` (50) and above -> 1, ``ERROR`` (40..49) -> 2, ``WARNING`` (30..39) -> 3,
    ``INFO`` (20..29) -> 4, ``DEBUG`` and below (..19) -> 5.  A value between two standard
    levels maps to the ETW level of the standard level just below it (25 -> informational),
    i.e. a custom level is never promoted to a more severe ETW level than it reaches.
    """
    if levelno >= 50:
        return 1
    if levelno >= 40:
        return 2
    if levelno >= 30:
        return 3
    if levelno >= 20:
        return 4
    return 5


def valid_keyword(value: object) -> bool:
    """Whether *value* can be an event keyword: an ``int`` (not ``bool``) in [0, 2**64)."""
    return type(value) is int and 0 <= value < _U64


def valid_level(value: object) -> bool:
    """Whether *value* can be an event level override: an ``int`` (not ``bool``) in 1..255."""
    return type(value) is int and 1 <= value <= 255


class KeywordsByLogger:
    """Map logger names to keywords: ``{"db": 0x2, "http": 0x4}``.

    A key matches the logger of that exact name and every logger below it in the dotted
    hierarchy (``"db"`` matches ``db`` and ``db.pool`` but not ``dbx``), the way stdlib
    logging names nest; the longest matching key wins.  A key ending in ``"*"`` matches any
    name starting with what precedes the star (``"app_*"`` matches ``app_web``).

    Invalid mappings raise ``TypeError``/``ValueError`` at construction (set-up time).
    Lookups never raise; results are cached (logger names are few and fixed in a program).
    """

    __slots__ = ("_cache", "_exact", "_prefixes")

    _CACHE_MAX: Final = 4096

    def __init__(self, mapping: Mapping[str, int] | None = None) -> None:
        exact: dict[str, int] = {}
        prefixes: list[tuple[str, int]] = []
        for name, keyword in (mapping or {}).items():
            if not isinstance(name, str) or not name.rstrip("*"):
                raise TypeError(f"keywords_by_logger: logger names must be non-empty str, got {name!r}")
            if not valid_keyword(keyword):
                raise ValueError(
                    f"keywords_by_logger[{name!r}]: keyword must be an int in [0, 2**64), got {keyword!r}"
                )
            if name.endswith("*"):
                prefixes.append((name[:-1], keyword))
            else:
                exact[name] = keyword
        prefixes.sort(key=lambda item: len(item[0]), reverse=True)
        self._exact = exact
        self._prefixes = tuple(prefixes)
        self._cache: dict[str, int | None] = {}

    def __bool__(self) -> bool:
        return bool(self._exact or self._prefixes)

    def keywords(self) -> tuple[int, ...]:
        """Every keyword the mapping can produce (for registering them up front), sorted."""
        return tuple(sorted({*self._exact.values(), *(kw for _, kw in self._prefixes)}))

    def lookup(self, name: object) -> int | None:
        """The keyword for logger *name*, or ``None`` when no key matches (or *name* is no ``str``)."""
        if type(name) is not str:
            return None
        try:
            return self._cache[name]
        except KeyError:
            pass
        result = self._resolve(name)
        if len(self._cache) < self._CACHE_MAX:
            self._cache[name] = result
        return result

    def _resolve(self, name: str) -> int | None:
        best: int | None = None
        best_len = -1
        probe = name
        while probe:
            if probe in self._exact:
                best, best_len = self._exact[probe], len(probe)
                break
            cut = probe.rfind(".")
            if cut < 0:
                break
            probe = probe[:cut]
        for prefix, keyword in self._prefixes:
            if len(prefix) > best_len and name.startswith(prefix):
                return keyword
        return best

    def __repr__(self) -> str:
        items = {**self._exact, **{p + "*": k for p, k in self._prefixes}}
        return f"KeywordsByLogger({items!r})"
