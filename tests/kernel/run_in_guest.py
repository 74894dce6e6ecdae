"""Run every ``kernel``-marked test against a kernel with user_events.

    python tests/kernel/run_in_guest.py [extra pytest args, e.g. -k fork -x]

* If this machine's kernel has user_events (and ``user_events_data`` is writable), run
  ``pytest -m kernel -v`` here.
* Otherwise boot ``<repo>/../shared/kernel/bzImage-*`` (or ``$STRUCTLOG_ETW_KERNEL_IMAGE``)
  with virtme-ng under software emulation and run ``pytest -m kernel -v`` inside that ONE
  guest.  The guest sees this machine's filesystem read-only (so the same interpreter and
  work tree); perf.data files and logs go to ``<repo>/kernel-out`` (``--rwdir``;
  ``$STRUCTLOG_ETW_KERNEL_OUT`` overrides), which is kept for inspection.

The exit code is pytest's.  A missing kernel image, qemu, vng or perf is an error (exit 2)
with a clear message, never a skip.  The interpreter running this script is the one the
guest uses (give it by absolute path; it needs pytest and the project's test dependencies).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_harness import perf_path, user_events_unavailable_reason  # noqa: E402

#: The whole guest run (boot + every kernel test) may take at most this long.
GUEST_TIMEOUT = float(os.environ.get("STRUCTLOG_ETW_GUEST_TIMEOUT", "2700"))


def _fail(msg: str) -> int:
    print(f"run_in_guest: ERROR: {msg}", file=sys.stderr, flush=True)
    return 2


def _kernel_image() -> Path | None:
    env = os.environ.get("STRUCTLOG_ETW_KERNEL_IMAGE")
    if env:
        return Path(env) if Path(env).is_file() else None
    images = sorted((REPO.parent / "shared" / "kernel").glob("bzImage-*"))
    images = [p for p in images if p.is_file() and not p.name.endswith(".sha256")]
    return images[-1] if images else None


def _pytest_args(extra: list[str]) -> list[str]:
    # Only tests/kernel is collected: importing the host suite under emulation costs minutes.
    kernel_dir = str(REPO / "tests" / "kernel")
    args = [sys.executable, "-m", "pytest", "-m", "kernel", "-v", "-p", "no:cacheprovider"]
    return [*args, kernel_dir, *extra]


def _run_relayed(cmd: list[str], env: dict[str, str], timeout: float) -> int | None:
    """Run *cmd* with its output relayed through a pipe; None if it ran past *timeout*.

    qemu opens its stdout chardev (``/proc/self/fd/1``) with O_TRUNC: handed our stdout
    directly, it would truncate a log file that CI or a user redirects this run into.  Behind a
    pipe, everything printed before the guest started stays in the log.
    """
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        pipe = proc.stdout
        assert pipe is not None
        out = sys.stdout.buffer
        while chunk := os.read(pipe.fileno(), 65536):
            out.write(chunk)
            out.flush()
        rc = proc.wait()
    finally:
        expired = not timer.is_alive()
        timer.cancel()
    return None if expired and rc < 0 else rc


def _build_perf_decode(where: Path) -> None:
    """Build Microsoft's perf-decode into ``where`` here, before the guest boots (the guest emulates
    its CPU: building there takes many minutes); the kernel tests that read files with it find it
    there (tests/helpers/perf_tools.py).  A failed build is reported; the tests that need it then
    fail under CI=true and are skipped elsewhere."""
    script = REPO.parent / "shared" / "ref" / "build-perf-decode.sh"
    if not script.is_file():
        print(f"run_in_guest: no {script}: perf-decode not built", flush=True)
        return
    try:
        done = subprocess.run(
            ["bash", str(script), str(where)], capture_output=True, text=True, timeout=1200, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"run_in_guest: perf-decode build failed: {e}", flush=True)
        return
    if done.returncode != 0:
        print(f"run_in_guest: perf-decode build failed (exit {done.returncode}); logs in {where}", flush=True)


def main(argv: list[str]) -> int:
    """Run the kernel tests here or in one virtme-ng guest; return pytest's exit code."""
    python = Path(sys.executable)
    out = Path(os.environ.get("STRUCTLOG_ETW_KERNEL_OUT") or REPO / "kernel-out").resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    env = dict(os.environ, STRUCTLOG_ETW_KERNEL_OUT=str(out), STRUCTLOG_ETW_KERNEL_REQUIRED="1")
    _build_perf_decode(out / "perf-decode")

    reason = user_events_unavailable_reason()
    if reason is None:
        if perf_path() is None:
            return _fail("this kernel has user_events but perf is missing (apt-get install linux-perf)")
        print("run_in_guest: this kernel has user_events; running the kernel tests here", flush=True)
        return subprocess.call(_pytest_args(argv), cwd=REPO, env=env)

    print(f"run_in_guest: {reason}; booting a user_events kernel with virtme-ng", flush=True)
    image = _kernel_image()
    if image is None:
        return _fail(
            f"no kernel image: expected {REPO.parent / 'shared' / 'kernel'}/bzImage-* "
            "(or set STRUCTLOG_ETW_KERNEL_IMAGE)"
        )
    # vng runs virtme-run from PATH: put the interpreter's bin directory first.
    path = os.pathsep.join([str(python.parent), env.get("PATH", "/usr/bin:/bin")])
    env["PATH"] = path
    vng = shutil.which("vng", path=path)
    if vng is None:
        return _fail("vng (virtme-ng) is not installed: pip install virtme-ng")
    if shutil.which("qemu-system-x86_64", path=path) is None:
        return _fail("qemu-system-x86_64 is not installed (Debian: apt-get install qemu-system-x86)")
    if perf_path() is None:
        return _fail("perf is not installed; the guest records events with it (apt-get install linux-perf)")
    if shutil.which("udevadm", path=path + ":/usr/sbin:/sbin") is None:
        return _fail(
            "udev is not installed; vng cannot return the guest's output without it (apt-get install udev)"
        )

    guest_cmd = [
        "/usr/bin/env",
        f"STRUCTLOG_ETW_KERNEL_OUT={out}",
        "STRUCTLOG_ETW_KERNEL_REQUIRED=1",
        "STRUCTLOG_ETW_IN_GUEST=1",
        f"PATH={path}",
        "PYTHONDONTWRITEBYTECODE=1",
        *_pytest_args(argv),
    ]
    # Software emulation unless told that KVM works here (STRUCTLOG_ETW_KVM=1: the GitHub Linux
    # runner's /dev/kvm); nested KVM fails on the development machines.
    kvm = [] if os.environ.get("STRUCTLOG_ETW_KVM") == "1" else ["--disable-kvm"]
    cmd = [
        vng,
        *kvm,
        "-r",
        str(image),
        "--memory",
        "1G",
        "--cpus",
        "2",
        "--cwd",
        str(REPO),
        "--rwdir",
        str(out),
        "--",
        *guest_cmd,
    ]
    print("run_in_guest: " + " ".join(cmd), flush=True)
    start = time.monotonic()
    rc = _run_relayed(cmd, env, GUEST_TIMEOUT)
    if rc is None:
        return _fail(f"the guest did not finish within {GUEST_TIMEOUT:.0f}s")
    took = time.monotonic() - start
    print(
        f"run_in_guest: guest boot + kernel tests took {took:.1f}s; exit code {rc}; output in {out}",
        flush=True,
    )
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
