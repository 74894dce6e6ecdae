"""How a user writes against structlog-etw's public API; checked by ``mypy --strict`` (not run)."""

from __future__ import annotations

import asyncio
import logging

import structlog
from structlog.typing import FilteringBoundLogger

from structlog_etw import (
    EtwEarlyDrop,
    EtwHandler,
    EtwRenderer,
    Provider,
    close_all,
    get_provider,
    make_etw_bound_logger,
)
from structlog_etw.testing import CapturedEvent, EtwCapture, capture_etw_events

renderer = EtwRenderer("MyCompany_MyService", default_keyword=0x1, keywords_by_logger={"db": 0x2})
wrapper: type[FilteringBoundLogger] = make_etw_bound_logger(renderer, min_level=logging.INFO)
wrapper_by_name: type[FilteringBoundLogger] = make_etw_bound_logger(
    "MyCompany_MyService", min_level="debug", default_keyword=0x1, keywords_by_logger={"http": 0x4}
)
structlog.configure(
    processors=[structlog.contextvars.merge_contextvars, structlog.processors.format_exc_info, renderer],
    wrapper_class=wrapper,
    cache_logger_on_first_use=True,
)
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
provider: Provider = get_provider("MyCompany_MyService")
written: int = provider.stats()["written"]

with capture_etw_events("tracelogging") as capture:
    log.warning("captured")
captured: EtwCapture = capture
events: list[CapturedEvent] = captured.events
first_name: str = events[0].name if events else ""
fields: dict[str, object] = events[0].fields if events else {}
tracepoints: list[str] = captured.registered("MyCompany_MyService")
close_all()
