"""``structlog-etw decode FILE``: perf.data -> one line per event (text, JSON, perf-decode's JSON)
or a Chrome/Perfetto timeline (docs/cli/decode.md).  An .etl file (told by its content) goes to
:mod:`structlog_etw.cli.decode_etl`.

Exit codes: 0 every sample decoded; 1 the file is damaged or truncated, or some samples could
not be decoded (what could be decoded is still written, the rest is reported on stderr); 2 the
file cannot be read or is not a perf.data file.  Whatever the file holds, the outcome is one of
these with a message on stderr, never a traceback.  Samples of events that are no tracepoints
(``-e cpu-clock``, cycles, breakpoints) are counted on stderr as "not tracepoints"; they are no
damage.  ``decode -`` reads a pipe as perf writes it: what is decoded is shown before each read
that may wait for perf.
"""

from __future__ import annotations

import argparse
import codecs
import functools
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, Final, TextIO

from ..perf.datafile import PerfDataError, PerfDataFile, Sample
from ..perf.samples import SampleDecodeError, decode_sample
from ..read.writers._lines import Accepts, Lines, sample_meta
from ..read.writers.console import ConsoleLines, printable
from ..read.writers.json_lines import JsonLines
from ..read.writers.perf_json import PerfJsonLines
from ._progress import input_size, progress_for
from ._report import Outcome, cannot_open, report
from .output import (
    EventFilter,
    EventWriter,
    add_filter_arguments,
    add_output_arguments,
    event_filter,
    make_writer,
    use_color,
)

__all__ = ["FORMATS", "add_arguments", "decode_file", "run"]

#: The output formats of ``decode`` (``--format``).
FORMATS = ("text", "json", "perf-json", "chrome-trace")
#: The outputs written line by line, each by its writer module's plans (chrome-trace: by its
#: :class:`~structlog_etw.cli.output.EventWriter` at the end).
_LINES: Final[dict[str, Callable[[Accepts, bool], Lines]]] = {
    "perf-json": PerfJsonLines,
    "json": JsonLines,
    "text": ConsoleLines,
}
#: Lines kept before they are written in one go (and before every read that may wait for perf).
_BATCH: Final = 512


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``decode``."""
    parser.add_argument(
        "file",
        metavar="FILE",
        help="perf.data file written by perf record ('-': read stdin, e.g. perf's pipe mode) or an .etl file",
    )
    add_output_arguments(parser, FORMATS)
    parser.add_argument(
        "--perf-json",
        dest="format",
        action="store_const",
        const="perf-json",
        help="one object per line exactly as Microsoft's perf-decode writes it: --format perf-json",
    )
    parser.add_argument(
        "--pretty", "--text", dest="format", action="store_const", const="text", help="--format text"
    )
    add_filter_arguments(parser)
    parser.add_argument(
        "--order",
        choices=["time", "file"],
        default="time",
        help="time: by timestamp, as perf script and perf-decode (default); file: as stored, per CPU buffer",
    )
    parser.add_argument("--file-order", dest="order", action="store_const", const="file", help="--order file")
    parser.add_argument(  # the default since 0.2; kept so that old command lines still run
        "--time-order", dest="order", action="store_const", const="time", help=argparse.SUPPRESS
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line on a terminal's stderr")
    parser.epilog = (
        "Colour only on a terminal without NO_COLOR (or --color). Exit status: 0 all decoded, 1 damaged"
        " file or undecodable samples (reported on stderr), 2 unreadable file."
    )


class _Sink:
    """Where the lines go: batches of bytes lines to ``binary`` (the text stream's own buffer)
    or, without one, decoded to ``out``; ``dirty`` when the ordinary path wrote to ``out`` since
    (which is flushed first, so that lines stay in order)."""

    def __init__(self, out: TextIO, binary: BinaryIO | None) -> None:
        self.out = out
        self.binary = binary
        self.dirty = False
        self.line_buffering = bool(getattr(out, "line_buffering", False))
        #: The lines not written yet.
        self.batch: list[bytes] = []

    def write(self) -> None:
        """Write the batch (if any)."""
        lines = self.batch
        if not lines:
            return
        lines.append(b"")
        data = b"\n".join(lines)
        lines.clear()
        if self.binary is None:
            self.out.write(data.decode("utf-8", "surrogateescape"))
            return
        if self.dirty:
            self.out.flush()
            self.dirty = False
        self.binary.write(data)
        if self.line_buffering:
            self.binary.flush()

    def text(self, line: str) -> None:
        """Write a line of the ordinary path to ``out`` (after the batch)."""
        self.write()
        self.dirty = True
        self.out.write(line + "\n")


class _Decoding:
    """One decode: each sample's line from its output's plans (:data:`_LINES`), or the ordinary
    way (decoded, then written by the output's DecodedEvent writer); what could not be
    decoded, counted."""

    def __init__(
        self, out: TextIO, mode: str, colors: bool, wanted: EventFilter, binary_out: BinaryIO | None
    ) -> None:
        lines = _LINES.get(mode)
        self.lines = lines(wanted.accepts_values, colors) if lines is not None else None
        self.writer: EventWriter | None = None if lines else make_writer(mode, out, colors=colors)
        self.wanted = wanted
        self.sink = _Sink(out, binary_out)
        self.written = 0
        self.problems: list[str] = []
        self.unknown: dict[str, int] = {}  # samples without a tracepoint format, by name
        self.others: dict[str, int] = {}  # samples of events that are no tracepoints, by name

    def run(self, samples: Iterable[Sample]) -> None:
        """Write every sample's line (the fast way when its plan reads it)."""
        lines = self.lines
        if lines is None:  # chrome-trace: every event to the writer
            for sample in samples:
                # (a progress hook goes here: one call per sample)
                self.written += self.ordinary(sample)
            return
        find = lines.renderers.get  # a tracepoint format's renderer, once it has one
        batch = self.sink.batch
        add = batch.append
        written = 0
        for sample in samples:
            # (a progress hook goes here: one call per sample)
            render = find(id(sample.format))
            if render is None:
                fmt = sample.format
                if fmt is None or not sample.is_tracepoint:
                    written += self.ordinary(sample)
                    continue
                render = lines.renderer(fmt)
            try:
                line = render(sample)
            except OSError:
                raise
            except Exception:  # a crafted sample: the ordinary path reports what is wrong with it
                line = None
            if line is None:
                written += self.ordinary(sample)
            elif line:
                add(line)
                written += 1
                if len(batch) >= _BATCH:
                    self.sink.write()
        self.written += written

    def ordinary(self, sample: Sample) -> int:
        """Decode ``sample`` and write it; return 1 if it was written, 0 if not (filtered, or
        not decoded: counted)."""
        if not sample.is_tracepoint:
            self.others[sample.name] = self.others.get(sample.name, 0) + 1
            return 0
        try:
            event = decode_sample(sample)
            if self.lines is not None:
                line = self.lines.line_of(sample, event)
                if line is None:
                    return 0
                self.sink.text(line)
                return 1
            if not self.wanted.accepts(event):
                return 0
            assert self.writer is not None
            self.writer.write(event, sample_meta(sample))
        except SampleDecodeError as exc:
            if sample.format is None:
                key = sample.name or "unnamed events"
                self.unknown[key] = self.unknown.get(key, 0) + 1
            else:
                self.problems.append(str(exc))
            return 0
        except OSError:
            raise  # writing failed (a closed pipe): not the sample's fault
        except Exception as exc:  # whatever a crafted sample does is reported, not raised
            # A decoder bug or a limit hit on a crafted file: report the sample, go on.
            self.problems.append(f"sample at offset {sample.offset} ({sample.name}): cannot decode: {exc!r}")
            return 0
        return 1

    def finish(self, f: PerfDataFile, notes: list[str] | None) -> tuple[int, list[str]]:
        """Write what is left; return ``(events written, problems)`` (``notes``: the samples of
        events that are no tracepoints, one line per name)."""
        self.sink.write()
        if self.writer is not None:
            self.writer.close()
        for name, count in self.unknown.items():
            self.problems.append(
                f"{count} samples of {name} not decoded: tracepoint format unknown"
                " (the file lacks its tracing data: truncated?)"
            )
        if notes is not None:
            notes.extend(
                f"{count} samples of {name}: not tracepoints (not decoded)"
                for name, count in self.others.items()
            )
        return self.written, [*f.problems, *self.problems]

    def on_wait(self, waiting: Callable[[], None] | None) -> Callable[[], None]:
        """What the file calls before a read that may wait for perf: the batch written, then ``waiting``."""

        def on_wait() -> None:
            self.sink.write()
            if waiting is not None:
                waiting()

        return on_wait


def decode_file(
    f: PerfDataFile,
    out: TextIO,
    *,
    mode: str = "text",
    colors: bool = False,
    providers: Iterable[str] | None = None,
    events: Iterable[str] | None = None,
    time_order: bool = True,
    level: int | None = None,
    keyword: int | None = None,
    notes: list[str] | None = None,
    wanted: EventFilter | None = None,
    binary_out: BinaryIO | None = None,
    progress: Callable[[Iterator[Sample]], Iterator[Sample]] | None = None,
) -> tuple[int, list[str]]:
    """Write the file's events to ``out`` in format ``mode``; return ``(events written, problems)``.

    Never raises for what the file holds: a sample that cannot be decoded (or whose decoding
    fails in any way) is a problem in the returned list, and the other samples are still written.
    Samples of events that are no tracepoints (hardware, software, breakpoints) are not
    problems: one line per event name is appended to ``notes`` (when given).  ``wanted`` is the
    event filter when the caller has built one (``decode`` does, from its arguments); else it is
    built from ``providers``, ``events``, ``level`` and ``keyword``.  ``binary_out``: the byte
    stream under ``out`` (UTF-8, ``"\\n"`` line ends) when the caller has one: lines are then
    written to it as bytes, in batches (``out`` is flushed first whenever it was written to).
    ``progress``: wraps the samples (the progress line of :mod:`~structlog_etw.cli._progress`).
    """
    if wanted is None:
        wanted = EventFilter(
            level=level,
            keyword=keyword,
            providers=frozenset(providers) if providers else None,
            names=frozenset(events) if events else None,
        )
    decoding = _Decoding(out, mode, colors, wanted, binary_out)
    waiting = f.on_wait
    f.on_wait = decoding.on_wait(waiting)
    samples = f.samples_by_time() if time_order else f.samples()
    if progress is not None:
        samples = progress(samples)
    try:
        decoding.run(samples)
    finally:
        f.on_wait = waiting
    return decoding.finish(f, notes)


def _open(path: str) -> PerfDataFile:
    if path == "-":  # perf record -o - | structlog-etw decode -: read as perf writes it
        return PerfDataFile.from_fd(sys.stdin.buffer.fileno(), "stdin")
    return PerfDataFile.open(path)


def _is_etl(path: str) -> bool:
    """Whether ``path`` is a regular file holding an .etl file, by its content (a pipe is not read)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            head = f.read(128)
    except OSError:
        return False
    if head[:8] in (b"PERFILE2", b"2ELIFREP"):  # a perf.data file: no need to load the .etl reader
        return False
    from ..etw.etl import is_etl  # noqa: PLC0415 - only for what may be an .etl file

    return is_etl(head)


def _binary_stdout(mode: str) -> BinaryIO | None:
    """stdout's byte stream when lines may be written to it as bytes: UTF-8 text, ``"\\n"``
    line ends (the text stream does not translate them), and for ``--perf-json`` invalid UTF-8
    written as it is (``surrogateescape``, as :func:`run` sets it)."""
    buffer = getattr(sys.stdout, "buffer", None)
    encoding = getattr(sys.stdout, "encoding", None)
    if buffer is None or not isinstance(encoding, str) or os.linesep != "\n":
        return None
    try:
        utf8 = codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return None
    if not utf8 or (mode == "perf-json" and getattr(sys.stdout, "errors", None) != "surrogateescape"):
        return None
    return buffer  # type: ignore[no-any-return]


def run(args: argparse.Namespace) -> int:
    """Decode ``args.file`` to stdout; report problems on stderr (``cli._report``)."""
    if args.file != "-" and _is_etl(args.file):  # .etl: told by the content, not the name
        from .decode_etl import run as run_etl  # noqa: PLC0415

        return run_etl(args)
    name = printable(args.file)
    try:
        f = _open(args.file)
    except Exception as exc:  # a crafted header too: a message, never a traceback
        return cannot_open(name, exc, PerfDataError, "perf.data")
    mode = args.format
    if mode == "perf-json":
        # perf-decode's bytes, invalid UTF-8 included (kept as surrogate escapes until written).
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
    notes: list[str] = []
    f.on_wait = sys.stdout.flush  # a pipe: show what is decoded before waiting for perf
    shown = progress_for("structlog-etw decode", args.quiet, output=sys.stdout)
    size = input_size(args.file)
    with f:
        written, problems = decode_file(
            f,
            sys.stdout,
            mode=mode,
            colors=use_color(args.color, sys.stdout),
            time_order=args.order == "time",
            notes=notes,
            wanted=event_filter(args),
            binary_out=_binary_stdout(mode),
            progress=None if shown is None else functools.partial(shown.samples, total=size),
        )
        sys.stdout.flush()
        outcome = Outcome(written, problems, notes=notes, lost=f.lost, late=f.late)
    return report(name, outcome)
