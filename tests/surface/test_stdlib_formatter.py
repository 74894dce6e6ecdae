"""stdlib logging the ways structlog users set it up: ProcessorFormatter, foreign_pre_chain, formatters,
and records no formatter can render; none of them raises into the application."""

from __future__ import annotations

import io
import logging
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from structlog.stdlib import ProcessorFormatter

from structlog_etw import EtwEarlyDrop, EtwHandler, EtwRenderer
from structlog_etw.testing import EtwCapture
from tests.helpers.surface import unique_provider


@pytest.fixture
def lib_logger() -> Iterator[logging.Logger]:
    """A stdlib logger of logging's manager (as a library's ``getLogger`` gives), not propagating."""
    logger = logging.getLogger(f"lib.{uuid.uuid4().hex[:8]}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger
    logger.handlers.clear()


def _stream_handler(formatter: logging.Formatter) -> tuple[logging.Handler, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    return handler, stream


class TestProcessorFormatter:
    """``ProcessorFormatter(processors=[..., EtwRenderer(...)])``: structlog's usual stdlib recipe.

    Before, ``DropEvent`` (a BaseException) escaped ``Handler.emit`` into the application.
    """

    @pytest.mark.parametrize("remove_meta", [False, True], ids=["meta-kept", "remove_processors_meta"])
    def test_foreign_record_becomes_an_event_and_nothing_raises(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger, remove_meta: bool
    ) -> None:
        """With or without remove_processors_meta, a foreign record is written without meta keys, no raise."""
        renderer = EtwRenderer(unique_provider())
        processors: list[Any] = [ProcessorFormatter.remove_processors_meta] if remove_meta else []
        handler, _ = _stream_handler(ProcessorFormatter(processors=[*processors, renderer]))
        lib_logger.addHandler(handler)
        lib_logger.warning("disk %s full", "/var")  # raised DropEvent before
        (event,) = etw_capture.events
        assert (event.name, event.level) == ("disk /var full", 3)
        assert "_record" not in event.fields and "_from_structlog" not in event.fields

    def test_on_an_etw_handler_the_event_is_written_once_and_nothing_printed(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """On an EtwHandler the event is written once with just its chain's fields, and nothing printed."""
        name = unique_provider()
        handler = EtwHandler(name)
        handler.setFormatter(
            ProcessorFormatter(
                foreign_pre_chain=[structlog.stdlib.add_logger_name],
                processors=[ProcessorFormatter.remove_processors_meta, EtwRenderer(name)],
            )
        )
        lib_logger.addHandler(handler)
        lib_logger.info("connected", extra={"ignored_by_formatter": 1})
        (event,) = etw_capture.events
        assert event.name == "connected"
        assert event.fields == {"logger": lib_logger.name}  # exactly what the formatter's chain made
        assert handler.errors == 0
        assert capsys.readouterr() == ("", "")

    def test_structlog_records_through_wrap_for_formatter(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger
    ) -> None:
        """A structlog event through wrap_for_formatter is written with its level, keyword and fields."""
        name = unique_provider()
        handler = EtwHandler(name)
        handler.setFormatter(ProcessorFormatter(processors=[EtwRenderer(name)]))
        lib_logger.addHandler(handler)
        log = structlog.wrap_logger(
            lib_logger,
            processors=[structlog.stdlib.add_log_level, ProcessorFormatter.wrap_for_formatter],
            wrapper_class=structlog.stdlib.BoundLogger,
        )
        log.error("payment_failed", order=17, etw_keyword=0x4)
        (event,) = etw_capture.events
        assert (event.name, event.level, event.keyword) == ("payment_failed", 2, 0x4)
        assert event.fields == {"order": 17, "level": "error"}

    def test_custom_stdlib_level_keeps_its_number(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger
    ) -> None:
        """Custom stdlib levels 45 and 5 map by their number to ETW levels 2 and 5."""
        handler, _ = _stream_handler(ProcessorFormatter(processors=[EtwRenderer(unique_provider())]))
        lib_logger.addHandler(handler)
        lib_logger.setLevel(1)
        lib_logger.log(45, "between_error_and_critical")  # levelname "Level 45"
        lib_logger.log(5, "below_debug")
        assert [(e.name, e.level) for e in etw_capture.events] == [
            ("between_error_and_critical", 2),
            ("below_debug", 5),
        ]

    def test_passthrough_renderer_then_console_text(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger
    ) -> None:
        """A passthrough renderer writes the event and hands it on to the formatter's console renderer."""
        renderer = EtwRenderer(unique_provider(), passthrough=True)
        handler, stream = _stream_handler(
            ProcessorFormatter(
                processors=[
                    ProcessorFormatter.remove_processors_meta,
                    renderer,
                    structlog.processors.KeyValueRenderer(key_order=["event"]),
                ]
            )
        )
        lib_logger.addHandler(handler)
        lib_logger.info("both", extra={"etw_keyword": 0x2})
        assert [e.name for e in etw_capture.events] == ["both"]
        assert stream.getvalue() == "event='both'\n"

    def test_a_passthrough_level_passes_every_record_on_inside_the_formatter(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger
    ) -> None:
        """Below the level the record still goes on: "" would break the next processor."""
        renderer = EtwRenderer(unique_provider(), passthrough="warning")
        handler, stream = _stream_handler(
            ProcessorFormatter(
                processors=[renderer, structlog.processors.KeyValueRenderer(key_order=["event"])]
            )
        )
        lib_logger.addHandler(handler)
        lib_logger.info("low")
        assert [e.name for e in etw_capture.events] == ["low"]
        assert stream.getvalue().startswith("event='low'")

    @pytest.mark.parametrize("listening", [False, True])
    def test_early_drop_first_in_the_chain(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger, listening: bool
    ) -> None:
        """EtwEarlyDrop first in a ProcessorFormatter chain drops unlistened records, passes listened ones."""
        name = unique_provider()
        etw_capture.set_enabled(listening)
        handler = EtwHandler(name)
        handler.setFormatter(
            ProcessorFormatter(foreign_pre_chain=[EtwEarlyDrop(name)], processors=[EtwRenderer(name)])
        )
        lib_logger.addHandler(handler)
        plain, _ = _stream_handler(ProcessorFormatter(processors=[EtwEarlyDrop(name), EtwRenderer(name)]))
        lib_logger.addHandler(plain)
        # without the formatter's keys: EtwEarlyDrop knows its caller is ProcessorFormatter.format
        meta_removed, _ = _stream_handler(
            ProcessorFormatter(
                processors=[ProcessorFormatter.remove_processors_meta, EtwEarlyDrop(name), EtwRenderer(name)]
            )
        )
        lib_logger.addHandler(meta_removed)
        lib_logger.info("maybe")  # raised DropEvent before when nobody listened
        assert [e.name for e in etw_capture.events] == (["maybe"] * 3 if listening else [])


class TestForeignPreChain:
    """``EtwHandler``'s own processors for foreign records: contextvars merged by default."""

    def test_contextvars_reach_stdlib_records(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger
    ) -> None:
        """Contextvars, fields and etw_keyword, reach stdlib records only while they are bound."""
        lib_logger.addHandler(EtwHandler(unique_provider()))
        with structlog.contextvars.bound_contextvars(request_id="r-1", etw_keyword=0x2):
            lib_logger.info("in_request")
        lib_logger.info("after")
        first, second = etw_capture.events
        assert (first.fields["request_id"], first.keyword) == ("r-1", 0x2)
        assert "request_id" not in second.fields and second.keyword == 1

    def test_record_fields_win_over_contextvars(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger
    ) -> None:
        """A record's own attribute (lineno) wins over a contextvar of the same name."""
        lib_logger.addHandler(EtwHandler(unique_provider()))
        with structlog.contextvars.bound_contextvars(lineno="bound", user="ann"):
            lib_logger.info("x")
        (event,) = etw_capture.events
        assert isinstance(event.fields["lineno"], int) and event.fields["user"] == "ann"

    def test_stdlib_processors_see_the_record(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger
    ) -> None:
        """stdlib processors in foreign_pre_chain see the record; its meta keys are not written."""
        chain = [
            structlog.stdlib.add_log_level,
            structlog.stdlib.ExtraAdder(allow=["tenant"]),
            structlog.processors.CallsiteParameterAdder([structlog.processors.CallsiteParameter.THREAD_NAME]),
        ]
        lib_logger.addHandler(EtwHandler(unique_provider(), foreign_pre_chain=chain))
        lib_logger.warning("with_chain", extra={"tenant": 7})
        (event,) = etw_capture.events
        assert event.fields["level"] == "warning"
        assert event.fields["tenant"] == 7
        assert event.fields["thread_name"] == "MainThread"
        assert "_record" not in event.fields and "_from_structlog" not in event.fields

    def test_no_chain(self, etw_capture: EtwCapture, lib_logger: logging.Logger) -> None:
        """foreign_pre_chain=() merges no contextvars into the record's event."""
        lib_logger.addHandler(EtwHandler(unique_provider(), foreign_pre_chain=()))
        with structlog.contextvars.bound_contextvars(request_id="r-1"):
            lib_logger.info("x")
        assert "request_id" not in etw_capture.events[0].fields

    def test_drop_event_in_the_chain_drops_the_record(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger
    ) -> None:
        """DropEvent raised in foreign_pre_chain drops that record only, not counted as a handler error."""

        def drop_health(logger: Any, method: str, event_dict: Any) -> Any:
            if event_dict["event"] == "health":
                raise structlog.DropEvent
            return event_dict

        handler = EtwHandler(unique_provider(), foreign_pre_chain=[drop_health])
        lib_logger.addHandler(handler)
        lib_logger.info("health")
        lib_logger.info("real")
        assert [e.name for e in etw_capture.events] == ["real"] and handler.errors == 0


class TestHandlerFormatter:
    """A plain ``logging.Formatter`` on the handler makes the ``message`` field."""

    def test_message_is_the_formatters_output(
        self, etw_capture: EtwCapture, lib_logger: logging.Logger
    ) -> None:
        """A plain logging.Formatter's output is the message field; the event is named by the template."""
        handler = EtwHandler(unique_provider())
        handler.setFormatter(logging.Formatter("%(levelname)s [%(name)s] %(message)s"))
        lib_logger.addHandler(handler)
        lib_logger.info("hello %s", "ann")
        (event,) = etw_capture.events
        assert event.name == "hello %s"
        assert event.fields["message"] == f"INFO [{lib_logger.name}] hello ann"


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    __repr__ = __str__


def _hostile_records(name: str) -> list[logging.LogRecord]:
    def rec(msg: Any, args: Any = (), **attrs: Any) -> logging.LogRecord:
        record = logging.LogRecord(name, logging.INFO, "/src/app.py", 7, msg, args, None, "f")
        record.__dict__.update(attrs)
        return record

    try:
        raise ValueError("boom")
    except ValueError:
        real_exc = sys.exc_info()
    return [
        rec("bad %d", ("not-a-number",)),  # % arguments of the wrong type
        rec("two %s %s", ("one",)),  # too few arguments
        rec("none %s"),  # a placeholder, no arguments: logging prints it as it is
        rec(_Unprintable()),  # msg whose str() raises
        rec("arg %s", (_Unprintable(),)),  # an argument whose str() raises
        rec("x", exc_info=(1, 2, 3)),  # malformed exc_info
        rec("x", exc_info="not a tuple"),
        rec("x", exc_info=real_exc, exc_text=b"bytes, not text"),
        rec("x", stack_info=12345),
        rec("map %(a)s", ({"b": 1},)),  # mapping without the key
        rec(None),
        rec("x", levelno="INFO", levelname=None),  # level attributes of the wrong type
        rec("x", extra_obj=_Unprintable()),  # an extra attribute nothing can print
    ]


class TestHostileRecords:
    """Records no formatter can render are written with what can be rendered; nothing raises or prints."""

    def test_every_hostile_record_is_written(
        self, etw_capture: EtwCapture, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Every malformed record is written with what can be rendered; no error counted, nothing printed."""
        handler = EtwHandler(unique_provider())
        records = _hostile_records("hostile")
        for record in records:
            handler.handle(record)
        events = etw_capture.events
        assert len(events) == len(records)
        assert handler.errors == 0
        assert capsys.readouterr() == ("", "")
        bad_args, too_few, _, unprintable, bad_arg = events[:5]
        assert bad_args.fields["message"] == "bad %d"
        assert bad_args.fields["args"] == ["not-a-number"]
        assert bad_args.fields["message_error"].startswith("TypeError")
        assert too_few.fields["args"] == ["one"]
        assert unprintable.fields["message"] == "<unprintable _Unprintable>"
        assert bad_arg.fields["args"] == ["<unprintable _Unprintable>"]
        assert events[5].fields["exception"] == "(1, 2, 3)"
        assert "ValueError: boom" in events[7].fields["exception"]
        assert events[11].level == 5

    def test_hostile_records_through_a_processor_formatter(self, etw_capture: EtwCapture) -> None:
        """structlog's formatter raises on them (``getMessage``); the handler writes them itself."""
        name = unique_provider()
        handler = EtwHandler(name)
        handler.setFormatter(ProcessorFormatter(processors=[EtwRenderer(name)]))
        records = _hostile_records("hostile.pf")
        for record in records:
            handler.handle(record)
        assert len(etw_capture.events) == len(records)
        assert handler.errors == 0

    def test_formatter_that_raises_still_writes(self, etw_capture: EtwCapture) -> None:
        """A formatter that raises: the template is the message and the error is in message_error."""

        class Broken(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                raise RuntimeError("formatter bug")

        handler = EtwHandler(unique_provider())
        handler.setFormatter(Broken())
        handler.handle(logging.LogRecord("n", logging.INFO, "p", 1, "ok %s", ("a",), None))
        (event,) = etw_capture.events
        assert event.fields["message"] == "ok %s"
        assert event.fields["message_error"] == "RuntimeError: formatter bug"
