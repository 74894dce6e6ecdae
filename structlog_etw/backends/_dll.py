"""Loading the ETW functions through ctypes: each one from the first library of a chain that has it.

Windows exports the ETW provider API from the API-set DLL ``api-ms-win-eventing-provider-l1-1-0.dll``
and from ``advapi32.dll``; an API-set DLL of an older or trimmed Windows may lack a function the
other has (``EventSetInformation`` came with Windows 8).  :class:`Dlls` therefore resolves every
function on its own: from the first library of the chain that loads and exports it, loading the
next library only when a function is missing from those before.  The provider backend
(:mod:`structlog_etw.backends.etw`) and the session consumer (:mod:`structlog_etw.etw.consumer`)
both load through it.

``chain=None`` means the system DLLs (``ctypes.WinDLL``, Windows only); a chain of paths loads
shared libraries with ``ctypes.CDLL`` instead: the tests' C stand-in (``tests/csrc/``), with the
C calling convention for callbacks.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = ["CONSUMER_DLLS", "PROVIDER_DLLS", "DllError", "Dlls"]

#: Where the provider API is looked up on Windows, in this order.
PROVIDER_DLLS: Final = ("api-ms-win-eventing-provider-l1-1-0.dll", "advapi32.dll")
#: Where the controller and consumer API (StartTraceW ... CloseTrace) is looked up on Windows.
CONSUMER_DLLS: Final = ("advapi32.dll",)


class DllError(Exception):
    """No library of the chain loads, or none of them exports a function (the message says which)."""


class Dlls:
    """A chain of libraries; :meth:`bind` takes a function from the first one that exports it.

    ``chain``: shared-library paths (or one path) to load with ``ctypes.CDLL``, or None for
    ``system``, the DLL names loaded with ``ctypes.WinDLL`` (Windows only: elsewhere
    :class:`DllError`).  The first library that loads is loaded here (none: :class:`DllError`,
    "cannot load ..."); the others when a function is missing from the ones before.
    ``use_last_error``: load them so that :meth:`last_error` reads ``GetLastError`` of the call.
    """

    def __init__(
        self, chain: str | Sequence[str] | None, system: Sequence[str], *, use_last_error: bool = False
    ) -> None:
        self.system = chain is None
        if chain is None:
            if sys.platform != "win32":
                raise DllError(f"ETW is only available on Windows (this is {sys.platform})")
            self.names: tuple[str, ...] = tuple(system)
        else:
            self.names = (chain,) if isinstance(chain, str) else tuple(chain)
        if not self.names:
            raise DllError("no library to load ETW from")
        self._use_last_error = use_last_error
        self._libraries: list[Any] = []  # loaded so far, in chain order (None: failed to load)
        self._errors: list[str] = []
        #: function name -> the library of the chain it was taken from
        self.sources: dict[str, str] = {}
        for _ in self.names:
            self._load_next()
            if self._libraries[-1] is not None:
                break
        else:
            raise DllError("cannot load " + "; ".join(self._errors))

    def _load_next(self) -> None:
        name = self.names[len(self._libraries)]
        try:
            if not self.system:
                lib: Any = ctypes.CDLL(name)
            elif sys.platform == "win32":
                lib = ctypes.WinDLL(name, use_last_error=self._use_last_error)
            else:  # pragma: no cover - refused in __init__
                raise OSError("not Windows")
        except OSError as e:
            self._errors.append(f"{name}: {e}")
            lib = None
        self._libraries.append(lib)

    def bind(self, name: str, restype: Any, argtypes: list[Any]) -> Any:
        """The function ``name`` with its types set, from the first library that has it."""
        index = 0
        while True:
            if index == len(self._libraries):
                if index == len(self.names):
                    raise DllError(f"the ETW library has no {name} (looked in {', '.join(self.names)})")
                self._load_next()
            lib = self._libraries[index]
            index += 1
            if lib is None:
                continue
            try:
                fn = getattr(lib, name)
            except AttributeError:
                continue
            fn.restype = restype
            fn.argtypes = argtypes
            self.sources[name] = self.names[index - 1]
            return fn

    def callback_type(self, restype: Any, *argtypes: Any) -> Any:
        """The ctypes type of a callback these libraries call (WINFUNCTYPE for the system DLLs)."""
        if self.system and sys.platform == "win32":
            return ctypes.WINFUNCTYPE(restype, *argtypes)
        return ctypes.CFUNCTYPE(restype, *argtypes)

    def last_error(self) -> Callable[[], int]:
        """A function reading the calling thread's last Win32 error after a call of these libraries."""
        if self.system and sys.platform == "win32":
            return ctypes.get_last_error
        get_error = self.bind("GetLastError", ctypes.c_uint32, [])
        return lambda: int(get_error())
