"""Pick the commit a series goes on, say why, and find which prerequisite patches are missing.

Order: `--base`; else the series' `base-commit:` when the repository has it; else the branch for the
target tree named in the subject (`net`, `net-next`, ...); else HEAD. The tree's branch is taken from
`git config patchbench.<tree>.base <rev>` when set, else the first of: local branch `<tree>`,
`<tree>/main` or `<tree>/master` (a remote named after the tree), `<any remote>/<tree>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from patchbench.errors import BadInput
from patchbench.series import Series
from patchbench.tree.git import Git

_COMMIT_ID = re.compile(r"^[0-9a-fA-F]{7,64}$")
_TREE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# How far back from the base `prerequisite-patch-id:` lines are looked for.
PREREQUISITE_SEARCH_DEPTH = 1000


@dataclass
class BaseChoice:
    commit: str
    reason: str
    warnings: list[str] = field(default_factory=list)


def tree_branch(git: Git, tree: str) -> tuple[str, str] | None:
    """(sha, how it was found) of the branch for target tree `tree`, or None."""
    if not _TREE_NAME.match(tree):  # a word from a subject: never a pattern or an option
        return None
    code, configured, _ = git.run("config", "--get", f"patchbench.{tree}.base", check=False)
    if code == 0 and configured.strip():
        sha = git.commit_exists(configured.strip())
        if sha is None:
            raise BadInput(f"git config patchbench.{tree}.base names {configured.strip()!r}, "
                           "which is not a commit in this repository")
        return sha, f"patchbench.{tree}.base = {configured.strip()}"
    candidates = [f"refs/heads/{tree}", f"refs/remotes/{tree}/main", f"refs/remotes/{tree}/master"]
    listed = git.out("for-each-ref", "--format=%(refname)", *candidates, f"refs/remotes/*/{tree}").split()
    # for-each-ref also lists refs below a pattern (refs/heads/net/x): keep exact remote matches only.
    remotes = sorted(r for r in listed if r.startswith("refs/remotes/") and r.count("/") == 3
                     and r.endswith("/" + tree) and r not in candidates)
    for ref in [c for c in candidates if c in listed] + remotes:
        sha = git.commit_exists(ref)
        if sha:
            return sha, f"branch {ref.removeprefix('refs/heads/').removeprefix('refs/remotes/')}"
    return None


def resolve_base(git: Git, series: Series, base: str | None = None) -> BaseChoice:
    if base is not None:
        sha = git.commit_exists(base)
        if sha is None:
            raise BadInput(f"--base {base!r} is not a commit in {git.git_dir}")
        return BaseChoice(sha, f"--base {base}")
    warnings = []
    if series.base_commit and not _COMMIT_ID.match(series.base_commit):
        # A mail names a commit by its id, never by a ref such as HEAD or a branch of the user's.
        warnings.append(f"base-commit: {series.base_commit!r} is not a commit id; ignored")
    elif series.base_commit:
        sha = git.commit_exists(series.base_commit)
        if sha:
            return BaseChoice(sha, "base-commit: from the series")
        warnings.append(f"base-commit: {series.base_commit} is not in this repository")
    if series.tree:
        found = tree_branch(git, series.tree)
        if found:
            return BaseChoice(found[0], f"{found[1]} for the {series.tree} tree named in the subject", warnings)
    head = git.commit_exists("HEAD")
    if head is None:
        raise BadInput(f"{git.git_dir}: HEAD is not a commit; give --base")
    return BaseChoice(head, "HEAD (no usable base-commit: or tree branch)", warnings)


def missing_prerequisites(git: Git, base: str, patch_ids: list[str],
                          depth: int = PREREQUISITE_SEARCH_DEPTH) -> list[str]:
    """The `prerequisite-patch-id:` values with no commit among the last `depth` commits of `base`."""
    if not patch_ids:
        return []
    history = git.run("log", "-p", "--no-merges", "--no-color", f"-n{depth}", "--format=commit %H", base)[1]
    found = {line.split()[0] for line in git.out("patch-id", "--stable",
                                                 input=history.encode("utf-8", "surrogateescape")).splitlines()}
    return [pid for pid in patch_ids if pid not in found]
