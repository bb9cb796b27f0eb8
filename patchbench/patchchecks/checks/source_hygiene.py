"""source-hygiene: code netdev asks patches not to add, from the [[hygiene]] table of netdev.toml.

Each entry is a regex on the lines a patch adds to files whose path matches. Only what the patch
makes new counts: a matching line it adds is reported only beyond the matching lines of the same
text it removes from that file (code moved, not added).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext, netdev_facts

ID = "source-hygiene"
MESSAGE = "deprecated calls, inline in .c, static functions in headers (a data table)"
NEEDS = ()


@lru_cache(maxsize=1)
def table() -> tuple[tuple[dict, re.Pattern, re.Pattern, re.Pattern | None], ...]:
    return tuple((entry, re.compile(entry["files"]), re.compile(entry["added"]),
                  re.compile(entry["not_added"]) if "not_added" in entry else None)
                 for entry in netdev_facts()["hygiene"])


def matches(path: str, text: str) -> list[dict]:
    """The table entries a line `text` of file `path` falls foul of."""
    return [entry for entry, files, added, fine in table()
            if files.search(path) and added.search(text) and not (fine and fine.search(text))]


def run(context: PatchContext) -> list[Finding]:
    found = []
    for patch in context.applied.applied:
        mail = context.mail(patch)
        if mail is None or not mail.diff:
            continue
        try:
            files = PatchSet(mail.diff)
        except UnidiffParseError:
            continue   # the tree stage applied it; a diff unidiff cannot read has nothing to report here
        for diff in files:
            path = diff.path
            removed = Counter(" ".join(line.value.split()) for hunk in diff for line in hunk if line.is_removed)
            for hunk in diff:
                for line in hunk:
                    if not line.is_added:
                        continue
                    key = " ".join(line.value.split())
                    hits = matches(path, line.value.rstrip("\n"))
                    if hits and removed[key] > 0:
                        removed[key] -= 1
                        continue
                    for entry in hits:
                        found.append(Finding(rule=ID, severity=entry["severity"], file=path,
                                             line=line.target_line_no or 0, function="",
                                             message=f"{entry['id']}: {entry['message']}", patch=patch.index))
    return found
