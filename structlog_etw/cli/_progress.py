"""A one-line progress display on stderr for long commands (``decode``, ``record``).

Shown only when stderr is a terminal (and, for ``decode``, stdout is not that terminal too:
there the events themselves show the progress, and a redrawn line would tear them), never
with ``--quiet``; elsewhere nothing is written and nothing wraps the work, so a pipe or a
log file sees no progress bytes and the decode loop pays nothing.  The line is redrawn at most
:data:`INTERVAL` seconds apart and erased when the work ends.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Final, Protocol, TextIO, TypeVar

__all__ = ["INTERVAL", "Progress", "human_bytes", "input_size", "progress_for"]

#: Seconds between two redraws of the line.
INTERVAL: Final = 0.25
#: The decode loop looks at the clock once per this many samples.
_CHECK_EVERY: Final = 1024


class _HasOffset(Protocol):
    @property
    def offset(self) -> int: ...


_S = TypeVar("_S", bound=_HasOffset)


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover - the loop returns


def input_size(path: str) -> int | None:
    """The size of the regular file ``path`` (None for ``-``, a pipe, or what cannot be read)."""
    if path == "-":
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if st.st_size > 0 else None


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """The progress line of ``prog`` on ``stream`` (a terminal); :meth:`show` redraws it when
    :data:`INTERVAL` has passed (``force``: now), :meth:`done` erases it."""

    def __init__(self, prog: str, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.prog = prog
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self._next = self.started
        self._shown = False

    def due(self) -> bool:
        """Whether the line should be redrawn now."""
        return self.clock() >= self._next

    def show(self, text: str, force: bool = False) -> None:
        """Redraw the line with ``text`` (when due, or ``force``)."""
        now = self.clock()
        if not force and now < self._next:
            return
        self._next = now + INTERVAL
        try:
            self.stream.write(f"\r{self.prog}: {text}\x1b[K")
            self.stream.flush()
        except (OSError, ValueError):
            return
        self._shown = True

    def rate(self, count: int) -> float:
        """``count`` per second since the start."""
        elapsed = self.clock() - self.started
        return count / elapsed if elapsed > 0 else 0.0

    def done(self) -> None:
        """Erase the line (when one was drawn)."""
        if self._shown:
            self._shown = False
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def samples(self, samples: Iterable[_S], total: int | None) -> Iterator[_S]:
        """``samples`` passed through, the line showing how far into the ``total`` bytes of the
        input they are (the samples' file offsets) and the events per second."""
        count = 0
        furthest = 0
        try:
            for sample in samples:
                count += 1
                if not count % _CHECK_EVERY and self.due():
                    furthest = max(furthest, sample.offset)
                    self.show(self._decode_text(furthest, total, count))
                yield sample
        finally:
            self.done()

    def _decode_text(self, at: int, total: int | None, count: int) -> str:
        where = human_bytes(at)
        if total:
            where = f"{where} of {human_bytes(total)} ({100 * at // total}%)"
        return f"{where} read, {count:,} events, {self.rate(count):,.0f} events/s"


def progress_for(prog: str, quiet: bool, *, output: TextIO | None = None) -> Progress | None:
    """A :class:`Progress` on stderr when it is a terminal, not ``quiet``, and ``output`` (the
    command's stdout, when it writes events there) is not the same terminal; else None."""
    err = sys.stderr
    if quiet or not _is_terminal(err):
        return None
    if output is not None and _is_terminal(output):
        try:
            if os.path.samestat(os.fstat(output.fileno()), os.fstat(err.fileno())):
                return None
        except (OSError, ValueError, AttributeError):
            return None
    return Progress(prog, err)
