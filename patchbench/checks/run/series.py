"""Stage 4 for a series: the findings each applied patch introduces.

For every patch and every C file it touches, the file is analysed as it was in the patch's parent
and as it is in the patch's commit (blobs read from the object store through tree.git's runner,
never from a work tree, nor from the repository a hook's GIT_DIR names). A finding of the commit is
new when no finding of the parent has the same `Finding.identity()` (rule, file, function, message
with numbers blanked): line shifts and repeats do not count, but a finding naming more places of
its defect than the parent's does (a patch adding one more use of a value after its section). Each
patch is compared with its own parent, so a bug introduced by patch 2 and repaired by patch 3 is
still reported against patch 2.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from patchbench.checks import callindex
from patchbench.checks.run import cache as findings_cache
from patchbench.checks.engine.context import TreeContext
from patchbench.checks.engine.finding import Finding
from patchbench.tree import ApplyResult
from patchbench.tree.git import BlobReader, Git, open_repository

C_SUFFIXES = (".c", ".h")


@dataclass
class PatchCheck:
    index: int
    commit: str
    files: list[str]                                   # the C files analysed
    new: list[Finding] = field(default_factory=list)   # findings introduced by this patch


@dataclass
class SeriesCheck:
    base: str
    patches: list[PatchCheck]

    @property
    def findings(self) -> list[Finding]:
        return [f for patch in self.patches for f in patch.new]


def new_findings(before: list[Finding], after: list[Finding]) -> list[Finding]:
    """Findings of `after` whose identity no finding of `before` has, or that name more places
    of their defect than any finding of `before` with their identity (a patch adding one more use
    of a value after its section)."""
    known: dict[tuple, int] = {}
    for f in before:
        known[f.identity()] = max(known.get(f.identity(), 0), f.repeats)
    return [f for f in after if f.identity() not in known or f.repeats > known[f.identity()]]


def _analyse(blobs: BlobReader, versions: list[tuple[str, str]], jobs: int, context: TreeContext,
             parents: dict[tuple[str, str], str] | None = None,
             rule_ids: frozenset[str] | None = None) -> dict[tuple[str, str], list[Finding]]:
    """Findings of each (rev, path) version; an absent file has none. `parents`: (rev, path) ->
    the parent rev whose text of path the rules are shown beside (FileModel.previous)."""
    sources = {version: blobs.read(f"{version[0]}:{version[1]}") for version in dict.fromkeys(versions)}
    present = [version for version, source in sources.items() if source is not None]
    parents = parents or {}
    previous = {version: blobs.read(f"{parents[version]}:{version[1]}") for version in present
                if version in parents}
    results = findings_cache.findings_of_many([(path, sources[(rev, path)], previous.get((rev, path)))
                                      for rev, path in present], jobs, context, rule_ids)
    found = {version: [] for version in sources}
    found.update(zip(present, results))
    return found


def check_applied(result: ApplyResult, jobs: int = os.cpu_count() or 1,
                  rule_ids: frozenset[str] | None = None) -> SeriesCheck:
    """New findings of each applied patch of `result` (patches after a failed one are absent), of
    the default rules or `rule_ids`.

    Each patch's version of its files is analysed first, all at once on `jobs` processes; the
    parents' versions only where the patch's version has findings at all."""
    touched = [(patch, sorted({p for p in patch.files if p.endswith(C_SUFFIXES)})) for patch in result.applied]
    git_dir = open_repository(result.repo)
    index = callindex.from_git(git_dir, result.base, jobs) if any(files for _, files in touched) else None
    context = TreeContext(index, series=True)
    with Git(git_dir).blobs() as blobs:
        after = _analyse(blobs, [(patch.commit, path) for patch, files in touched for path in files], jobs,
                         context, {(patch.commit, path): patch.parent for patch, files in touched for path in files},
                         rule_ids)
        before = _analyse(blobs, [(patch.parent, path) for patch, files in touched for path in files
                                  if after[(patch.commit, path)]], jobs, context, rule_ids=rule_ids)
    checked = []
    for patch, files in touched:
        check = PatchCheck(patch.index, patch.commit, files)
        for path in files:
            for finding in new_findings(before.get((patch.parent, path), []), after[(patch.commit, path)]):
                finding.patch = patch.index
                check.new.append(finding)
        checked.append(check)
    return SeriesCheck(result.base, checked)
