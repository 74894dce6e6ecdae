"""Unix-only standard modules (``fcntl``, ``resource``, ``termios``, ...) in tests that Windows collects.

Windows has none of them, so no test module, conftest or helper imports one at module level;
a test that needs one gets it from :func:`unix_module`, which skips the test (or, called at
module level, the module) on Windows and imports normally everywhere else: on Linux and macOS
the test runs, and a missing module there is an error, not a skip.

``tests/project/test_windows_collection.py`` holds the suite to this: it collects and runs the host
suite on Linux with those modules hidden (``tests/helpers/without_unix/sitecustomize.py``, which
lists them in ``STRUCTLOG_ETW_HIDDEN_MODULES``); there the hidden ones count as missing by design,
as on Windows.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

import pytest

#: The environment variable the simulated-Windows run sets: the modules it hides, comma-separated.
HIDDEN_ENV = "STRUCTLOG_ETW_HIDDEN_MODULES"


def missing_by_design(name: str) -> bool:
    """Whether this run has no ``name`` on purpose: Windows, or the simulated-Windows run hides it."""
    return sys.platform == "win32" or name in os.environ.get(HIDDEN_ENV, "").split(",")


def unix_module(name: str) -> ModuleType:
    """Import the Unix-only module ``name``; skip the calling test (or module) where it cannot exist."""
    if missing_by_design(name):
        return pytest.importorskip(name, reason=f"{name} is a Unix-only module (this run has none: Windows)")
    return importlib.import_module(name)
