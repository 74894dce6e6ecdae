"""The read side's shared rules: one error for every decoder, one struct nesting limit for both
formats, one parser of tracepoint names.

The events are built here from the formats' byte layouts (shared/spec), independent of the
project's encoders, so the limit is tried exactly at its edge.
"""

from __future__ import annotations

import pytest

from structlog_etw.formats import eventheader as eventheader_spec
from structlog_etw.formats.eventheader import EventHeaderDecodeError, parse_tracepoint_name
from structlog_etw.perf import SampleDecodeError, match_tracepoint
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.read.decode.tracelogging import decode as tracelogging_decode
from structlog_etw.read.decoded import MAX_DECODE_NESTING, DecodeError
from tests.helpers.hostile import eventheader_event, tracelogging_metadata

_TRACEPOINT = "P_L4K1"


def _eventheader_nested(depth: int) -> bytes:
    """An EventHeader event: ``depth`` structs, each the one member of the one outside it, around a Value8."""
    struct_field = b"s\0" + bytes([0x01 | 0x80, 1])  # Struct (encoding 1, chained format = 1 member)
    return eventheader_event(struct_field * depth + b"v\0\x02", b"\x07")  # Value8


def _tracelogging_nested(depth: int) -> bytes:
    """TraceLogging metadata: ``depth`` structs, each the one member of the one outside it, around a UINT8."""
    struct_field = b"s\0" + bytes([0x18 | 0x80, 1])  # STRUCT (InType 24, OutType = 1 member)
    return tracelogging_metadata(struct_field * depth + b"v\0\x04")  # UINT8


def _innermost(value: object, depth: int) -> object:
    for _ in range(depth):
        assert isinstance(value, dict)
        value = value["s"]
    assert isinstance(value, dict)
    return value["v"]


class TestOneDecodeError:
    """Both decoders (and the perf sample decoder) refuse malformed bytes with the one DecodeError."""

    def test_decode_error_is_a_value_error(self) -> None:
        """Code that catches ValueError around a decoder keeps working."""
        assert issubclass(DecodeError, ValueError)

    def test_the_eventheader_name_is_an_alias_of_the_same_class(self) -> None:
        """EventHeaderDecodeError (public since 0.1) is DecodeError itself, from the package and from spec."""
        assert EventHeaderDecodeError is DecodeError
        assert eventheader_spec.EventHeaderDecodeError is DecodeError

    def test_a_truncated_eventheader_event_raises_decode_error(self) -> None:
        """An EventHeader event cut inside its header is a DecodeError."""
        with pytest.raises(DecodeError, match="too short"):
            decode_event(_TRACEPOINT, b"\x07\0")

    def test_a_bad_tracepoint_name_raises_decode_error(self) -> None:
        """A name that is not <Provider>_L<level>K<keyword> is a DecodeError."""
        with pytest.raises(DecodeError, match="not an EventHeader tracepoint name"):
            parse_tracepoint_name("NoUnderscore")

    def test_truncated_tracelogging_metadata_raises_decode_error(self) -> None:
        """TraceLogging metadata whose size word disagrees with its length is a DecodeError."""
        with pytest.raises(DecodeError, match="metadata size"):
            tracelogging_decode(b"\x09\0\0a\0", b"")

    def test_tracelogging_data_left_over_raises_decode_error(self) -> None:
        """TraceLogging data longer than the fields it declares is a DecodeError."""
        with pytest.raises(DecodeError, match="left over"):
            tracelogging_decode(tracelogging_metadata(b"v\0\x04"), b"\x01\x02")

    def test_a_short_event_descriptor_raises_decode_error(self) -> None:
        """An EVENT_DESCRIPTOR that is not 16 bytes is a DecodeError (it was struct.error)."""
        with pytest.raises(DecodeError, match="16 bytes"):
            tracelogging_decode(tracelogging_metadata(b"v\0\x04"), b"\x01", descriptor=b"\0" * 15)

    def test_the_sample_error_is_a_decode_error(self) -> None:
        """perf's SampleDecodeError (which names the sample) is caught by ``except DecodeError``."""
        assert issubclass(SampleDecodeError, DecodeError)


class TestOneNestingLimit:
    """Both formats follow structs MAX_DECODE_NESTING deep and refuse one more level."""

    def test_the_limit_is_32(self) -> None:
        """The shared limit keeps the EventHeader decoder's 32 (perf-decode's stack is 8 deep)."""
        assert MAX_DECODE_NESTING == 32

    def test_eventheader_structs_nested_to_the_limit_decode(self) -> None:
        """MAX_DECODE_NESTING nested EventHeader structs decode down to the innermost value."""
        ev = decode_event(_TRACEPOINT, _eventheader_nested(MAX_DECODE_NESTING))
        assert _innermost(ev.fields["s"], MAX_DECODE_NESTING - 1) == 7

    def test_eventheader_structs_nested_past_the_limit_are_refused(self) -> None:
        """One more EventHeader struct level is a DecodeError."""
        with pytest.raises(DecodeError, match="nested too deeply"):
            decode_event(_TRACEPOINT, _eventheader_nested(MAX_DECODE_NESTING + 1))

    def test_tracelogging_structs_nested_to_the_limit_decode(self) -> None:
        """MAX_DECODE_NESTING nested TraceLogging structs decode down to the innermost value."""
        ev = tracelogging_decode(_tracelogging_nested(MAX_DECODE_NESTING), b"\x07")
        assert _innermost(ev.fields["s"], MAX_DECODE_NESTING - 1) == 7

    def test_tracelogging_structs_nested_past_the_limit_are_refused(self) -> None:
        """One more TraceLogging struct level is a DecodeError (it was 64 before the limits became one)."""
        with pytest.raises(DecodeError, match=f"nested deeper than {MAX_DECODE_NESTING}"):
            tracelogging_decode(_tracelogging_nested(MAX_DECODE_NESTING + 1), b"\x07")


class TestOneTracepointNameParser:
    """The listener reads tracepoint names with the spec's parser: one place says whose a name is."""

    @pytest.mark.parametrize(
        "name", ["NoUnderscore", "P_4K1", "P_L4", "P_L4K1g", "P_L4K1G!", "x" * 256 + "_L4K1"]
    )
    def test_names_the_parser_refuses_match_no_provider(self, name: str) -> None:
        """Every name parse_tracepoint_name refuses is no provider's tracepoint for the listener."""
        with pytest.raises(DecodeError):
            parse_tracepoint_name(name)
        assert match_tracepoint(name.rpartition("_")[0] or name, name) is None

    @pytest.mark.parametrize(
        "name", ["P_L4K1", "P_L5K1fGgroup1", "P_L1Kf123456789abcdef", "P_L4K0", "Two_Parts_L3K2Gg"]
    )
    def test_the_listener_takes_what_the_parser_reads(self, name: str) -> None:
        """match_tracepoint's (level, keyword) are parse_tracepoint_name's, for the provider it names."""
        provider, level, keyword, _options = parse_tracepoint_name(name)
        assert match_tracepoint(provider, name) == (level, keyword)

    def test_the_group_is_the_g_option(self) -> None:
        """A group filter takes the tracepoints whose options are exactly G<group>."""
        assert match_tracepoint("P", "P_L4K1Gmine", group="mine") == (4, 1)
        assert match_tracepoint("P", "P_L4K1Gother", group="mine") is None
        assert match_tracepoint("P", "P_L4K1", group="mine") is None
