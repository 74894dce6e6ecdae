"""In CI (``CI=true``) a missing test tool or package fails the run instead of skipping.

CI installs gcc (for the fake ETW library and the compiled ``structlog_etw.write.shapes._speedups``, with
python3-dev's headers: tests/packaging/ requires it in the wheel), traceloggingdynamic
(Microsoft's encoder, the differential tests) and the conformance vectors; a skip there would
count untested code as a pass.  Locally the same tests skip with the reason.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.fake_etw import build_fake_library
from tests.helpers.shared_data import find_spec_or_skip, import_or_skip, skip_or_fail, vector

MISSING = "structlog_etw_no_such_module_for_tests"


@pytest.fixture(params=["true", "TRUE", "1", "yes"])
def ci(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI set to each value that counts as true."""
    monkeypatch.setenv("CI", request.param)


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI unset: a developer's machine."""
    monkeypatch.delenv("CI", raising=False)


def test_skip_or_fail_fails_in_ci(ci: None) -> None:
    """With CI set to any true value (true, TRUE, 1, yes), skip_or_fail fails the test instead of skipping."""
    with pytest.raises(pytest.fail.Exception, match="required when CI=true"):
        skip_or_fail("tool missing")


def test_skip_or_fail_skips_locally(local: None) -> None:
    """Without CI set, skip_or_fail skips with the reason given."""
    with pytest.raises(pytest.skip.Exception, match="tool missing"):
        skip_or_fail("tool missing")


def test_missing_gcc_fails_the_fake_library_build_in_ci(
    ci: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With CI set to any true value, a missing gcc fails the fake ETW library build."""
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(pytest.fail.Exception, match="gcc not found"):
        build_fake_library(tmp_path)


def test_missing_gcc_skips_the_fake_library_build_locally(
    local: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without CI set, a missing gcc skips the fake ETW library build."""
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(pytest.skip.Exception, match="gcc not found"):
        build_fake_library(tmp_path)


def test_missing_traceloggingdynamic_import_fails_in_ci(ci: None) -> None:
    """With CI set to any true value, import_or_skip of a missing module fails naming it."""
    with pytest.raises(pytest.fail.Exception, match=MISSING):
        import_or_skip(MISSING)


def test_missing_traceloggingdynamic_spec_fails_in_ci(ci: None) -> None:
    """With CI set to any true value, find_spec_or_skip of a missing module fails naming it."""
    with pytest.raises(pytest.fail.Exception, match=MISSING):
        find_spec_or_skip(MISSING)


def test_missing_module_skips_locally(local: None) -> None:
    """Without CI set, import_or_skip and find_spec_or_skip of a missing module skip naming it."""
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        import_or_skip(MISSING)
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        find_spec_or_skip(MISSING)


def test_missing_conformance_vector_fails_in_ci(
    ci: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With CI set to any true value, a missing conformance vector file fails the test."""
    monkeypatch.setenv("STRUCTLOG_ETW_SHARED", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="conformance file"):
        vector("EventHeaderInterceptor.dat")


def test_present_module_and_compiler_are_used(tmp_path: Path) -> None:
    """The helpers return what exists (so the real tests run): the module and the built library."""
    assert import_or_skip("json").__name__ == "json"
    assert find_spec_or_skip("json").origin is not None
    if shutil.which("gcc") is None:
        skip_or_fail("gcc not found")
    assert Path(build_fake_library(tmp_path)).is_file()
