"""The Windows backend prepares EventWriteTransfer's arguments once per slot and per event shape.

Run against tests/csrc/fake_eventing.c (compiled with gcc), which copies what each descriptor
points at: a stale or wrong address shows as wrong bytes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from structlog_etw.backends import etw
from structlog_etw.backends.etw import EtwBackend
from structlog_etw.formats.tracelogging import event_descriptor, provider_id
from structlog_etw.write.tracelogging import TraceLoggingEncoder
from tests.helpers.fake_etw import Fake

NAME = "MyCompany.Prepared"


@pytest.fixture
def opened(fake: Fake) -> Iterator[tuple[EtwBackend, TraceLoggingEncoder]]:
    fake.enable(5, 0xFF)
    enc = TraceLoggingEncoder(NAME)
    backend = EtwBackend(NAME, provider_id(NAME), enc.traits, library=fake.path)
    try:
        yield backend, enc
    finally:
        backend.close()


class TestPreparedPerSlotAndShape:
    """The event descriptor comes from the slot, the traits and metadata descriptors from a cache."""

    def test_slot_handle_is_its_opcode_0_event_descriptor_and_other_opcodes_are_packed(
        self, fake: Fake, opened: tuple[EtwBackend, TraceLoggingEncoder]
    ) -> None:
        """A slot's handle is its opcode-0 descriptor; another opcode is packed into the one written."""
        backend, enc = opened
        slot = backend.open_slot(3, 0x8)
        assert slot.handle == event_descriptor(3, 0, 0x8)
        event = enc.encode_dict("e", {"a": 1}, None)
        assert event is not None
        assert backend.write(slot, event, 0, None, None) == 0
        assert backend.write(slot, event, 2, None, None) == 0
        first, second = fake.records()
        assert (first.descriptor, second.descriptor) == (
            event_descriptor(3, 0, 0x8),
            event_descriptor(3, 2, 0x8),
        )

    def test_one_prepared_entry_per_metadata_and_every_write_reads_its_own_data(
        self, fake: Fake, opened: tuple[EtwBackend, TraceLoggingEncoder]
    ) -> None:
        """Five events of one metadata use one prepared entry, and each write passes its own data."""
        backend, enc = opened
        slot = backend.open_slot(4, 1)
        for i in range(5):
            event = enc.encode_dict("e", {"i": i, "s": "x" * i}, None)
            assert event is not None
            assert backend.write(slot, event, 0, None, None) == 0
        assert len(backend._prefixes) == 1
        assert [r.decoded().fields for r in fake.records()] == [{"i": i, "s": "x" * i} for i in range(5)]

    def test_an_equal_metadata_blob_of_another_object_reads_the_kept_copy(
        self, fake: Fake, opened: tuple[EtwBackend, TraceLoggingEncoder]
    ) -> None:
        """An equal metadata blob in another object, the first freed, is written right via the kept copy."""
        backend, enc = opened
        slot = backend.open_slot(4, 1)
        event = enc.encode_dict("e", {"i": 7}, None)
        assert event is not None
        backend.write(slot, event, 0, None, None)
        copy = (event[0], bytes(bytearray(event[1])), event[2])  # equal, not the same object
        del event
        assert backend.write(slot, copy, 0, None, None) == 0
        assert [r.decoded().fields for r in fake.records()] == [{"i": 7}, {"i": 7}]

    def test_new_traits_drop_the_prepared_descriptors(
        self, fake: Fake, opened: tuple[EtwBackend, TraceLoggingEncoder]
    ) -> None:
        """Assigning new traits empties the prepared descriptors."""
        backend, enc = opened
        slot = backend.open_slot(4, 1)
        event = enc.encode_dict("e", {"i": 1}, None)
        assert event is not None
        backend.write(slot, event, 0, None, None)
        assert backend._prefixes
        backend.traits = enc.traits
        assert backend._prefixes == {}

    def test_the_cache_is_bounded(self, opened: tuple[EtwBackend, TraceLoggingEncoder]) -> None:
        """Writing more shapes than _PREFIX_LIMIT never keeps more than _PREFIX_LIMIT prepared entries."""
        backend, enc = opened
        slot = backend.open_slot(4, 1)
        for i in range(etw._PREFIX_LIMIT + 10):
            event = enc.encode_dict(f"e{i}", {"i": i}, None)
            assert event is not None
            backend.write(slot, event, 0, None, None)
            assert len(backend._prefixes) <= etw._PREFIX_LIMIT


class TestDataAddress:
    """The data descriptor's address comes from id() where CPython's layout was confirmed."""

    def test_offset_agrees_with_ctypes_here(self) -> None:
        """The bytes-object data offset equals bytes' basic size minus one and gives ctypes' address."""
        assert bytes.__basicsize__ - 1 == etw._BYTES_OFFSET
        data = b"payload" * 10
        assert id(data) + etw._BYTES_OFFSET == etw._address(data)

    def test_without_the_offset_the_ctypes_address_is_used(
        self, fake: Fake, opened: tuple[EtwBackend, TraceLoggingEncoder], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without the known offset, the data address is taken from ctypes and the event is written right."""
        monkeypatch.setattr(etw, "_BYTES_OFFSET", None)
        backend, enc = opened
        event = enc.encode_dict("e", {"s": "via ctypes"}, None)
        assert event is not None
        assert backend.write(backend.open_slot(4, 1), event, 0, None, None) == 0
        assert fake.records()[0].decoded().fields == {"s": "via ctypes"}
