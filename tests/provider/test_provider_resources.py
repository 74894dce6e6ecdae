"""Out of descriptors at start-up: the provider runs disabled with a reason, never raises, and
tries again (bounded) once a later event registers a new (level, keyword) pair.

Each case runs in a subprocess whose ``RLIMIT_NOFILE`` is exhausted (every free descriptor
taken) before the first provider is made, so the lazy imports of the backend and encoder
modules cannot open their files either (``OSError(EMFILE)``: the old code let it escape from
``EtwRenderer(...)``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.unix import unix_module

REPO = Path(__file__).resolve().parents[2]

_PRELUDE = """
import json, os, resource, sys, warnings
sys.path.insert(0, {repo!r})
warnings.simplefilter("ignore")
import structlog
import structlog_etw
from structlog_etw import EtwRenderer, get_provider
from structlog_etw.provider._provider import MAX_BACKEND_RETRIES
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
fillers = []
while True:
    try:
        fillers.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        break
def free():
    for fd in fillers:
        os.close(fd)
    fillers.clear()
out = {{}}
"""


def _run(body: str) -> dict[str, Any]:
    unix_module("resource")
    script = _PRELUDE.format(repo=str(REPO)) + textwrap.dedent(body) + "\nfree()\nprint(json.dumps(out))\n"
    cmd = [sys.executable, "-c", script]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_renderer_made_out_of_descriptors_runs_disabled_and_retries_later() -> None:
    """EtwRenderer(...) and get_provider(...) return with no descriptor left (no exception);
    status says resources_exhausted; a new pair registered once descriptors are free again
    makes the OS backend anew (the reason is then what this machine gives a fresh provider)."""
    out = _run(
        """
        try:
            renderer = EtwRenderer("SlEtw_Emfile")
            prov = get_provider("SlEtw_Emfile")
            out["raised"] = None
        except BaseException as exc:
            out["raised"] = repr(exc)
            free()
            raise SystemExit(json.dumps(out))
        out["before"] = prov.status.reason.value
        log = structlog.wrap_logger(structlog.ReturnLogger(), processors=[renderer])
        log.info("while_out_of_descriptors")
        free()
        prov.slot(2, 0x10)  # a new pair: the provider tries the OS backend again
        out["after"] = prov.status.reason.value
        out["fresh"] = get_provider("SlEtw_Fresh").status.reason.value
        """
    )
    assert out["raised"] is None
    assert out["before"] == "resources_exhausted"
    assert out["after"] == out["fresh"] != "resources_exhausted"


def test_retrying_a_transient_failure_is_bounded() -> None:
    """A provider that stays out of descriptors tries the OS backend again at most
    MAX_BACKEND_RETRIES times, however many new pairs are registered."""
    out = _run(
        """
        prov = get_provider("SlEtw_EmfileBound")
        for kw in range(1, 40):
            prov.slot(3, 1 << kw)
        out["retries"] = prov._retries
        out["max"] = MAX_BACKEND_RETRIES
        out["reason"] = prov.status.reason.value
        """
    )
    assert out["retries"] == out["max"] == 8
    assert out["reason"] == "resources_exhausted"


@pytest.mark.parametrize("where", ["import", "constructor"])
def test_any_oserror_making_the_os_backend_is_a_reason_not_an_exception(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OSError from importing or constructing the OS backend (here EMFILE and EIO) gives a
    disabled provider with a status reason, never an exception from the provider's constructor."""
    import errno  # noqa: PLC0415

    from structlog_etw import Provider, StatusReason  # noqa: PLC0415
    from structlog_etw.backends import user_events  # noqa: PLC0415
    from structlog_etw.provider import _platform  # noqa: PLC0415

    monkeypatch.setattr(_platform, "PLATFORM", "linux")
    code = errno.EMFILE if where == "import" else errno.EIO
    if where == "import":
        monkeypatch.setitem(sys.modules, "structlog_etw.backends.user_events", None)
        real_import = __import__

        def failing_import(name: str, *args: Any, **kwargs: Any) -> Any:
            if "user_events" in name or (args and args[2] and "user_events" in args[2]):
                raise OSError(code, "Too many open files")
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr("builtins.__import__", failing_import)
    else:

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise OSError(code, "I/O error")

        monkeypatch.setattr(user_events, "UserEventsBackend", failing)
    prov = Provider("SlEtw_OsError")
    try:
        expected = StatusReason.RESOURCES_EXHAUSTED if where == "import" else StatusReason.OPEN_FAILED
        assert prov.status.reason is expected
        assert prov.status.available is False
    finally:
        prov.close()
