"""Import Microsoft's ``traceloggingdynamic`` on any OS, for its ``EventBuilder`` (the encoding peer).

The package loads the Windows eventing DLL when its module body runs (class ``Provider``).  On Linux
``ctypes`` has no ``WinDLL``; we give it a stand-in whose functions are inert attribute holders just
long enough to import the module.  ``EventBuilder`` itself never touches the DLL.
"""

from __future__ import annotations

import ctypes
import sys
import types
from typing import Any

__all__ = ["load_traceloggingdynamic"]


class _StandInFunction:
    restype: Any = None
    argtypes: Any = None

    def __call__(self, *args: object) -> int:
        raise OSError("traceloggingdynamic's Windows DLL is not available here (benchmark stand-in)")


class _StandInDLL:
    def __init__(self, name: str, mode: int = 0) -> None:
        self._name = name

    def __getattr__(self, name: str) -> _StandInFunction:
        f = _StandInFunction()
        setattr(self, name, f)
        return f


def load_traceloggingdynamic() -> types.ModuleType | None:
    """Return the ``traceloggingdynamic`` module, or ``None`` if it is not installed."""
    added = False
    if not hasattr(ctypes, "WinDLL"):
        ctypes.WinDLL = _StandInDLL  # type: ignore[attr-defined]
        added = True
    try:
        import traceloggingdynamic  # noqa: PLC0415 - optional/late import
    except ImportError:
        return None
    finally:
        if added:
            del ctypes.WinDLL  # type: ignore[attr-defined]
    return sys.modules["traceloggingdynamic"] if traceloggingdynamic else None
