"""On Windows only (elevated): real ETW sessions, Windows' own tools, and ``listen`` as a process.

* ``logman`` records an .etl of the provider while structlog logs, and ``tracerpt`` (Windows'
  TDH-based decoder, independent of this project) turns it into XML: the values must be the
  ones logged.
* ``structlog-etw listen`` runs as its own process and prints an event this process logs.
* A session of listen's name left running (as by a process that died) is stopped and replaced.

Elsewhere these tests are skipped (reported as skipped, never as passed); on a Windows CI runner
(``CI=true``) a missing administrator right or a missing tool fails instead of skipping.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import shutil
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, etw_activity
from structlog_etw.etw import EtwListener, session_name
from structlog_etw.formats.tracelogging import provider_id
from tests.etw.conftest import EtwOs
from tests.helpers.shared_data import skip_or_fail

pytestmark = pytest.mark.skipif(sys.platform != "win32", reason="needs Windows ETW sessions")

NS = "{http://schemas.microsoft.com/win/2004/08/events/event}"
U = uuid.UUID("12345678-1234-5678-1234-567812345678")
WHEN = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        skip_or_fail(f"{name} is not on PATH")
    return path


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=120)


def _log(provider: str) -> Any:
    return structlog.wrap_logger(None, processors=[EtwRenderer(provider)])


def _events(xml_path: Path) -> list[dict[str, Any]]:
    """tracerpt's XML -> per event: provider guid, level, keywords, opcode, ids and the Data by name."""
    out = []
    for ev in ET.parse(xml_path).getroot().iter(f"{NS}Event"):
        system = ev.find(f"{NS}System")
        if system is None:
            continue
        provider = system.find(f"{NS}Provider")
        correlation = system.find(f"{NS}Correlation")
        data = {d.get("Name"): (d.text or "") for d in ev.iter(f"{NS}Data")}
        out.append(
            {
                "guid": provider.get("Guid") if provider is not None else None,
                "level": system.findtext(f"{NS}Level"),
                "keywords": system.findtext(f"{NS}Keywords"),
                "opcode": system.findtext(f"{NS}Opcode"),
                "activity": correlation.get("ActivityID") if correlation is not None else None,
                "related": correlation.get("RelatedActivityID") if correlation is not None else None,
                "data": data,
            }
        )
    return out


def test_logman_records_and_tracerpt_decodes_the_logged_values(etw_os: EtwOs, tmp_path: Path) -> None:
    """A logman session records our events and tracerpt reads each logged value, level and activity back."""
    logman, tracerpt = _tool("logman"), _tool("tracerpt")
    guid = provider_id(etw_os.provider)
    session = f"structlog-etw-test-{uuid.uuid4().hex[:8]}"
    etl, xml_path = tmp_path / "trace.etl", tmp_path / "trace.xml"
    _run(logman, "start", session, "-p", f"{{{guid}}}", "0xFFFFFFFFFFFFFFFF", "5", "-o", str(etl), "-ets")
    try:
        log = _log(etw_os.provider)
        log.info(
            "values",
            marker="m1",
            s="hello",
            i=-5,
            u=2**64 - 1,
            f=0.25,
            ok=True,
            raw=b"\x00\xff",
            id=U,
            v4=ipaddress.IPv4Address("192.0.2.1"),
            when=WHEN,
            etw_keyword=0x4,
        )
        log.error("failure", marker="m2", code=7)
        with etw_activity(log, "Work", marker="m3") as act:
            log.info("inside", marker="m4")
    finally:
        _run(logman, "stop", session, "-ets", check=False)
    _run(tracerpt, str(etl), "-o", str(xml_path), "-of", "XML", "-y")
    by_marker = {e["data"].get("marker"): e for e in _events(xml_path) if e["data"].get("marker")}
    assert set(by_marker) >= {"m1", "m2", "m3", "m4"}, by_marker.keys()

    m1 = by_marker["m1"]
    assert uuid.UUID(m1["guid"]) == guid
    assert (m1["level"], int(m1["keywords"], 16) & 0xFFFFFFFFFFFF) == ("4", 0x4)
    d = m1["data"]
    assert d["s"] == "hello"
    assert int(d["i"]) == -5
    assert int(d["u"]) == 2**64 - 1
    assert float(d["f"]) == 0.25
    assert d["ok"].strip().lower() in ("true", "1")
    assert d["raw"].lower().removeprefix("0x") == "00ff"
    assert uuid.UUID(d["id"]) == U
    assert d["v4"] == "192.0.2.1"
    assert d["when"].startswith("2024-05-06T07:08:09")

    m2 = by_marker["m2"]
    assert (m2["level"], int(m2["data"]["code"])) == ("2", 7)
    m3, m4 = by_marker["m3"], by_marker["m4"]
    assert m3["opcode"] == "1" and uuid.UUID(m3["activity"]) == act.id
    assert uuid.UUID(m4["activity"]) == act.id


def test_listen_process_prints_an_event_of_this_process(etw_os: EtwOs) -> None:
    """A ``listen`` process on Windows prints the event this process logs and its summary."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "structlog_etw",
            "listen",
            etw_os.provider,
            "--json",
            "--count",
            "1",
            "--duration",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "listening to" in first, first + proc.stderr.read()
        _log(etw_os.provider).warning("smoke", n=42)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    (line,) = out.splitlines()
    event = json.loads(line)
    assert (event["provider"], event["name"], event["level"], event["fields"]) == (
        etw_os.provider,
        "smoke",
        3,
        {"n": 42},
    )
    assert "1 events, 0 lost" in err


def test_a_leftover_real_session_is_stopped_and_replaced(etw_os: EtwOs) -> None:
    """A real session left behind under listen's name is stopped and replaced, and gone afterwards."""
    logman = _tool("logman")
    guid = provider_id(etw_os.provider)
    name = session_name(etw_os.provider)
    _run(logman, "start", name, "-p", f"{{{guid}}}", "-rt", "-ets")  # as if a listen had died
    try:
        with EtwListener(etw_os.provider, level=5) as listener:
            assert listener.stale_stopped
            _log(etw_os.provider).info("after_stale", x=1)
            got = [e.decoded.name for e in listener.drain() if e.decoded is not None]
        assert got == ["after_stale"]
        assert etw_os.provider not in _run(logman, "query", "-ets").stdout
    finally:
        _run(logman, "stop", name, "-ets", check=False)
