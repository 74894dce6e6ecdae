"""Test folders that need a product of a nox session: the built site (``nox -s docs``), the built
sdist and wheel (``nox -s build``).

The session builds the product and runs the folder with an environment variable naming it.  Any
other run (a plain ``pytest``, ``nox -s tests``) deselects the folder's tests and says so in the
summary, as it does for the kernel tests: they are never skipped in a run that was asked for them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def deselect_unless_built(
    config: pytest.Config, items: list[pytest.Item], folder: Path, env: str, session: str
) -> str | None:
    """Deselect the tests under ``folder`` when ``$env`` is unset; the summary line, or None."""
    if os.environ.get(env):
        return None
    mine = [item for item in items if folder in item.path.parents]
    if not mine:
        return None
    config.hook.pytest_deselected(items=mine)
    keep = set(map(id, mine))
    items[:] = [item for item in items if id(item) not in keep]
    return (
        f"{len(mine)} tests of {folder.name}/ deselected: they check what `{session}` builds (${env} unset)"
    )


def built_path(env: str, session: str) -> Path:
    """The directory ``$env`` names; fails the test when the session's product is missing."""
    value = os.environ.get(env)
    if not value:
        pytest.fail(f"${env} is unset: run these tests through `{session}`", pytrace=False)
    path = Path(value).resolve()
    if not path.is_dir():
        pytest.fail(f"${env}={value} is not a directory: `{session}` builds it", pytrace=False)
    return path
