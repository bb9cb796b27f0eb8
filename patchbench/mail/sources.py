"""Where mail comes from: split a path (or stdin) into raw messages, one bytes object each, streaming.

Accepted: mbox (mboxo or mboxrd, odd `From ` separators, leading blank lines), maildir, a single
RFC 822 message, a directory of *.patch / *.eml / *.mbox files, `.gz` of any file, `-` for stdin, and
(through `rereadable`) a thread fetched from lore by Message-Id or URL.
Only one message is held in memory at a time, so memory does not grow with the mailbox.
"""

from __future__ import annotations

import gzip
import re
import shutil
import sys
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from patchbench.errors import BadInput
from patchbench.mail.lore import download, thread_url

_HEADER_LINE = re.compile(rb"^[\x21-\x39\x3b-\x7e]+:")
_MBOX_DATED_FROM = re.compile(rb"^From \S+ +[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d ")
_MBOXRD_DEEP_QUOTE = re.compile(rb"^>>+From ", re.MULTILINE)
_QUOTED_FROM = re.compile(rb"^>(>*From )", re.MULTILINE)
_DIRECTORY_SUFFIXES = (".patch", ".diff", ".eml", ".mbox", ".mbx", ".txt", ".gz")


def iter_raw_messages(source: str) -> Iterator[bytes]:
    """Yield the raw bytes of each message in `source`, in the order they are stored."""
    if source == "-":
        yield from split_mbox(sys.stdin.buffer)
        return
    path = Path(source)
    if not path.exists():
        raise BadInput(f"{source}: no such file or directory")
    if path.is_dir():
        yield from _read_directory(path)
    else:
        yield from _read_file(path)


@contextmanager
def rereadable(source: str) -> Iterator[str]:
    """A path to `source` that can be read twice: stdin, or a thread fetched from a public-inbox
    archive (a Message-Id or a lore URL), is first copied, streaming, to a temporary file."""
    url = None if source == "-" else thread_url(source)
    if source != "-" and url is None:
        yield source
        return
    with tempfile.NamedTemporaryFile(prefix="patchbench-", suffix=".mbox") as spool:
        if url is None:
            shutil.copyfileobj(sys.stdin.buffer, spool)
        else:
            download(url, spool)
        spool.flush()
        yield spool.name


def _read_directory(path: Path) -> Iterator[bytes]:
    if (path / "cur").is_dir() or (path / "new").is_dir():
        files = [f for sub in ("cur", "new") if (path / sub).is_dir() for f in (path / sub).iterdir()]
    else:
        files = [f for f in path.iterdir() if f.name.lower().endswith(_DIRECTORY_SUFFIXES)]
        files = files or list(path.iterdir())  # no known suffix: take every file
    # format-patch names (0001-...), maildir names (timestamp first) and MH numbers (1, 2, ... 10)
    # all sort into sending order when runs of digits compare as numbers
    for file in sorted((f for f in files if f.is_file() and not f.name.startswith(".")), key=_natural_order):
        yield from _read_file(file)


def _natural_order(path: Path) -> list:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", path.name)]


def _read_file(path: Path) -> Iterator[bytes]:
    try:
        with open(path, "rb") as raw:
            if raw.read(2) == b"\x1f\x8b":
                raw.seek(0)
                with gzip.GzipFile(fileobj=raw) as unzipped:
                    yield from split_mbox(unzipped)
            else:
                raw.seek(0)
                yield from split_mbox(raw)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise BadInput(f"{path}: truncated or corrupt gzip file ({exc})") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a directory") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None


def split_mbox(lines: Iterable[bytes]) -> Iterator[bytes]:
    """Split an mbox stream into messages; a stream without `From ` separators is one message.

    A `From ` line separates messages only when a header line follows it and it either comes after a
    blank line or carries an mbox date, so body text that happens to start with "From " stays put.
    """
    message: list[bytes] = []
    held_separator: bytes | None = None   # a `From ` line waiting to see whether a header follows
    previous_blank = True
    mboxrd = False                        # public-inbox (lore) writes mboxrd, with `From mboxrd@z`
    for line in lines:
        if held_separator is not None:
            if _HEADER_LINE.match(line):
                if _has_content(message):
                    yield _finish(message, mboxrd)
                message = []
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
    if held_separator is not None:
        message.append(held_separator)
    if _has_content(message):
        yield _finish(message, mboxrd)


def _has_content(message: list[bytes]) -> bool:
    return any(line.strip() for line in message)


def _finish(message: list[bytes], mboxrd: bool) -> bytes:
    raw = b"".join(message)
    # mboxrd escapes every `From ` line with one more `>`; known from the separator, or from a
    # `>>From ` (only mboxrd writes those). In mboxo a `>From ` may be what the author wrote: kept.
    if mboxrd or _MBOXRD_DEEP_QUOTE.search(raw):
        raw = _QUOTED_FROM.sub(rb"\1", raw)
    return raw
