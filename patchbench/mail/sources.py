"""Where mail comes from: split a path (or stdin) into raw messages, one bytes object each, streaming.

Accepted: mbox (mboxo or mboxrd, odd `From ` separators, leading blank lines), maildir, a single
RFC 822 message, a directory of *.patch / *.eml / *.mbox files, `.gz` of any file, `-` for stdin, and
(through `rereadable`) a thread fetched from lore by Message-Id or URL.
Only one message is held in memory at a time, so memory does not grow with the mailbox; and no more
than `InputLimits` allow is read (sizes are checked before a file is split: a file by its size, a
gzip by inflating it once without keeping anything).
"""

from __future__ import annotations

import gzip
import os
import re
import sys
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from patchbench.errors import BadInput
from patchbench.mail.limits import InputLimits
from patchbench.mail.lore import download, thread_url

_HEADER_LINE = re.compile(rb"^[\x21-\x39\x3b-\x7e]+:")
_MBOX_DATED_FROM = re.compile(rb"^From \S+ +[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d ")
_MBOXRD_DEEP_QUOTE = re.compile(rb"^>>+From ", re.MULTILINE)
_QUOTED_FROM = re.compile(rb"^>(>*From )", re.MULTILINE)
_DIRECTORY_SUFFIXES = (".patch", ".diff", ".eml", ".mbox", ".mbx", ".txt", ".gz")


class Budget:
    """What one reading of a source has used of its `InputLimits` (bytes and messages, all files)."""

    def __init__(self, limits: InputLimits, name: str):
        self.limits, self.name = limits, name
        self.size = self.messages = 0
        self.separators = 0          # `From ` at the start of a line, +1 a file: at least the messages

    def take_bytes(self, size: int) -> None:
        self.size += size
        if self.size > self.limits.max_input_size:
            raise self.limits.refuse(f"{self.name}: more than", self.limits.max_input_size, "of mail",
                                     "--max-input-size")

    def take_message(self) -> None:
        self.messages += 1
        if self.messages > self.limits.max_messages:
            raise self.limits.refuse(f"{self.name}: more than", self.limits.max_messages, "messages",
                                     "--max-messages")


def iter_raw_messages(source: str, limits: InputLimits = InputLimits(), name: str | None = None) -> Iterator[bytes]:
    """Yield the raw bytes of each message in `source`, in the order they are stored; errors name the
    source as `name` (a spooled copy of standard input is "standard input").

    Before any message is yielded, the source is measured (C-speed scans, nothing kept): past the size
    limit, or with more possible messages than the limit allows and, split without decoding, more
    messages indeed, it is refused - in about a second, where decoding it first took minutes.
    """
    if source == "-":
        budget = Budget(limits, "standard input")
        yield from split_mbox(_lines(sys.stdin.buffer, limits, budget), budget)
        return
    path = Path(source)
    if not path.exists():
        raise BadInput(f"{source}: no such file or directory")
    files = directory_files(path) if path.is_dir() else [path]
    name = name or source
    measured = Budget(limits, name)
    for file in files:
        _measure(file, measured)
    if measured.separators > limits.max_messages:
        counted = Budget(limits, name)
        for file in files:
            for _ in _read_file(file, counted):
                pass
    budget = Budget(limits, name)
    for file in files:
        yield from _read_file(file, budget)


@contextmanager
def rereadable(source: str, limits: InputLimits = InputLimits()) -> Iterator[str]:
    """A path to `source` that can be read twice: stdin, or a thread fetched from a public-inbox
    archive (a Message-Id or a lore URL), is first copied, streaming, to a temporary file (no more
    than the input size limit)."""
    url = None if source == "-" else thread_url(source)
    if source != "-" and url is None:
        yield source
        return
    with tempfile.NamedTemporaryFile(prefix="patchbench-", suffix=".mbox") as spool:
        if url is None:
            _copy_limited(sys.stdin.buffer, spool, Budget(limits, "standard input"))
        else:
            download(url, spool, Budget(limits, url).take_bytes)
        spool.flush()
        yield spool.name


def _copy_limited(source, into, budget: Budget) -> None:
    while chunk := source.read(1 << 20):
        budget.take_bytes(len(chunk))
        into.write(chunk)


def directory_files(path: Path) -> list[Path]:
    """The mail files of a directory (a maildir's cur/ and new/), in sending order."""
    if (path / "cur").is_dir() or (path / "new").is_dir():
        files = [f for sub in ("cur", "new") if (path / sub).is_dir() for f in (path / sub).iterdir()]
    else:
        files = [f for f in path.iterdir() if f.name.lower().endswith(_DIRECTORY_SUFFIXES)]
        files = files or list(path.iterdir())  # no known suffix: take every file
    # format-patch names (0001-...), maildir names (timestamp first) and MH numbers (1, 2, ... 10)
    # all sort into sending order when runs of digits compare as numbers
    return sorted((f for f in files if f.is_file() and not f.name.startswith(".")), key=_natural_order)


def _natural_order(path: Path) -> list:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", path.name)]


@contextmanager
def _opened(path: Path) -> Iterator[tuple[BinaryIO, bool]]:
    """The file and whether it is gzip; reading errors become BadInput naming the file."""
    try:
        with open(path, "rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            yield raw, gzipped
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise BadInput(f"{path}: truncated or corrupt gzip file ({exc})") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a directory") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read_file(path: Path, budget: Budget) -> Iterator[bytes]:
    with _opened(path) as (raw, gzipped):
        if gzipped:
            with gzip.GzipFile(fileobj=raw) as unzipped:
                yield from split_mbox(_lines(unzipped, budget.limits), budget)
        else:
            yield from split_mbox(_lines(raw, budget.limits), budget)


def _measure(path: Path, budget: Budget) -> None:
    """Count, keeping nothing, the bytes of mail in `path` (inflated, for a gzip) and the lines that may
    start a message, and refuse a line past the limit: an endless line of zeros is refused here, at C
    speed, whatever the size limit. Chunks are never longer than a line may be, so no long line can
    hide inside one."""
    limits = budget.limits
    step = min(1 << 22, limits.max_line_length)
    with _opened(path) as (raw, gzipped):
        budget.separators += 1
        if not gzipped:
            budget.take_bytes(os.fstat(raw.fileno()).st_size)
        tail, line = b"\n", 0          # the file starts at the start of a line; bytes of the line so far
        for chunk in _inflated(raw, step) if gzipped else iter(lambda: raw.read(step), b""):
            if gzipped:
                budget.take_bytes(len(chunk))
            window = tail + chunk
            budget.separators += window.count(b"\nFrom ")
            tail = window[-5:]
            first = chunk.find(b"\n")
            if line + (len(chunk) if first < 0 else first + 1) > limits.max_line_length:
                raise limits.refuse(f"{budget.name}: a line longer than", limits.max_line_length, "",
                                    "--max-line-length")
            line = line + len(chunk) if first < 0 else len(chunk) - chunk.rfind(b"\n") - 1


def _inflated(raw: BinaryIO, step: int) -> Iterator[bytes]:
    """The inflated bytes of a gzip file, every member, at most `step` at a time. zlib directly:
    GzipFile's buffering costs half as much again."""
    inflater = zlib.decompressobj(wbits=31)
    data = raw.read(1 << 16)
    while data:
        yield inflater.decompress(data, step)
        if inflater.eof:  # one member ended; a gzip may hold several, one after the other
            data = (inflater.unused_data or raw.read(1 << 16)).lstrip(b"\0")   # zero padding between
            inflater = zlib.decompressobj(wbits=31)
            if not data:
                return
        else:
            data = inflater.unconsumed_tail or raw.read(1 << 16)
    yield inflater.flush()   # input all read: what zlib still holds is at most a few bytes
    if not inflater.eof:
        raise EOFError("compressed file ended before the end-of-stream marker was reached")


def _lines(stream, limits: InputLimits, budget: Budget | None = None) -> Iterator[bytes]:
    """Lines of a binary stream, none longer than the line limit allows plus one byte (so that an
    endless line is never held whole); with `budget`, the bytes are counted as they are read."""
    while line := stream.readline(limits.max_line_length + 1):
        if budget is not None:
            budget.take_bytes(len(line))
        yield line


def split_mbox(lines: Iterable[bytes], budget: Budget | None = None) -> Iterator[bytes]:
    """Split an mbox stream into messages; a stream without `From ` separators is one message.

    A `From ` line separates messages only when a header line follows it and it either comes after a
    blank line or carries an mbox date, so body text that happens to start with "From " stays put.
    With `budget`, lines, header blocks and the number of messages are held to its limits.
    """
    limits = budget.limits if budget is not None else InputLimits()
    name = budget.name if budget is not None else "mailbox"
    message: list[bytes] = []
    header_size = 0                       # bytes of the current message's header block; -1 past it
    held_separator: bytes | None = None   # a `From ` line waiting to see whether a header follows
    previous_blank = True
    mboxrd = False                        # public-inbox (lore) writes mboxrd, with `From mboxrd@z`
    for line in lines:
        if len(line) > limits.max_line_length:
            raise limits.refuse(f"{name}: a line longer than", limits.max_line_length, "", "--max-line-length")
        if held_separator is not None:
            if _HEADER_LINE.match(line):
                if _has_content(message):
                    yield _counted(_finish(message, mboxrd), budget)
                message, header_size = [], 0
                mboxrd = held_separator.startswith(b"From mboxrd@")
            else:
                message.append(held_separator)
            held_separator = None
        if line.startswith(b"From ") and (previous_blank or _MBOX_DATED_FROM.match(line)):
            held_separator = line
            continue
        blank = line.isspace() or not line
        if blank and not message:
            continue  # leading blank lines before the first header
        message.append(line)
        previous_blank = blank
        if header_size >= 0:
            header_size = -1 if blank else header_size + len(line)
            if header_size > limits.max_header_size:
                raise limits.refuse(f"{name}: a message's header block longer than", limits.max_header_size, "",
                                    "--max-header-size")
    if held_separator is not None:
        message.append(held_separator)
    if _has_content(message):
        yield _counted(_finish(message, mboxrd), budget)


def _counted(raw: bytes, budget: Budget | None) -> bytes:
    if budget is not None:
        budget.take_message()
    return raw


def _has_content(message: list[bytes]) -> bool:
    return any(line.strip() for line in message)


def _finish(message: list[bytes], mboxrd: bool) -> bytes:
    raw = b"".join(message)
    # mboxrd escapes every `From ` line with one more `>`; known from the separator, or from a
    # `>>From ` (only mboxrd writes those). In mboxo a `>From ` may be what the author wrote: kept.
    if mboxrd or _MBOXRD_DEEP_QUOTE.search(raw):
        raw = _QUOTED_FROM.sub(rb"\1", raw)
    return raw
