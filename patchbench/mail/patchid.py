"""`git patch-id --stable` of a diff, computed here (the same algorithm) so that reading a mailbox
needs no repository and no process per patch.

What git hashes: every line of the diff from the first `diff ` header on, with all whitespace
removed; `index` lines, hunk headers (line numbers) and "\\ No newline" markers are left out. With
--stable each file is hashed on its own and the hashes are added as 20-byte little-endian numbers,
so the order of the files does not matter. The id is therefore the same when a patch is rebased
(line numbers move), re-sent with another commit message, or its files are reordered.
"""

from __future__ import annotations

import hashlib
import re

_HUNK = re.compile(r"^@@ -(?:\d+(?:,(\d+))?) \+(?:\d+(?:,(\d+))?)")
_WHITESPACE = re.compile(r"[ \t\n\r]+")   # git's isspace()
_OBJECT_ID = re.compile(r"^[0-9a-fA-F]{40}")
_SIZE = 20


def patch_id(diff: str) -> str | None:
    """The stable patch-id of `diff` (hex), or None when it holds no diff git would hash."""
    total = bytearray(_SIZE)
    sha = hashlib.sha1()
    hashed = 0
    before = after = -1
    binary = False
    old_blob = new_blob = ""
    for line in diff.split("\n"):   # git reads lines by "\n" only
        if line.startswith("\\ ") and len(line) + 1 > 12:
            continue
        if _OBJECT_ID.match(line.removeprefix("commit ").removeprefix("From ")):
            break  # the next commit of a `git log -p` stream
        if not hashed and not line.startswith("diff "):
            continue
        if before == -1:
            if line.startswith(("GIT binary patch", "Binary files")):
                binary, before = True, 0
                sha.update((old_blob + new_blob).encode())
                sha = _flush(total, sha)
                continue
            if line.startswith("index "):
                old_blob, _, rest = line[6:].partition("..")
                new_blob = rest.split(" ", 1)[0]
                continue
            if line.startswith("--- "):
                before = after = 1
            elif not line[:1].isalpha():
                break
        if binary:
            if line.startswith("diff "):
                binary, before = False, -1
            continue
        if before == 0 and after == 0:
            if line.startswith("@@ -"):
                before, after = _hunk_lengths(line)
                continue
            if not line.startswith("diff "):
                break  # the end of the diff: a signature, the next mail
            sha = _flush(total, sha)
            before = after = -1
        if line[:1] in ("-", " "):
            before -= 1
        if line[:1] in ("+", " "):
            after -= 1
        squeezed = _WHITESPACE.sub("", line).encode("utf-8", "surrogateescape")
        hashed += len(squeezed)
        sha.update(squeezed)
    if not hashed:
        return None
    _flush(total, sha)
    return total.hex()


def _hunk_lengths(header: str) -> tuple[int, int]:
    match = _HUNK.match(header)
    if not match:
        return 0, 0
    return int(match.group(1) or 1), int(match.group(2) or 1)


def _flush(total: bytearray, sha) -> "hashlib._Hash":
    """Add one file's hash into the running sum (with carry, as git does) and start the next."""
    carry = 0
    for i, byte in enumerate(sha.digest()):
        carry += total[i] + byte
        total[i] = carry & 0xFF
        carry >>= 8
    return hashlib.sha1()
