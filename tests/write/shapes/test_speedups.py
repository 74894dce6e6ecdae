"""The compiled shape packer (``structlog_etw/write/shapes/_speedups.c``): the generated function's bytes, its
``None`` and its errors, for every layout of the kinds it takes, in both formats; loaded where it
is built (required under ``CI=true``), and turned off by ``STRUCTLOG_ETW_PURE_PYTHON=1``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from structlog_etw.write import shapes as _shapes
from structlog_etw.write.eventheader._codec import CODEC as EH_CODEC
from structlog_etw.write.fields import BOOL, BYTES, F64, I64, STR, dict_fields
from structlog_etw.write.tracelogging._codec import CODEC as TL_CODEC
from tests.helpers.encoders import fast_and_general
from tests.helpers.shared_data import in_ci, skip_or_fail
from tests.helpers.speedups_fuzz import EDGES, OTHER

ROOT = Path(__file__).resolve().parents[3]
SPEEDUPS = _shapes.SPEEDUPS
#: ``nox -s wheels`` runs the suite on a wheel built with no C compiler: there, no compiled packer
#: is the install's point (tests/installed checks it), not a broken set-up.
PURE_INSTALL = os.environ.get("STRUCTLOG_ETW_WHEEL_KIND") == "pure"
needs_speedups = pytest.mark.skipif(
    SPEEDUPS is None and (PURE_INSTALL or not in_ci()),
    reason="the compiled packer is not built here (no C compiler where the package was installed); "
    "under CI=true its absence fails TestLoaded, unless the install is the pure-Python one",
)

#: Each format's codec table (its ops, steps, lead names and env build its layouts' functions).
FORMATS: dict[str, _shapes.Codec] = {"eventheader": EH_CODEC, "tracelogging": TL_CODEC}


def _outcome(fn: Callable[..., bytes | None], event: Any, lead: tuple[bytes, ...]) -> tuple[str, object]:
    """What a shape function did: its bytes, ``None``, or that it raised."""
    try:
        out = fn(event, *lead)
    except Exception:
        return ("raised", None)
    return ("none", None) if out is None else ("bytes", out)


# Values of each class: arbitrary ones and the edge values of tests/helpers/speedups_fuzz.py.
_INTS = st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.sampled_from(EDGES[I64]))
_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(EDGES[F64]))
_BY_KIND: dict[int, st.SearchStrategy[Any]] = {
    STR: st.one_of(st.text(max_size=20), st.sampled_from(EDGES[STR])),
    I64: _INTS,
    F64: _FLOATS,
    BOOL: st.booleans(),
    BYTES: st.one_of(st.binary(max_size=20), st.sampled_from(EDGES[BYTES])),
    _shapes.NONE: st.none(),
    I64 | _shapes.NULLABLE: _INTS,
    F64 | _shapes.NULLABLE: _FLOATS,
}
#: A value of another class than the kind's (the function then returns None).
_OTHER = st.sampled_from([1, 1.0, True, "s", b"b", None, *OTHER])


@st.composite
def layouts_and_events(draw: st.DrawFn, fmt: str) -> tuple[tuple[int, ...], dict[str, Any]]:
    """A layout of the format's compiled kinds (and SKIP) and an event for it, its values mostly
    of their kinds' classes."""
    kinds = tuple(draw(st.lists(st.sampled_from([*FORMATS[fmt].ops, _shapes.SKIP]), max_size=12)))
    event: dict[str, Any] = {}
    for i, kind in enumerate(kinds):
        if kind == _shapes.SKIP:
            event[f"s{i}"] = draw(_OTHER)
        elif draw(st.integers(0, 15)) == 0:
            event[f"k{i}"] = draw(_OTHER)
        else:
            event[f"k{i}"] = draw(_BY_KIND[kind])
    return kinds, event


def _both(
    fmt: str, kinds: tuple[int, ...]
) -> tuple[Callable[..., bytes | None], Callable[..., bytes | None]]:
    """The compiled packer and the generated function of a layout of *fmt*."""
    codec = FORMATS[fmt]
    compiled = _shapes.compiled_packer(kinds, codec.ops)
    assert compiled is not None
    return compiled, _shapes.compile_shape_function(kinds, codec.steps, codec.lead, codec.env)


def _lead(fmt: str) -> tuple[bytes, ...]:
    """Lead parts a layout's function writes first (EventHeader: head and metadata; TraceLogging:
    empty ones, tested here with bytes all the same)."""
    return (b"HEAD", b"META")


@needs_speedups
class TestSameAsTheGeneratedFunction:
    """For every layout of the kinds it takes, the compiled packer does what the generated
    function does: the same bytes, ``None`` for the same events, raising for the same values."""

    @pytest.mark.parametrize("fmt", list(FORMATS))
    @settings(max_examples=400, deadline=None)
    @given(data=st.data())
    def test_arbitrary_layouts_and_values(self, fmt: str, data: st.DataObject) -> None:
        """Random layouts (skipped positions included) and values (edge values, other classes):
        the compiled packer's outcome equals the generated function's."""
        kinds, event = data.draw(layouts_and_events(fmt))
        compiled, generated = _both(fmt, kinds)
        assert _outcome(compiled, event, _lead(fmt)) == _outcome(generated, event, _lead(fmt))

    @pytest.mark.parametrize("fmt", list(FORMATS))
    @given(event=st.dictionaries(st.text(max_size=3), st.integers(), max_size=3))
    @example(event={})
    @example(event={"a": 1})
    def test_an_event_of_another_length(self, fmt: str, event: dict[str, int]) -> None:
        """An event with fewer or more values than the layout (an empty layout included): the
        same outcome (None for a non-empty event of an empty layout, else raised)."""
        for kinds in [(), (I64,), (I64, I64, I64, I64)]:
            if len(kinds) == len(event):
                continue
            compiled, generated = _both(fmt, kinds)
            got = _outcome(compiled, event, _lead(fmt))
            assert got == _outcome(generated, event, _lead(fmt))
            assert got != ("bytes", None)

    @pytest.mark.parametrize("fmt", list(FORMATS))
    def test_subclasses_are_not_their_base(self, fmt: str) -> None:
        """A str, int or float subclass (whose methods could run Python code) is another class:
        None from both, and the subclass's methods are never called."""

        class Loud(str):
            def encode(self, *a: Any, **k: Any) -> bytes:  # pragma: no cover - must not run
                raise AssertionError("called")

        class Index(int):
            def __index__(self) -> int:  # pragma: no cover - must not run
                raise AssertionError("called")

        for kinds, event in [((STR,), {"a": Loud("x")}), ((I64,), {"a": Index(3)})]:
            compiled, generated = _both(fmt, kinds)
            assert compiled(event, *_lead(fmt)) is None
            assert generated(event, *_lead(fmt)) is None

    @pytest.mark.parametrize("fmt", list(FORMATS))
    def test_a_dict_subclass_raises_and_the_encoder_writes_the_general_routes_bytes(
        self, fmt: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The packer takes an exact dict only (a subclass raises TypeError); the encoder then
        writes the general route's bytes, event after event."""
        compiled, _ = _both(fmt, (I64,))
        with pytest.raises(TypeError):
            compiled(OrderedDict(a=1), *_lead(fmt))
        monkeypatch.setattr(_shapes._caches, "SHAPE_HOT", 1)
        monkeypatch.setattr(_shapes._caches, "LAYOUT_HOT", 1)
        monkeypatch.setattr(_shapes._caches, "COMPILE_COST", 0)
        fast, general, header = fast_and_general(fmt)
        for i in range(6):
            for event in (OrderedDict(a=i, b="x"), {"a": i, "b": "x"}):
                want = general.encode_fields("E", dict_fields(event.items(), None), header)
                assert fast.encode_dict("E", event, None, header) == want

    def test_values_and_results_are_not_leaked(self) -> None:
        """Packing (bytes, None and raised) leaves every value's reference count as it was."""
        compiled, _ = _both("eventheader", (STR, I64, F64, BYTES))
        values = ["é" * 300, 2**40, 1.5, b"b" * 200]
        event = dict(zip("abcd", values, strict=True))
        bad = dict(zip("abcd", [values[0], 2**64, 1.5, values[3]], strict=True))
        before = [sys.getrefcount(v) for v in values]
        for _ in range(1000):
            compiled(event, b"H", b"M")
            compiled({**event, "b": "wrong class"}, b"H", b"M")
            with pytest.raises(OverflowError):
                compiled(bad, b"H", b"M")
        assert [sys.getrefcount(v) for v in values] == before

    def test_nothing_is_attached_to_the_callers_strings(self) -> None:
        """A non-ASCII string is encoded into bytes of its own: the caller's ``str`` does not keep
        a UTF-8 copy afterwards (its size is unchanged), also for one too long to write."""
        compiled, _ = _both("eventheader", (STR,))
        for text in ("é" * 100, "é" * 40000):
            value = "".join(reversed(text))  # a new object: no UTF-8 copy made by anyone yet
            size = sys.getsizeof(value)
            try:
                compiled({"a": value}, b"H", b"M")
            except OverflowError:
                assert len(value.encode()) > 65535
            assert sys.getsizeof(value) == size

    def test_a_program_takes_known_ops_only(self) -> None:
        """An op code past the module's table is refused when the program is made."""
        assert SPEEDUPS is not None
        with pytest.raises(ValueError, match="unknown op"):
            SPEEDUPS.Program(bytes([len(SPEEDUPS.OPS)]))
        with pytest.raises(TypeError):
            SPEEDUPS.Program(bytes([1])).pack()


class TestLoaded:
    """Where the package was built with its compiled module, the encoders use it; the switch
    turns it off; the op tables name ops the module has."""

    def test_built_and_loaded_under_ci(self) -> None:
        """Under CI=true the compiled module is built and loaded (a silent fallback to Python would
        leave the figures of docs/performance.md unreproducible)."""
        if SPEEDUPS is None and (PURE_INSTALL or not in_ci()):
            pytest.skip("not built here (a pure-Python install, or not CI): nothing to check")
        assert SPEEDUPS is not None, "structlog_etw.write.shapes._speedups is not built or not loaded"
        assert SPEEDUPS.ABI_VERSION == _shapes._generate._SPEEDUPS_ABI

    @needs_speedups
    @pytest.mark.parametrize("fmt", list(FORMATS))
    def test_every_op_the_formats_name_exists(self, fmt: str) -> None:
        """Each format's kind -> op table names ops of the module, and every kind it lists has a
        generated-function step too (the one the packer stands in for)."""
        codec = FORMATS[fmt]
        assert SPEEDUPS is not None
        assert set(codec.ops.values()) <= set(SPEEDUPS.OPS)
        assert set(codec.ops) <= set(codec.steps)

    @needs_speedups
    def test_a_hot_layout_of_primitive_values_gets_the_compiled_packer(self) -> None:
        """The encoder's function for a layout of str/int/float/bool/None/bytes is the compiled
        packer; a layout with a UUID keeps its generated function."""
        fn = EH_CODEC.layout_function((STR, I64, F64, BOOL, _shapes.NONE, BYTES))
        assert type(fn).__name__ == "builtin_function_or_method"
        assert (
            EH_CODEC.layout_function((STR, _shapes.SHAPE_KINDS[uuid.UUID])).__class__.__name__ == "function"
        )

    def test_the_switch_turns_it_off(self) -> None:
        """With STRUCTLOG_ETW_PURE_PYTHON=1 the module is not loaded, and a hot layout gets its
        generated function (same bytes: TestSameAsTheGeneratedFunction)."""
        code = (
            "from structlog_etw.write import shapes as _shapes\n"
            "from structlog_etw.write.eventheader._codec import CODEC\n"
            f"fn = CODEC.layout_function(({STR},))\n"
            "print(_shapes.SPEEDUPS is None, type(fn).__name__)\n"
        )
        env = {**os.environ, "STRUCTLOG_ETW_PURE_PYTHON": "1"}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True
        )
        assert out.stdout.split() == ["True", "function"]


#: The C type each op checks (``expected_type`` in _speedups.c), by the class of :data:`_shapes.OPS`.
_C_TYPES: dict[type | None, str] = {
    None: "",
    str: "&PyUnicode_Type",
    bytes: "&PyBytes_Type",
    int: "&PyLong_Type",
    float: "&PyFloat_Type",
    bool: "&PyBool_Type",
    type(None): "Py_TYPE(Py_None)",
}


def _c_ops() -> dict[str, tuple[int, str, int]]:
    """The op table of _speedups.c as written there: name -> (enum code, checked type, op_bytes)."""
    source = (ROOT / "structlog_etw" / "write" / "shapes" / "_speedups.c").read_text()
    enum = dict(re.findall(r"\bOP_([A-Z0-9_]+) = (\d+)", source))
    names_block = re.search(r"op_names\[OP_COUNT\] = \{(.*?)\};", source, re.S)
    sizes_block = re.search(r"op_bytes\[OP_COUNT\] = \{(.*?)\};", source, re.S)
    types_block = re.search(r"expected_type\(unsigned char op\)\s*\{(.*?)\n\}", source, re.S)
    assert names_block and sizes_block and types_block, "the op table of _speedups.c moved"
    names = re.findall(r'"([a-z0-9_]+)"', names_block.group(1))
    sizes = {k: int(v) for k, v in re.findall(r"\[OP_([A-Z0-9_]+)\] = (\d+)", sizes_block.group(1))}
    types: dict[str, str] = {}
    for cases, c_type in re.findall(r"((?:case OP_[A-Z0-9_]+: )+)return ([^;]+);", types_block.group(1)):
        for op in re.findall(r"OP_([A-Z0-9_]+)", cases):
            types[op] = c_type
    assert int(enum.pop("COUNT")) == len(names)
    return {
        name: (int(enum[name.upper()]), types.get(name.upper(), ""), sizes[name.upper()]) for name in names
    }


class TestOpTable:
    """The compiled packer's ops are numbered, named, sized and typed in _speedups.c as in
    ``_shapes.OPS`` (a module whose ``OPS`` differ is not loaded), and each codec row names an op
    that writes its kind's class."""

    def test_the_c_enum_is_the_python_table(self) -> None:
        """Enum codes, op_names order, op_bytes and expected_type of _speedups.c equal OPS's codes,
        names, sizes and classes."""
        want = {name: (op.code, _C_TYPES[op.cls], op.size) for name, op in _shapes.OPS.items()}
        assert _c_ops() == want
        assert [op.code for op in _shapes.OPS.values()] == list(range(len(_shapes.OPS)))

    @pytest.mark.parametrize("fmt", list(FORMATS))
    def test_each_row_names_an_op_of_its_class(self, fmt: str) -> None:
        """A row's op takes the class its layout kind stands for (``SHAPE_KINDS``) and the row
        has a step (what the op stands in for)."""
        classes = {kind: cls for cls, kind in _shapes.SHAPE_KINDS.items()}
        rows = [row for row in FORMATS[fmt].rows.values() if row.op is not None]
        assert rows
        for row in rows:
            kind = _shapes.shape_kind(row.kind)
            cls = classes.get(kind) or classes[kind & ~_shapes.NULLABLE]
            assert _shapes.OPS[row.op].cls is cls, row
            assert row.step is not None, row

    @needs_speedups
    def test_the_loaded_module_has_the_tables_ops(self) -> None:
        """The module's OPS is the table's name -> code."""
        assert SPEEDUPS is not None
        assert {name: op.code for name, op in _shapes.OPS.items()} == SPEEDUPS.OPS


class TestPurePythonSuite:
    """The encoders' shape tests pass on the generated functions alone, as on a machine where the
    compiled module could not be built."""

    def test_shape_tests_pass_with_the_switch_on(self) -> None:
        """tests/write/eventheader/test_encode_dict.py, tests/write/tracelogging/test_encode_dict.py,
        tests/write/shapes/test_shape_recent.py and tests/write/eventheader/test_nullable.py pass under
        STRUCTLOG_ETW_PURE_PYTHON=1."""
        env = {**os.environ, "STRUCTLOG_ETW_PURE_PYTHON": "1"}
        files = [
            "tests/write/eventheader/test_encode_dict.py",
            "tests/write/tracelogging/test_encode_dict.py",
            "tests/write/shapes/test_shape_recent.py",
            "tests/write/eventheader/test_nullable.py",
        ]
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *files],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


class TestUnderAddressSanitizer:
    """The C code itself: built with AddressSanitizer and UndefinedBehaviorSanitizer, it packs
    thousands of random events (edge values, other classes, other lengths, layouts past its stack
    arrays) without a report."""

    def test_random_events_pack_without_a_sanitizer_report(self, tmp_path: Path) -> None:
        """``tests/helpers/speedups_fuzz.py`` under ASan+UBSan (the package copied beside a
        sanitized build of ``_speedups.c``): exit 0, every outcome seen, no report."""
        if sys.platform != "linux":
            pytest.skip("the sanitizer build uses gcc's libasan on Linux (the Windows job has MSVC)")
        gcc = shutil.which("gcc")
        if gcc is None:
            skip_or_fail("gcc is not installed")
        runtimes = []
        for lib in ("libasan.so", "libubsan.so"):
            path = subprocess.run(
                [gcc, f"-print-file-name={lib}"], capture_output=True, text=True, timeout=60, check=True
            ).stdout.strip()
            if not os.path.isabs(path):
                skip_or_fail(f"gcc has no {lib}")
            runtimes.append(path)
        import sysconfig  # noqa: PLC0415 - only this test compiles

        package = tmp_path / "structlog_etw"
        shutil.copytree(
            ROOT / "structlog_etw", package, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__")
        )
        built = subprocess.run(
            [
                gcc, "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer",
                "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                f"-I{sysconfig.get_paths()['include']}", str(package / "write/shapes/_speedups.c"),
                "-o", str(package / f"write/shapes/_speedups{sysconfig.get_config_var('EXT_SUFFIX')}"),
            ],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert built.returncode == 0, built.stderr[-3000:]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
            "LD_PRELOAD": " ".join(runtimes),
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0",  # the interpreter's own leaks: not ours
            "STRUCTLOG_ETW_PURE_PYTHON": "",
        }
        code = (
            "import structlog_etw.write.shapes as s, sys; "
            f"assert s.SPEEDUPS.__file__.startswith({str(package)!r}), s.SPEEDUPS; "
            "from tests.helpers.speedups_fuzz import main; print(main(20261204, 3000))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
            timeout=600, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-5000:]
        assert "Sanitizer" not in out.stderr and "runtime error" not in out.stderr, out.stderr[-5000:]
        tally = out.stdout.split()
        assert tally[0::2] == ["packed", "none", "raised"], out.stdout
        assert all(int(n) > 0 for n in tally[1::2]), out.stdout
