"""make_etw_bound_logger's classes pickle (and their loggers pickle and deep-copy) as their
make_etw_bound_logger arguments, the way structlog's own loggers pickle; and the wrapper follows
its renderer's current keywords_by_logger."""

from __future__ import annotations

import copy
import logging
import multiprocessing
import pickle
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, KeywordsByLogger, get_provider, make_etw_bound_logger
from structlog_etw.testing import EtwCapture
from tests.helpers.forking import bounded_pool
from tests.helpers.surface import Spy, bound, unique_provider


#: A chain that pickles (our renderer's own pickling is the renderer's business).
def _chain() -> list[Any]:
    return [structlog.contextvars.merge_contextvars, structlog.processors.JSONRenderer(sort_keys=True)]


def _worker_log(log: Any) -> str:
    """What a process-pool worker gets back from a logger sent to it."""
    return str(log.info("in_worker", n=2))


class TestPickling:
    """A logger pickles and copies like structlog's; its class reduces to the factory's arguments."""

    @pytest.mark.parametrize("target", ["name", "provider", "renderer"])
    def test_the_class_pickles_as_its_arguments_and_comes_back_as_itself(self, target: str) -> None:
        """Built from a name, a Provider or an EtwRenderer: ``loads(dumps(cls))`` is the class
        (the same arguments give the same class), and no provider or renderer is pickled."""
        name = unique_provider("Pickle")
        arg: Any = {"name": name, "provider": get_provider(name), "renderer": EtwRenderer(name)}[target]
        cls = make_etw_bound_logger(arg, "info")
        data = pickle.dumps(cls)
        assert b"Provider" not in data and b"EtwRenderer" not in data
        assert pickle.loads(data) is cls

    def test_a_logger_pickles_deep_copies_and_keeps_its_context(self) -> None:
        """The restored logger has the same class, context and behaviour."""
        cls = make_etw_bound_logger(unique_provider("Pickle"), logging.INFO)
        log = bound(cls, _chain(), user="ann")
        for other in (pickle.loads(pickle.dumps(log)), copy.deepcopy(log), copy.copy(log)):
            assert type(other) is type(log)
            assert other.info("hello", n=1) == '{"event": "hello", "n": 1, "user": "ann"}'
            assert other.debug("below_min_level") is None

    @pytest.mark.parametrize("method", ["fork", "spawn"])
    def test_a_process_pool_worker_gets_a_working_logger(self, method: str) -> None:
        """``ProcessPoolExecutor.submit(f, log)`` with fork and spawn children."""
        if method not in multiprocessing.get_all_start_methods():
            pytest.skip(f"no {method} start method here")
        cls = make_etw_bound_logger(unique_provider("Pool"), logging.INFO)
        log = bound(cls, _chain(), job="j1")
        with bounded_pool(method) as pool:
            assert pool.submit(_worker_log, log).result(timeout=120) == (
                '{"event": "in_worker", "job": "j1", "n": 2}'
            )


class TestFollowsTheRenderersKeywordMap:
    """``renderer.keywords_by_logger = KeywordsByLogger(...)`` after the wrapper was built takes
    effect for new and for held loggers: the wrapper never drops what the renderer writes."""

    def test_a_replaced_map_selects_the_new_keyword(self, etw_capture: EtwCapture) -> None:
        """A session on keyword 0x2 gets the ``db`` logger's events once the map names it."""
        renderer = EtwRenderer(unique_provider())
        spy = Spy()
        cls = make_etw_bound_logger(renderer)
        etw_capture.set_enabled(False)
        etw_capture.set_enabled(True, keyword=0x2)
        held = bound(cls, [renderer], logger="db")
        held.info("before")  # keyword 1: nobody listens
        renderer.keywords_by_logger = KeywordsByLogger({"db": 0x2})
        held.info("held_after")
        bound(cls, [renderer], logger="db").info("new_after")
        bound(cls, [spy, renderer]).bind(logger="db.pool").info("through_the_chain")
        bound(cls, [renderer]).info("unnamed")  # keyword 1: nobody listens
        assert [(e.name, e.keyword) for e in etw_capture.events] == [
            ("held_after", 0x2),
            ("new_after", 0x2),
            ("through_the_chain", 0x2),
        ]
        assert [c[1]["event"] for c in spy.calls] == ["through_the_chain"]

    def test_the_wrapper_writes_exactly_what_the_renderer_alone_writes(self, etw_capture: EtwCapture) -> None:
        """The same calls through the wrapper and through structlog's filtering logger, before
        and after the map is replaced, give the same events."""
        renderer = EtwRenderer(unique_provider(), keywords_by_logger={"http": 0x4})
        etw_capture.set_enabled(False)
        etw_capture.set_enabled(True, keyword=0x2)
        ours = bound(make_etw_bound_logger(renderer), [renderer])
        theirs = bound(structlog.make_filtering_bound_logger(logging.NOTSET), [renderer])
        seen: dict[str, list[tuple[str, int]]] = {}
        for name, log in (("ours", ours), ("theirs", theirs)):
            etw_capture.clear()
            renderer.keywords_by_logger = KeywordsByLogger({"http": 0x4})
            log.bind(logger="db").info("one")
            renderer.keywords_by_logger = KeywordsByLogger({"db": 0x2})
            log.bind(logger="db").info("two")
            log.bind(logger="http").info("three")
            seen[name] = [(e.name, e.keyword) for e in etw_capture.events]
        assert seen["ours"] == seen["theirs"] == [("two", 0x2)]
