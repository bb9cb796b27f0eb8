"""The commit a patch becomes: message with collected trailers (as `b4 am` writes it) and identities."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parseaddr

from patchbench.series import Patch

_TRAILER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*):\s*(.*)$")


@dataclass
class Identity:
    name: str
    email: str

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


def parse_identity(text: str) -> Identity:
    """"Name <mail>" as a From line gives it (an unquoted comma stays in the name, as git am keeps it);
    a bare address stands for the name too."""
    match = re.match(r"^\s*(.*?)\s*<([^<>]*)>\s*$", text)
    if match:
        name, email = match[1], match[2]
        if len(name) >= 2 and name[0] == name[-1] == '"':
            name = name[1:-1].replace('\\"', '"')
    else:
        name, email = parseaddr(text)
        email = email or text.strip()
    return Identity(name=(name or email).strip(), email=email.strip())


def git_date(date: datetime) -> str:
    """git's internal date format, keeping the sender's UTC offset; a naive datetime is taken as UTC."""
    if date.tzinfo is None:
        date = date.replace(tzinfo=timezone.utc)
    offset = int(date.utcoffset().total_seconds() // 60)
    sign = "-" if offset < 0 else "+"
    return f"{int(date.timestamp())} {sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"


def stripspace(text: str) -> str:
    """What `git stripspace` (and so `git am`) does: trailing blanks off, runs of empty lines folded."""
    lines: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        line = line.rstrip()
        if line or (lines and lines[-1]):
            lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _normalised(trailer: str) -> str:
    match = _TRAILER.match(trailer.strip())
    if not match:
        return " ".join(trailer.split()).lower()
    return match[1].lower() + ": " + " ".join(match[2].split()).lower()


def _is_trailer_block(lines: list[str]) -> bool:
    return bool(lines) and bool(_TRAILER.match(lines[0])) and all(
        _TRAILER.match(line) or line[:1] in (" ", "\t") for line in lines)


def commit_message(patch: Patch, applier: Identity | None = None, extra_trailers: tuple[str, ...] = ()) -> str:
    """Subject, body, and the trailers collected for the patch (then `extra_trailers`) that its body
    does not carry yet.

    New trailers go at the end of the body's trailer block, but above the applier's own
    Signed-off-by when that already closes it; with `applier`, a Signed-off-by is added as
    `git am --signoff` does (unless it is already the last line).
    """
    body = stripspace(patch.body).rstrip("\n")
    lines = body.split("\n") if body else []
    start = max((i + 1 for i, line in enumerate(lines) if not line), default=0)
    if not _is_trailer_block(lines[start:]):
        lines += [""] if lines else []
        start = len(lines)
    block = lines[start:]
    have = {_normalised(line) for line in block}
    new = [t.strip() for t in [*patch.trailers, *extra_trailers] if _normalised(t) not in have]
    new = list(dict.fromkeys(new))
    own_signoff = f"Signed-off-by: {applier}" if applier else None
    if own_signoff and block and _normalised(block[-1]) == _normalised(own_signoff):
        block[-1:-1] = new
    else:
        block += new
        if own_signoff:
            block.append(own_signoff)
    text = "\n".join(lines[:start] + block)
    return stripspace(f"{patch.subject}\n\n{text}")


def identity_env(patch: Patch, committer: Identity) -> dict[str, str]:
    """Author from the mail; committer from the user's git identity. Committer date = author date, so
    that applying the same series to the same base twice gives the same commits (and the same refs)."""
    author = parse_identity(patch.author)
    env = {"GIT_AUTHOR_NAME": author.name, "GIT_AUTHOR_EMAIL": author.email,
           "GIT_COMMITTER_NAME": committer.name, "GIT_COMMITTER_EMAIL": committer.email}
    if patch.date is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = git_date(patch.date)
    return env
