"""The source lines a report quotes with a finding: the offending line and, where the finding has
one, its related line (where the lock was taken, where the read-side section ended, where the
queue is stopped). Both are the finding's own fields (Finding.line, Finding.related); this only
reads their text from the source the finding was made on.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchbench.checks.engine.finding import Finding


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


def context(finding: Finding, source: bytes | None) -> Context:
    """The offending line and the related line of `finding` in `source` (the file it was found in)."""
    if source is None:
        return Context()
    lines = source.decode("utf-8", "replace").split("\n")
    shown = Context()
    if 1 <= finding.line <= len(lines):
        shown.source = lines[finding.line - 1].rstrip()
    place = finding.related
    if place is not None and place.line != finding.line and 1 <= place.line <= len(lines):
        shown.related = Related(place.what, place.line, lines[place.line - 1].rstrip())
    return shown
