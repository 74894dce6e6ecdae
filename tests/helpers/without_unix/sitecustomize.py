"""Make the Unix-only standard modules unimportable, as they are on Windows.

Put this folder first on ``PYTHONPATH`` and every Python started with it (pytest and the
processes it starts with the same environment) finds no ``fcntl``, ``resource``, ``termios``,
...: ``import fcntl`` raises :class:`ModuleNotFoundError` wherever it is written, also in a
module a later change adds.  ``tests/project/test_windows_collection.py`` runs the host suite this way
on Linux, so a module-level import of one of them in anything a Windows run collects fails
there.  ``STRUCTLOG_ETW_HIDDEN_MODULES`` (set here, comma-separated) tells the tests which
modules are hidden (``tests/helpers/platform.py``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

#: The standard modules CPython has on Unix only (those a Windows build lacks).
#: (``posix`` and ``_posixsubprocess`` stay: ``os`` and ``subprocess`` stand on them here, as on
#: ``nt`` and ``_winapi`` on Windows.)
HIDDEN = frozenset(
    ("fcntl", "resource", "termios", "pwd", "grp", "pty", "tty", "syslog", "spwd", "nis", "crypt")
)


class _Hide:
    """A meta-path finder that refuses the hidden modules (as Windows' import system would)."""

    @staticmethod
    def find_spec(
        name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """Refuse a hidden module; leave every other one to the next finder."""
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden: simulating Windows)", name=name)
        return None


# Whatever of them site.py or an earlier import already loaded is forgotten: the next import fails.
for _name in HIDDEN:
    sys.modules.pop(_name, None)
sys.meta_path.insert(0, _Hide())
os.environ["STRUCTLOG_ETW_HIDDEN_MODULES"] = ",".join(sorted(HIDDEN))
