"""Our EventHeader decoder agrees with Microsoft's perf-decode on LinuxTracepoints' own test data.

Every event of EventHeaderInterceptorLE64.dat and of perf.data must decode to
exactly the names, fields (in order, with duplicates and field tags) and values
of the expected ``.linux.json`` files beside them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from structlog_etw.perf import samples as samples_module
from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.perf.samples import decode_sample, sample_perf_json
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.read.writers.perf_json import perf_json
from tests.helpers.shared_data import (
    expected_perf_data_events,
    load_expected,
    pairs,
    read_dat,
    untagged,
    vector,
)

DAT = "EventHeaderInterceptorLE64.dat"


def _mismatches(got: list[Any], expected: list[Any]) -> list[str]:
    problems = []
    if len(got) != len(expected):
        problems.append(f"{len(got)} events decoded, {len(expected)} expected")
    for i, (g, e) in enumerate(zip(got, expected, strict=False)):
        if g != e:
            problems.append(f"event {i}:\n  got      {g!r:.800}\n  expected {e!r:.800}")
    return problems


def test_every_interceptor_event_decodes_like_perf_decode() -> None:
    """All 374 events of Microsoft's interceptor capture render as perf-decode's expected JSON."""
    records = read_dat(vector(DAT))
    expected = load_expected(vector(DAT + ".linux.json"))
    assert len(records) == 374
    got = [pairs(perf_json(decode_event(name, data))) for name, data in records]
    problems = _mismatches(got, expected)
    assert not problems, "\n".join(problems[:20])


def test_perf_decode_text_is_rendered_from_the_decoded_event_alone() -> None:
    """perf_json reads the DecodedEvent (value bytes, byte order, raw name), never the event bytes."""
    records = read_dat(vector(DAT))
    expected = load_expected(vector(DAT + ".linux.json"))
    got = [pairs(perf_json(dataclasses.replace(decode_event(n, d), raw=b""))) for n, d in records]
    problems = _mismatches(got, expected)
    assert not problems, "\n".join(problems[:20])


def test_interceptor_python_values_match_the_expected_names_and_levels() -> None:
    """Each interceptor event's name, header fields, activity ids and field names match the expected."""
    records = read_dat(vector(DAT))
    expected = load_expected(vector(DAT + ".linux.json"))
    for (name, data), exp in zip(records, expected, strict=True):
        ev = decode_event(name, data)
        exp_d = dict(exp)
        provider, _, event_name = exp_d["n"].partition(":")
        assert (ev.provider, ev.name) == (provider, event_name)
        meta = dict(exp_d["meta"])
        assert ev.level == meta.get("level", 0)
        assert ev.keyword == int(meta.get("keyword", "0x0"), 16)
        assert ev.opcode == meta.get("opcode", 0)
        assert ev.id == meta.get("id", 0)
        assert ev.version == meta.get("version", 0)
        assert ev.tag == int(meta.get("tag", "0x0"), 16)
        assert (str(ev.activity_id) if ev.activity_id else None) == meta.get("activity")
        assert (str(ev.related_id) if ev.related_id else None) == meta.get("relatedActivity")
        top_level_names = [k.split(";tag=")[0] for k, _ in exp if k not in ("n", "meta")]
        assert [f.name for f in ev.field_list] == top_level_names


def test_a_changed_payload_byte_is_detected_by_the_comparison() -> None:
    """The comparison is not vacuous: flipping one value byte makes an event differ."""
    records = read_dat(vector(DAT))
    expected = load_expected(vector(DAT + ".linux.json"))
    index = next(i for i, exp in enumerate(expected) if dict(exp)["n"] == "TestProviderC:u32")
    name, data = records[index]
    corrupted = data[:-1] + bytes([data[-1] ^ 0xFF])
    assert pairs(perf_json(decode_event(name, corrupted))) != expected[index]


@pytest.mark.parametrize("field_tags", [True, False])
def test_field_tags_are_written_only_when_asked(field_tags: bool) -> None:
    """Field tags appear in perf-decode JSON (";tag=0xBEEF") only when field_tags is set."""
    records = read_dat(vector(DAT))
    name, data = next(r for r in records if r[0].startswith("TestProviderC_") and b"CScalars3" in r[1])
    text = perf_json(decode_event(name, data), field_tags=field_tags)
    assert ('"Struct20;tag=0xBEEF"' in text) is field_tags


PERF = "perf.data"


def test_every_perf_data_sample_decodes_like_perf_decode() -> None:
    """All 539 samples: 285 sched:sched_switch (plain tracepoints, decoded by their tracefs
    format) and 254 EventHeader user_events, with time, cpu, pid and tid; field tags as the
    current perf-decode writes them (3 events carry some)."""
    f = PerfDataFile.open(vector(PERF))
    samples = list(f.samples())
    expected = expected_perf_data_events()
    assert f.problems == []
    assert len(samples) == 539
    assert sum(s.is_eventheader for s in samples) == 254
    got = [pairs(sample_perf_json(s)) for s in samples]
    problems = _mismatches(got, expected)
    assert not problems, "\n".join(problems[:20])


def test_perf_data_samples_render_from_their_decoded_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given the decoded event, sample_perf_json decodes nothing again and needs no event bytes."""
    f = PerfDataFile.open(vector(PERF))
    samples = list(f.samples())
    decoded = [dataclasses.replace(decode_sample(s), raw=b"") for s in samples]
    expected = expected_perf_data_events()

    def no_second_decode(*args: object) -> None:
        raise AssertionError("decoded again")

    monkeypatch.setattr(samples_module, "decode_event", no_second_decode)
    got = [pairs(sample_perf_json(s, decoded=ev)) for s, ev in zip(samples, decoded, strict=True)]
    problems = _mismatches(got, expected)
    assert not problems, "\n".join(problems[:20])


class TestPlainTracepointPerfJson:
    """--perf-json of plain (tracefs) tracepoints is written from their DecodedEvent alone."""

    def test_sched_switch_text_needs_no_event_bytes(self) -> None:
        """The 285 sched_switch samples render as perf-decode does with every event byte gone
        (the sample's raw and data and the decoded event's raw emptied): the writer reads fields only."""
        f = PerfDataFile.open(vector(PERF))
        pairs_in = [(s, e) for s, e in zip(f.samples(), expected_perf_data_events(), strict=True)]
        plain = [(s, e) for s, e in pairs_in if not s.is_eventheader]
        assert len(plain) == 285
        got = []
        for s, _ in plain:
            event = dataclasses.replace(decode_sample(s), raw=b"")
            hollow = dataclasses.replace(s, raw=b"", data=b"")
            got.append(pairs(sample_perf_json(hollow, decoded=event)))
        problems = _mismatches(got, [e for _, e in plain])
        assert not problems, "\n".join(problems[:20])

    def test_the_text_follows_the_decoded_fields(self) -> None:
        """Changed DecodedField value bytes change the text: the writer reads the fields, not the event."""
        f = PerfDataFile.open(vector(PERF))
        sample = next(s for s in f.samples() if not s.is_eventheader)
        event = decode_sample(sample)
        pid = next(i for i, fl in enumerate(event.field_list) if fl.name == "prev_pid")
        changed = list(event.field_list)
        changed[pid] = dataclasses.replace(changed[pid], value=0x1234, raw=(0x1234).to_bytes(4, "little"))
        text = sample_perf_json(sample, decoded=dataclasses.replace(event, field_list=tuple(changed)))
        assert '"prev_pid":"0x1234"' in text
        assert '"prev_pid":"0x950"' in sample_perf_json(sample, decoded=event)


def test_the_perf_data_expectation_differs_from_the_old_file_only_by_field_tags() -> None:
    """The tagged expectation is the shipped file plus tags on exactly the 3 events that carry them."""
    old = load_expected(vector(PERF + ".linux.json"))
    new = expected_perf_data_events()
    assert [untagged(e) for e in new] == old
    assert sum(a != b for a, b in zip(new, old, strict=True)) == 3


def test_sched_switch_samples_decode_to_python_values() -> None:
    """A sched_switch sample of the real perf.data decodes to its tracefs fields as Python values."""
    f = PerfDataFile.open(vector(PERF))
    first = decode_sample(next(s for s in f.samples() if not s.is_eventheader))
    assert (first.provider, first.name) == ("sched", "sched_switch")
    assert (first.format, first.raw_name) == ("tracefs", b"sched_switch")
    assert first.fields == {
        "prev_comm": "perf",
        "prev_pid": 0x950,
        "prev_prio": 120,
        "prev_state": 2,
        "next_comm": "migration/0",
        "next_pid": 0x11,
        "next_prio": 0,
    }
