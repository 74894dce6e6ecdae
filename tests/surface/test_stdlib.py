"""EtwHandler: stdlib LogRecords (foreign and structlog-routed) become the same trace events."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
import structlog

from structlog_etw import EtwHandler, EtwRenderer
from structlog_etw.formats._levels import level_from_stdlib
from structlog_etw.testing import EtwCapture
from tests.helpers.surface import unique_provider


@pytest.fixture
def stdlib_logger() -> logging.Logger:
    """A stdlib logger outside logging's manager, at level 1, not propagating."""
    # A logger outside logging's manager: only the handlers the test adds (pytest's etw_capture
    # handlers would otherwise re-raise the errors the handler under test must swallow).
    logger = logging.Logger(f"surface.test.{uuid.uuid4().hex[:8]}", level=1)
    logger.propagate = False
    return logger


def test_foreign_record_fields(etw_capture: EtwCapture, stdlib_logger: logging.Logger) -> None:
    """A foreign record is named by its template with message, logger, source fields and extra=."""
    handler = EtwHandler(unique_provider())
    stdlib_logger.addHandler(handler)
    stdlib_logger.warning("disk %s at %d%%", "/var", 93, extra={"host": "db1", "etw_keyword": 0x4})
    (event,) = etw_capture.events
    assert event.name == "disk %s at %d%%"
    assert event.level == 3
    assert event.keyword == 0x4  # extra= control key, not a field
    assert event.fields["message"] == "disk /var at 93%"
    assert event.fields["logger"] == stdlib_logger.name
    assert event.fields["funcName"] == "test_foreign_record_fields"
    assert event.fields["pathname"] == __file__
    assert event.fields["module"] == "test_stdlib"
    assert isinstance(event.fields["lineno"], int)
    assert event.fields["host"] == "db1"
    assert set(event.fields) == {"message", "logger", "pathname", "module", "lineno", "funcName", "host"}


def test_foreign_exception_and_stack(etw_capture: EtwCapture, stdlib_logger: logging.Logger) -> None:
    """exception() writes level 2 with the formatted traceback; stack_info=True writes the stack field."""
    stdlib_logger.addHandler(EtwHandler(unique_provider()))
    table: dict[str, int] = {}
    try:
        table["missing"]
    except KeyError:
        stdlib_logger.exception("lookup failed")
    stdlib_logger.info("where", stack_info=True)
    failed, where = etw_capture.events
    assert failed.level == 2
    assert "KeyError: 'missing'" in failed.fields["exception"]
    assert "Traceback (most recent call last)" in failed.fields["exception"]
    assert "test_foreign_exception_and_stack" in where.fields["stack"]


@pytest.mark.parametrize(
    ("levelno", "etw_level"),
    [
        (60, 1),
        (50, 1),
        (45, 2),
        (40, 2),
        (35, 3),
        (30, 3),
        (25, 4),
        (20, 4),
        (15, 5),
        (10, 5),
        (5, 5),
        (1, 5),
    ],
)
def test_level_map_including_custom_levels(
    etw_capture: EtwCapture, stdlib_logger: logging.Logger, levelno: int, etw_level: int
) -> None:
    """Every stdlib level number, custom ones too, maps to its ETW level in the table and in the event."""
    assert level_from_stdlib(levelno) == etw_level
    stdlib_logger.addHandler(EtwHandler(unique_provider()))
    stdlib_logger.log(levelno, "custom")
    (event,) = etw_capture.events
    assert event.level == etw_level


def test_handler_level_and_nobody_listening(etw_capture: EtwCapture, stdlib_logger: logging.Logger) -> None:
    """Records below the handler level or at an unlistened level are not written nor counted dropped."""
    handler = EtwHandler(unique_provider(), level=logging.INFO)
    stdlib_logger.addHandler(handler)
    stdlib_logger.debug("below_handler_level")
    etw_capture.set_enabled(False, level=3)
    stdlib_logger.warning("nobody_listens_at_warning")
    stdlib_logger.error("written")
    assert [e.name for e in etw_capture.events] == ["written"]
    assert handler.provider.stats()["dropped"] == {}


def test_structlog_records_keep_their_event_dict(
    etw_capture: EtwCapture, stdlib_logger: logging.Logger
) -> None:
    """A structlog event routed via wrap_for_formatter keeps its event dict, contextvars and keyword."""
    stdlib_logger.addHandler(EtwHandler(unique_provider()))
    log = structlog.wrap_logger(
        stdlib_logger,
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
    )
    with structlog.contextvars.bound_contextvars(request_id="r-7"):
        log.bind(user="ann").info("user_login", attempts=3, ok=True, etw_keyword=0x2)
    (event,) = etw_capture.events
    assert event.name == "user_login"
    assert event.level == 4
    assert event.keyword == 0x2
    assert event.fields == {"request_id": "r-7", "user": "ann", "attempts": 3, "ok": True}


def test_structlog_record_exception_via_format_exc_info(
    etw_capture: EtwCapture, stdlib_logger: logging.Logger
) -> None:
    """A structlog exception formatted by format_exc_info arrives as the exception field at level 2."""
    stdlib_logger.addHandler(EtwHandler(unique_provider()))
    log = structlog.wrap_logger(
        stdlib_logger,
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[
            structlog.processors.format_exc_info,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
    )
    try:
        raise RuntimeError("db down")
    except RuntimeError:
        log.exception("query_failed")
    (event,) = etw_capture.events
    assert event.level == 2
    assert "RuntimeError: db down" in event.fields["exception"]


def test_keywords_by_logger_name_in_handler(etw_capture: EtwCapture) -> None:
    """The handler picks each record's keyword from its logger name, and skips unlistened keywords."""
    handler = EtwHandler(unique_provider(), keywords_by_logger={"sqlalchemy": 0x2, "urllib3": 0x4})
    loggers = [logging.getLogger(n) for n in ("sqlalchemy.engine", "urllib3", "other")]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        etw_capture.set_enabled(False)
        etw_capture.set_enabled(True, keyword=0x2)
        etw_capture.set_enabled(True, keyword=0x1)
        for logger in loggers:
            logger.info("hello")
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    assert [(e.fields["logger"], e.keyword) for e in etw_capture.events] == [
        ("sqlalchemy.engine", 0x2),
        ("other", 0x1),
    ]


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    __repr__ = __str__


def test_handler_never_raises_and_counts(
    etw_capture: EtwCapture, stdlib_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    """A processor of the handler's that fails is counted, never raised nor printed."""

    def broken(logger: Any, method: str, event_dict: Any) -> Any:
        raise RuntimeError("processor bug")

    handler = EtwHandler(unique_provider(), foreign_pre_chain=[broken])
    stdlib_logger.addHandler(handler)
    stdlib_logger.info("lost")
    handler.foreign_pre_chain = ()
    stdlib_logger.info("fine")
    assert handler.errors == 1
    assert handler.provider.stats()["dropped"]["handler_error"] == 1
    assert [e.name for e in etw_capture.events] == ["fine"]
    assert capsys.readouterr().err == ""


def test_reentrant_record_is_dropped_not_recursed(
    etw_capture: EtwCapture, stdlib_logger: logging.Logger
) -> None:
    """A record logged while formatting another is dropped and counted reentrant, not recursed into."""
    handler = EtwHandler(unique_provider())
    stdlib_logger.addHandler(handler)

    class Reenter:
        def __str__(self) -> str:
            stdlib_logger.info("inner")
            return "outer"

    stdlib_logger.info("%s", Reenter())
    assert [e.fields["message"] for e in etw_capture.events] == ["outer"]
    assert handler.provider.stats()["dropped"]["reentrant"] == 1


def test_handler_shares_renderer_provider(etw_capture: EtwCapture, stdlib_logger: logging.Logger) -> None:
    """An EtwHandler made from a renderer shares its provider and its keywords_by_logger."""
    renderer = EtwRenderer(unique_provider(), keywords_by_logger={"surface": 0x8})
    handler = EtwHandler(renderer)
    assert handler.provider is renderer.provider
    stdlib_logger.addHandler(handler)
    stdlib_logger.info("via_renderer_config")
    (event,) = etw_capture.events
    assert event.keyword == 0x8  # the renderer's keywords_by_logger ("surface" prefix)


def test_extra_does_not_override_record_fields(
    etw_capture: EtwCapture, stdlib_logger: logging.Logger
) -> None:
    """extra= adds fields (message_id, tenant) but does not override the record's funcName."""
    stdlib_logger.addHandler(EtwHandler(unique_provider()))
    extra: dict[str, Any] = {"message_id": "m", "tenant": 7}
    stdlib_logger.info("x", extra=extra)
    (event,) = etw_capture.events
    assert event.fields["funcName"] == "test_extra_does_not_override_record_fields"
    assert event.fields["message_id"] == "m"
    assert event.fields["tenant"] == 7


def test_record_level_wins_over_a_contextvar_level(
    etw_capture: EtwCapture, stdlib_logger: logging.Logger
) -> None:
    """The handler gives its renderer the record's level as ``etw_level``, so a level bound
    through contextvars does not count for stdlib records - in the drop decision neither."""
    handler = EtwHandler(unique_provider())
    stdlib_logger.addHandler(handler)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, level=4)
    with structlog.contextvars.bound_contextvars(etw_level=1):  # nobody listens at level 1
        stdlib_logger.info("record_level")
        stdlib_logger.info("extra_level", extra={"etw_level": 1})
    assert [(e.name, e.level) for e in etw_capture.events] == [("record_level", 4)]


def test_extra_logger_key_does_not_change_the_name_keyword(
    etw_capture: EtwCapture, stdlib_logger: logging.Logger
) -> None:
    """A foreign record's ``logger`` field is its name (``extra`` does not override it): the
    keyword follows that name in the drop decision as in the written event."""
    handler = EtwHandler(unique_provider(), keywords_by_logger={"db": 0x2})
    stdlib_logger.addHandler(handler)
    etw_capture.set_enabled(False)
    etw_capture.set_enabled(True, keyword=1)
    stdlib_logger.info("claims_db", extra={"logger": "db"})
    assert [(e.name, e.keyword, e.fields["logger"]) for e in etw_capture.events] == [
        ("claims_db", 1, stdlib_logger.name)
    ]
