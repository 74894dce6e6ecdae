"""Property tests: whatever an application logs, the call returns and the event decodes as documented.

Hypothesis generates hostile event dicts (nested and recursive containers, huge and negative ints,
NaN/inf, lone surrogates and NULs in strings and keys, non-str keys, bytes of any size, None,
objects whose ``__str__``/``__repr__`` raise, thousands of fields, names with ``;``).  Each one goes
through the real pipeline (``_fields.to_fields`` -> encoder -> bytes) for BOTH formats and is read
back with the project's decoders.  The decoded event must equal the documented representation of
the typed fields (docs/types.md), or carry the visible truncation marker and agree with it on every
field that was kept, or have been refused by the encoder (``None``: the provider counts it as
dropped ``too_large``).  A decoder error fails the test: nothing is written a decoder would reject.

The example budget is fixed and the runs are derandomized, so CI runs the same examples every time.
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_event
from hypothesis import strategies as st

from structlog_etw import EtwRenderer, Provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.read.decode.eventheader import decode_event as eh_decode_event
from structlog_etw.read.decode.tracelogging import decode as tl_decode
from structlog_etw.read.decoded import DecodedEvent
from structlog_etw.surface._renderer import FORMATTER_KEYS, event_name
from structlog_etw.write import fields as _fields
from structlog_etw.write.fields import ARRAY, STRUCT, Field, to_field
from structlog_etw.write.fields import TRUNCATED_FIELD as EH_TRUNCATED_FIELD
from structlog_etw.write.fields import TRUNCATED_FIELD as TL_TRUNCATED_FIELD
from structlog_etw.write.fields import TRUNCATION_MARKER as EH_TRUNCATION_MARKER
from structlog_etw.write.fields import TRUNCATION_MARKER as TL_TRUNCATION_MARKER
from tests.helpers.strategies import Unprintable

PROPERTY_SETTINGS = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

FORMATS = ["eventheader", "tracelogging"]
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

# --------------------------------------------------------------------------------------------
# What applications throw at a logger


class BadStrGoodRepr:
    """``__str__`` raises, ``__repr__`` works."""

    def __str__(self) -> str:
        raise ValueError("broken __str__")

    def __repr__(self) -> str:
        return "BadStrGoodRepr()"


class StrReturnsNonStr:
    """``__str__`` returns something that is not a ``str``."""

    def __str__(self) -> str:
        return 42  # type: ignore[return-value]  # noqa: PLE0307 - the point of the test


_HOSTILE_CHARS = st.sampled_from(["\x00", "\ud800", "\udfff", "\udc80", ";", "\n", "\ufffd", "é", "😀", " "])
_CHARS = st.one_of(st.characters(categories=["L", "N", "P", "Cs", "Cc", "Zs", "So"]), _HOSTILE_CHARS)
texts = st.text(_CHARS, max_size=40)
big_texts = st.builds(
    lambda c, n: c * n,
    st.sampled_from(["a", "é", "\ud800", "\x00"]),
    st.sampled_from([0, 255, 256, 4000, 9000, 33000, 70_000]),
)
ints = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([-(2**63), 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1]),
    st.integers(-(2**200), 2**200),
    st.builds(lambda e, s: s * 10**e, st.integers(4000, 5000), st.sampled_from([1, -1])),
)
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.nan, math.inf, -math.inf, -0.0])
)
blobs = st.one_of(st.binary(max_size=64), st.builds(bytes, st.sampled_from([0, 300, 9000, 70_000])))
weird_objects = st.sampled_from([Unprintable, BadStrGoodRepr, StrReturnsNonStr, object]).map(
    lambda cls: cls()
)
# Control keys (etw_level, ...) and "event" steer the renderer and are tested with it; not fields.
# ProcessorFormatter's own keys (``_record``, ``_from_structlog``) send an event down the formatter's
# route (no DropEvent, docs/stdlib.md), tested in tests/surface/test_stdlib_formatter.py.
_RESERVED = {
    "event",
    "exc_info",
    "etw_keyword",
    "etw_level",
    "etw_opcode",
    "etw_tags",
    "etw_name",
    *FORMATTER_KEYS,
}
keys = st.one_of(
    texts.filter(lambda k: k not in _RESERVED),
    ints,
    st.none(),
    st.tuples(st.integers(), texts),
    st.floats(allow_nan=False),
    weird_objects,
)
scalars = st.one_of(texts, ints, floats, st.booleans(), st.none(), blobs, weird_objects)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=6),
        st.lists(children, max_size=6).map(tuple),
        st.dictionaries(keys, children, max_size=6),
    )


values = st.recursive(scalars, _containers, max_leaves=25)


def _recursive_list() -> list[Any]:
    a: list[Any] = [1, "x"]
    a.append(a)
    return a


def _recursive_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"k": 1}
    d["self"] = d
    return d


_SPECIAL_VALUES: dict[str, Callable[[], Any]] = {
    "recursive_list": _recursive_list,
    "recursive_dict": _recursive_dict,
    "list_of_unprintables": lambda: [Unprintable(), BadStrGoodRepr()],
    "deep_dict": lambda: _deep(40),
    "big_dict": lambda: {f"k{i}": i for i in range(500)},
    "huge_int_list": lambda: [2**100, -(2**100)],
}
special_values = st.sampled_from(sorted(_SPECIAL_VALUES)).map(lambda k: _SPECIAL_VALUES[k]())


def _deep(n: int) -> dict[str, Any]:
    d: dict[str, Any] = {"leaf": "x"}
    for i in range(n):
        d = {f"l{i}": d}
    return d


_plain_dicts = st.dictionaries(keys, st.one_of(values, special_values, big_texts), max_size=12)
_many_fields = st.integers(129, 3000).map(
    lambda n: {f"field_{i}": i for i in range(n)}
)  # thousands of fields
_many_strings = st.integers(1, 200).map(lambda n: {f"s{i}": "y" * 700 for i in range(n)})  # 0.7 .. 140 KB
# Mostly ordinary-sized hostile dicts; some over every size and field-count limit.
event_dicts = st.sampled_from([_plain_dicts] * 6 + [_many_fields, _many_strings]).flatmap(lambda s: s)
event_names = st.one_of(texts, st.sampled_from(["user_login", "a;b;c", "", "\x00", "\ud800name", "x" * 300]))


# --------------------------------------------------------------------------------------------
# The documented representation of typed fields after a round trip


def _valid_text(s: str) -> str:
    """What a ``str`` becomes on the wire: each lone surrogate -> U+FFFD (valid UTF-8); NUL is kept."""
    if not _has_surrogate(s):
        return s
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _valid_name(fmt: str, s: str) -> str:
    """What a field name becomes in metadata (documented per format in the encoders).

    Both: NUL -> ``_``, lone surrogates -> U+FFFD.  EventHeader: ``;`` -> ``_`` too (``;``
    starts attributes in EventHeader names).
    """
    if fmt == "eventheader":
        s = s.replace(";", "_")
    s = s.replace("\x00", "_")
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)


def _same_float(a: float, b: float) -> bool:
    return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))


def _expected_scalar(kind: int, value: Any) -> Any:
    if kind in (_fields.STR, _fields.JSON):
        return _valid_text(value)
    if kind == _fields.BOOL:
        return bool(value)
    return value


def _values_match(kind: int, got: Any, want: Any, cut_ok: bool, marker: str) -> bool:
    """``got`` (decoded) is ``want`` (typed field value) as documented, or a marked cut of it."""
    if kind & ARRAY:
        base = kind & ~ARRAY
        if not isinstance(got, list):
            return False
        if len(got) != len(want) and not (cut_ok and len(got) < len(want)):
            return False
        return all(_values_match(base, g, w, False, marker) for g, w in zip(got, want, strict=False))
    if kind == _fields.F64:
        return isinstance(got, float) and _same_float(got, want)
    want = _expected_scalar(kind, want)
    if got == want and type(got) is type(want):
        return True
    if not cut_ok:
        return False
    if kind in (_fields.STR, _fields.JSON) and isinstance(got, str) and got.endswith(marker):
        kept = got[: -len(marker)]
        return bool(want.startswith(kept))
    if kind == _fields.BYTES and isinstance(got, bytes):
        return bool(want.startswith(got))
    return False


def check_round_trip(
    fmt: str,
    decoded_fields: list[Any],
    expected: list[Field],
    marker_field: str,
    marker_text: str,
    path: str = "",
    *,
    truncated: bool = False,
) -> bool:
    """Compare a decoder's field list with the encoder's input; return whether it was truncated.

    ``truncated``: whether the provider counted the event as truncated (the caller knows from
    ``stats()``; a field the user called ``_truncated`` cannot tell it apart).  Untruncated: the
    same fields, names and values as documented.  Truncated: the last field is ``_truncated=True``
    and the others are a prefix of the fields, each equal or visibly cut.
    """
    body = decoded_fields[:-1] if truncated else decoded_fields
    if truncated:
        assert decoded_fields, f"{path}: truncated event without the marker field"
        assert decoded_fields[-1].name == marker_field, f"{path}: last field is not the marker"
        assert decoded_fields[-1].value is True, f"{path}: truncation marker is not True"
        assert len(body) <= len(expected), f"{path}: more fields than written"
    else:
        assert len(body) == len(expected), f"{path}: {len(body)} fields decoded, {len(expected)} written"
    for i, (got, want) in enumerate(zip(body, expected, strict=False)):
        name, kind, value = want
        where = f"{path}[{i}] {name!r}"
        assert got.name == _valid_name(fmt, name), f"{where}: decoded name {got.name!r}"
        if kind == STRUCT:
            assert isinstance(got.value, list), f"{where}: struct decoded as {type(got.value)}"
            check_round_trip(
                fmt, list(got.value), value, marker_field, marker_text, where
            ) if not truncated else None
            continue
        if kind == _fields.NULL:  # null on Linux; TraceLogging has no null: the text (docs/types.md)
            assert got.value == (None if fmt == "eventheader" else "None"), (
                f"{where}: None decoded {got.value!r}"
            )
            continue
        assert _values_match(kind, got.value, value, truncated, marker_text), (
            f"{where}: kind {kind:#x} decoded {got.value!r:.200} expected {value!r:.200}"
        )
    return truncated


# --------------------------------------------------------------------------------------------
# The real pipeline for both formats: EtwRenderer -> Provider -> encoder -> capture backend


class Pipeline:
    """A provider of one format whose backend records exactly what the OS would get."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        name = f"Prop_{fmt}"
        self.backend = CaptureBackend(name, format=fmt)
        self.provider = Provider(name, backend=self.backend)
        self.renderer = EtwRenderer(name, provider=self.provider)
        if fmt == "tracelogging":
            self.marker_field, self.marker_text = TL_TRUNCATED_FIELD, TL_TRUNCATION_MARKER
        else:
            self.marker_field, self.marker_text = EH_TRUNCATED_FIELD, EH_TRUNCATION_MARKER

    def log(self, event_dict: dict[Any, Any]) -> None:
        """Run the renderer as structlog does (it ends the chain with DropEvent)."""
        with pytest.raises(structlog.DropEvent):
            self.renderer(None, "info", event_dict)

    def decode(self, rec: Any) -> DecodedEvent:
        """Decode one captured record with the project decoder (raises if it is malformed)."""
        if self.fmt == "tracelogging":
            assert len(rec.traits) + len(rec.metadata) + len(rec.data) <= 65535 - 100
            return tl_decode(
                rec.metadata, rec.data, provider=rec.provider, level=rec.level, keyword=rec.keyword
            )
        assert len(rec.event) <= 8192
        return eh_decode_event(rec.tracepoint, rec.event)


_PIPELINES: dict[str, Pipeline] = {}


def pipeline(fmt: str) -> Pipeline:
    """One pipeline per format for the whole module (the encoders' caches stay warm, as in an app)."""
    if fmt not in _PIPELINES:
        _PIPELINES[fmt] = Pipeline(fmt)
    return _PIPELINES[fmt]


def log_and_check(fmt: str, name: Any, event_dict: dict[Any, Any]) -> str:
    """Log one event and check what was written (or counted).  Returns the outcome."""
    p = pipeline(fmt)
    expected = [to_field(k, v) for k, v in event_dict.items()]
    before = p.provider.stats()
    p.backend.clear()
    p.log({"event": name, **event_dict})
    after = p.provider.stats()
    records = p.backend.clear()
    if not records:
        dropped = {k: after["dropped"].get(k, 0) - before["dropped"].get(k, 0) for k in after["dropped"]}
        assert sum(dropped.values()) == 1, f"event neither written nor counted: {after}"
        assert after["errors"] == before["errors"]
        assert dropped.get("too_large") == 1, f"dropped for an unexpected reason: {dropped}"
        return "refused (counted dropped too_large)"
    assert len(records) == 1
    assert after["written"] == before["written"] + 1
    ev = p.decode(records[0])
    assert ev.name == expected_event_name(fmt, name), f"event name {ev.name!r} for {name!r}"
    truncated = after["truncated"] - before["truncated"]
    assert truncated in (0, 1), f"truncated counted {truncated} times for one event"
    check_round_trip(
        fmt, list(ev.field_list), expected, p.marker_field, p.marker_text, truncated=bool(truncated)
    )
    return "truncated with marker" if truncated else "exact"


def expected_event_name(fmt: str, event: Any) -> str:
    """The documented event name: ``str(event)``, NUL and ``;`` -> ``_``, <= 200 chars, else "event"."""
    return _valid_name(fmt, event_name(event))


@pytest.mark.parametrize("fmt", FORMATS)
@PROPERTY_SETTINGS
@given(name=event_names, event_dict=event_dicts)
def test_any_event_dict_is_written_as_documented_or_counted(
    fmt: str, name: str, event_dict: dict[Any, Any]
) -> None:
    """In both formats any hostile event dict decodes as documented, marked truncated, or counts too_large."""
    note_event(log_and_check(fmt, name, event_dict))


@pytest.mark.parametrize("fmt", FORMATS)
def test_thousands_of_fields_are_truncated_with_a_marker_or_counted_too_large(fmt: str) -> None:
    """In both formats 3,000 fields are written truncated with the marker or counted too_large."""
    outcome = log_and_check(fmt, "many", {f"field_{i}": i for i in range(3000)})
    assert outcome in ("truncated with marker", "refused (counted dropped too_large)")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_70k_string_is_cut_with_the_marker_not_dropped(fmt: str) -> None:
    """In both formats a 70,000-character string is cut with the marker, the event kept."""
    assert log_and_check(fmt, "big", {"big": "a" * 70_000, "after": 7}) == "truncated with marker"


@pytest.mark.parametrize("fmt", FORMATS)
def test_real_structlog_calls_with_hostile_values_return_normally(fmt: str) -> None:
    """In both formats structlog calls with hostile names and values return and decode as documented."""
    p = pipeline(fmt)
    log = structlog.wrap_logger(None, processors=[p.renderer])
    p.backend.clear()
    recursive = _recursive_list()
    log.info("a;b\x00c", s="\ud800\x00;", n=-(2**70), f=math.nan, b=b"\x00" * 3, o=Unprintable(), r=recursive)
    log.error(Unprintable(), nested={"k": [1, {"x": (None, math.inf)}]}, empty={}, t=())
    (r1, r2) = p.backend.clear()
    e1, e2 = p.decode(r1), p.decode(r2)
    assert e1.name == "a_b_c"
    assert e1.fields["s"] == "\ufffd\x00;"
    assert e1.fields["n"] == str(-(2**70))
    assert math.isnan(e1.fields["f"])
    assert e1.fields["b"] == b"\x00" * 3
    assert e1.fields["o"] == "<unprintable Unprintable>"
    assert e2.level == 2
    assert e2.name == "<unprintable Unprintable>"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


@pytest.mark.parametrize(
    ("fmt", "outcome"),
    [
        ("eventheader", "refused (counted dropped too_large)"),  # names alone are past 8184 bytes
        ("tracelogging", "truncated with marker"),  # keeps the leading fields (128-field limit)
    ],
)
def test_metadata_past_64k_is_counted_too_large_or_cut_never_an_error(fmt: str, outcome: str) -> None:
    """110 KB of field names: EventHeader counts too_large, TraceLogging truncates; never an error."""
    wide = {f"field_with_a_rather_long_name_{i:05d}": i for i in range(3000)}  # ~110 KB of names
    assert log_and_check(fmt, "wide", wide) == outcome
