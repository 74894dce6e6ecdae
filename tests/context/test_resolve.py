"""_resolve: the one home of the level tables and the control-value rules (no structlog involved)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from structlog_etw.context._resolve import EVENT_NAMES, event_header, keyword_or, level_or, logger_name
from structlog_etw.formats._levels import (
    LEVEL_BY_NAME,
    LEVEL_NAMES,
    METHOD_LEVELS,
    STDLIB_LEVELS,
    check_keyword,
    level_from_stdlib,
    method_for_stdlib,
    stdlib_level,
)


def test_level_tables_are_the_ones_every_module_used_to_write_down() -> None:
    """The tables the renderer, wrapper, handler and CLI each had before, now derived in one place."""
    assert dict(METHOD_LEVELS) == {
        "critical": 1, "fatal": 1, "error": 2, "exception": 2, "err": 2, "warning": 3, "warn": 3,
        "info": 4, "msg": 4, "log": 4, "debug": 5, "notset": 5,
    }  # fmt: skip
    assert dict(STDLIB_LEVELS) == {
        "critical": 50, "fatal": 50, "error": 40, "exception": 40, "warning": 30, "warn": 30,
        "info": 20, "msg": 20, "debug": 10, "notset": 0,
    }  # fmt: skip
    assert dict(LEVEL_NAMES) == {1: "critical", 2: "error", 3: "warning", 4: "info", 5: "debug"}
    assert list(LEVEL_BY_NAME.items()) == [
        ("critical", 1), ("fatal", 1), ("error", 2), ("warning", 3), ("warn", 3), ("info", 4),
        ("debug", 5), ("verbose", 5),
    ]  # fmt: skip
    for level, name in LEVEL_NAMES.items():
        assert logging.getLevelName(STDLIB_LEVELS[name]) == name.upper()
        assert level_from_stdlib(STDLIB_LEVELS[name]) == level


@pytest.mark.parametrize(
    ("levelno", "method"),
    [(60, "critical"), (50, "critical"), (45, "error"), (40, "error"), (35, "warning"), (25, "info"),
     (20, "info"), (15, "debug"), (10, "debug"), (5, "debug"), (0, "debug"), (-3, "debug")],
)  # fmt: skip
def test_custom_stdlib_numbers_map_to_the_standard_level_below(levelno: int, method: str) -> None:
    """Every stdlib level number, custom or negative, maps to the standard method at or below it."""
    assert method_for_stdlib(levelno) == method


def test_min_level_names_and_numbers() -> None:
    """stdlib_level takes level names in any case and numbers; a method name or float raises."""
    assert stdlib_level("INFO") == 20
    assert stdlib_level("notset") == 0
    assert stdlib_level(25) == 25
    with pytest.raises(ValueError, match="min_level"):
        stdlib_level("log")  # a method name, not a level name
    with pytest.raises(TypeError):
        stdlib_level(2.5)  # type: ignore[arg-type]


class _Counter:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def __call__(self, key: str) -> None:
        self.keys.append(key)


@pytest.mark.parametrize("value", ["1", 1.0, True, 0, 256, -1])
def test_invalid_level_means_the_default_and_is_counted(value: Any) -> None:
    """Every invalid etw_level (str, float, bool, 0, 256, -1) means the default and is counted once."""
    count = _Counter()
    assert level_or(value, 4, count) == 4
    assert count.keys == ["etw_level"]


def test_absent_values_mean_the_default_and_are_not_counted() -> None:
    """None control values mean the defaults and are not counted invalid."""
    count = _Counter()
    assert level_or(None, 4, count) == 4
    assert keyword_or(None, 7, count) == 7
    assert event_header(None, None, None, "eventheader", count) == (0, 0, None)
    assert count.keys == []


def test_keyword_range_is_checked_once_for_everyone() -> None:
    """Keywords in [0, 2**64) pass, 2**64 falls back counted; check_keyword refuses -1 (named) and bool."""
    count = _Counter()
    assert keyword_or(2**64 - 1, 1, count) == 2**64 - 1
    assert keyword_or(2**64, 1, count) == 1
    assert check_keyword(0) == 0
    with pytest.raises(ValueError, match=r"default_keyword must be an int in \[0, 2\*\*64\)"):
        check_keyword(-1, "default_keyword")
    with pytest.raises(ValueError):
        check_keyword(True)
    assert count.keys == ["etw_keyword"]


def test_event_header_limits_follow_the_format() -> None:
    """Opcode, tags and name limits follow the format (16-bit tags EventHeader, 28-bit TraceLogging)."""
    count = _Counter()
    assert event_header(255, 0xFFFF, "n;x", "eventheader", count) == (255, 0xFFFF, "n_x")
    assert event_header(256, 0x10000, "", "eventheader", count) == (0, 0, None)
    assert event_header(1, 0x0FFFFFFF, 5, "tracelogging", count) == (1, 0x0FFFFFFF, None)
    assert event_header(1, 0x10000000, "n", "tracelogging", count) == (1, 0, "n")
    assert count.keys == ["etw_opcode", "etw_tags", "etw_name", "etw_name", "etw_tags"]


class _Named:
    name = "wrapped"


class _Record:
    name = "record"


def test_logger_name_rule() -> None:
    """The logger name comes from the logger key, else the stdlib record, else the wrapped logger."""
    assert logger_name(_Named(), {"logger": "event"}) == "event"
    assert logger_name(_Named(), {"logger": 5, "_record": _Record()}) == "record"
    assert logger_name(_Named(), {}) == "wrapped"
    assert logger_name(None, {}) is None


def test_event_text_names_are_valid_and_cached_only_when_short() -> None:
    """EVENT_NAMES cleans names and caches short ones; a long text is cut to 200, not cached."""
    assert EVENT_NAMES["a;b\0c"] == "a_b_c"
    assert EVENT_NAMES["a;b\0c"] is EVENT_NAMES["a;b\0c"]  # kept
    assert EVENT_NAMES[""] == "event"
    long = "x" * 500
    assert EVENT_NAMES[long] == "x" * 200
    assert long not in EVENT_NAMES


class _HostileInt(int):
    """An int subclass whose hash and comparisons raise: never a valid control value."""

    def __hash__(self) -> int:
        raise RuntimeError("no hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparison")

    def __bool__(self) -> bool:
        raise RuntimeError("no truth")


class _HostileObject:
    def __bool__(self) -> bool:
        raise RuntimeError("no truth")

    def __str__(self) -> str:
        raise RuntimeError("no text")


def _control_values() -> Any:
    from hypothesis import strategies as st  # noqa: PLC0415

    json_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=300)
    json_values = st.recursive(
        json_leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner)
    )
    made = (lambda: _HostileInt(4), _HostileObject, lambda: float("nan"), lambda: 2**64, lambda: 1 << 200)
    hostile = st.integers(0, len(made) - 1).map(lambda i: made[i]())  # sampled_from would hash them
    return json_values | hostile


class TestControlValuesFromData:
    """Control keys taken from request data (``log.info("req", **request_json)``) never raise and
    never drop an event: a valid value is used, an invalid one is counted under its key and
    replaced by its default; keywords and levels stay within the provider's slot bound."""

    def test_any_json_or_hostile_control_values_are_used_or_counted(self) -> None:
        """Any JSON or hostile control value writes the event once, counted invalid exactly when invalid."""
        import structlog  # noqa: PLC0415
        from hypothesis import given, settings  # noqa: PLC0415
        from hypothesis import strategies as st  # noqa: PLC0415

        from structlog_etw import EtwRenderer, Provider, make_etw_bound_logger  # noqa: PLC0415
        from structlog_etw.backends.capture import CaptureBackend  # noqa: PLC0415
        from structlog_etw.context._resolve import valid_opcode, valid_tags  # noqa: PLC0415
        from structlog_etw.formats._levels import valid_keyword, valid_level  # noqa: PLC0415

        checks = {
            "etw_level": valid_level,
            "etw_keyword": valid_keyword,
            "etw_opcode": valid_opcode,
            "etw_tags": lambda v: valid_tags(v, "eventheader"),
            "etw_name": lambda v: type(v) is str and v != "",
        }
        provider = Provider("Co_Data", backend=CaptureBackend("Co_Data"), max_slots=64)
        renderer = EtwRenderer("Co_Data", provider=provider)
        loggers = [
            structlog.wrap_logger(None, processors=[renderer], wrapper_class=wrapper)
            for wrapper in (structlog.make_filtering_bound_logger(0), make_etw_bound_logger(renderer))
        ]

        @settings(max_examples=120, derandomize=True, deadline=None)
        @given(st.dictionaries(st.sampled_from(sorted(checks)), _control_values(), min_size=1), st.booleans())
        def check(controls: dict[str, Any], fast: bool) -> None:
            before = provider.stats()
            loggers[fast].info("req", **controls)
            after = provider.stats()
            assert after["dropped"].keys() <= {"slot_limit"}
            handled = after["written"] - before["written"]
            handled += after["dropped"].get("slot_limit", 0) - before["dropped"].get("slot_limit", 0)
            assert handled == 1
            for key, value in controls.items():
                invalid = value is not None and not checks[key](value)
                counted = after["invalid"].get(key, 0) - before["invalid"].get(key, 0)
                assert counted == (1 if invalid else 0), (key, value)
            assert after["slots"] <= 64

        check()
        provider.close()
