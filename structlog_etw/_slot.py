"""One (level, keyword) of a provider and the enable word that says whether anyone listens."""

from __future__ import annotations

from typing import Any

__all__ = ["Slot"]


class Slot:
    """A provider's (level, keyword) pair as a backend sees it.

    ``word[0]`` is non-zero while at least one trace session wants events at this
    level and keyword.  On Linux ``word`` is memory the kernel updates (the
    user_events enable word); on Windows a one-element array the enable callback
    rewrites.  Reading ``word[0]`` is the whole per-call enabled check.
    """

    __slots__ = ("handle", "keyword", "level", "word")

    def __init__(self, level: int, keyword: int, word: Any, handle: Any = None) -> None:
        self.level = level
        self.keyword = keyword
        self.word = word
        self.handle = handle

    @property
    def enabled(self) -> bool:
        """Whether a session currently wants events at this level and keyword."""
        return bool(self.word[0])

    def __repr__(self) -> str:
        return f"Slot(level={self.level}, keyword={self.keyword:#x}, enabled={self.enabled})"
