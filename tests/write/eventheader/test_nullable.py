"""None as a nullable EventHeader field (LinuxTracepoints 1.4): bytes, one type per key, decoders."""

from __future__ import annotations

import json
import random
import struct
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.formats.eventheader import (
    ENC_BINARY_LENGTH16_CHAR8,
    ENC_STRING_LENGTH16_CHAR8,
    ENC_VALUE64,
    ENCODING_CHAIN,
    FMT_FLOAT,
    FMT_SIGNED_INT,
    FMT_UNSIGNED_INT,
)
from structlog_etw.formats.header import Header
from structlog_etw.formats.tracelogging import InType, OutType
from structlog_etw.provider._provider import Provider
from structlog_etw.read.decode.eventheader import decode_event
from structlog_etw.read.writers.console import event_pretty
from structlog_etw.read.writers.json_lines import event_json
from structlog_etw.read.writers.perf_json import perf_json_fields
from structlog_etw.write import shapes as _shapes
from structlog_etw.write.eventheader import _encoder as eh
from structlog_etw.write.fields import NULL, dict_fields, to_field
from structlog_etw.write.tracelogging import TraceLoggingEncoder
from tests.helpers.common_schema_collectors import otel_arrow_attributes, read_like_geneva

TP = "P_L4K1"
NULLABLE_INT = bytes((ENC_BINARY_LENGTH16_CHAR8 | ENCODING_CHAIN, FMT_SIGNED_INT))
NULLABLE_FLOAT = bytes((ENC_BINARY_LENGTH16_CHAR8 | ENCODING_CHAIN, FMT_FLOAT))
PLAIN_INT = bytes((ENC_VALUE64 | ENCODING_CHAIN, FMT_SIGNED_INT))


@pytest.fixture
def eager_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes get their entry at their first written event and layouts compile at once."""
    monkeypatch.setattr(_shapes._caches, "SHAPE_HOT", 1)
    monkeypatch.setattr(_shapes._caches, "LAYOUT_HOT", 1)
    monkeypatch.setattr(_shapes._caches, "COMPILE_COST", 0)


def _tail(event: bytes, name: str) -> bytes:
    """The metadata and payload after the event name (the header and extension prefix cut)."""
    return event[event.index(name.encode() + b"\0") + len(name) + 1 :]


def _types(event: bytes) -> dict[str, tuple[int, int]]:
    return {f.name: (f.encoding, f.format) for f in decode_event(TP, event).field_list}


class TestTypeTable:
    """None is its own kind in the format-neutral type table."""

    def test_none_is_the_null_kind(self) -> None:
        """to_field and dict_fields give None the NULL kind, not the text "None"."""
        assert to_field("x", None) == ("x", NULL, None)
        assert dict_fields({"x": None, "y": 1}.items(), None)[0] == ("x", NULL, None)


class TestEncoderBytes:
    """The bytes EventHeader writes for None and for the numbers of a key that has been None."""

    def test_none_alone_is_a_nullable_int64_of_length_zero(self) -> None:
        """A None with no other type known: BinaryLength16Char8 / SignedInt, u16 length 0."""
        out = eh.EventHeaderEncoder().encode_dict("E", {"x": None}, None, Header(4))
        assert out is not None
        assert _tail(out, "E") == b"x\0" + NULLABLE_INT + b"\0\0"

    def test_ints_and_floats_of_a_key_that_was_none_are_nullable_with_their_fixed_size(self) -> None:
        """After a None, the key's int is a counted 8-byte SignedInt value; its float a Float one."""
        enc = eh.EventHeaderEncoder()
        enc.encode_dict("E", {"x": None, "r": None}, None, Header(4))
        out = enc.encode_dict("E", {"x": -2, "r": 0.5}, None, Header(4))
        assert out is not None
        meta = b"x\0" + NULLABLE_INT + b"r\0" + NULLABLE_FLOAT
        values = b"\x08\0" + struct.pack("<q", -2) + b"\x08\0" + struct.pack("<d", 0.5)
        assert _tail(out, "E") == meta + values
        # and the next None of r is a nullable float: the key's first number named its type
        again = enc.encode_dict("E", {"x": None, "r": None}, None, Header(4))
        assert again is not None and _tail(again, "E") == meta + b"\0\0\0\0"

    def test_a_uint64_of_a_nullable_key_is_nullable_unsigned(self) -> None:
        """An int past int64 at a key that was None: BinaryLength16Char8 / UnsignedInt, length 8."""
        enc = eh.EventHeaderEncoder()
        enc.encode_dict("E", {"x": None}, None, Header(4))
        out = enc.encode_dict("E", {"x": 2**64 - 1}, None, Header(4))
        assert out is not None
        assert _types(out)["x"] == (ENC_BINARY_LENGTH16_CHAR8, FMT_UNSIGNED_INT)
        assert decode_event(TP, out).fields == {"x": 2**64 - 1}

    def test_keys_never_none_and_other_events_keep_their_plain_types(self) -> None:
        """Only the keys of the event name that were None change: other keys and names stay Value64."""
        enc = eh.EventHeaderEncoder()
        enc.encode_dict("E", {"x": None, "y": 1}, None, Header(4))
        same = enc.encode_dict("E", {"x": 1, "y": 1}, None, Header(4))
        other = enc.encode_dict("F", {"x": 1}, None, Header(4))
        assert same is not None and other is not None
        assert _types(same) == {
            "x": (ENC_BINARY_LENGTH16_CHAR8, FMT_SIGNED_INT),
            "y": (ENC_VALUE64, FMT_SIGNED_INT),
        }
        assert _tail(other, "F") == b"x\0" + PLAIN_INT + struct.pack("<q", 1)

    def test_a_string_key_keeps_its_string_type_and_its_none_is_a_null(self) -> None:
        """perf-decode reads a zero-length string as "": a None of a str key is a null, never ""."""
        enc = eh.EventHeaderEncoder()
        events = [enc.encode_dict("E", {"s": v}, None, Header(4)) for v in ("a", None, "", "b")]
        assert all(e is not None for e in events)
        assert [decode_event(TP, e).fields["s"] for e in events if e] == ["a", None, "", "b"]
        assert [_types(e)["s"] for e in events if e] == [
            (ENC_STRING_LENGTH16_CHAR8, 0),
            (ENC_BINARY_LENGTH16_CHAR8, FMT_SIGNED_INT),
            (ENC_STRING_LENGTH16_CHAR8, 0),
            (ENC_STRING_LENGTH16_CHAR8, 0),
        ]

    def test_a_none_in_a_struct_is_a_null_member(self) -> None:
        """A None inside a dict is a nullable int64 member of length 0 (the memory is top-level only)."""
        out = eh.EventHeaderEncoder().encode_dict("E", {"d": {"a": None, "b": 1}}, None, Header(4))
        assert out is not None
        assert decode_event(TP, out).fields == {"d": {"a": None, "b": 1}}

    def test_typed_fields_route_writes_nulls_too(self) -> None:
        """encode() with a NULL field (the typed-field API) writes the same nullable field."""
        out = eh.EventHeaderEncoder().encode("E", [("x", NULL, None)], 4)
        assert out is not None and _tail(out, "E") == b"x\0" + NULLABLE_INT + b"\0\0"


class TestOneTypePerKey:
    """A key sometimes None and sometimes a number keeps one field type from its first None on."""

    def test_sometimes_none_ints_have_one_field_type_after_the_first_none(self, eager_shapes: None) -> None:
        """Every event from the first None on carries the key as one nullable SignedInt type."""
        enc = eh.EventHeaderEncoder()
        values: list[Any] = [5, None, 7, None, None, 9, 11] * 4
        events = [enc.encode_dict("E", {"status": v, "path": "/"}, None, Header(4)) for v in values]
        decoded = [decode_event(TP, e) for e in events if e is not None]
        assert [d.fields["status"] for d in decoded] == values
        types = {_types(e)["status"] for e in events[1:] if e is not None}
        assert types == {(ENC_BINARY_LENGTH16_CHAR8, FMT_SIGNED_INT)}
        assert _types(events[0] or b"")["status"] == (ENC_VALUE64, FMT_SIGNED_INT)  # before the first None

    def test_shape_functions_write_nullable_shapes_byte_for_byte_as_the_typed_route(
        self, eager_shapes: None
    ) -> None:
        """Hot sometimes-None shapes run generated functions, with the bytes of encode(dict_fields)."""
        rng = random.Random(28)
        fast, typed = eh.EventHeaderEncoder(), eh.EventHeaderEncoder()
        choices: list[Any] = [None, 1, -3, 2.5, "s", True, 2**63 + 1]
        for _ in range(3000):
            name = rng.choice(["a", "b"])
            event = {k: rng.choice(choices) for k in ("x", "y", "z")}
            out = fast.encode_dict(name, event, None, Header(4))
            assert out == typed.encode(name, dict_fields(event.items(), None), 4), event
            got = decode_event(TP, out or b"").fields
            assert got == event
        entries = [*fast._shapes.first.values(), *fast._shapes.by_class.values()]
        assert any(entry is not _shapes.GENERAL for entry in entries)  # the generated functions ran

    def test_the_interpreted_route_writes_nullable_keys_as_the_typed_route(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Before shapes are hot (default tiers), the interpreted route writes the typed route's bytes."""
        rng = random.Random(2828)
        walked, typed = eh.EventHeaderEncoder(), eh.EventHeaderEncoder()
        choices: list[Any] = [None, 4, 0.25, "t", b"b", False]
        keyed: list[object] = []
        real = eh.walk

        def counting(*args: Any) -> Any:
            keyed.append(args[-1])
            return real(*args)

        monkeypatch.setattr(eh, "walk", counting)
        for i in range(400):
            event = {f"k{j}": rng.choice(choices) for j in range(i % 7 + 1)}
            out = walked.encode_dict("n", event, None, Header(4))
            assert out == typed.encode("n", dict_fields(event.items(), None), 4), event
            assert decode_event(TP, out or b"").fields == event
        assert any(keyed)  # the interpreted route ran with the nullable keys' entries

    def test_the_nullable_memory_is_bounded(self) -> None:
        """The keys remembered as nullable never pass the encoder's cache_limit."""
        enc = eh.EventHeaderEncoder(cache_limit=8)
        for i in range(100):
            assert enc.encode_dict(f"e{i}", {"x": None, "y": None}, None, Header(4)) is not None
            assert sum(map(len, enc._nullable.values())) <= 8
        assert enc._nullable  # what was learned last is kept

    def test_an_event_that_is_not_written_teaches_nothing(self) -> None:
        """A None of an event too large to write is not remembered (nothing kept for what was not written)."""
        enc = eh.EventHeaderEncoder(max_size=64)
        assert enc.encode_dict("E" * 80, {"x": None}, None, Header(4)) is None
        assert enc._nullable == {}

    def test_a_first_number_in_an_event_not_written_does_not_name_the_nones_type(self) -> None:
        """A key's first number after its None names the None's type only once its event is written."""
        enc = eh.EventHeaderEncoder(max_size=96)
        assert enc.encode_dict("E", {"x": None}, None, Header(4)) is not None
        many = {f"key_{i:02}_named_at_length": i for i in range(8)}  # names cannot be cut
        assert enc.encode_dict("E", {"x": 7, **many}, None, Header(4)) is None  # too large
        out = enc.encode_dict("E", {"x": None}, None, Header(4))
        assert out is not None and _types(out)["x"][1] == FMT_SIGNED_INT
        assert enc.encode_dict("E", {"x": 0.5}, None, Header(4)) is not None  # written: a float
        out = enc.encode_dict("E", {"x": None}, None, Header(4))
        assert out is not None and _tail(out, "E") == b"x\0" + NULLABLE_FLOAT + b"\0\0"


class TestDecoders:
    """Every reader of EventHeader gives None (Python) or null (JSON) back."""

    def _decoded(self) -> Any:
        out = eh.EventHeaderEncoder().encode_dict("E", {"x": None, "s": "v"}, None, Header(4))
        assert out is not None
        return decode_event(TP, out)

    def test_decoder_gives_none(self) -> None:
        """decode_event reads a nullable field of length 0 as None, its raw bytes empty."""
        ev = self._decoded()
        assert ev.fields == {"x": None, "s": "v"}
        assert ev.field_list[0].raw == b""

    def test_perf_json_prints_null_as_perf_decode_does(self) -> None:
        """--perf-json's fields: perf-decode's "null" for a nullable field of length 0."""
        assert perf_json_fields(self._decoded()) == '"x":null,"s":"v"'

    def test_cli_json_and_text_outputs(self) -> None:
        """decode --json writes null; the text output writes Python's None."""
        ev = self._decoded()
        assert json.loads(event_json(ev))["fields"] == {"x": None, "s": "v"}
        assert "x=None" in event_pretty(ev)


class TestOtherPaths:
    """The capture, the Common Schema layout and TraceLogging."""

    def test_common_schema_none_attribute_is_null_and_dropped_by_the_collector(self) -> None:
        """In PartC a None is a null member; otel-arrow's receiver drops it, ints are still promoted."""
        backend = CaptureBackend("CsNull", format="eventheader")
        provider = Provider("CsNull", backend=backend)
        log = structlog.wrap_logger(
            None, processors=[EtwRenderer("CsNull", provider=provider, schema="common")]
        )
        log.info("hello", gone=None, n=3)
        (rec,) = backend.records
        fields = decode_event(rec.tracepoint, rec.event).fields
        assert fields["PartC"]["gone"] is None and fields["PartC"]["n"] == 3
        attrs = dict(otel_arrow_attributes(rec.event))
        assert "PartC.gone" not in attrs and "gone" not in attrs
        assert ("n", 3) in read_like_geneva(rec.event).columns

    def test_tracelogging_writes_the_text_none(self) -> None:
        """TraceLogging has no null: None is the COUNTEDANSISTRING/UTF8 text "None", ints stay INT64."""
        enc = TraceLoggingEncoder("P")
        out = enc.encode_dict("E", {"x": None}, None, Header(4))
        assert out is not None
        _, meta, data = out
        assert meta.endswith(b"x\0" + bytes((InType.COUNTEDANSISTRING | 0x80, OutType.UTF8)))
        assert data == b"\x04\0None"
        later = enc.encode_dict("E", {"x": 1}, None, Header(4))
        assert later is not None and later[1].endswith(b"x\0" + bytes((InType.INT64,)))
