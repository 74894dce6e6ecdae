"""``structlog-etw wprp``: the WPR profile parses as XML and has what Microsoft's WPR profile schema
requires (docs/windows.md names the pages): element order, required attributes, a File and a
Memory profile of one name, ids that resolve, the provider as ``*Name`` with its level and keywords.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from structlog_etw.cli import main
from structlog_etw.formats.tracelogging import provider_id

_ID = re.compile(r"^[^:\s]+$")  # the schema's IdType: at least one character, no colons or spaces


def _profile(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[ET.Element, str]:
    assert main(["wprp", *args]) == 0
    out = capsys.readouterr().out
    return ET.fromstring(out.encode()), out


class TestTheProfileStructure:
    """What WPR needs to load the profile and record the provider."""

    def test_root_collector_provider_profiles_in_schema_order(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """WindowsPerformanceRecorder(Version) > Profiles > collectors, providers, then profiles."""
        root, _ = _profile(capsys, "MyCompany_MyService")
        assert root.tag == "WindowsPerformanceRecorder" and root.get("Version") == "1.0"
        (profiles,) = list(root)
        assert profiles.tag == "Profiles"
        assert [e.tag for e in profiles] == ["EventCollector", "EventProvider", "Profile", "Profile"]

    def test_the_collector(self, capsys: pytest.CaptureFixture[str]) -> None:
        """EventCollector: Id and Name, buffer size and count."""
        root, _ = _profile(capsys, "P")
        collector = root.find("Profiles/EventCollector")
        assert collector is not None
        assert _ID.match(collector.get("Id", "")) and collector.get("Name")
        assert collector.find("BufferSize").get("Value") == "64"  # type: ignore[union-attr]
        assert int(collector.find("Buffers").get("Value", "0")) > 0  # type: ignore[union-attr]

    def test_the_provider_by_star_name_with_level_and_keywords(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """EventProvider: Id, Name ``*NAME`` (WPR hashes it to the TraceLogging GUID), Level, Keywords."""
        root, text = _profile(capsys, "MyCompany_MyService", "-k", "0x1", "-k", "4", "--level", "warning")
        provider = root.find("Profiles/EventProvider")
        assert provider is not None
        assert _ID.match(provider.get("Id", ""))
        assert provider.get("Name") == "*MyCompany_MyService"
        assert provider.get("Level") == "3"
        assert [k.get("Value") for k in provider.findall("Keywords/Keyword")] == ["0x5"]
        assert str(provider_id("MyCompany_MyService")) in text  # the GUID, for logman and tracelog

    def test_defaults_record_everything(self, capsys: pytest.CaptureFixture[str]) -> None:
        """No -k: every keyword bit (as the logman recipe); no --level: 5 (verbose)."""
        root, _ = _profile(capsys, "P")
        provider = root.find("Profiles/EventProvider")
        assert provider is not None and provider.get("Level") == "5"
        assert provider.find("Keywords/Keyword").get("Value") == "0xffffffffffffffff"  # type: ignore[union-attr]

    def test_a_file_and_a_memory_profile_whose_ids_resolve(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Two profiles of one Name; Id is Name.DetailLevel.LoggingMode; their references exist."""
        root, _ = _profile(capsys, "A", "B.Service", "C Name")
        profiles = root.findall("Profiles/Profile")
        assert sorted(p.get("LoggingMode") for p in profiles) == ["File", "Memory"]
        assert len({p.get("Name") for p in profiles}) == 1
        collectors = {c.get("Id") for c in root.findall("Profiles/EventCollector")}
        providers = {p.get("Id"): p.get("Name") for p in root.findall("Profiles/EventProvider")}
        assert sorted(providers.values()) == ["*A", "*B.Service", "*C Name"]
        assert all(_ID.match(i or "") for i in providers)
        for p in profiles:
            for attr in ("Id", "Name", "Description", "LoggingMode", "DetailLevel"):
                assert p.get(attr), attr
            assert p.get("Id") == f"{p.get('Name')}.{p.get('DetailLevel')}.{p.get('LoggingMode')}"
            assert p.get("DetailLevel") in ("Verbose", "Light")
            (ref,) = p.findall("Collectors/EventCollectorId")
            assert ref.get("Value") in collectors
            assert {e.get("Value") for e in ref.findall("EventProviders/EventProviderId")} == set(providers)

    def test_names_are_escaped(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A name with XML's special characters and ``--`` stays a well-formed document."""
        root, _ = _profile(capsys, 'a<b>&"c"--d')
        provider = root.find("Profiles/EventProvider")
        assert provider is not None and provider.get("Name") == '*a<b>&"c"--d'


class TestBadArguments:
    """What cannot be a provider, a level or a keyword is refused with exit 2."""

    def test_a_control_character(self, capsys: pytest.CaptureFixture[str]) -> None:
        """XML cannot hold it: a message, exit 2, nothing on stdout."""
        assert main(["wprp", "bad\x01name"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and "cannot hold" in err

    @pytest.mark.parametrize("args", [["--level", "0"], ["--level", "noise"], ["-k", "0"], ["-k", "x"]])
    def test_bad_level_or_keyword(self, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """argparse's usage error, exit 2."""
        with pytest.raises(SystemExit) as exc:
            main(["wprp", "P", *args])
        assert exc.value.code == 2


def test_the_page_shows_what_it_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cli/wprp.md's example profile is exactly what ``wprp MyCompany_MyService`` prints."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "cli" / "wprp.md").read_text(encoding="utf-8")
    shown = page.split("```xml\n", 1)[1].split("```", 1)[0]
    _, printed = _profile(capsys, "MyCompany_MyService")
    assert shown == printed
