"""``structlog-etw listen`` on its Windows path (an ETW session), run against the C stand-in."""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time

import pytest

from structlog_etw.backends.etw import EtwBackend
from structlog_etw.cli import listen
from structlog_etw.etw import EtwListener, session_name
from structlog_etw.write.fields import to_fields
from structlog_etw.write.tracelogging import TraceLoggingEncoder
from tests.helpers.fake_etw import Fake

NAME = "MyCompany_ListenWin"


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    listen.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture
def windows_listen(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> Fake:
    monkeypatch.setattr(listen, "_PLATFORM", "win32")
    monkeypatch.setattr(listen, "_ETW_LIBRARY", fake.path)
    return fake


def _writer(fake: Fake, events: list[tuple[str, int, int]]) -> threading.Thread:
    """Once listen's session has enabled the provider, register it and write ``events`` (name,
    level, keyword).  Not as soon as the session exists: between StartTraceW and EnableTraceEx2
    (a loaded machine can stretch that window) every event would be written disabled and dropped,
    and ``listen --count`` would wait for them forever."""

    def enabled() -> bool:
        info = fake.session_info(session_name(NAME))
        return info is not None and info["params_version"] != 0  # EnableTraceEx2 was called

    def write() -> None:
        deadline = time.monotonic() + 30
        while not enabled() and time.monotonic() < deadline:
            time.sleep(0.01)
        backend = EtwBackend(NAME, library=fake.path)
        enc = TraceLoggingEncoder(NAME)
        try:
            for name, level, keyword in events:
                event = enc.encode(name, to_fields({"k": keyword}.items()), level)
                assert event is not None
                backend.write(backend.open_slot(level, keyword), event)
        finally:
            backend.close()

    t = threading.Thread(target=write)
    t.start()
    return t


@pytest.mark.parametrize("enable_delay", [0.0, 0.5])
def test_listen_on_windows_shows_the_sessions_events_with_filters(
    windows_listen: Fake,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    enable_delay: float,
) -> None:
    """``listen`` on Windows shows the session's events passing level and keyword, then stops it;
    also when the session enables the provider late (as on a loaded machine).  ``--duration``
    bounds the run: a lost event fails the test instead of hanging it."""
    if enable_delay:
        enable = EtwListener._enable

        def late(self: EtwListener) -> None:
            time.sleep(enable_delay)  # the session exists, the provider is not enabled yet
            enable(self)

        monkeypatch.setattr(EtwListener, "_enable", late)
    events = [("info_k4", 4, 4), ("warn_k8", 3, 8), ("warn_k4", 3, 4), ("error_k6", 2, 6), ("late", 1, 4)]
    writer = _writer(windows_listen, events)
    argv = [NAME, "--json", "--level", "warning", "--keyword", "0x4", "--count", "2", "--duration", "60"]
    rc = listen.run(_args(argv))
    writer.join(60)
    assert not writer.is_alive()
    out, err = capsys.readouterr()
    assert rc == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(d["name"], d["level"]) for d in lines] == [("warn_k4", 3), ("error_k6", 2)]
    assert (lines[0]["provider"], lines[0]["keyword"], lines[0]["fields"]) == (NAME, 4, {"k": 4})
    assert lines[0]["tracepoint"] is None  # ETW has no tracepoints
    assert lines[0]["pid"] is not None and lines[0]["timestamp"] is not None
    assert f"session structlog-etw-listen-{NAME}" in err
    assert "2 events, 0 lost" in err
    assert windows_listen.lib.fake_sessions_in_use() == 0  # stopped and closed on exit


def test_listen_on_windows_text_output_and_duration(
    windows_listen: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    """``listen --duration`` on Windows writes text lines and stops after the duration with its summary."""
    writer = _writer(windows_listen, [("hello", 4, 1)])
    rc = listen.run(_args([NAME, "--duration", "3", "--no-color"]))
    writer.join(60)
    assert not writer.is_alive()
    out, err = capsys.readouterr()
    assert rc == 0
    assert "hello" in out and "k=1" in out.replace(": ", "=")
    assert "1 events, 0 lost" in err


def test_listen_on_windows_without_rights_exits_2(
    windows_listen: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    """``listen`` on Windows without rights exits 2 saying to run as administrator; --group too."""
    windows_listen.lib.fake_set_start_result(5)
    assert listen.run(_args([NAME])) == 2
    assert "administrator" in capsys.readouterr().err
    assert listen.run(_args([NAME, "--group", "g"])) == 2


def test_ctrl_c_stops_listen_and_its_session(
    windows_listen: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C stops ``listen`` with exit 0 and its summary, and its ETW session is gone."""

    def interrupt() -> None:
        deadline = time.monotonic() + 10
        # listen's own handler is in place once its session runs: Ctrl-C then means "stop".
        while signal.getsignal(signal.SIGINT) is signal.default_int_handler and time.monotonic() < deadline:
            time.sleep(0.01)
        assert windows_listen.session_info(session_name(NAME)) is not None
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    rc = listen.run(_args([NAME, "--duration", "30"]))  # would run 30 s without the Ctrl-C
    t.join(30)
    assert not t.is_alive()
    assert rc == 0
    assert "0 events, 0 lost" in capsys.readouterr().err
    assert windows_listen.lib.fake_sessions_in_use() == 0
