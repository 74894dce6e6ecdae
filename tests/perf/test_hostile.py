"""perf.data and tracefs ``format`` readers on hostile files: work linear in the input's size.

The crafted inputs run in a subprocess under a memory limit with a hang timeout
(tests/helpers/hostile.py): before the fixes the perf.data below took minutes and gigabytes,
and the format line never finished.
"""

from __future__ import annotations

from structlog_etw.perf.datafile import PerfDataFile
from structlog_etw.perf.tracefs_format import parse_format
from tests.helpers.hostile import format_text_without_colons, perf_data_shared_ids, run_bounded

_SHARED_IDS_IN_CHILD = """
from structlog_etw.perf.datafile import PerfDataFile
from tests.helpers.hostile import perf_data_shared_ids
f = PerfDataFile.from_bytes(perf_data_shared_ids(6000, 64000))
print(len(f.attrs), f.problems)
"""

_FORMAT_LINE_IN_CHILD = """
from structlog_etw.perf.tracefs_format import parse_format
from tests.helpers.hostile import format_text_without_colons
fmt = parse_format("s", format_text_without_colons(512 * 1024))
print([f.name for f in fmt.fields])
"""


class TestAttrIdSections:
    """Each attr's id section is read once, against a budget of the file's size."""

    def test_6000_attrs_sharing_64000_ids_read_in_linear_work(self) -> None:
        """6000 attrs sharing one 64000-id section are read without a hang, the shared ids reported."""
        assert len(perf_data_shared_ids(6000, 64000)) < 1_400_000  # about 1 MB
        run = run_bounded(_SHARED_IDS_IN_CHILD)
        assert not run.hung, "perf.data reader hung on shared id sections"
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.startswith("6000 [")
        assert "5999 attrs share an id section with another attr (ids ignored)" in run.stdout

    def test_the_first_attr_keeps_its_ids(self) -> None:
        """Of attrs sharing an id section, only the first keeps its ids."""
        f = PerfDataFile.from_bytes(perf_data_shared_ids(3, 10))
        assert [len(a.ids) for a in f.attrs] == [10, 0, 0]


class TestFormatLines:
    """A ``format`` line is split, not matched with a regex that can backtrack."""

    def test_a_512_kb_line_without_a_colon_is_read_quickly(self) -> None:
        """A format file with a 512 KB line without a colon is parsed without a hang."""
        run = run_bounded(_FORMAT_LINE_IN_CHILD)
        assert not run.hung, "format parser hung on a long line"
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.strip() == "['a']"

    def test_field_properties_are_still_read(self) -> None:
        """A format line without colons still gives the field's name, offset, size and signedness."""
        fmt = parse_format("s", format_text_without_colons(10))
        assert fmt is not None
        (field,) = fmt.fields
        assert (field.name, field.offset, field.size, field.signed) == ("a", 0, 4, True)
