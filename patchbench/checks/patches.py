"""Stage 4 for a series: the findings each applied patch introduces.

For every patch and every C file it touches, the file is analysed as it was in the patch's parent
and as it is in the patch's commit (blobs read from the object store with `git cat-file`, never
from a work tree). A finding of the commit is new when no finding of the parent has the same
`Finding.identity()` (rule, file, function, message with numbers blanked): line shifts and repeats
do not count. Each patch is compared with its own parent, so a bug introduced by patch 2 and
repaired by patch 3 is still reported against patch 2.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from patchbench.checks import facts
from patchbench.checks.finding import Finding
from patchbench.errors import BadInput
from patchbench.tree import ApplyResult

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


class BlobReader:
    """`git cat-file --batch` on one repository: the bytes of `<rev>:<path>`, or None if absent."""

    def __init__(self, git_dir: Path):
        self.process = subprocess.Popen(
            ["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def read(self, rev: str, path: str) -> bytes | None:
        self.process.stdin.write(f"{rev}:{path}\n".encode())
        self.process.stdin.flush()
        header = self.process.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            return None
        data = self.process.stdout.read(int(header[2]))
        self.process.stdout.read(1)   # the newline after the content
        return data

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()

    def __enter__(self) -> "BlobReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def git_dir_of(repo: Path) -> Path:
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--absolute-git-dir"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BadInput(f"{repo} is not a git repository")
    return Path(proc.stdout.strip())


def file_findings(blobs: BlobReader, rev: str, path: str) -> list[Finding]:
    source = blobs.read(rev, path)
    return [] if source is None else facts.findings_for(path, source)


def new_findings(before: list[Finding], after: list[Finding]) -> list[Finding]:
    """Findings of `after` whose identity no finding of `before` has."""
    known = {f.identity() for f in before}
    return [f for f in after if f.identity() not in known]


def check_applied(result: ApplyResult) -> SeriesCheck:
    """New findings of each applied patch of `result` (patches after a failed one are absent)."""
    checked = []
    with BlobReader(git_dir_of(result.repo)) as blobs:
        for patch in result.applied:
            files = sorted({p for p in patch.files if p.endswith(C_SUFFIXES)})
            check = PatchCheck(patch.index, patch.commit, files)
            for path in files:
                after = file_findings(blobs, patch.commit, path)
                if after:
                    before = file_findings(blobs, patch.parent, path)
                    for finding in new_findings(before, after):
                        finding.patch = patch.index
                        check.new.append(finding)
            checked.append(check)
    return SeriesCheck(result.base, checked)
