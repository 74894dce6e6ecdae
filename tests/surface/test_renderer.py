"""EtwRenderer through real structlog configuration, writing to a capture backend."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from structlog_etw import EtwRenderer, get_provider
from structlog_etw.backends.capture import CaptureBackend
from structlog_etw.context._activity import CURRENT_ACTIVITY
from structlog_etw.provider._provider import set_backend_factory
from structlog_etw.surface._renderer import MAX_EVENT_NAME, event_name
from structlog_etw.testing import capture_etw_events, isolated_providers
from tests.helpers.eventheader_reader import Parsed, parse

PROV = "Co_Render"


@pytest.fixture
def cap() -> Iterator[CaptureBackend]:
    made: dict[str, CaptureBackend] = {}

    def factory(name: str, group: str | None, provider_id: uuid.UUID) -> CaptureBackend:
        made[name] = CaptureBackend(name, group)
        return made[name]

    with isolated_providers():
        set_backend_factory(factory)
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
        try:
            structlog.configure(processors=[EtwRenderer(PROV)], cache_logger_on_first_use=False)
            yield made[PROV]
        finally:
            structlog.reset_defaults()
            structlog.contextvars.clear_contextvars()


def events(cap: CaptureBackend) -> list[tuple[str, Parsed]]:
    return [(r.tracepoint, parse(r.event)) for r in cap.records]


def test_log_call_becomes_one_event_with_typed_fields_and_prints_nothing(
    cap: CaptureBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    """One log call writes one event with its name, level, keyword and typed fields, printing nothing."""
    log = structlog.get_logger().bind(etw_keyword=0x4)
    log.info("user_login", user="ann", attempts=3, ratio=0.5, ok=True)
    ((tp, ev),) = events(cap)
    assert tp == f"{PROV}_L4K4"
    assert ev.name == "user_login"
    assert ev.level == 4
    assert ev.values() == {"user": "ann", "attempts": 3, "ratio": 0.5, "ok": True}
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("method", "level"),
    [("critical", 1), ("fatal", 1), ("error", 2), ("exception", 2), ("warning", 3), ("warn", 3), ("info", 4),
     ("msg", 4), ("debug", 5)],
)  # fmt: skip
def test_level_comes_from_the_method_name(cap: CaptureBackend, method: str, level: int) -> None:
    """Every structlog log method writes at its ETW level (1 critical .. 5 debug) on that tracepoint."""
    if method == "fatal" and _reported_method("fatal") == "error":
        level = 2  # structlog 23.1's filtering logger calls the chain with "error" for fatal()
    getattr(structlog.get_logger(), method)("e")
    ((tp, ev),) = events(cap)
    assert ev.level == level
    assert tp == f"{PROV}_L{level}K1"


def _reported_method(method: str) -> str:
    """The method name structlog's default logger hands the processors for *method*."""
    seen: list[str] = []

    def spy(logger: Any, method_name: str, event_dict: Any) -> Any:
        seen.append(method_name)
        raise structlog.DropEvent

    log = structlog.wrap_logger(
        None, processors=[spy], wrapper_class=structlog.make_filtering_bound_logger(0)
    )
    getattr(log, method)("probe")
    return seen[0]


@pytest.mark.parametrize(
    ("method", "level"),
    [("critical", 1), ("fatal", 1), ("error", 2), ("exception", 2), ("err", 2), ("warning", 3), ("warn", 3),
     ("info", 4), ("msg", 4), ("log", 4), ("debug", 5), ("notset", 5)],
)  # fmt: skip
def test_renderer_maps_every_method_name_to_its_level(cap: CaptureBackend, method: str, level: int) -> None:
    """Whatever method name structlog reports (fatal is error in structlog 23.1), the renderer's table."""
    with pytest.raises(structlog.DropEvent):
        get_renderer()(None, method, {"event": "e"})
    ((tp, ev),) = events(cap)
    assert (tp, ev.level) == (f"{PROV}_L{level}K1", level)


def test_unknown_method_is_verbose_and_etw_level_overrides(cap: CaptureBackend) -> None:
    """An unknown method name writes at level 5 (verbose); etw_level overrides the method's level."""
    r = get_renderer()
    with pytest.raises(structlog.DropEvent):
        r(None, "trace", {"event": "a"})
    structlog.get_logger().info("b", etw_level=2)
    assert [ev.level for _, ev in events(cap)] == [5, 2]


def get_renderer(**kw: Any) -> EtwRenderer:
    return EtwRenderer(PROV, **kw)


def test_call_keyword_beats_bound_beats_contextvars_beats_default(cap: CaptureBackend) -> None:
    """etw_keyword of the call beats bound, contextvars and default, and is never written as a field."""
    log = structlog.get_logger()
    log.info("default")
    structlog.contextvars.bind_contextvars(etw_keyword=0x8)
    log.info("from_contextvars")
    log.bind(etw_keyword=0x4).info("bound")
    log.bind(etw_keyword=0x4).info("call", etw_keyword=0x2)
    assert [tp for tp, _ in events(cap)] == [f"{PROV}_L4K1", f"{PROV}_L4K8", f"{PROV}_L4K4", f"{PROV}_L4K2"]
    assert all("etw_keyword" not in ev.values() for _, ev in events(cap))


def test_contextvars_control_keys_work_with_merge_contextvars_too(cap: CaptureBackend) -> None:
    """Control keys bound in contextvars apply and are not written as fields after merge_contextvars."""
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, EtwRenderer(PROV)])
    structlog.contextvars.bind_contextvars(etw_keyword=0x8, etw_name="ctx_name", req="r1")
    structlog.get_logger().info("e")
    ((tp, ev),) = events(cap)
    assert tp == f"{PROV}_L4K8"
    assert ev.name == "ctx_name"
    assert ev.values() == {"event": "e", "req": "r1"}


def test_etw_name_names_the_event_and_keeps_event_as_field(cap: CaptureBackend) -> None:
    """etw_name names the event, and the message is then written as the "event" field."""
    structlog.get_logger().info("User ann logged in", etw_name="UserLogin", user="ann")
    ((_, ev),) = events(cap)
    assert ev.name == "UserLogin"
    assert ev.values() == {"event": "User ann logged in", "user": "ann"}


def test_opcode_and_tags_go_to_the_header(cap: CaptureBackend) -> None:
    """etw_opcode and etw_tags are written in the event header, not as fields."""
    structlog.get_logger().info("e", etw_opcode=1, etw_tags=0x1234)
    ((_, ev),) = events(cap)
    assert (ev.opcode, ev.tag) == (1, 0x1234)
    assert ev.values() == {}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("etw_keyword", "x"),
        ("etw_keyword", -1),
        ("etw_keyword", 2**64),
        ("etw_keyword", True),
        ("etw_level", 0),
        ("etw_level", 256),
        ("etw_opcode", 300),
        ("etw_tags", -1),
        ("etw_tags", 0x10000),
        ("etw_name", 5),
        ("etw_name", ""),
    ],
)
def test_invalid_control_values_fall_back_and_are_counted(cap: CaptureBackend, key: str, value: Any) -> None:
    """Every out-of-range or mistyped control value falls back to its default and is counted invalid."""
    structlog.get_logger().info("e", **{key: value})
    ((tp, ev),) = events(cap)
    assert tp == f"{PROV}_L4K1"
    assert (ev.name, ev.opcode, ev.tag) == ("e", 0, 0)
    assert get_provider(PROV).stats()["invalid"] == {key: 1}


def test_an_invalid_value_means_the_default_not_the_contextvar(cap: CaptureBackend) -> None:
    """The first place that has a control value decides: a bad call value is not replaced by
    the one bound through contextvars (the wrapper and EtwEarlyDrop follow the same rule)."""
    structlog.contextvars.bind_contextvars(etw_keyword=0x8, etw_level=2)
    structlog.get_logger().info("bad_call_values", etw_keyword="x", etw_level=0)
    structlog.get_logger().info("contextvars")
    assert [(tp, ev.name) for tp, ev in events(cap)] == [
        (f"{PROV}_L4K1", "bad_call_values"),
        (f"{PROV}_L2K8", "contextvars"),
    ]
    assert get_provider(PROV).stats()["invalid"] == {"etw_keyword": 1, "etw_level": 1}


def test_tags_limit_follows_the_format_the_provider_writes_now() -> None:
    """A renderer made before a TraceLogging capture takes 28-bit tags once the provider writes
    TraceLogging (the limit is the format's, read when the tags are checked)."""
    renderer = EtwRenderer(f"Co_Tags_{uuid.uuid4().hex[:8]}")
    with capture_etw_events("tracelogging") as capture, pytest.raises(structlog.DropEvent):
        renderer(None, "info", {"event": "wide_tags", "etw_tags": 0x0FFFFFFF})
    (event,) = capture.events
    assert event.tags == 0x0FFFFFFF


def test_event_names_are_made_valid() -> None:
    """event_name turns ';' and NUL into '_', names empty "event", caps length, survives unprintables."""
    assert event_name("a;b\0c") == "a_b_c"
    assert event_name("") == "event"
    assert event_name("\0") == "_"
    assert event_name("x" * 1000) == "x" * MAX_EVENT_NAME
    assert event_name(42) == "42"

    class Bad:
        def __str__(self) -> str:
            raise RuntimeError

        def __repr__(self) -> str:
            raise RuntimeError

    assert event_name(Bad()).startswith("<unprintable ")


def test_exc_info_becomes_a_formatted_exception_field(cap: CaptureBackend) -> None:
    """exc_info becomes an "exception" field holding the formatted traceback, with no exc_info field."""
    log = structlog.get_logger()
    try:
        raise ValueError("broken")
    except ValueError:
        log.exception("failed", x=1)
    ((_, ev),) = events(cap)
    vals = ev.values()
    assert vals["x"] == 1
    assert vals["exception"].startswith("Traceback (most recent call last)")
    assert "ValueError: broken" in vals["exception"]
    assert "exc_info" not in vals


def test_exception_already_formatted_by_structlog_is_kept(cap: CaptureBackend) -> None:
    """An exception dict_tracebacks already made is kept, written as its JSON text."""
    structlog.configure(processors=[structlog.processors.dict_tracebacks, EtwRenderer(PROV)])
    try:
        raise KeyError("k")
    except KeyError:
        structlog.get_logger().exception("failed")
    ((_, ev),) = events(cap)
    exc = ev.values()["exception"]
    assert isinstance(exc, str)
    assert json.loads(exc)[0]["exc_type"] == "KeyError"  # dict_tracebacks' list, written as JSON


def test_current_activity_ids_are_written(cap: CaptureBackend) -> None:
    """The current activity id is written inside an activity, the related id on its Start event only."""
    a, r = uuid.uuid4().bytes, uuid.uuid4().bytes
    token = CURRENT_ACTIVITY.set((a, r))
    try:
        structlog.get_logger().info("start", etw_opcode=1)
        structlog.get_logger().info("in_activity")
    finally:
        CURRENT_ACTIVITY.reset(token)
    structlog.get_logger().info("outside")
    (_, start), (_, inside), (_, outside) = events(cap)
    assert (start.activity, start.related) == (a, r)  # the related id only on a Start event
    assert (inside.activity, inside.related) == (a, None)
    assert outside.activity is None


def test_disabled_slot_writes_nothing_and_counts_nothing(cap: CaptureBackend) -> None:
    """An event at a disabled level is neither written nor counted as dropped."""
    cap.set_enabled(False, level=5)
    structlog.get_logger().debug("nobody_listens", x=1)
    structlog.get_logger().info("listened")
    assert [ev.name for _, ev in events(cap)] == ["listened"]
    stats = get_provider(PROV).stats()
    assert stats["dropped"] == {}
    assert stats["written"] == 1


def test_passthrough_returns_the_dict_for_later_renderers(
    cap: CaptureBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    """passthrough=True writes the event and hands the dict, control keys removed, to the next renderer."""
    structlog.configure(
        processors=[EtwRenderer(PROV, passthrough=True), structlog.processors.JSONRenderer(sort_keys=True)],
        logger_factory=structlog.PrintLoggerFactory(),
    )
    structlog.get_logger().info("both", user="ann", etw_keyword=0x2)
    ((tp, ev),) = events(cap)
    assert tp == f"{PROV}_L4K2"
    assert ev.values() == {"user": "ann"}
    assert json.loads(capsys.readouterr().out) == {"event": "both", "user": "ann"}


def test_hostile_values_never_raise_and_are_written(cap: CaptureBackend) -> None:
    """Unprintable, self-referencing, huge, NaN and surrogate values and bad names are written, not raised."""

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

        __repr__ = __str__

    loop: list[Any] = [1]
    loop.append(loop)
    d: dict[str, Any] = {}
    d["self"] = d
    structlog.get_logger().info(
        "hostile;name\0",
        obj=Unprintable(),
        loop=loop,
        d=d,
        big=2**200,
        nan=float("nan"),
        s="a\ud800\0b",
        **{"k\0;": 1},
    )
    ((_, ev),) = events(cap)
    vals = ev.values()
    assert ev.name == "hostile_name_"
    assert vals["obj"].startswith("<unprintable ")
    assert vals["obj"].endswith("Unprintable>")
    assert vals["big"] == str(2**200)
    assert vals["s"] == "a\ufffd\0b"
    assert vals["k__"] == 1


def test_renderer_with_explicit_group_and_keywords_registers_them(cap: CaptureBackend) -> None:
    """A renderer's group and keywords are registered on its provider's tracepoints."""
    EtwRenderer("Co_Grouped", group="grp", keywords=(0x20,))
    prov = get_provider("Co_Grouped")
    assert prov.group == "grp"
    assert prov.slot(3, 0x20).handle == "Co_Grouped_L3K20Ggrp"


def test_logging_after_close_all_at_interpreter_exit_returns_normally(tmp_path: Any) -> None:
    """Logging from an atexit hook after close_all returns normally and is counted closed."""
    script = tmp_path / "late.py"
    script.write_text(
        "import atexit, structlog\n"
        "def late():\n"
        "    log.info('at_exit_after_close', x=1)\n"
        "    print('late-ok', prov.stats()['dropped'], prov.closed)\n"
        "atexit.register(late)  # registered first, so it runs after close_all\n"
        "from structlog_etw import EtwRenderer, get_provider\n"
        "from structlog_etw.provider._provider import set_backend_factory\n"
        "from structlog_etw.backends.capture import CaptureBackend\n"
        "set_backend_factory(lambda n, g, i: CaptureBackend(n, g))\n"
        "log = structlog.wrap_logger(None, processors=[EtwRenderer('Co_Late')])\n"
        "prov = get_provider('Co_Late')\n"
        "log.info('before_exit')\n"
        "print('written', get_provider('Co_Late').stats()['written'])\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
        env={"PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[2])},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.splitlines() == ["written 1", "late-ok {'closed': 1} True"]


class _RaisingBool:
    """An ``exc_info`` value that cannot say whether it is true."""

    def __bool__(self) -> bool:
        raise RuntimeError("no truth here")

    def __repr__(self) -> str:
        return "RaisingBool"


class _RaisingEq:
    """A key whose comparison raises; ``like`` gives it the hash of a key the renderer looks up."""

    def __init__(self, like: str | None = None) -> None:
        self._hash = hash(like) if like is not None else id(self)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparison here")

    def __str__(self) -> str:
        return "raising_key"


class TestHostileEventDicts:
    """Values and keys that raise when the renderer asks about them (``exc_info.__bool__``, a key's
    ``__eq__``) no longer drop the event as ``render_error``: it is written, control keys kept."""

    def test_exc_info_whose_bool_raises_is_written_without_an_exception_field(
        self, cap: CaptureBackend
    ) -> None:
        """An exc_info whose bool() raises: the event is written without an exception field, not dropped."""
        structlog.get_logger().error("failed", exc_info=_RaisingBool(), n=1)
        ((_tp, ev),) = events(cap)
        assert ev.name == "failed"
        assert ev.values() == {"n": 1}
        assert get_provider(PROV).stats()["dropped"] == {}

    @pytest.mark.parametrize("like", [None, "exception", "etw_level", "exc_info", "logger"])
    def test_a_key_whose_eq_raises_is_written_as_a_field(self, cap: CaptureBackend, like: str | None) -> None:
        """A key whose == raises, whatever key it hashes like, is written as a field by its text."""
        with pytest.raises(structlog.DropEvent):  # a key a processor (not a call) can add
            EtwRenderer(PROV)(None, "info", {"event": "hostile", "n": 2, _RaisingEq(like): "v"})
        ((_tp, ev),) = events(cap)
        assert ev.name == "hostile"
        assert ev.values() == {"n": 2, "raising_key": "v"}
        assert get_provider(PROV).stats()["dropped"] == {}

    def test_control_keys_still_apply_next_to_a_hostile_key(self, cap: CaptureBackend) -> None:
        """Control keys still set the level and keyword when another key's == raises."""
        event = {"event": "ctl", "etw_keyword": 0x10, "etw_level": 2, _RaisingEq("etw_name"): 1}
        with pytest.raises(structlog.DropEvent):
            EtwRenderer(PROV)(None, "info", event)
        ((tp, ev),) = events(cap)
        assert tp == f"{PROV}_L2K10"
        assert ev.values() == {"raising_key": 1}

    def test_passthrough_returns_the_plain_copy_it_wrote(self, cap: CaptureBackend) -> None:
        """With passthrough the renderer returns the plain-keyed copy it wrote, control keys removed."""
        key = _RaisingEq()
        out = EtwRenderer(PROV, passthrough=True)(None, "info", {"event": "p", "etw_keyword": 0x4, key: 3})
        assert out == {"event": "p", "raising_key": 3}
        ((tp, _ev),) = events(cap)
        assert tp == f"{PROV}_L4K4"

    def test_a_non_str_key_never_becomes_a_control_key(self, cap: CaptureBackend) -> None:
        """A non-str key whose text is "etw_level" is written as a field, not taken as a control key."""

        class Named:
            def __str__(self) -> str:
                return "etw_level"

            def __eq__(self, other: object) -> bool:
                raise RuntimeError

            __hash__ = object.__hash__

        with pytest.raises(structlog.DropEvent):
            EtwRenderer(PROV)(None, "info", {"event": "named", Named(): 1})
        ((tp, ev),) = events(cap)
        assert tp == f"{PROV}_L4K1"  # not taken as etw_level: a field named by its text
        assert list(ev.values().values()) == [1]
        assert next(iter(ev.values())).startswith("etw_level")
