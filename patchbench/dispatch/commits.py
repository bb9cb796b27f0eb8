"""A commit range of the user's repository as an applied series: one patch per commit, oldest first."""

from __future__ import annotations

from pathlib import Path

from patchbench.dispatch.workspace import git
from patchbench.errors import BadInput
from patchbench.tree import AppliedPatch, ApplyResult
from patchbench.tree.git import Git


def is_range(repo: Path, spec: str) -> bool:
    """True when `spec` is `A..B` and both ends name commits in `repo` (not a path to a mailbox)."""
    if ".." not in spec or Path(spec).exists():
        return False
    start, _, end = spec.partition("..")
    return all(Git.at(repo).commit_exists(rev or "HEAD") for rev in (start, end))


def applied_range(repo: Path, spec: str) -> ApplyResult:
    start, _, end = spec.partition("..")
    base = git(repo, "rev-parse", f"{start}^{{commit}}")
    head = git(repo, "rev-parse", f"{end or 'HEAD'}^{{commit}}")
    commits = git(repo, "rev-list", "--reverse", "--first-parent", f"{base}..{head}").split()
    if not commits:
        raise BadInput(f"the range {spec} holds no commit")
    applied, parent = [], base
    for index, commit in enumerate(commits, start=1):
        files = git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", commit).split("\n")
        subject = git(repo, "log", "-1", "--format=%s", commit)
        applied.append(AppliedPatch(index, commit, parent, [f for f in files if f], subject))
        parent = commit
    return ApplyResult(repo, base, f"range {spec}", applied, None, head)
