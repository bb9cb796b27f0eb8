"""The source lines a report quotes with a finding: the offending line and, where the finding
names one, its related line (where the lock was taken, where the read-side section ended, where
the queue is stopped).

A Finding carries its line and a message; the related line is not (yet) a field of it. Where the
message already names the related place, `context` finds that line in the same source text the
finding was made on. The rule catalogue (docs/rules.md) says, per rule, which related line a
rule should set itself once Finding carries one; until then this is where it is read back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from patchbench.checks.finding import Finding


@dataclass
class Related:
    what: str      # e.g. "lock taken", "read-side section ended", "queue stopped"
    line: int
    text: str      # that source line, as in the file


@dataclass
class Context:
    """What a report shows with one finding besides its message."""
    source: str | None = None          # the offending line, as in the file
    related: Related | None = None


_LOCK_TAKEN = re.compile(r"^(\w+)\(([^,)]*)")          # "spin_lock(&d->lock) taken in f() ..."
_RCU_UNLOCK = re.compile(r"\b(?:s?rcu_read_unlock\w*|rcu_read_unlock_\w+)\s*\(")
_STOPPER = re.compile(r"\b(?:that|but) (\w+)\(\) stops\b")   # "... but foo_xmit() stops queue 0"
_STOP_CALL = re.compile(r"\bnetif_\w*stop\w*\s*\(")


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _definition(lines: list[str], name: str, before: int) -> int | None:
    """0-based index of the line where function `name` is defined, searching up from `before`
    (or, with before == len(lines), the whole file from the top)."""
    header = re.compile(rf"^[A-Za-z_].*\b{re.escape(name)}\s*\(")
    candidates = range(min(before, len(lines) - 1), -1, -1) if before < len(lines) else range(len(lines))
    for index in candidates:
        if header.match(lines[index]) and not lines[index].rstrip().endswith(";"):
            return index
    return None


def _search_up(lines: list[str], finding: Finding, found: Callable[[str], bool]) -> int | None:
    """1-based line above the finding, inside its function, on which found(line) holds."""
    end = finding.line - 1
    start = _definition(lines, finding.function, end) or 0
    for index in range(end - 1, start - 1, -1):
        if found(lines[index]):
            return index + 1
    return None


def _lock_taken(lines: list[str], finding: Finding) -> int | None:
    match = _LOCK_TAKEN.match(finding.message)
    if not match:
        return None
    needle = _squeeze(f"{match[1]}({match[2]}")
    return _search_up(lines, finding, lambda text: needle in _squeeze(text))


def _section_ended(lines: list[str], finding: Finding) -> int | None:
    return _search_up(lines, finding, lambda text: bool(_RCU_UNLOCK.search(text)))


def _queue_stopped(lines: list[str], finding: Finding) -> int | None:
    match = _STOPPER.search(finding.message)
    if not match:
        return None   # the finding is on the stop itself
    start = _definition(lines, match[1], len(lines))
    if start is None:
        return None
    for index in range(start, len(lines)):
        if index > start and lines[index].startswith("}"):
            return None
        if _STOP_CALL.search(lines[index]):
            return index + 1
    return None


# rule id -> (what the related line is, how to find it from the finding's message)
RELATED: dict[str, tuple[str, Callable[[list[str], Finding], int | None]]] = {
    "lock-imbalance": ("lock taken", _lock_taken),
    "rcu-pointer-escapes": ("read-side section ended", _section_ended),
    "queue-wake-wrong-queue": ("queue stopped", _queue_stopped),
    "queue-stop-unmatched": ("queue stopped", _queue_stopped),
}


def context(finding: Finding, source: bytes | None) -> Context:
    """The offending line and the related line of `finding` in `source` (the file it was found in)."""
    if source is None:
        return Context()
    lines = source.decode("utf-8", "replace").split("\n")
    shown = Context()
    if 1 <= finding.line <= len(lines):
        shown.source = lines[finding.line - 1].rstrip()
    what, locate = RELATED.get(finding.rule, ("", None))
    related = locate(lines, finding) if locate else None
    if related is not None and related != finding.line:
        shown.related = Related(what, related, lines[related - 1].rstrip())
    return shown
