"""The structlog range we claim (``structlog>=23.1``) is the range nox tests, and what differs inside it."""

from __future__ import annotations

import ast
import importlib.metadata
import logging
import re
from pathlib import Path

import structlog

from structlog_etw import EtwRenderer, make_etw_bound_logger
from structlog_etw.testing import EtwCapture
from tests.helpers.surface import unique_provider

ROOT = Path(__file__).resolve().parents[2]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


STRUCTLOG = _version(importlib.metadata.version("structlog"))


class TestTestedRange:
    """``nox -s tests`` runs the suite against the floor ``pyproject.toml`` declares, and the newest."""

    def test_oldest_session_is_the_declared_floor(self) -> None:
        """noxfile's OLDEST_STRUCTLOG equals the structlog floor pyproject.toml declares."""
        # tomllib is Python 3.11+: the one line is read as text
        match = re.search(
            r'^dependencies = \["structlog>=([0-9.]+)"\]$', (ROOT / "pyproject.toml").read_text(), re.M
        )
        assert match is not None
        floor = match.group(1)
        tree = ast.parse((ROOT / "noxfile.py").read_text())
        constants = {
            target.id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        oldest = constants["OLDEST_STRUCTLOG"]
        assert isinstance(oldest, ast.Constant)
        assert (*_version(oldest.value), 0, 0)[:3] == (*_version(floor), 0, 0)[:3]
        assert "STRUCTLOG_VERSIONS" in constants  # the parametrized tests session


class TestFatal:
    """``log.fatal``: level 1 (critical) wherever structlog lets the renderer tell it from ``error``.

    structlog before 25.1 makes ``fatal`` an alias of ``error`` in its filtering bound logger (the
    default wrapper class): processors see the method name ``"error"``, so the event is level 2 there
    (as structlog's own ``add_log_level`` says ``"error"``); docs/stdlib.md says so.
    ``make_etw_bound_logger`` maps ``fatal`` to critical on every version.
    """

    def test_etw_bound_logger_fatal_is_critical_on_every_version(self, etw_capture: EtwCapture) -> None:
        """Through make_etw_bound_logger fatal() writes level 1, as critical() does, on any structlog."""
        name = unique_provider()
        log = structlog.wrap_logger(
            structlog.ReturnLogger(),
            processors=[EtwRenderer(name)],
            wrapper_class=make_etw_bound_logger(name),
        )
        log.fatal("f")
        log.critical("c")
        assert [(e.name, e.level) for e in etw_capture.events] == [("f", 1), ("c", 1)]

    def test_filtering_bound_logger_fatal(self, etw_capture: EtwCapture) -> None:
        """structlog's filtering logger's fatal() writes level 1 from structlog 25.1 on, level 2 before."""
        log = structlog.wrap_logger(
            structlog.ReturnLogger(),
            processors=[EtwRenderer(unique_provider())],
            wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET),
        )
        log.fatal("f")
        expected = 1 if STRUCTLOG >= (25, 1) else 2
        assert [(e.name, e.level) for e in etw_capture.events] == [("f", expected)]

    def test_stdlib_bound_logger_fatal_is_critical(self, etw_capture: EtwCapture) -> None:
        """structlog's stdlib BoundLogger's fatal() writes level 1."""
        logger = logging.Logger("versions.fatal")
        logger.propagate = False
        log = structlog.wrap_logger(
            logger, processors=[EtwRenderer(unique_provider())], wrapper_class=structlog.stdlib.BoundLogger
        )
        log.fatal("f")
        assert [(e.name, e.level) for e in etw_capture.events] == [("f", 1)]
