"""The structlog surface: the only code of the package that imports structlog.

The renderer, the bound-logger wrapper, the stdlib handlers, activities, the contextvars watch and
the resolution of levels, keywords and event names.  Its public names are exported by
:mod:`structlog_etw` itself; the modules here are private.
"""

__all__: list[str] = []
