"""Keywords by logger name: the renderer, the wrapper's fast path and EtwHandler pick the keyword
from the logger's name; the keywords are registered when the provider is created."""

from __future__ import annotations

import logging

import pytest
import structlog

from structlog_etw import EtwHandler, EtwRenderer, KeywordsByLogger, make_etw_bound_logger
from structlog_etw.testing import EtwCapture
from tests.helpers.surface import SpyRenderer, bound, unique_provider

MAP = {"db": 0x2, "http": 0x4, "http.client": 0x8, "job_*": 0x10}


@pytest.mark.parametrize(
    ("name", "keyword"),
    [
        ("db", 0x2),
        ("db.pool", 0x2),
        ("db.pool.conn", 0x2),
        ("dbx", None),
        ("http", 0x4),
        ("http.server", 0x4),
        ("http.client", 0x8),
        ("http.client.tls", 0x8),
        ("job_mail", 0x10),
        ("job", None),
        ("", None),
        (None, None),
        (42, None),
    ],
)
def test_name_matching_exact_dotted_children_and_star_prefix(name: object, keyword: int | None) -> None:
    """Every name matches its exact key, a dotted parent, a star prefix or nothing, the same when repeated."""
    names = KeywordsByLogger(MAP)
    assert names.lookup(name) == keyword
    assert names.lookup(name) == keyword  # cached answer is the same


def test_longest_key_wins_between_star_and_dotted() -> None:
    """Between a star prefix and a dotted parent the longer key decides the keyword."""
    names = KeywordsByLogger({"app": 0x1, "app.web*": 0x2})
    assert names.lookup("app.webhooks") == 0x2
    assert names.lookup("app.worker") == 0x1


def test_invalid_mappings_raise_at_setup() -> None:
    """Empty or non-str names raise TypeError, bool or negative keywords ValueError, at set-up."""
    with pytest.raises(TypeError):
        KeywordsByLogger({"": 1})
    with pytest.raises(TypeError):
        KeywordsByLogger({3: 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="keyword"):
        KeywordsByLogger({"db": True})
    with pytest.raises(ValueError, match="keyword"):
        EtwRenderer(unique_provider(), keywords_by_logger={"db": -2})


def test_keywords_are_registered_when_the_provider_is_created(etw_capture: EtwCapture) -> None:
    """The map's keywords and the default are registered at levels 1-5 when the provider is made."""
    name = unique_provider()
    EtwRenderer(name, keywords_by_logger={"db": 0x2, "http": 0x4})
    registered = etw_capture.registered(name)
    for keyword in (1, 2, 4):
        for level in range(1, 6):
            assert f"{name}_L{level}K{keyword:x}" in registered
    assert etw_capture.records == []


def test_renderer_uses_logger_key_from_add_logger_name_or_bind(etw_capture: EtwCapture) -> None:
    """The renderer keys on a bound or per-call logger name; etw_keyword wins, no name gives the default."""
    renderer = EtwRenderer(unique_provider(), keywords_by_logger=MAP)
    log = structlog.wrap_logger(structlog.ReturnLogger(), processors=[renderer])
    log.bind(logger="db.pool").info("bound_name")
    log.info("call_name", logger="http.client")
    log.info("no_name")
    log.bind(logger="db").info("explicit_wins", etw_keyword=0x40)
    assert [(e.name, e.keyword) for e in etw_capture.events] == [
        ("bound_name", 0x2),
        ("call_name", 0x8),
        ("no_name", 0x1),
        ("explicit_wins", 0x40),
    ]


def test_renderer_uses_stdlib_logger_name(etw_capture: EtwCapture) -> None:
    """The renderer keys on the logger field add_logger_name adds from a stdlib logger."""
    renderer = EtwRenderer(unique_provider(), keywords_by_logger=MAP)
    log = structlog.wrap_logger(
        logging.getLogger("http.server"),
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[structlog.stdlib.add_logger_name, renderer],
    )
    log.warning("served")
    (event,) = etw_capture.events
    assert (event.keyword, event.fields["logger"]) == (0x4, "http.server")


def test_renderer_uses_wrapped_logger_name_without_add_logger_name(etw_capture: EtwCapture) -> None:
    """Without add_logger_name the renderer keys on the wrapped stdlib logger's name, adding no field."""
    renderer = EtwRenderer(unique_provider(), keywords_by_logger=MAP)
    log = structlog.wrap_logger(logging.getLogger("db.migrations"), processors=[renderer])
    log.info("migrated")
    (event,) = etw_capture.events
    assert event.keyword == 0x2
    assert "logger" not in event.fields


def test_invalid_etw_keyword_falls_back_to_the_name_keyword(etw_capture: EtwCapture) -> None:
    """An invalid etw_keyword falls back to the logger name's keyword, not the default."""
    renderer = EtwRenderer(unique_provider(), keywords_by_logger=MAP)
    log = structlog.wrap_logger(structlog.ReturnLogger(), processors=[renderer])
    log.bind(logger="db").info("bad_keyword", etw_keyword="x")
    (event,) = etw_capture.events
    assert event.keyword == 0x2


def test_wrapper_fast_path_uses_the_name_keyword(etw_capture: EtwCapture) -> None:
    """The wrapper skips by the bound or stdlib logger name's keyword slot before running the chain."""
    renderer = SpyRenderer(unique_provider(), keywords_by_logger=MAP)
    spy = renderer  # records what reaches the renderer
    cls = make_etw_bound_logger(renderer)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x2)
    db = bound(cls, [renderer], logger="db.pool")
    http = bound(cls, [renderer], logger="http")
    stdlib_db = structlog.wrap_logger(
        logging.getLogger("db.engine"), wrapper_class=cls, processors=[renderer]
    )
    db.info("db_event")
    http.info("http_event")  # keyword 0x4: nobody listens, the chain does not even run
    stdlib_db.info("stdlib_db_event")
    assert [c[1]["event"] for c in spy.calls] == ["db_event", "stdlib_db_event"]
    assert [(e.name, e.keyword) for e in etw_capture.events] == [("db_event", 2), ("stdlib_db_event", 2)]


def test_wrapper_rebinding_the_logger_name_changes_the_keyword(etw_capture: EtwCapture) -> None:
    """Rebinding logger= to another name moves the logger to that name's keyword slot."""
    renderer = EtwRenderer(unique_provider(), keywords_by_logger=MAP)
    cls = make_etw_bound_logger(renderer)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=0x4)
    log = bound(cls, [renderer], logger="db")
    log.info("as_db")
    log.bind(logger="http").info("as_http")
    assert [e.name for e in etw_capture.events] == ["as_http"]


def test_handler_uses_record_logger_name(etw_capture: EtwCapture) -> None:
    """EtwHandler takes the keyword from the record's logger name (a star-prefix match here)."""
    handler = EtwHandler(unique_provider(), keywords_by_logger=MAP)
    logger = logging.Logger("job_nightly", level=logging.INFO)
    logger.addHandler(handler)
    logger.info("started")
    (event,) = etw_capture.events
    assert event.keyword == 0x10
