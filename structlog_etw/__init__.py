"""structlog events as ETW TraceLogging events (Windows) and user_events EventHeader tracepoints (Linux).

Example::

    import structlog
    from structlog_etw import EtwRenderer

    structlog.configure(processors=[structlog.processors.add_log_level, EtwRenderer("MyCompany_MyService")])
    structlog.get_logger().info("user_login", user="ann", attempts=3)

Importing the package imports nothing else: each name loads its module on first use (PEP 562),
so that the pytest plugin (``structlog_etw.pytest_plugin``, registered for every pytest run where
structlog-etw is installed) costs other projects' test suites no structlog import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._activity import Activity, current_activity_id, etw_activity
    from ._otel import add_otel_ids, use_otel_activity_ids
    from ._provider import (
        EtwUnavailableWarning,
        Provider,
        ProviderStatus,
        StatusReason,
        close_all,
        get_provider,
        open_descriptors,
    )
    from ._renderer import EtwRenderer
    from ._resolve import KeywordsByLogger
    from ._stdlib import EtwHandler, EtwQueueHandler
    from ._wrapper import EtwEarlyDrop, make_etw_bound_logger

__version__ = "0.5.0"

#: Public name -> the private module that defines it.
_EXPORTS: dict[str, str] = {
    "Activity": "._activity",
    "current_activity_id": "._activity",
    "etw_activity": "._activity",
    "add_otel_ids": "._otel",
    "use_otel_activity_ids": "._otel",
    "EtwUnavailableWarning": "._provider",
    "Provider": "._provider",
    "ProviderStatus": "._provider",
    "StatusReason": "._provider",
    "close_all": "._provider",
    "get_provider": "._provider",
    "open_descriptors": "._provider",
    "EtwRenderer": "._renderer",
    "KeywordsByLogger": "._resolve",
    "EtwHandler": "._stdlib",
    "EtwQueueHandler": "._stdlib",
    "EtwEarlyDrop": "._wrapper",
    "make_etw_bound_logger": "._wrapper",
}

__all__ = [
    "Activity",
    "EtwEarlyDrop",
    "EtwHandler",
    "EtwQueueHandler",
    "EtwRenderer",
    "EtwUnavailableWarning",
    "KeywordsByLogger",
    "Provider",
    "ProviderStatus",
    "StatusReason",
    "__version__",
    "add_otel_ids",
    "close_all",
    "current_activity_id",
    "etw_activity",
    "get_provider",
    "make_etw_bound_logger",
    "open_descriptors",
    "use_otel_activity_ids",
]


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (``from structlog_etw import EtwRenderer``)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``dir(structlog_etw)``), loaded or not."""
    return sorted({*globals(), *__all__})
