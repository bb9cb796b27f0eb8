"""series-shape: the series is put together the way netdev asks.

The subject names the target tree and it is one netdev.toml knows (`net`, `net-next`, ...); a
netdev series has at most [series].most_patches patches; two or more patches come with a cover
letter; every patch says why in a description (more than its subject and trailers); from v2 on
the changes since the previous version are written down, below a patch's `---` or in the cover
letter; every patch carries the same subject prefix. Findings about the whole series are reported
on its first patch.
"""

from __future__ import annotations

import re

from patchbench.checks.engine.finding import Finding
from patchbench.mail.content import message_trailers
from patchbench.patchchecks.context import PatchContext, message_finding, netdev_facts

ID = "series-shape"
MESSAGE = "tree named and known, at most 15 patches, a cover letter, descriptions, v2+ changelog, one prefix"
NEEDS = ()

_DIFFSTAT = re.compile(r"^\s*(\S.* \| +(\d+ ?[+-]*|Bin .*)|\d+ files? changed.*|create mode .*|delete mode .*"
                       r"|rename .*|mode change .*)$")
_CHANGELOG = re.compile(r"^\s*(changes|changelog|change log|since|v\d+\b|-+\s*v\d+)", re.IGNORECASE | re.MULTILINE)


def has_changelog_notes(notes: str) -> bool:
    """Text below `---` other than the diffstat (and b4's/format-patch's base lines)."""
    return any(line.strip() and not _DIFFSTAT.match(line) and not line.startswith(("base-commit:", "change-id:"))
               for line in notes.splitlines())


def description(body: str) -> str:
    """The commit message without its trailers: what the patch says about itself."""
    trailers = set(message_trailers(body))
    return "\n".join(line for line in body.splitlines() if line.strip() and line.strip() not in trailers).strip()


def run(context: PatchContext) -> list[Finding]:
    series, applied = context.series, context.applied.applied
    if not applied:
        return []
    facts = netdev_facts()
    first = applied[0].index
    found = []

    def say(severity: str, message: str, index: int = first) -> None:
        found.append(message_finding(ID, severity, message, index))

    if not series.tree:
        say("warning", f"the subject prefix [{series.subject_prefix}] names no target tree (net or net-next?)")
    elif series.tree not in facts["trees"]:
        say("warning", f"the subject prefix names tree {series.tree!r}, not one of {', '.join(facts['trees'])}")
    if series.tree in facts["trees"] and series.total > facts["series"]["most_patches"]:
        say("error", f"{series.total} patches; netdev takes at most {facts['series']['most_patches']} in a series")
    if series.total >= 2 and series.cover is None:
        say("warning", f"{series.total} patches without a cover letter")
    if series.version >= 2:
        in_cover = bool(series.cover and _CHANGELOG.search(series.cover.body))
        if not in_cover and not any(has_changelog_notes(p.notes) for p in series.patches):
            say("warning", f"v{series.version} says nowhere what changed since v{series.version - 1} "
                           "(below --- or in the cover letter)")
    prefixes = {p.index: " ".join(p.subject_prefix.split()) for p in series.patches}
    for patch in applied:
        mail = context.mail(patch)
        if mail is None:
            continue
        if not description(mail.body):
            say("warning", "no description: the commit message has only its subject and trailers", patch.index)
        if prefixes.get(patch.index) and prefixes[patch.index] != prefixes.get(first, prefixes[patch.index]):
            say("warning", f"subject prefix [{prefixes[patch.index]}] differs from patch {first}'s "
                           f"[{prefixes[first]}]", patch.index)
    return found
