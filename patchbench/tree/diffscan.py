"""Read what a patch will touch from its headers, the way `git apply -p1` reads them.

Hunk bodies are skipped by their line counts, so a removed line that starts with "-- " can never be
taken for a header. Used both to refuse unsafe paths before anything is written and to name the file
and hunk when git reports a failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
NULL_BLOB = re.compile(r"^0+$")


@dataclass
class Hunk:
    header: str                    # "@@ -2180,7 +2180,9 @@" (without the function context)
    old_start: int


@dataclass
class FileDiff:
    old_path: str | None           # None when the patch creates the file
    new_path: str | None           # None when the patch deletes it
    new_mode: str | None = None
    old_blob: str | None = None    # abbreviated preimage blob id from the `index` line
    hunks: list[Hunk] = field(default_factory=list)
    header_names: tuple[str, ...] = ()   # as the `diff --git` line has them (git insists they agree)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    def paths(self) -> list[str]:
        """Every name the patch gives this file, so that none escapes the safety check."""
        return [p for p in dict.fromkeys((self.old_path, self.new_path, *self.header_names)) if p]


def unquote(name: str) -> str:
    """A path as git prints it: C-quoted ("a\\303\\244") when it has special bytes, else verbatim."""
    if not (len(name) >= 2 and name[0] == '"' and name[-1] == '"'):
        return name
    out = bytearray()
    body, i = name[1:-1], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1:i + 2] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(int(body[i + 1:i + 4], 8) & 0xFF)
            i += 4
    return out.decode("utf-8", "surrogateescape")


def _strip_component(name: str) -> str | None:
    """`--- a/x/y` names as -p1 sees them: None for /dev/null, the first component dropped."""
    name = unquote(name.split("\t", 1)[0].rstrip())
    if name == "/dev/null":
        return None
    return name.split("/", 1)[1] if "/" in name else name


def _closing_quote(text: str) -> int:
    """Index of the quote that ends the C-quoted name `text` starts with."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i
        else:
            i += 1
    return len(text) - 1


def _git_header_names(rest: str) -> tuple[str, str]:
    """Names on a `diff --git a/X b/Y` line; for unquoted names with spaces, the split where X == Y."""
    if rest.startswith('"'):
        end = _closing_quote(rest)
        first, second = rest[:end + 1], rest[end + 2:]
    elif rest.endswith('"') and ' "' in rest:
        split = rest.rindex(' "')
        first, second = rest[:split], rest[split + 1:]
    else:
        first, second = rest, ""
        for pos in range(len(rest)):
            if rest.startswith(" b/", pos):
                first, second = rest[:pos], rest[pos + 1:]
                if first[2:] == second[2:]:
                    break
    return _strip_component(first) or "", _strip_component(second) or ""


def scan(diff: str) -> list[FileDiff]:
    """The files of one patch's diff text, in order."""
    files: list[FileDiff] = []
    current: FileDiff | None = None
    old_left = new_left = 0
    for line in diff.split("\n"):
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag == "\\":
                continue
            if tag in (" ", ""):  # an empty line is context whose leading space a mailer ate
                old_left, new_left = old_left - 1, new_left - 1
                continue
            if tag == "-":
                old_left -= 1
                continue
            if tag == "+":
                new_left -= 1
                continue
            old_left = new_left = 0  # the hunk was shorter than its header says: read on as headers
        if line.startswith("diff --git "):
            old, new = _git_header_names(line[len("diff --git "):])
            current = FileDiff(old_path=old, new_path=new, header_names=(old, new))
            files.append(current)
        elif line.startswith("--- ") and (current is None or current.hunks):
            current = FileDiff(old_path=_strip_component(line[4:]), new_path=None)
            files.append(current)
        elif current is None:
            continue
        elif line.startswith("--- "):
            current.old_path = _strip_component(line[4:])
        elif line.startswith("+++ "):
            current.new_path = _strip_component(line[4:])
        elif line.startswith(("rename from ", "copy from ")):
            current.old_path = unquote(line.split(" ", 2)[2])
        elif line.startswith(("rename to ", "copy to ")):
            current.new_path = unquote(line.split(" ", 2)[2])
        elif line.startswith("new file mode "):
            current.old_path, current.new_mode = None, line.split()[-1]
        elif line.startswith("deleted file mode "):
            current.new_path = None
        elif line.startswith("new mode "):
            current.new_mode = line.split()[-1]
        elif line.startswith("index "):
            pre = line.split()[1].split("..")[0]
            current.old_blob = None if NULL_BLOB.match(pre) else pre
            if len(line.split()) > 2 and current.new_mode is None:
                current.new_mode = line.split()[2]
        elif match := _HUNK.match(line):
            old_left = int(match[2]) if match[2] is not None else 1
            new_left = int(match[4]) if match[4] is not None else 1
            current.hunks.append(Hunk(header=line[:match.end()], old_start=int(match[1])))
    return files
