"""The suite's own guards against hanging (tests/helpers/forking.py, tests/conftest.py): a stuck
process-pool worker, a fork child whose code raises or waits forever, a thread a test leaves
running.  Each fails a test within a bound where the unguarded code waits forever."""

from __future__ import annotations

import os
import threading

import pytest

from tests.helpers.forking import bounded_pool, fork_child, threads_left_running, wait_child
from tests.helpers.hostile import run_bounded

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")

_STUCK_WORKER = r"""
import concurrent.futures, sys, time
from tests.helpers.forking import bounded_pool

with bounded_pool(sys.argv[1]) as pool:
    future = pool.submit(time.sleep, 3600)  # a worker that never finishes (as a deadlocked one)
    try:
        future.result(timeout=1)
    except concurrent.futures.TimeoutError:
        print("gave up")
print("left the pool")
"""

_FAULTHANDLER_CHILD = r"""
import faulthandler, sys
from tests.helpers.forking import fork_child, wait_child

faulthandler.dump_traceback_later(600)  # what pytest's faulthandler_timeout does around each test
pid = fork_child(lambda: faulthandler.cancel_dump_traceback_later() or True)
print(wait_child(pid, timeout=float(sys.argv[1])))
faulthandler.cancel_dump_traceback_later()
"""


class TestBoundedPool:
    """``bounded_pool`` never waits for a worker that does not finish, and forks with no thread alive."""

    @needs_fork
    @pytest.mark.parametrize("method", ["fork", "spawn"])
    def test_a_stuck_worker_does_not_hang_the_exit(self, method: str) -> None:
        """A worker that never returns: ``result(timeout=1)`` gives up and the ``with`` exits (a
        plain ``with ProcessPoolExecutor()`` waits for the worker forever in ``shutdown``)."""
        run = run_bounded(_STUCK_WORKER, method, timeout=90)
        assert not run.hung, "leaving the pool waited for the stuck worker"
        assert run.returncode == 0, run.stderr
        assert run.stdout.split("\n")[:2] == ["gave up", "left the pool"]

    @needs_fork
    def test_a_fork_pool_with_another_thread_alive_is_refused(self) -> None:
        """With another Python thread alive, a fork pool fails at once instead of forking."""
        stop = threading.Event()
        other = threading.Thread(target=stop.wait, args=(30,), name="other")
        other.start()
        try:
            with pytest.raises(AssertionError, match="other threads alive"), bounded_pool("fork"):
                pass  # pragma: no cover (never entered)
        finally:
            stop.set()
            other.join(30)


@needs_fork
class TestForkChild:
    """``fork_child`` children always exit; ``wait_child`` kills one that does not."""

    def test_a_child_whose_code_raises_exits_without_returning(self) -> None:
        """A child whose function raises exits with 2 and never runs the caller's code (pytest's)."""
        r, w = os.pipe()
        try:
            pid = fork_child(lambda: 1 / 0)
            os.write(w, b"%d\n" % os.getpid())  # a child that returned would write its pid too
            code = wait_child(pid, timeout=30)
        finally:
            os.close(w)
        with os.fdopen(r, "rb") as reader:
            written = reader.read().split()
        assert code == 2
        assert written == [b"%d" % os.getpid()]

    def test_the_exit_code_says_what_the_function_returned(self) -> None:
        """A true result exits 0, a false one 1."""
        assert wait_child(fork_child(lambda: True), timeout=30) == 0
        assert wait_child(fork_child(lambda: False), timeout=30) == 1

    def test_a_child_stuck_in_faulthandler_is_killed_at_the_deadline(self) -> None:
        """A child of a process with an armed ``dump_traceback_later`` (pytest's
        ``faulthandler_timeout``) waits forever in ``cancel_dump_traceback_later`` for a watchdog
        thread it does not have: ``wait_child`` kills it at the deadline and returns None."""
        run = run_bounded(_FAULTHANDLER_CHILD, "3", timeout=60)
        assert not run.hung, run.stderr
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["None"]


class TestThreadsLeftRunning:
    """``threads_left_running`` (the check tests/conftest.py makes after every test)."""

    def test_a_thread_still_running_after_the_grace_is_reported(self) -> None:
        """A thread started after the snapshot and still waiting after the grace is named."""
        before = set(threading.enumerate())
        stop = threading.Event()
        leaked = threading.Thread(target=stop.wait, args=(30,), name="leaked", daemon=True)
        leaked.start()
        try:
            assert threads_left_running(before, grace=0.1) == [leaked]
        finally:
            stop.set()
            leaked.join(30)

    def test_a_thread_that_ends_within_the_grace_is_not_reported(self) -> None:
        """A thread that finishes within the grace (a listener stopping) is not left running."""
        before = set(threading.enumerate())
        stop = threading.Event()
        ending = threading.Thread(target=stop.wait, args=(30,), name="ending")
        ending.start()
        stop.set()
        assert threads_left_running(before, grace=30) == []
        assert not ending.is_alive()
