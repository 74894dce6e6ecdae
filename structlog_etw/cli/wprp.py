"""``structlog-etw wprp PROVIDER... [-k KW]... [--level L]``: a WPR recording profile for providers.

Prints a Windows Performance Recorder profile (``.wprp``, XML) that records each named
TraceLogging provider, for::

    structlog-etw wprp MyCompany_MyService > myservice.wprp
    wpr -start myservice.wprp -filemode
    ... run the service ...
    wpr -stop myservice.etl
    structlog-etw decode myservice.etl          # on any OS

The profile follows Microsoft's WPR profile schema (docs: "WPR profile definitions"): the root
``WindowsPerformanceRecorder`` (``Version="1.0"``) holding ``Profiles``; in it, in the order the
schema asks, one ``EventCollector`` (its buffers), one ``EventProvider`` per provider (``Id``
without colons or spaces, ``Name`` the provider as ``*Name``: ETW tools hash a ``*``-prefixed
name to the provider GUID as TraceLogging does, see ``structlog-etw guid``; ``Level``; its
``Keywords``), then two ``Profile`` definitions, the ``File`` and the ``Memory`` logging mode of
one name (the schema wants both), each with the required ``Id`` (``Name.DetailLevel.LoggingMode``),
``Name``, ``Description``, ``LoggingMode``, ``DetailLevel`` and its ``Collectors`` naming the
collector and the providers.  A comment at the top gives each provider's GUID and the commands.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from typing import Final

from ..formats.tracelogging import provider_id, validate_provider_name
from .output import keyword_arg, level_filter_arg

__all__ = ["ALL_KEYWORDS", "PROFILE_NAME", "add_arguments", "profile", "run"]

#: The profiles' ``Name`` (``wpr -start FILE.wprp!StructlogEtw`` names it when needed).
PROFILE_NAME: Final = "StructlogEtw"
_COLLECTOR: Final = "EventCollector_StructlogEtw"
_BUFFER_KB: Final = 64  # as logman's -bs 64: the largest event ETW takes fits in one buffer
_BUFFERS: Final = 64
_ID_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.\-]")
#: Without ``-k``: every keyword bit (as the logman and tracelog recipes give), so every event
#: passes whatever a session makes of a mask of 0.
ALL_KEYWORDS: Final = 0xFFFF_FFFF_FFFF_FFFF


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``wprp``."""
    parser.add_argument(
        "providers", nargs="+", metavar="PROVIDER", help="provider name, e.g. MyCompany_MyService"
    )
    parser.add_argument(
        "-k",
        "--keyword",
        action="append",
        type=keyword_arg,
        default=[],
        metavar="KW",
        help="record events with a keyword bit of KW (repeatable: the masks are OR'ed; default: all bits)",
    )
    parser.add_argument(
        "--level",
        type=level_filter_arg,
        default=5,
        metavar="L",
        help="record events of level L or more severe (1-255 or a name; default 5, verbose: everything)",
    )
    parser.epilog = "Then: wpr -start FILE.wprp -filemode ... wpr -stop OUT.etl; structlog-etw decode OUT.etl"


def _provider_element_id(name: str, taken: set[str]) -> str:
    """An ``EventProvider`` ``Id``: no colons or spaces (the schema), unique in the profile."""
    base = "EventProvider_" + _ID_UNSAFE.sub("_", name)
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}_{n}"
    taken.add(candidate)
    return candidate


def profile(providers: list[str], keyword: int = ALL_KEYWORDS, level: int = 5) -> str:
    """The ``.wprp`` text recording ``providers`` at ``level`` and ``keyword`` (MatchAnyKeyword)."""
    for name in providers:
        validate_provider_name(name)
        if not name.isprintable():
            raise ValueError(f"provider name {name!r} has characters an XML file cannot hold")
    root = ET.Element("WindowsPerformanceRecorder", Version="1.0", Author="structlog-etw")
    profiles = ET.SubElement(root, "Profiles")
    collector = ET.SubElement(profiles, "EventCollector", Id=_COLLECTOR, Name="structlog-etw event collector")
    ET.SubElement(collector, "BufferSize", Value=str(_BUFFER_KB))
    ET.SubElement(collector, "Buffers", Value=str(_BUFFERS))
    taken: set[str] = set()
    ids = []
    for name in providers:
        element_id = _provider_element_id(name, taken)
        ids.append(element_id)
        provider = ET.SubElement(profiles, "EventProvider", Id=element_id, Name=f"*{name}", Level=str(level))
        keywords = ET.SubElement(provider, "Keywords")
        ET.SubElement(keywords, "Keyword", Value=f"0x{keyword:x}")
    description = "structlog-etw: " + ", ".join(providers)
    for mode in ("File", "Memory"):
        prof = ET.SubElement(
            profiles,
            "Profile",
            Id=f"{PROFILE_NAME}.Verbose.{mode}",
            Name=PROFILE_NAME,
            Description=description,
            LoggingMode=mode,
            DetailLevel="Verbose",
        )
        collectors = ET.SubElement(prof, "Collectors")
        ref = ET.SubElement(collectors, "EventCollectorId", Value=_COLLECTOR)
        event_providers = ET.SubElement(ref, "EventProviders")
        for element_id in ids:
            ET.SubElement(event_providers, "EventProviderId", Value=element_id)
    ET.indent(root)
    guids = "\n".join(f"       {name}: {provider_id(name)}" for name in providers)
    comment = (
        "<!-- Recording profile written by structlog-etw for its TraceLogging providers (GUIDs):\n"
        f"{_comment_text(guids)}\n"
        "     wpr -start THIS.wprp -filemode  ...  wpr -stop OUT.etl\n"
        "     structlog-etw decode OUT.etl   (any OS) -->\n"
    )
    return '<?xml version="1.0" encoding="utf-8"?>\n' + comment + ET.tostring(root, encoding="unicode") + "\n"


def _comment_text(text: str) -> str:
    """Text safe inside an XML comment (no ``--``)."""
    return text.replace("--", "- -")


def run(args: argparse.Namespace) -> int:
    """Print the profile; 2 for a name that cannot be a provider."""
    keyword = 0
    for mask in args.keyword:
        keyword |= mask
    keyword = keyword or ALL_KEYWORDS
    try:
        text = profile(args.providers, keyword, args.level)
    except ValueError as exc:
        print(f"structlog-etw wprp: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0
