"""The old import paths of the public API, and their new homes: the one table of the 0.6 move.

0.6 laid the package out by direction (``write/``, ``formats/``, ``read/``, ...).  For one release
every public module path of 0.5 keeps importing: :data:`MOVED` names each old path's new home,
and importing the old path gives the very module object of the new one, with a
:class:`DeprecationWarning` that names the new path.  The old packages
``structlog_etw.eventheader`` and ``structlog_etw.tracelogging`` are facades built from
:data:`PACKAGES`: each of their old names is looked up on first use, so importing an old
read-only path (``structlog_etw.eventheader.decoder``) loads no module of the write side.

:func:`find_spec` is what the meta-path finder that ``structlog_etw/__init__.py`` installs calls
for a module of the package that no file provides; nothing else of the package imports this
module.
"""

from __future__ import annotations

import sys
import types
import warnings
from importlib.machinery import ModuleSpec
from typing import Final

__all__ = ["MOVED", "PACKAGES", "find_spec"]

#: Old module path -> its new home.  The old path serves the same module object.
MOVED: Final[dict[str, str]] = {
    "structlog_etw.fields": "structlog_etw.write.fields",
    "structlog_etw.header": "structlog_etw.formats.header",
    "structlog_etw.decoded": "structlog_etw.read.decoded",
    "structlog_etw.live": "structlog_etw.read.live",
    "structlog_etw.eventheader.spec": "structlog_etw.formats.eventheader",
    "structlog_etw.eventheader.encoder": "structlog_etw.write.eventheader",
    "structlog_etw.eventheader.decoder": "structlog_etw.read.decode.eventheader",
    "structlog_etw.eventheader.perf_decode": "structlog_etw.read.writers.perf_json",
    "structlog_etw.tracelogging.spec": "structlog_etw.formats.tracelogging",
    "structlog_etw.tracelogging.encoder": "structlog_etw.write.tracelogging",
    "structlog_etw.tracelogging.decoder": "structlog_etw.read.decode.tracelogging",
    "structlog_etw.cli.chrome_trace": "structlog_etw.read.writers.chrome_trace",
}

#: The old packages, and the old modules whose names went to more than one new home: each name
#: they offered, and the old module (a key of :data:`MOVED`) or the module whose new home has it
#: now.  A package's submodules (``spec``, ``encoder``, ...) are attributes too.
PACKAGES: Final[dict[str, dict[str, str]]] = {
    "structlog_etw.eventheader": {
        **dict.fromkeys(
            (
                "COMMAND_FIELDS",
                "DYN_MAX_EVENT_SIZE",
                "PERF_MAX_EVENT_SIZE",
                "Encoding",
                "EventHeaderDecodeError",
                "ExtensionKind",
                "Format",
                "HeaderFlags",
                "parse_tracepoint_name",
                "register_command",
                "tracepoint_name",
                "validate_provider_name",
            ),
            "structlog_etw.eventheader.spec",
        ),
        "Header": "structlog_etw.header",
        "EventHeaderEncoder": "structlog_etw.eventheader.encoder",
        "decode_event": "structlog_etw.eventheader.decoder",
        "perf_json": "structlog_etw.eventheader.perf_decode",
        "perf_json_fields": "structlog_etw.eventheader.perf_decode",
    },
    "structlog_etw.tracelogging": {
        **dict.fromkeys(
            (
                "CHANNEL_TRACELOGGING",
                "DEFAULT_MAX_SIZE",
                "InType",
                "OutType",
                "TraceLoggingEvent",
                "event_descriptor",
                "group_guid",
                "provider_id",
                "provider_traits",
                "validate_provider_name",
            ),
            "structlog_etw.tracelogging.spec",
        ),
        "Header": "structlog_etw.header",
        "TraceLoggingEncoder": "structlog_etw.tracelogging.encoder",
        "decode": "structlog_etw.tracelogging.decoder",
        "decode_traits": "structlog_etw.tracelogging.decoder",
    },
    "structlog_etw.cli.render": {
        "EventMeta": "structlog_etw.decoded",
        "wallclock_text": "structlog_etw.eventheader.perf_decode",
        **dict.fromkeys(
            ("event_json", "json_fields", "json_line", "json_line_bytes", "undecodable_json"),
            "structlog_etw.read.writers.json_lines",
        ),
        **dict.fromkeys(
            (  # noqa: SIM905 - one line of names, not the console writer's __all__ again
                "TextFieldStyle event_pretty level_name pretty_head pretty_line pretty_line_templates"
                " pretty_value printable undecodable_pretty"
            ).split(),
            "structlog_etw.read.writers.console",
        ),
    },
}


def _stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the import statement: past the import system's
    frames and this module's."""
    frame: types.FrameType | None = sys._getframe(2)  # the caller of _warn
    level = 2
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename == __file__:
            level += 1
        elif not ("importlib" in filename and "_bootstrap" in filename):  # warnings skips those
            break
        frame = frame.f_back
    return level


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} moved to {new} in structlog-etw 0.6; import it from there (the old path goes in the next "
        "release)",
        DeprecationWarning,
        stacklevel=_stacklevel(),
    )


def _load(name: str) -> types.ModuleType:
    """The module ``name``, imported the way an import statement does (``-X importtime`` lists it)."""
    __import__(name)
    return sys.modules[name]


def _facade(name: str) -> types.ModuleType:
    """The old package ``name``: its old names, each loaded from its new home on first use."""
    names = PACKAGES[name]
    submodules = sorted({old.rpartition(".")[2] for old in MOVED if old.startswith(name + ".")})
    module = types.ModuleType(name, f"Deprecated: the 0.5 package {name}; its names moved ({__name__}).")

    def __getattr__(attr: str) -> object:
        if attr in submodules:
            return _load(f"{name}.{attr}")
        old = names.get(attr)
        if old is None:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        return getattr(_load(MOVED.get(old, old)), attr)

    def __dir__() -> list[str]:
        return sorted([*names, *submodules])

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    module.__dir__ = __dir__  # type: ignore[method-assign]
    module.__all__ = sorted(names)  # type: ignore[attr-defined]
    module.__path__ = []  # a package: its old submodules are found by this table, not on disk
    return module


class _Loader:
    """Serves an old path: the new home's module object (or an old package's facade)."""

    @staticmethod
    def create_module(spec: ModuleSpec) -> types.ModuleType:
        if spec.name in PACKAGES:
            _warn(spec.name, ", ".join(sorted({MOVED.get(old, old) for old in PACKAGES[spec.name].values()})))
            return _facade(spec.name)
        new = MOVED[spec.name]
        _warn(spec.name, new)
        module = _load(new)
        spec.loader_state = module.__spec__  # the import system sets __spec__ to this alias's spec
        return module

    @staticmethod
    def exec_module(module: types.ModuleType) -> None:
        spec = module.__spec__
        if spec is not None and spec.loader_state is not None:
            module.__spec__ = spec.loader_state  # the module keeps its own spec (name, origin)


def find_spec(fullname: str) -> ModuleSpec | None:
    """The spec that serves the old path ``fullname``, or ``None`` when it is not one."""
    if fullname in MOVED or fullname in PACKAGES:
        return ModuleSpec(fullname, _Loader, is_package=fullname in PACKAGES)  # type: ignore[arg-type]
    return None
