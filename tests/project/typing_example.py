"""How a user writes against structlog-etw's public API; checked by ``mypy --strict`` (not run).

Every name of ``structlog_etw.__all__`` and ``structlog_etw.testing.__all__`` is used here
(tests/project/test_typing_example.py checks that), processors inside
``structlog.configure(processors=[...])``.
"""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import queue
import uuid

import structlog
from structlog.typing import FilteringBoundLogger

import structlog_etw
from structlog_etw import (
    Activity,
    EtwEarlyDrop,
    EtwHandler,
    EtwQueueHandler,
    EtwRenderer,
    EtwUnavailableWarning,
    KeywordsByLogger,
    Provider,
    ProviderStatus,
    StatusReason,
    add_otel_ids,
    close_all,
    current_activity_id,
    etw_activity,
    get_provider,
    make_etw_bound_logger,
    open_descriptors,
    use_otel_activity_ids,
)
from structlog_etw.backends.capture import CaptureRecord
from structlog_etw.testing import (
    CapturedEvent,
    EtwCapture,
    capture_etw_events,
    decode_record,
    isolated_providers,
)

renderer = EtwRenderer("MyCompany_MyService", default_keyword=0x1, keywords_by_logger={"db": 0x2})
wrapper: type[FilteringBoundLogger] = make_etw_bound_logger(renderer, min_level=logging.INFO)
wrapper_by_name: type[FilteringBoundLogger] = make_etw_bound_logger(
    "MyCompany_MyService", min_level="debug", default_keyword=0x1, keywords_by_logger={"http": 0x4}
)
structlog.configure(
    processors=[
        structlog.contextvars.merge_contextvars,
        EtwEarlyDrop(renderer),
        add_otel_ids,
        structlog.processors.format_exc_info,
        renderer,
    ],
    wrapper_class=wrapper,
    cache_logger_on_first_use=True,
)
use_otel_activity_ids(True)
by_name: KeywordsByLogger = KeywordsByLogger({"db": 0x2, "app_*": 0x4})
renderer.keywords_by_logger = by_name
version: str = structlog_etw.__version__

# the stdlib recipe: structlog's ProcessorFormatter ending in the renderer, on an EtwHandler
formatter = structlog.stdlib.ProcessorFormatter(
    foreign_pre_chain=[structlog.contextvars.merge_contextvars, add_otel_ids],
    processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
)
etw_handler = EtwHandler(renderer, foreign_pre_chain=[structlog.contextvars.merge_contextvars, add_otel_ids])
etw_handler.setFormatter(formatter)
log: FilteringBoundLogger = structlog.get_logger().bind(etw_keyword=0x4, user="ann")
log.info("user_login", attempts=3)
log.log(25, "custom_level")


async def handler() -> None:
    """Async methods come from the FilteringBoundLogger protocol."""
    await log.ainfo("async_event", etw_tags=0x1)
    await log.aexception("failed")


asyncio.run(handler())

drop: EtwEarlyDrop = EtwEarlyDrop("MyCompany_MyService")
chain: list[structlog.typing.Processor] = [drop, renderer]

stdlib_handler: logging.Handler = EtwHandler(
    "MyCompany_MyService", logging.INFO, keywords_by_logger={"urllib3": 0x8}
)
logging.getLogger().addHandler(stdlib_handler)
# a QueueHandler whose records an EtwHandler behind the QueueListener writes as if attached directly
log_queue: queue.Queue[logging.LogRecord] = queue.Queue()
queue_handler: logging.handlers.QueueHandler = EtwQueueHandler(log_queue)
listener = logging.handlers.QueueListener(log_queue, EtwHandler("MyCompany_MyService", event_key="msg"))
renamed = EtwRenderer("MyCompany_MyService", event_key="msg", keywords_by_logger=by_name)
provider: Provider = get_provider("MyCompany_MyService")
keep: list[int] = open_descriptors()  # for DaemonContext(files_preserve=...)
written: int = provider.stats()["written"]
status: ProviderStatus = provider.status
if not status.available and status.reason is StatusReason.NO_USER_EVENTS:
    print(status.detail)
warning_class: type[RuntimeWarning] = EtwUnavailableWarning

with etw_activity(log, "Download", url="https://example.invalid") as activity:
    running: Activity = activity
    activity.record(bytes_read=10)
    current: uuid.UUID | None = current_activity_id()

with capture_etw_events("tracelogging") as capture:
    log.warning("captured")
captured: EtwCapture = capture
events: list[CapturedEvent] = captured.events
first_name: str = events[0].name if events else ""
fields: dict[str, object] = events[0].fields if events else {}
tracepoints: list[str] = captured.registered("MyCompany_MyService")
records: list[CaptureRecord] = captured.records
again: list[CapturedEvent] = [decode_record(r) for r in records]
captured.clear()
with isolated_providers(), capture_etw_events():
    fresh: Provider = get_provider("MyCompany_MyService", default_keyword=0x2)
close_all()
