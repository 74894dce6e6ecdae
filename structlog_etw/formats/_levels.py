"""ETW levels, opcodes and keywords: the level tables, the :class:`Level` and :class:`Opcode`
numbers both formats share, and the ranges of a level and a keyword.

One home for the structlog surface (method names, ``min_level``), the stdlib bridge (level
numbers), the provider (the levels registered up front, the keyword check at set-up), the
activities (Start and Stop opcodes), both encoders and what reads their events (the CLI's
``--level``, level names, the timeline's activity pairs).  An ETW level is 1 (critical) .. 5
(verbose); a keyword is a 64-bit mask.  Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Final

__all__ = [
    "LEVEL_BY_NAME",
    "LEVEL_NAMES",
    "METHOD_LEVELS",
    "STDLIB_LEVELS",
    "STDLIB_NUMBERS",
    "Level",
    "Opcode",
    "check_keyword",
    "level_from_method",
    "level_from_stdlib",
    "method_for_stdlib",
    "stdlib_level",
    "valid_keyword",
    "valid_level",
]


class Level(IntEnum):
    """An event's severity (ETW's and EventHeader's ``level`` byte; eventheader_types' ``Level``)."""

    LOG_ALWAYS = 0
    CRITICAL_ERROR = 1
    ERROR = 2
    WARNING = 3
    INFORMATIONAL = 4
    VERBOSE = 5


class Opcode(IntEnum):
    """An event's role (ETW's and EventHeader's ``opcode`` byte; eventheader_types' ``Opcode``).

    structlog-etw writes :attr:`INFO` for every event but an activity's first
    (:attr:`ACTIVITY_START`, the only one carrying a related activity id) and last
    (:attr:`ACTIVITY_STOP`); the rest name what other providers write.
    """

    INFO = 0
    ACTIVITY_START = 1
    ACTIVITY_STOP = 2
    COLLECTION_START = 3
    COLLECTION_STOP = 4
    EXTENSION = 5
    REPLY = 6
    RESUME = 7
    SUSPEND = 8
    SEND = 9
    RECEIVE = 240


#: ETW level -> its name: the structlog method and the stdlib level of that severity.
LEVEL_NAMES: Final[Mapping[int, str]] = {1: "critical", 2: "error", 3: "warning", 4: "info", 5: "debug"}
#: ETW level -> the stdlib ``logging`` number of its name (``CRITICAL`` 50 .. ``DEBUG`` 10).
STDLIB_NUMBERS: Final[Mapping[int, int]] = {1: 50, 2: 40, 3: 30, 4: 20, 5: 10}
#: structlog method name -> ETW level: the five names and their aliases; unknown names mean 5.
METHOD_LEVELS: Final[Mapping[str, int]] = {
    **{name: level for level, name in LEVEL_NAMES.items()},
    "fatal": 1,
    "exception": 2,
    "err": 2,
    "warn": 3,
    "msg": 4,
    "log": 4,
    "notset": 5,
}
#: Level name -> stdlib number, for a minimum level given by name (``min_level="info"``).
STDLIB_LEVELS: Final[Mapping[str, int]] = {
    **{
        name: STDLIB_NUMBERS[level]
        for name, level in METHOD_LEVELS.items()
        if name not in ("err", "log", "notset")  # not level names
    },
    "notset": 0,
}
#: The level names a person types (the CLI's ``--level``), in level order; ``verbose`` is ETW's 5.
LEVEL_BY_NAME: Final[Mapping[str, int]] = {
    **{
        name: METHOD_LEVELS[name]
        for name in ("critical", "fatal", "error", "warning", "warn", "info", "debug")
    },
    "verbose": 5,
}


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
    for level, number in STDLIB_NUMBERS.items():
        if levelno >= number:
            return level
    return 5


def method_for_stdlib(levelno: int) -> str:
    """The method name of the ETW level a stdlib number maps to (25 -> ``"info"``)."""
    return LEVEL_NAMES[level_from_stdlib(levelno)]


def stdlib_level(level: int | str) -> int:
    """A minimum level given as a stdlib number or a level name (``"info"``) -> the number.

    Raises ``ValueError`` for an unknown name, ``TypeError`` for anything but ``int``/``str``.
    """
    if isinstance(level, str):
        try:
            return STDLIB_LEVELS[level.lower()]
        except KeyError:
            raise ValueError(f"min_level: unknown level name {level!r}") from None
    if type(level) is not int:
        raise TypeError(f"min_level must be an int or a level name, got {level!r}")
    return level


# --- ranges ------------------------------------------------------------------------------------

_U64: Final = 1 << 64


def valid_keyword(value: object) -> bool:
    """Whether *value* can be an event keyword: an ``int`` (not ``bool``) in [0, 2**64)."""
    return type(value) is int and 0 <= value < _U64


def valid_level(value: object) -> bool:
    """Whether *value* can be an event level override: an ``int`` (not ``bool``) in 1..255."""
    return type(value) is int and 1 <= value <= 255


def check_keyword(value: object, what: str = "keyword") -> int:
    """Return *value* if it is a valid keyword, else raise ``ValueError`` naming *what* (set-up time)."""
    if not valid_keyword(value):
        raise ValueError(f"{what} must be an int in [0, 2**64), got {value!r}")
    return value  # type: ignore[return-value]  # checked: an int
