"""The optional C extension; all other build configuration and metadata is in pyproject.toml.

``structlog_etw.write.shapes._speedups`` is compiled from ``structlog_etw/write/shapes/_speedups.c``
where a C compiler and the Python headers are found.  ``optional=True``: where it cannot be built,
setuptools prints a warning and the pure-Python package installs without it.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "structlog_etw.write.shapes._speedups", ["structlog_etw/write/shapes/_speedups.c"], optional=True
        )
    ]
)
