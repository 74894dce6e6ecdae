"""_contextvars: structlog's contextvars are read, never replaced; the public-API fallback is exact.

Every scenario of ``SCENARIOS`` runs twice: reading structlog's registry (the normal mode) and
through ``structlog.contextvars.get_contextvars()`` only (the fallback used when a structlog
version has no usable registry).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog

from structlog_etw import EtwEarlyDrop, EtwRenderer, make_etw_bound_logger
from structlog_etw.surface._contextvars import REGISTRY, WATCH, ContextvarsWatch
from structlog_etw.testing import EtwCapture
from tests.helpers.surface import SpyRenderer, bound, unique_provider

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(params=["registry", "public_api"])
def mode(request: Any) -> Iterator[str]:
    """The contextvars watch reading structlog's registry, or only its public API; cleared around."""
    structlog.contextvars.clear_contextvars()
    WATCH.use_public_api(request.param == "public_api")
    try:
        yield request.param
    finally:
        WATCH.use_public_api(False)
        structlog.contextvars.clear_contextvars()


def test_structlog_registry_is_read_not_replaced() -> None:
    """structlog's contextvars registry is read as the same dict, never replaced, only grown."""
    registry = structlog.contextvars._CONTEXT_VARS  # the test may look: the library only reads it
    assert type(registry) is dict
    assert REGISTRY is registry
    assert not WATCH.uses_public_api
    before = len(registry)
    structlog.contextvars.bind_contextvars(ctxwatch_test_key=1)
    structlog.contextvars.unbind_contextvars("ctxwatch_test_key")
    structlog.contextvars.clear_contextvars()
    assert structlog.contextvars._CONTEXT_VARS is registry  # still the same dict: only grows
    assert type(structlog.contextvars._CONTEXT_VARS) is dict
    assert len(registry) >= before


def test_import_probe_leaves_no_value_in_any_context() -> None:
    """The import-time registry probe leaves no variable in get_contextvars or merge_contextvars."""
    assert "structlog_etw_registry_probe" not in structlog.contextvars.get_contextvars()
    ctx: dict[str, Any] = {}
    structlog.contextvars.merge_contextvars(None, "info", ctx)
    assert "structlog_etw_registry_probe" not in ctx


def test_clean_size_follows_the_registry_in_a_fresh_process() -> None:
    """In a fresh process the watch's clean size follows the registry until an etw_* variable exists."""
    script = """
import structlog
from structlog_etw.surface._contextvars import REGISTRY, WATCH
print(len(REGISTRY) == WATCH.clean_size, WATCH.etw_bound())
structlog.contextvars.bind_contextvars(request_id="r1")  # grows the registry, no etw_* key
print(len(REGISTRY) == WATCH.clean_size, WATCH.etw_bound(), len(REGISTRY) == WATCH.clean_size)
structlog.contextvars.bind_contextvars(etw_level=2)
print(len(REGISTRY) == WATCH.clean_size, WATCH.etw_bound(), WATCH.clean_size)
structlog.contextvars.clear_contextvars()
print(WATCH.etw_bound(), len(WATCH.etw_variables()))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True, timeout=120
    )
    assert out.stdout.splitlines() == [
        "True False",  # the registry holds no etw_* variable: the hot-path test passes
        "False False True",  # it grew: one look, then the test passes again
        "False True -1",  # an etw_* variable exists from now on
        "False 1",  # unset in this context (cleared), still known
    ]


def test_fallback_when_structlog_has_no_usable_registry() -> None:
    """Simulates a structlog that keeps its variables in something other than a dict: the watch
    must then go through get_contextvars() and still honour contextvar keys."""
    script = """
import collections
import structlog.contextvars as c
c._CONTEXT_VARS = collections.UserDict(c._CONTEXT_VARS)  # simulate another structlog version
import structlog
from structlog_etw import EtwRenderer, make_etw_bound_logger
from structlog_etw.surface._contextvars import WATCH
from structlog_etw.testing import capture_etw_events

print(WATCH.uses_public_api, WATCH.clean_size)
with capture_etw_events() as cap:
    cap.set_enabled(False)
    cap.set_enabled(True, keyword=0x4)
    renderer = EtwRenderer("SurfaceFallback")
    log = structlog.wrap_logger(None, wrapper_class=make_etw_bound_logger(renderer), processors=[renderer])
    log.info("dropped")
    with structlog.contextvars.bound_contextvars(etw_keyword=0x4):
        log.info("contextvar_keyword")
    print([(e.name, e.keyword) for e in cap.events])
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True, timeout=120
    )
    assert out.stdout.splitlines() == ["True -1", "[('contextvar_keyword', 4)]"]


def test_a_watch_without_registry_uses_the_public_api() -> None:
    """A watch without a registry stays on the public API and still reads etw_* values."""
    watch = ContextvarsWatch(None)
    assert watch.uses_public_api
    assert watch.clean_size == -1
    watch.use_public_api(False)  # nothing to read: stays on the public API
    assert watch.uses_public_api
    with structlog.contextvars.bound_contextvars(etw_name="n"):
        assert watch.etw_bound()
        assert watch.value("etw_name") == "n"
    assert not watch.etw_bound()
    assert watch.value("etw_name") is None


# --- the same behaviour in both modes -----------------------------------------------------------

Seen = list[tuple[str, int, int]]


def _dropped_then_honoured(
    cap: EtwCapture, log: Any, method: str, where: dict[str, int], **bound: int
) -> Seen:
    """A session listens at *where* only; one call without and one with *bound* contextvars."""
    cap.set_enabled(False)
    cap.set_enabled(True, **where)  # type: ignore[arg-type]
    getattr(log, method)("dropped")
    with structlog.contextvars.bound_contextvars(**bound):
        getattr(log, method)("honoured")
    return [(e.name, e.level, e.keyword) for e in cap.events]


def _wrapper(*processors: Any, renderer: EtwRenderer | None = None, **context: Any) -> Any:
    renderer = renderer or EtwRenderer(unique_provider())
    return bound(make_etw_bound_logger(renderer), [*processors, renderer], **context)


def _plain(first: Any = None) -> Any:
    renderer = EtwRenderer(unique_provider())
    chain = [] if first is None else [first(renderer), structlog.contextvars.merge_contextvars]
    return bound(structlog.make_filtering_bound_logger(logging.NOTSET), [*chain, renderer])


def _wrapper_keyword(cap: EtwCapture) -> Seen:
    spy = SpyRenderer(unique_provider())  # sees what reaches the renderer
    log = _wrapper(renderer=spy)
    seen = _dropped_then_honoured(cap, log, "info", {"keyword": 0x10}, etw_keyword=0x10)
    structlog.contextvars.bind_contextvars(etw_keyword=0x10)
    structlog.contextvars.clear_contextvars()  # leaves the variable holding structlog's "unset"
    log.info("cleared")
    assert [c[1]["event"] for c in spy.calls] == ["honoured"]
    return seen


def _renderer_controls(cap: EtwCapture) -> Seen:
    log = _plain()
    with structlog.contextvars.bound_contextvars(etw_keyword=0x8, etw_name="renamed", etw_opcode=1):
        log.info("e")
    log.info("plain")
    return [(e.name, e.opcode, e.keyword) for e in cap.events]


def _direct_write_keyword(cap: EtwCapture, *processors: Any) -> Seen:
    cap.set_enabled(True)  # the plain slot listened: the direct write must see the bound key
    log = _wrapper(*processors)
    log.info("plain")
    with structlog.contextvars.bound_contextvars(etw_keyword=0x2):
        log.info("keyed")
    return [(e.name, e.level, e.keyword) for e in cap.events]


SCENARIOS: dict[str, tuple[Callable[[EtwCapture], Seen], Seen]] = {
    "direct_write_keyword": (_direct_write_keyword, [("plain", 4, 1), ("keyed", 4, 2)]),
    "direct_write_keyword_merged": (
        lambda cap: _direct_write_keyword(cap, structlog.contextvars.merge_contextvars),
        [("plain", 4, 1), ("keyed", 4, 2)],
    ),
    "wrapper_keyword": (_wrapper_keyword, [("honoured", 4, 0x10)]),
    "wrapper_level": (
        lambda cap: _dropped_then_honoured(cap, _wrapper(), "debug", {"level": 1}, etw_level=1),
        [("honoured", 1, 1)],
    ),
    "renderer_controls": (_renderer_controls, [("renamed", 1, 0x8), ("plain", 0, 1)]),
    "early_drop": (
        lambda cap: _dropped_then_honoured(cap, _plain(EtwEarlyDrop), "info", {"keyword": 2}, etw_keyword=2),
        [("honoured", 4, 2)],
    ),
    "bound_keys_hide_contextvars": (
        lambda cap: _dropped_then_honoured(
            cap, _wrapper(etw_keyword=0x20, etw_level=4), "info", {"keyword": 0x10}, etw_keyword=0x10
        ),
        [],
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_contextvar_control_keys_in_both_modes(etw_capture: EtwCapture, mode: str, scenario: str) -> None:
    """Every contextvar control-key scenario gives the same events via the registry and the public API."""
    run, expected = SCENARIOS[scenario]
    assert WATCH.uses_public_api == (mode == "public_api")
    assert run(etw_capture) == expected


def test_the_predicate_has_one_home() -> None:
    """ "An ``etw_*`` key bound through contextvars" is asked through ``etw_bound`` only: no other
    module of the surface reads the watch's registry size or calls its method itself."""
    from structlog_etw.surface import _contextvars  # noqa: PLC0415

    assert _contextvars.etw_bound == WATCH.etw_bound
    surface = os.path.join(ROOT, "structlog_etw", "surface")
    inlined = []
    for name in sorted(os.listdir(surface)):
        if name.endswith(".py") and name != "_contextvars.py":
            with open(os.path.join(surface, name), encoding="utf-8") as f:
                text = f.read()
            inlined += [name for needle in ("clean_size", "WATCH.etw_bound", "REGISTRY") if needle in text]
    assert inlined == []
