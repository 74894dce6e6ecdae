"""The perf.data reader's samples and formats are what the writers' protocols
(:mod:`structlog_etw.read.sample`) say they read: every member, of the right kind, on the objects
a real capture gives (mypy --strict checks the types where the command line hands them over)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.perf.tracefs_format import parse_format
from structlog_etw.read import sample as protocols
from tests.helpers.perfdata import plain_format
from tests.helpers.shared_data import vector


def _members(protocol: type) -> dict[str, bool]:
    """The protocol's members: name -> whether it is a method (else a read-only attribute)."""
    return {
        name: not isinstance(value, property)
        for name, value in vars(protocol).items()
        if isinstance(value, property) or (inspect.isfunction(value) and not name.startswith("_"))
    }


@pytest.fixture(scope="module")
def capture() -> list[Any]:
    """The samples of the conformance capture (perf record of Microsoft's test provider)."""
    with PerfDataFile.open(vector("perf.data")) as f:
        return [s for s in f.samples() if s.format is not None]


def test_every_protocol_names_what_it_has() -> None:
    """Each protocol has members, each with a docstring (the API reference shows them)."""
    for protocol in (protocols.PerfSample, protocols.PerfFormat, protocols.PerfField, protocols.PerfUnpack):
        members = _members(protocol)
        assert members, protocol
        for name in members:
            assert inspect.getdoc(getattr(protocol, name)), f"{protocol.__name__}.{name}"


def test_a_captured_sample_has_every_member_a_writer_reads(capture: list[Any]) -> None:
    """A sample, its format, the format's fields and their unpack have each member the
    protocols name (attributes as attributes, methods callable), for every format of the capture."""

    def check(obj: object, protocol: type) -> None:
        for name, is_method in _members(protocol).items():
            assert hasattr(obj, name), f"{type(obj).__name__} lacks {protocol.__name__}.{name}"
            assert callable(getattr(obj, name)) == is_method or name == "unpack_from", name

    assert capture
    plain = parse_format("test", plain_format("tick", 500))
    assert plain is not None
    formats = {id(s.format): s.format for s in capture} | {id(plain): plain}
    for s in capture:
        check(s, protocols.PerfSample)
    unpacked = 0
    for fmt in formats.values():
        check(fmt, protocols.PerfFormat)
        for field in fmt.own_fields:
            check(field, protocols.PerfField)
        unpack = fmt.fields_unpack(small_unsigned=False)
        if unpack is not None:
            check(unpack, protocols.PerfUnpack)
            unpacked += 1
    assert unpacked  # the plain tracepoint's fields are read in one unpack
