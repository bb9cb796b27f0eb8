"""Files touched by a diff (via unidiff), with git's extended headers: new, deleted, renamed, copied,
mode-only and binary changes. Also tells a diff cut short (truncated mail) from a complete one."""

from __future__ import annotations

import re
from dataclasses import dataclass

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

_FILE_START = re.compile(r"^(diff --git |diff -|Index: )", re.MULTILINE)
_GIT_PATHS = re.compile(r'^diff --git ("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)\s*$')
_HUNK_HEADER = re.compile(r"^@@+ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass
class FileChange:
    path: str                      # path after the patch (before it, for a deletion)
    old_path: str | None = None    # set for renames and copies
    status: str = "modified"       # added | deleted | modified | renamed | copied | mode | binary
    added: int = 0
    removed: int = 0
    binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None


def files_touched(diff: str) -> list[FileChange]:
    changes = []
    for block in _file_blocks(diff):
        changes.extend(_block_changes(block))
    return changes


def _file_blocks(diff: str) -> list[str]:
    starts = [match.start() for match in _FILE_START.finditer(diff)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return [diff[start:end] for start, end in zip(starts, starts[1:] + [len(diff)]) if diff[start:end].strip()]


def _block_changes(block: str) -> list[FileChange]:
    headers = _extended_headers(block)
    try:
        parsed = list(PatchSet(block))
    except (UnidiffParseError, ValueError, IndexError):
        parsed = []
    if not parsed:
        path = headers.get("rename to") or headers.get("copy to") or headers.get("b_path")
        if not path:
            return []
        added, removed = _count_lines(block)
        return [_with_status(FileChange(path=path, added=added, removed=removed), headers)]
    result = []
    for patched in parsed:
        change = FileChange(path=_strip_prefix(patched.path), added=patched.added, removed=patched.removed)
        if patched.is_added_file:
            change.status = "added"
        elif patched.is_removed_file:
            change.status = "deleted"
            change.path = _strip_prefix(patched.source_file)
        change.binary = bool(getattr(patched, "is_binary_file", False))
        result.append(_with_status(change, headers))
    return result


def _with_status(change: FileChange, headers: dict[str, str]) -> FileChange:
    change.old_mode = headers.get("old mode") or headers.get("deleted file mode")
    change.new_mode = headers.get("new mode") or headers.get("new file mode")
    change.binary = change.binary or "binary" in headers
    if "new file mode" in headers:
        change.status = "added"
    elif "deleted file mode" in headers:
        change.status = "deleted"
        change.path = headers.get("a_path", change.path)
    elif "rename from" in headers:
        change.status = "renamed"
        change.old_path = headers.get("a_path", headers["rename from"])
        change.path = headers.get("b_path", headers.get("rename to", change.path))
    elif "copy from" in headers:
        change.status = "copied"
        change.old_path = headers.get("a_path", headers["copy from"])
        change.path = headers.get("b_path", headers.get("copy to", change.path))
    elif change.status == "modified" and change.binary:
        change.status = "binary"
    elif change.status == "modified" and "old mode" in headers and not change.added and not change.removed:
        change.status = "mode"
    return change


def _extended_headers(block: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    lines = block.splitlines()
    paths = _GIT_PATHS.match(lines[0]) if lines else None
    if paths:
        headers["a_path"], headers["b_path"] = (_strip_prefix(_unquote(p)) for p in paths.groups())
    for line in lines[1:]:
        if line.startswith("+++ ") and "b_path" not in headers:
            headers["b_path"] = _strip_prefix(line[4:].split("\t")[0].strip())
        if line.startswith(("@@", "+++ ")):
            break
        if line.startswith(("GIT binary patch", "Binary files ")):
            headers["binary"] = "yes"
            continue
        for name in ("old mode", "new mode", "deleted file mode", "new file mode",
                     "rename from", "rename to", "copy from", "copy to"):
            if line.startswith(name + " "):
                headers[name] = _unquote(line[len(name) + 1:].strip())
    return headers


def _count_lines(block: str) -> tuple[int, int]:
    added = removed = 0
    in_hunk = False
    for line in block.splitlines():
        if line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            added += 1
        elif in_hunk and line.startswith("-"):
            removed += 1
    return added, removed


def _strip_prefix(path: str) -> str:
    path = _unquote(path)
    return path[2:] if path[:2] in ("a/", "b/") else path


def _unquote(path: str) -> str:
    """git C-quotes odd names: "b/A \\303\\242 B.py" -> b/A â B.py."""
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    try:
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
        return raw.decode("utf-8", errors="replace")
    except (UnicodeError, ValueError):
        return path[1:-1]


def is_truncated(diff: str) -> bool:
    """True when the diff ends inside a hunk that promised more lines (a mail cut short)."""
    old_left = new_left = 0
    for line in diff.splitlines():
        if old_left > 0 or new_left > 0:
            if line.startswith("-"):
                old_left -= 1
            elif line.startswith("+"):
                new_left -= 1
            elif line.startswith("\\"):
                continue
            elif line.startswith(" ") or line == "":
                old_left, new_left = old_left - 1, new_left - 1
            else:
                return False  # malformed rather than cut short; git apply will say so
            continue
        header = _HUNK_HEADER.match(line)
        if header:
            old_left = int(header.group(1) or 1)
            new_left = int(header.group(2) or 1)
    # mail clients strip a last context line holding only whitespace; that is damage git tolerates
    # at the end of a mail, not a cut: both sides then lack exactly that one line
    return (old_left > 0 or new_left > 0) and (old_left, new_left) != (1, 1)
