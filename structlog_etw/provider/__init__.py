"""The provider core: a provider's state and slots, the encode -> backend -> count sequence, the
registry of providers and the platform choice of a backend.

Its public names (:class:`~structlog_etw.Provider`, :func:`~structlog_etw.get_provider`, ...) are
exported by :mod:`structlog_etw` itself; the modules here are private.  Nothing here imports
structlog.
"""

__all__: list[str] = []
