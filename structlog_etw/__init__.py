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

import sys

from ._util.lazy import lazy_exports as _lazy_exports

TYPE_CHECKING = False  # not typing's: importing typing would double `import structlog_etw`'s time
if TYPE_CHECKING:
    from typing import Any

    from .context._activity import Activity, current_activity_id, etw_activity
    from .context._correlation import add_otel_ids, use_otel_activity_ids
    from .context._resolve import KeywordsByLogger
    from .provider._provider import (
        EtwUnavailableWarning,
        Provider,
        ProviderStatus,
        StatusReason,
        close_all,
        get_provider,
        open_descriptors,
    )
    from .surface._bound_logger import make_etw_bound_logger
    from .surface._early_drop import EtwEarlyDrop
    from .surface._renderer import EtwRenderer
    from .surface._stdlib import EtwHandler, EtwQueueHandler

__version__ = "0.6.0"

#: Public name -> the private module that defines it.
_EXPORTS: dict[str, str] = {
    "Activity": ".context._activity",
    "current_activity_id": ".context._activity",
    "etw_activity": ".context._activity",
    "add_otel_ids": ".context._correlation",
    "use_otel_activity_ids": ".context._correlation",
    "EtwUnavailableWarning": ".provider._provider",
    "Provider": ".provider._provider",
    "ProviderStatus": ".provider._provider",
    "StatusReason": ".provider._provider",
    "close_all": ".provider._provider",
    "get_provider": ".provider._provider",
    "open_descriptors": ".provider._provider",
    "EtwRenderer": ".surface._renderer",
    "KeywordsByLogger": ".context._resolve",
    "EtwHandler": ".surface._stdlib",
    "EtwQueueHandler": ".surface._stdlib",
    "EtwEarlyDrop": ".surface._early_drop",
    "make_etw_bound_logger": ".surface._bound_logger",
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

#: ``from structlog_etw import EtwRenderer`` loads the name's module on first use.
__getattr__, __dir__ = _lazy_exports(globals(), _EXPORTS)


class _MovedPaths:
    """The meta-path finder of the 0.5 module paths that moved (``structlog_etw.fields``, ...).

    Last on ``sys.meta_path``, so it is asked only about modules no file provides; the table and
    the loader live in :mod:`structlog_etw._moved`, loaded when an old path is first imported.
    """

    structlog_etw_moved = True

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None) -> Any:
        if not fullname.startswith("structlog_etw."):
            return None
        from . import _moved  # noqa: PLC0415 - only when an old path is imported

        return _moved.find_spec(fullname)


if not any(getattr(finder, "structlog_etw_moved", False) for finder in sys.meta_path):
    sys.meta_path.append(_MovedPaths)
