"""Compiler diagnostics as identities: file, function, flag and normalised text, never line numbers.

A warning is new in a patch when the multiset of identities after it holds more copies than before,
so a new warning cannot hide behind one the same patch fixed (counting alone would miss that).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_CONTEXT = re.compile(r"^(?P<file>[^:\s][^:]*): (?:In function '(?P<func>[^']+)'|At top level):$")
_DIAG = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?P<column>\d+:)? (?P<kind>warning|error): "
                   r"(?P<msg>.*?)(?: \[(?P<flag>-W[^\]]+)\])?$")


@dataclass(frozen=True)
class Diagnostic:
    file: str                      # relative to the source tree
    line: int
    function: str                  # "" at top level
    flag: str                      # e.g. "-Wunused-variable"; "" for errors without one
    kind: str                      # "warning" | "error"
    message: str

    def identity(self) -> tuple[str, str, str, str, str]:
        return (self.kind, self.file, self.function, self.flag, _normalise(self.message))

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "function": self.function, "flag": self.flag,
                "kind": self.kind, "message": self.message}


_ASCII_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'"})


def _normalise(message: str) -> str:
    # Numbers in messages are mostly sizes, offsets and line references that move with unrelated edits.
    return re.sub(r"\d+", "N", message)


def parse(output: str, src_prefix: str) -> list[Diagnostic]:
    """Diagnostics in compiler output; paths under `src_prefix` are made tree-relative."""
    def rel(path: str) -> str:
        return path.removeprefix(src_prefix.rstrip("/") + "/").removeprefix("./")

    function_of: dict[str, str] = {}
    found: list[Diagnostic] = []
    # gcc quotes with U+2018/U+2019 in a UTF-8 locale: the same diagnostic either way.
    for line in output.translate(_ASCII_QUOTES).splitlines():
        if m := _CONTEXT.match(line):
            function_of[rel(m["file"])] = m["func"] or ""
        elif m := _DIAG.match(line):
            path = rel(m["file"])
            # Only the compiler prints columns and "In function" context; kernel-doc (W=1) prints neither.
            function = function_of.get(path, "") if m["column"] else ""
            found.append(Diagnostic(path, int(m["line"]), function, m["flag"] or "", m["kind"], m["msg"]))
    return found


def new_since(before: list[Diagnostic], after: list[Diagnostic]) -> list[Diagnostic]:
    """Diagnostics of `after` whose identity occurs more often than in `before` (the surplus ones)."""
    surplus = Counter(d.identity() for d in after) - Counter(d.identity() for d in before)
    picked: list[Diagnostic] = []
    for diag in reversed(after):  # the last occurrences are the added ones when copies repeat
        if surplus[diag.identity()] > 0:
            surplus[diag.identity()] -= 1
            picked.append(diag)
    return picked[::-1]
