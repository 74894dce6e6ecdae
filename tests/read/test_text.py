"""The value texts every writer shares (``structlog_etw.read._text``)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from structlog_etw.read._text import uuid_text


@given(st.binary(min_size=16, max_size=16))
def test_a_uuid_s_text_is_the_uuid_module_s(raw: bytes) -> None:
    """``uuid_text`` writes what ``str(uuid.UUID(bytes=raw))`` writes, for any 16 bytes (also
    from a memoryview or a bytearray: a writer hands it what the payload is)."""
    assert uuid_text(raw) == str(uuid.UUID(bytes=raw))
    assert uuid_text(memoryview(raw)) == str(uuid.UUID(bytes=raw))
    assert uuid_text(bytearray(raw)) == str(uuid.UUID(bytes=raw))


@pytest.mark.parametrize("size", [0, 15, 17])
def test_a_uuid_is_sixteen_bytes(size: int) -> None:
    """Other lengths are refused, as ``uuid.UUID`` refuses them."""
    with pytest.raises(ValueError):
        uuid_text(bytes(size))
