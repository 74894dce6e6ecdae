"""Tried as production runs it, against the real kernel (marker ``kernel``): gunicorn with
``--preload`` and sync workers (a graceful ``SIGHUP`` reload, then ``SIGTERM`` whose handlers run
hooks that log), uvicorn with ``--workers 2``, and a provider registered in a legacy (shared-GIL)
subinterpreter that is then destroyed.

perf records the provider's tracepoint for the whole run; each case checks that perf got every
event the processes logged (by name and count), and that no process counted anything as dropped
or failed (each writes its ``stats()`` when it ends).
"""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import PerfSession, wait_until

from structlog_etw import Provider
from structlog_etw.backends.user_events import delete_tracepoint

pytestmark = pytest.mark.kernel

PerfFactory = Callable[..., PerfSession]
REPO = Path(__file__).resolve().parents[2]

#: The application both servers load: it logs at import (in gunicorn's master with --preload),
#: per request, and in its exit hooks; every process writes its stats() into OUT when it ends.
_COMMON = """
import json, os
import structlog
from structlog_etw import EtwRenderer, get_provider

NAME, OUT = os.environ["SLETW_NAME"], os.environ["SLETW_OUT"]
structlog.configure(processors=[EtwRenderer(NAME)], logger_factory=structlog.ReturnLoggerFactory())
log = structlog.get_logger()


def save_stats(role):
    s = get_provider(NAME).stats()
    keep = {k: s[k] for k in ("written", "dropped", "errors")}
    with open(os.path.join(OUT, f"{role}-{os.getpid()}.json"), "w") as f:
        json.dump(dict(keep, reason=get_provider(NAME).status.reason.value), f)
"""

WSGI_APP = (
    _COMMON
    + """
log.info("preloaded", pid=os.getpid())


def app(environ, start_response):
    log.info("request", pid=os.getpid())
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode()]
"""
)

GUNICORN_CONF = """
import os


def worker_exit(server, worker):  # runs in the worker, from its SIGTERM / SIGQUIT handling
    from app import log, save_stats
    log.info("worker_exit", pid=os.getpid())
    save_stats("worker")


def on_exit(server):  # runs in the master once SIGTERM stopped everything
    from app import log, save_stats
    log.info("master_exit", pid=os.getpid())
    save_stats("master")
"""

ASGI_APP = (
    _COMMON
    + """

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                log.info("startup", pid=os.getpid())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                log.info("shutdown", pid=os.getpid())
                save_stats("worker")
                await send({"type": "lifespan.shutdown.complete"})
                return
    log.info("request", pid=os.getpid())
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": str(os.getpid()).encode()})
"""
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int) -> int | None:
    """One request; the pid of the worker that answered, None if nobody did."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as resp:
            return int(resp.read())
    except OSError:
        return None


def _answered(port: int, served: list[int]) -> bool:
    """One request; its worker's pid appended to ``served`` when it was answered."""
    pid = _get(port)
    if pid is not None:
        served.append(pid)
    return pid is not None


def _stats(out: Path) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}


def _server(tmp_path: Path, name: str, app: str, files: dict[str, str]) -> tuple[Path, dict[str, str]]:
    out = tmp_path / "stats"
    out.mkdir()
    (tmp_path / "app.py").write_text(app)
    for fname, text in files.items():
        (tmp_path / fname).write_text(text)
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}", SLETW_NAME=name, SLETW_OUT=str(out))
    env["HOME"] = str(tmp_path)  # gunicorn puts its control socket there (the guest's /root is read-only)
    return out, env


class _Server:
    """A server process, stopped with SIGTERM when the ``with`` block ends (killed if it hangs)."""

    def __init__(self, cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
        self.stderr = ""

    def __enter__(self) -> _Server:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.proc.send_signal(signal.SIGTERM)
            self.stderr = self.proc.communicate(timeout=120)[1]
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.stderr += self.proc.communicate()[1]
            if exc[0] is not None:  # the test failed inside the block: show what the server said
                sys.stderr.write(f"server stderr:\n{self.stderr}\n")

    def assert_clean_exit(self) -> None:
        assert self.proc.returncode == 0, self.stderr
        assert "Traceback" not in self.stderr, self.stderr


def _assert_clean(stats: dict[str, dict[str, Any]]) -> None:
    for who, s in stats.items():
        assert s["dropped"] == {} and s["errors"] == {}, (who, s)
        assert s["reason"] == "os", (who, s)


def test_gunicorn_preload_sync_workers_reload_and_terminate(
    tmp_path: Path, provider_name: str, perf_session: PerfFactory
) -> None:
    """gunicorn --preload -w 2: workers forked from the master that made the provider log every
    request through what they inherited; SIGHUP replaces them (the old ones log worker_exit);
    SIGTERM ends all (worker_exit in each, master_exit): perf has every event, nothing dropped."""
    out, env = _server(tmp_path, provider_name, WSGI_APP, {"gunicorn_conf.py": GUNICORN_CONF})
    port = _free_port()
    owner = Provider(provider_name)  # the tracepoints exist before perf starts
    served: list[int] = []
    try:
        with perf_session([f"{provider_name}_L4K1"], label="gunicorn") as session:
            wait_until(lambda: owner.enabled(4, 1), what="perf to enable the tracepoint")
            cmd = [sys.executable, "-m", "gunicorn", "--preload", "-w", "2", "-k", "sync"]
            cmd += [
                "-b",
                f"127.0.0.1:{port}",
                "-c",
                "gunicorn_conf.py",
                "--graceful-timeout",
                "60",
                "app:app",
            ]
            with _Server(cmd, tmp_path, env) as server:
                wait_until(lambda: _answered(port, served), timeout=120, what="gunicorn to answer")
                served.extend(p for p in (_get(port) for _ in range(3)) if p)
                first = set(served)
                server.proc.send_signal(signal.SIGHUP)  # graceful reload: new workers, old ones stop
                new: list[int] = []

                def a_new_worker_answers() -> bool:
                    pid = _get(port)
                    if pid:
                        served.append(pid)
                        if pid not in first:
                            new.append(pid)
                    return bool(new)

                wait_until(a_new_worker_answers, timeout=120, what="a worker of the reload")
                served.extend(p for p in (_get(port) for _ in range(3)) if p)
                wait_until(lambda: len(list(out.glob("worker-*.json"))) >= 2, timeout=120, what="old workers")
            # SIGTERM: each worker logs worker_exit, then the master logs master_exit
        server.assert_clean_exit()
        stats = _stats(out)
        workers = [s for k, s in stats.items() if k.startswith("worker-")]
        assert len(workers) == 4 and "master" in " ".join(stats), sorted(stats)
        _assert_clean(stats)
        got = Counter(ev.name for ev in session.events())
        expected = Counter(preloaded=1, request=len(served), worker_exit=4, master_exit=1)
        assert got == expected, (got, len(served))
        # each worker's written count is its own requests plus its worker_exit
        per_worker = Counter(served)
        for key, s in stats.items():
            if key.startswith("worker-"):
                pid = int(key.split("-")[1].split(".")[0])
                # preloaded (the count inherited from the master) + its requests + worker_exit
                assert s["written"] == 1 + per_worker[pid] + 1, (key, s)
    finally:
        owner.close()


def test_uvicorn_two_workers(tmp_path: Path, provider_name: str, perf_session: PerfFactory) -> None:
    """uvicorn --workers 2 (spawned workers, each its own provider): startup, every request and
    the shutdown of both workers after SIGTERM reach perf; nothing dropped."""
    out, env = _server(tmp_path, provider_name, ASGI_APP, {})
    port = _free_port()
    owner = Provider(provider_name)
    served: list[int] = []
    try:
        with perf_session([f"{provider_name}_L4K1"], label="uvicorn") as session:
            wait_until(lambda: owner.enabled(4, 1), what="perf to enable the tracepoint")
            cmd = [sys.executable, "-m", "uvicorn", "app:app", "--workers", "2", "--port", str(port)]
            cmd += ["--host", "127.0.0.1", "--lifespan", "on"]
            cmd += ["--timeout-worker-healthcheck", "600"]  # spawned workers import slowly under emulation
            with _Server(cmd, tmp_path, env) as server:
                wait_until(
                    lambda: _answered(port, served), timeout=600, what="uvicorn to answer"
                )  # spawned workers import under emulation
                served.extend(p for p in (_get(port) for _ in range(5)) if p)
            # SIGTERM: each worker's lifespan shutdown logs
        server.assert_clean_exit()
        stats = _stats(out)
        assert len(stats) == 2, sorted(stats)
        _assert_clean(stats)
        got = Counter(ev.name for ev in session.events())
        assert got == Counter(startup=2, request=len(served), shutdown=2), (got, len(served))
        assert sum(s["written"] for s in stats.values()) == 2 + len(served) + 2
    finally:
        owner.close()


def _interpreter(version: str) -> str:
    """A python{version} that runs (PATH, else pyenv), as the noxfile finds it; a failure if none."""
    pyenv = os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")
    for candidate in [shutil.which(f"python{version}"), *sorted(glob.glob(pyenv), reverse=True)]:
        if (
            candidate
            and subprocess.run([candidate, "-c", ""], capture_output=True, check=False).returncode == 0
        ):
            return candidate
    pytest.fail(f"python{version} is needed for the subinterpreter test (pyenv install {version})")


SUBINTERPRETER = """
import os, sys
NAME = sys.argv[1]
try:
    import _interpreters as interpreters  # CPython 3.13
    interp = interpreters.create("legacy")
except ImportError:
    import _xxsubinterpreters as interpreters  # CPython 3.12
    interp = interpreters.create(isolated=False)
code = f'''
import sys
sys.path.insert(0, {sys.argv[2]!r})
from structlog_etw import get_provider
from structlog_etw.write.fields import to_fields
p = get_provider({NAME!r})
assert p.status.reason.value == "os", p.status
p.write(p.slot(4, 1), "from_subinterpreter", to_fields([("n", 1)]))
'''
failed = interpreters.run_string(interp, code)  # 3.13 returns what the code raised; 3.12 raises
assert failed is None, failed
from structlog_etw.backends.user_events import delete_tracepoint
try:
    delete_tracepoint(NAME + "_L3K1")
    print("DELETE_WHILE_ALIVE ok")
except OSError as exc:
    print("DELETE_WHILE_ALIVE", exc.errno)
interpreters.destroy(interp)  # its atexit close_all unregisters every enable word
try:  # EBUSY if the dead interpreter's words were still registered; the kernel may have
    delete_tracepoint(NAME + "_L3K1")  # deleted the unused tracepoint itself (ENOENT)
    print("AFTER_DESTROY deleted")
except OSError as exc:
    print("AFTER_DESTROY", exc.errno)
"""


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_a_provider_in_a_destroyed_legacy_subinterpreter_leaves_no_enable_word(
    tmp_path: Path, provider_name: str, version: str
) -> None:
    """A legacy (shared-GIL) subinterpreter registers a provider and is destroyed: its
    registrations are gone with it (the tracepoint, busy while it lived, can then be deleted), so
    the kernel never writes into the freed enable words."""
    python = _interpreter(version)
    name = f"{provider_name}V{version.replace('.', '')}"
    script = tmp_path / "sub.py"
    script.write_text(SUBINTERPRETER)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [python, str(script), name, str(REPO)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "DELETE_WHILE_ALIVE 16" in proc.stdout, proc.stdout  # EBUSY: registered while it lives
    # unregistered: deleted now, or already deleted by the kernel with its last registration
    gone = ("AFTER_DESTROY deleted", f"AFTER_DESTROY {errno.ENOENT}")
    assert any(line in proc.stdout for line in gone), proc.stdout
    with pytest.raises(OSError):  # really gone
        delete_tracepoint(name + "_L3K1")
