"""Forks, process pools and threads in tests, bounded so that nothing can hang the suite.

* :func:`fork_child` runs a function in a fork child that always ends with ``os._exit``: a child
  whose code raises never returns into pytest (where it would run the rest of the suite a second
  time and, with ``faulthandler_timeout`` set, wait forever in
  ``faulthandler.cancel_dump_traceback_later`` for the parent's watchdog thread, which the
  child does not have).  :func:`wait_child` waits for it with a deadline and kills it after.
* :func:`bounded_pool` is a ``ProcessPoolExecutor`` whose exit never waits for a stuck worker:
  ``with ProcessPoolExecutor(...)`` calls ``shutdown(wait=True)``, which waits forever (on a
  futex, in the executor's manager thread) for a work item a deadlocked fork child never runs.
* :func:`foreign_threads` lists the Python threads other than the main one: a fork made while
  one is alive may give a child that inherits a lock it holds and waits for it forever.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")

#: Seconds :func:`wait_child` waits by default: far above what a child of the tests takes on a
#: loaded machine; it only tells a deadlocked child from a slow one.
CHILD_TIMEOUT = 60.0


def foreign_threads() -> list[threading.Thread]:
    """The live Python threads of this process other than the main thread."""
    return [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()]


def threads_left_running(before: set[threading.Thread], grace: float) -> list[threading.Thread]:
    """The threads alive now that were not in *before* and are still alive after waiting up to
    *grace* seconds in all for them to finish."""
    left = [t for t in foreign_threads() if t not in before]
    deadline = time.monotonic() + grace
    for t in left:
        t.join(max(0.0, deadline - time.monotonic()))
    return [t for t in left if t.is_alive()]


def fork_child(body: Callable[[], object]) -> int:
    """Fork; the child runs ``body()`` and exits 0 if it returned a true value, 1 if a false one,
    2 if it raised.  The child never returns from here.  The parent gets the child's pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child's coverage is not collected)
        code = 2
        try:
            code = 0 if body() else 1
        finally:
            os._exit(code)
    return pid


def wait_child(pid: int, timeout: float = CHILD_TIMEOUT) -> int | None:
    """The exit code of child ``pid`` (negative: killed by that signal), or ``None`` if it was still
    running after ``timeout`` seconds: then it was killed with SIGKILL (and reaped)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.005)


class _TrackingPool(concurrent.futures.ProcessPoolExecutor):
    """A process pool that keeps the futures it handed out."""

    def __init__(self, workers: int, method: str) -> None:
        super().__init__(workers, mp_context=multiprocessing.get_context(method))
        self.futures: list[concurrent.futures.Future[Any]] = []

    def submit(
        self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> concurrent.futures.Future[_T]:
        future = super().submit(fn, *args, **kwargs)
        self.futures.append(future)
        return future


@contextlib.contextmanager
def bounded_pool(method: str, workers: int = 1) -> Iterator[concurrent.futures.ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` with the *method* start method whose exit never hangs.

    With ``fork``, no other Python thread may be alive (``AssertionError`` otherwise): the child
    could inherit a lock one of them holds.  On exit, workers that still have work (a
    ``result(timeout=...)`` gave up on them) are killed before the pool is shut down, so the
    shutdown does not wait for them.
    """
    if method == "fork":
        others = foreign_threads()
        assert not others, f"a fork with other threads alive may deadlock the child: {others}"
    pool = _TrackingPool(workers, method)
    try:
        yield pool
    finally:
        if all(f.done() for f in pool.futures):
            pool.shutdown(wait=True)
        else:
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                with contextlib.suppress(Exception):
                    process.kill()
            pool.shutdown(wait=False, cancel_futures=True)
