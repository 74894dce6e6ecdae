"""The structlog-etw command: guid, tracepoints, decode — as a subprocess and in-process."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from structlog_etw.cli import COMMANDS, main
from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.perf.samples import decode_sample, sample_perf_json
from structlog_etw.read.decode.tracelogging import decode as tracelogging_decode
from structlog_etw.read.decoded import EventMeta
from structlog_etw.read.writers.console import event_pretty
from structlog_etw.read.writers.json_lines import event_json
from structlog_etw.read.writers.perf_json import perf_json_fields
from structlog_etw.write.fields import to_fields
from structlog_etw.write.tracelogging import TraceLoggingEncoder
from tests.helpers.shared_data import REPO, expected_perf_data_events, pairs, pipe_mode_copy, vector

GUID_VECTORS = {
    "MyProvider": "b3864c38-4273-58c5-545b-8b3608343471",
    "TestProvider": "97c801ee-c28b-5bb6-2ae4-11e18fe6137a",
    "MyProviderName": "b7aa4d18-240c-5f41-5852-817dbf477472",
}


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m structlog_etw ARGS`` from the work tree."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "structlog_etw", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",
        env=full_env,
        cwd=REPO,
        check=False,
        timeout=120,
    )


# --- guid --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "guid"), GUID_VECTORS.items())
def test_guid_prints_the_eventsource_hash_and_the_star_form(name: str, guid: str) -> None:
    """``guid NAME`` prints the EventSource-hash GUID and the *NAME form, exit status 0."""
    proc = run_cli("guid", name)
    assert proc.returncode == 0, proc.stderr
    assert f"guid:    {guid}" in proc.stdout
    assert f"*{name}" in proc.stdout


def test_guid_quiet_prints_one_guid_per_name(capsys: pytest.CaptureFixture[str]) -> None:
    """``guid -q`` prints only the GUIDs, one per name given, in order."""
    assert main(["guid", "-q", *GUID_VECTORS]) == 0
    assert capsys.readouterr().out.split() == list(GUID_VECTORS.values())


def test_guid_warns_about_non_ascii_names(capsys: pytest.CaptureFixture[str]) -> None:
    """``guid`` on a non-ASCII name still succeeds and warns on stderr that it is "not ASCII"."""
    assert main(["guid", "-q", "Prövider"]) == 0
    assert "not ASCII" in capsys.readouterr().err


# --- tracepoints -------------------------------------------------------------------------------


def test_tracepoints_default_is_keyword_1_at_levels_1_to_5(capsys: pytest.CaptureFixture[str]) -> None:
    """``tracepoints P`` lists keyword 1 at levels 1-5 and one perf record line with all five."""
    assert main(["tracepoints", "MyCompany_MyService"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:5] == [f"MyCompany_MyService_L{lv}K1" for lv in range(1, 6)]
    perf = next(line for line in out if line.startswith("perf record"))
    assert perf.startswith("perf record -a -k monotonic -o perf.data ")
    assert perf.count(" -e user_events:MyCompany_MyService_L") == 5


def test_tracepoints_keywords_levels_and_group(capsys: pytest.CaptureFixture[str]) -> None:
    """``tracepoints`` crosses each -k keyword with each -l level (names or numbers) and the -g group."""
    argv = ["tracepoints", "P", "-k", "0x1F", "-k", "4", "-l", "info", "-l", "2", "-g", "grp1"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["P_L2K1fGgrp1", "P_L4K1fGgrp1", "P_L2K4Ggrp1", "P_L4K4Ggrp1"]


@pytest.mark.parametrize(
    "argv",
    [
        ["tracepoints", "Bad-Name"],
        ["tracepoints", "Bad:Name"],
        ["tracepoints", "P", "-g", "Upper"],
        ["tracepoints", "P" * 240, "-g", "x"],
    ],
)
def test_tracepoints_rejects_names_the_encoder_rejects(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``tracepoints`` exits 2 with its own message for names and groups the encoder would refuse."""
    assert main(argv) == 2
    assert "structlog-etw tracepoints:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["tracepoints", "P", "-l", "loud"], ["tracepoints", "P", "-k", "0x1" + "0" * 16]]
)
def test_tracepoints_rejects_bad_levels_and_keywords(argv: list[str]) -> None:
    """An unknown level name or a keyword past 64 bits is a usage error (exit status 2)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_tracepoints_via_python_dash_m() -> None:
    """``python -m structlog_etw tracepoints`` with --keyword, --level prints that tracepoint, -e line."""
    proc = run_cli("tracepoints", "MyCompany_MyService", "--keyword", "4", "--level", "4")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "MyCompany_MyService_L4K4"
    assert "-e user_events:MyCompany_MyService_L4K4" in proc.stdout


# --- decode ------------------------------------------------------------------------------------


def test_decode_json_agrees_with_the_decoder_api() -> None:
    """Every "decode --json" line of perf.data holds the header, sample and fields the decoder API gives."""
    path = vector("perf.data")
    proc = run_cli("decode", "--json", "--order", "file", str(path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    samples = list(PerfDataFile.open(path).samples())
    assert len(lines) == len(samples) == 539
    for line, sample in zip(lines, samples, strict=True):
        obj = json.loads(line)
        ev = decode_sample(sample)
        assert (obj["provider"], obj["name"], obj["level"], obj["keyword"]) == (
            ev.provider,
            ev.name,
            ev.level,
            ev.keyword,
        )
        assert obj["tag"] == ev.tag
        assert (obj["opcode"], obj["id"], obj["version"]) == (ev.opcode, ev.id, ev.version)
        assert obj["activity_id"] == (str(ev.activity_id) if ev.activity_id else None)
        assert obj["related_id"] == (str(ev.related_id) if ev.related_id else None)
        assert (obj["cpu"], obj["pid"], obj["tid"], obj["time_ns"]) == (
            sample.cpu,
            sample.pid,
            sample.tid,
            sample.time,
        )
        assert obj["tracepoint"] == sample.name
        assert obj["timestamp"].endswith("Z")
        if sample.is_eventheader:
            text = "{" + perf_json_fields(ev, field_tags=False) + "}"
            # --json keeps its output valid UTF-8: what perf-decode writes as invalid UTF-8 becomes U+FFFD
            expected_fields = pairs(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
            got_fields = json.loads(json.dumps(obj["fields"]), object_pairs_hook=list)
            if len(dict(expected_fields)) == len(expected_fields):  # no duplicate names
                assert got_fields == expected_fields
            assert [k for k, _ in expected_fields if k in obj["fields"]] == [k for k, _ in expected_fields]
        else:
            assert obj["fields"] == {k: v for k, v in ev.fields.items()}


def test_decode_perf_json_matches_perf_decode_output() -> None:
    """Byte for byte the values perf-decode writes, invalid UTF-8 and field tags included."""
    proc = run_cli("decode", "--perf-json", "--file-order", str(vector("perf.data")))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    expected = expected_perf_data_events()
    assert len(lines) == len(expected)
    for line, exp in zip(lines, expected, strict=True):
        assert pairs(line) == exp


def test_decode_filters_by_provider_and_event(capsys: pytest.CaptureFixture[str]) -> None:
    """``decode --provider`` keeps only that provider's events, and --event only the events of that name."""
    path = str(vector("perf.data"))
    assert main(["decode", "--json", "--provider", "TestProviderCpp", path]) == 0
    objs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert objs
    assert {o["provider"] for o in objs} == {"TestProviderCpp"}
    assert main(["decode", "--json", "--provider", "TestProviderC", "--event", "u32", path]) == 0
    objs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(o["name"], o["fields"]) for o in objs] == [
        ("u32", {"u32": 4000000000, "(4294967295U)": 4294967295})
    ]


def test_decode_pretty_has_no_colour_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    """``decode --pretty`` to a pipe writes no ANSI colour and shows level, name, struct fields, opcode."""
    assert (
        main(
            [
                "decode",
                "--pretty",
                "--provider",
                "TestProviderC",
                "--event",
                "CScalars3",
                str(vector("perf.data")),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert "[info     ] CScalars3" in out
    assert "Struct20={hi=hi, ch10=[H, o, w]}" in out
    assert "opcode=3" in out


def test_decode_text_colours_only_a_terminal_without_no_color() -> None:
    """Run under a pseudo-terminal: text with colour by default, none with NO_COLOR."""
    pty = pytest.importorskip("pty", reason="pseudo-terminals are POSIX-only")
    path = str(vector("perf.data"))
    outputs = {}
    for no_color in ("", "1"):
        env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        env["PYTHONPATH"] = str(REPO)
        if no_color:
            env["NO_COLOR"] = no_color
        main_fd, child_fd = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "structlog_etw", "decode", "--event", "u8", path],
            stdout=child_fd,
            stderr=subprocess.PIPE,
            env=env,
            cwd=REPO,
        )
        os.close(child_fd)
        chunks = []
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=60)
        os.close(main_fd)
        outputs[no_color] = b"".join(chunks).decode()
    assert "\x1b[34mdebug" in outputs[""]  # u8 is a level-5 event: debug, in blue
    assert "\x1b[" not in outputs["1"]
    assert "u8=200" in outputs["1"]


def _cut(tmp_path: Path, fraction: float) -> Path:
    data = vector("perf.data").read_bytes()
    out = tmp_path / f"cut{int(fraction * 100)}.data"
    out.write_bytes(data[: int(len(data) * fraction)])
    return out


def test_decode_truncated_in_the_data_reports_and_exits_non_zero(tmp_path: Path) -> None:
    """A perf.data cut in its data exits 1, reporting the truncation, unknown formats and the problems."""
    proc = run_cli("decode", "--json", str(_cut(tmp_path, 0.5)))
    assert proc.returncode == 1
    assert "file truncated" in proc.stderr
    assert "format unknown" in proc.stderr  # the tracepoint formats were in the lost tail
    assert "problems" in proc.stderr


def test_decode_truncated_in_the_features_still_decodes_every_event(tmp_path: Path) -> None:
    """A perf.data cut in its feature sections exits 1 saying so, yet decodes all 539 events."""
    cut = _cut(tmp_path, 0.97)
    proc = run_cli("decode", "--json", str(cut))
    assert proc.returncode == 1
    assert "truncated" in proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 539
    full = [sample_perf_json(s) for s in PerfDataFile.open(vector("perf.data")).samples()]
    assert len(full) == len(lines)


def test_decode_damaged_record_keeps_what_came_before(tmp_path: Path) -> None:
    """A damaged record exits 1 naming its offset, after writing the 300 events before it."""
    data = bytearray(vector("perf.data").read_bytes())
    samples = list(PerfDataFile.from_bytes(bytes(data)).samples())
    victim = samples[300].offset
    data[victim + 6 : victim + 8] = b"\x00\x00"
    path = tmp_path / "damaged.data"
    path.write_bytes(bytes(data))
    proc = run_cli("decode", "--json", str(path))
    assert proc.returncode == 1
    assert len(proc.stdout.splitlines()) == 300
    assert f"damaged record at offset {victim}" in proc.stderr


def test_decode_unreadable_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing file or one that is not perf.data exits 2 with a message naming the problem."""
    assert main(["decode", str(tmp_path / "missing.data")]) == 2
    assert "missing.data" in capsys.readouterr().err
    junk = tmp_path / "junk.data"
    junk.write_bytes(b"this is not perf data")
    assert main(["decode", str(junk)]) == 2
    assert "not a perf.data file" in capsys.readouterr().err


# --- the command itself ------------------------------------------------------------------------


def test_no_subcommand_prints_usage_and_exits_2() -> None:
    """Without a subcommand the CLI prints usage listing guid and decode to stderr and exits 2."""
    proc = run_cli()
    assert proc.returncode == 2
    assert "guid" in proc.stderr
    assert "decode" in proc.stderr


def test_every_registered_subcommand_has_help() -> None:
    """Every registered subcommand's --help exits 0 and names "structlog-etw <subcommand>"."""
    for name, _module, _help in COMMANDS:
        proc = run_cli(name, "--help")
        assert proc.returncode == 0, proc.stderr
        assert f"structlog-etw {name}" in proc.stdout


def test_version() -> None:
    """--version exits 0 and prints "structlog-etw <version>"."""
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("structlog-etw ")


def test_decode_reads_a_pipe_mode_stream_from_stdin() -> None:
    """``perf record -o - | structlog-etw decode -``: perf's pipe format on stdin."""
    stream = pipe_mode_copy(vector("perf.data").read_bytes())
    proc = subprocess.run(
        [sys.executable, "-m", "structlog_etw", "decode", "--perf-json", "--file-order", "-"],
        input=stream,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    expected = expected_perf_data_events()
    assert [pairs(line) for line in lines] == expected


# --- rendering ---------------------------------------------------------------------------------


def test_cli_modules_render_decoded_events_and_parse_no_bytes() -> None:
    """No CLI module unpacks event bytes or reaches for another module's private names."""
    for path in sorted((REPO / "structlog_etw" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert all(a.name != "struct" for a in node.names), f"{path.name} imports struct"
            elif isinstance(node, ast.ImportFrom):
                assert node.module != "struct", f"{path.name} imports from struct"
                private = [
                    a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                ]
                assert not private, f"{path.name} imports private names {private} from {node.module}"


def test_tracelogging_events_render_from_their_python_values() -> None:
    """A TraceLogging DecodedEvent's wire numbers are not EventHeader's: JSON and text use its values."""
    _traits, metadata, data = TraceLoggingEncoder("MyCompany.MyService").encode(
        "user_login", to_fields({"user": "ann", "attempts": 3, "peer": {"port": 80}}.items()), 3
    )
    ev = tracelogging_decode(metadata, data, provider="MyCompany.MyService", level=3, keyword=4)
    obj = json.loads(event_json(ev, EventMeta(pid=7, tid=7)))
    assert (obj["provider"], obj["name"], obj["level"], obj["keyword"]) == (
        "MyCompany.MyService",
        "user_login",
        3,
        0x4,
    )
    assert obj["fields"] == {"user": "ann", "attempts": 3, "peer": {"port": 80}}
    line = event_pretty(ev, EventMeta(pid=7, tid=7))
    assert line.startswith("[warning  ] user_login")
    assert "user=ann attempts=3 peer={port=80}" in line


def test_plain_tracepoints_are_shown_without_level_or_keyword() -> None:
    """A plain (tracefs) tracepoint renders as "[tracepoint] name" without an EventHeader keyword."""
    f = PerfDataFile.open(vector("perf.data"))
    ev = decode_sample(next(s for s in f.samples() if not s.is_eventheader))
    assert ev.format == "tracefs"
    line = event_pretty(ev)
    assert line.startswith("[tracepoint] sched_switch")
    assert "k=0x" not in line
