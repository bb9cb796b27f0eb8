"""Apply a series patch by patch into the user's object store, never into the user's checkout.

Each run seeds a private index file, in a fresh temporary directory that is also its empty work
tree, with only the base's files that the series names (see `sparse`), applies every patch with
`git apply --cached` (3-way on the preimage blobs when the repository has them), and records it
with `git mktree` + `git commit-tree`. A checkout of the 6.1 tree's 78,635 files costs tens of
seconds; reading them all into an index a third of one; this costs milliseconds per patch.

The commits are kept reachable by `refs/patchbench/<series>/<base>-<diffs>` (see `series_ref`), updated
after every patch, so on a failure it points at the last patch that applied. Nothing else in the
repository changes: HEAD, the index, the work tree, branches and the stash are never touched, and
the temporary directory is removed in `finally`, also on Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import signal
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from patchbench.errors import BadInput
from patchbench.series import Patch, Series
from patchbench.tree.base import missing_prerequisites, resolve_base
from patchbench.tree.diffscan import FileDiff, scan
from patchbench.tree.git import Git, GitFailed, open_repository
from patchbench.tree.message import Identity, commit_message, identity_env, parse_identity
from patchbench.tree.result import AppliedPatch, ApplyFailure, ApplyResult
from patchbench.tree.safety import SYMLINK_MODE, check_lexical, check_symlinks, paths_to_query
from patchbench.tree.sparse import SparseIndex, named_entries

REF_PREFIX = "refs/patchbench/"
LINK_PREFIX = "https://patch.msgid.link/"     # what `b4 am -l` links to
_PATCH_FAILED = re.compile(r"^error: patch failed: (.+):(\d+)$", re.M)
_FILE_ERROR = re.compile(r"^error: (.+?): (?:patch does not apply|does not exist in index|already exists in "
                         r"index|does not match index|wrong type|has type \S+, expected \S+)", re.M)
_REF_UNSAFE = re.compile(r"[^A-Za-z0-9._+@=-]+")


def series_ref(series: Series, base: str) -> str:
    """refs/patchbench/<message-id of the cover or first patch>/<base, 12 hex>-<digest of the diffs, 8 hex>.

    Runs of different series (or of one series onto different bases) never share a ref, even when
    two postings reuse a message-id; two runs of the same series onto the same base make the same
    commits, so sharing theirs cannot make them disagree.
    """
    msgid = series.cover.message_id if series.cover else (series.patches[0].message_id if series.patches else "")
    key = _REF_UNSAFE.sub("_", msgid.strip("<>")).strip("._").replace("..", "_").removesuffix(".lock") or "series"
    digest = hashlib.sha1("\0".join(p.diff for p in series.patches).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{REF_PREFIX}{key}/{base[:12]}-{digest[:8]}"


def _committer(git: Git) -> Identity:
    code, ident, _ = git.run("var", "GIT_COMMITTER_IDENT", check=False)
    if code != 0:  # no user.name/user.email anywhere: still apply, under a name that says who did it
        return Identity("patchbench", "patchbench@localhost")
    return parse_identity(ident.rsplit(" ", 2)[0])


def _failure(index: int, files: list[FileDiff], stderr: str) -> ApplyFailure:
    """Name the file and hunk git stopped at; git's own words are the reason."""
    reason = "; ".join(line.removeprefix("error: ").strip() for line in stderr.splitlines()
                       if line.startswith(("error:", "fatal:"))) or stderr.strip() or "git apply failed"
    file = hunk = None
    if match := _PATCH_FAILED.search(stderr):
        file, line = match[1], int(match[2])
        diff = next((f for f in files if match[1] in f.paths()), None)
        hunk = next((h.header for h in (diff.hunks if diff else []) if h.old_start == line), None)
    elif match := _FILE_ERROR.search(stderr):
        file = match[1]
    elif len(files) == 1:
        file = files[0].path
    return ApplyFailure(index=index, file=file, hunk=hunk, reason=reason)


def _preimages_known(git: Git, files: list[FileDiff]) -> bool:
    blobs = [f.old_blob for f in files if f.old_path and f.old_blob]
    if not blobs or len(blobs) < sum(1 for f in files if f.old_path):
        return False
    answers = git.out("cat-file", "--batch-check", input="".join(b + "\n" for b in blobs).encode())
    return all(line.split()[1:2] == ["blob"] for line in answers.splitlines())


def _apply_one(git: Git, patch_file: Path, files: list[FileDiff], index: int) -> tuple[bool, ApplyFailure | None]:
    """(used a 3-way merge, failure or None) after applying one patch to the private index."""
    code, _, stderr = git.run("apply", "--cached", str(patch_file), check=False)
    if code == 0:
        return False, None
    failure = _failure(index, files, stderr)
    if not _preimages_known(git, files):
        return False, failure
    code, _, merge_err = git.run("apply", "--cached", "--3way", str(patch_file), check=False)
    if code == 0:
        return True, None
    conflicts = sorted({line[2:] for line in merge_err.splitlines() if line.startswith("U ")})
    failure.reason += "; 3-way merge " + (f"left conflicts in {', '.join(conflicts)}" if conflicts
                                          else "failed too")
    return False, failure


@contextmanager
def signals_deferred():
    """Hold SIGINT and SIGTERM until the block is done; they are delivered (and raise) right after."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _update_ref(git: Git, ref: str, commit: str) -> None:
    for _ in range(100):  # another run holds the ref's lock for a moment: wait for it
        code, _, stderr = git.run("update-ref", "-m", "patchbench apply", ref, commit, check=False)
        if code == 0:
            return
        if "lock" not in stderr:
            raise GitFailed(["update-ref", ref, commit], code, stderr)
        time.sleep(0.05)
    raise GitFailed(["update-ref", ref, commit], 1, stderr)


def apply_series(series: Series, repo: Path, base: str | None = None, *, signoff: bool = False,
                 add_link: bool = False) -> ApplyResult:
    """Apply `series` onto its base in `repo`, one commit per patch; see the module doc for isolation.

    Raises BadInput for a bad --base, a repository that is not one (or that git cannot read), or an
    unsafe path in any patch (checked for the whole series before anything is written). A patch that
    does not apply is a result (`failed`), not an exception. `signoff` adds the committer's
    Signed-off-by (git am -s); `add_link` a Link: to the patch's message-id (b4 am -l).
    """
    try:
        return _apply_series(series, Path(repo), base, signoff, add_link)
    except GitFailed as exc:
        raise BadInput(f"{repo}: {exc}") from None


def _apply_series(series: Series, repo: Path, base: str | None, signoff: bool, add_link: bool) -> ApplyResult:
    git = Git(open_repository(repo))
    choice = resolve_base(git, series, base)
    scanned = [(patch.index, scan(patch.diff)) for patch in series.patches]
    check_lexical(scanned)
    named = named_entries(git, choice.commit, paths_to_query(files for _, files in scanned))
    check_symlinks(scanned, {path for path, (mode, _, _) in named.items() if mode == SYMLINK_MODE})
    missing = missing_prerequisites(git, choice.commit, series.prerequisite_patch_ids)
    warnings = choice.warnings + [f"prerequisite-patch-id: {pid} is not in the history of the base"
                                  for pid in missing]
    if series.missing:
        absent = ", ".join(f"{n}/{series.total}" for n in series.missing)
        warnings.append(f"the series is incomplete: {absent} missing; applying the patches that are there")
    result = ApplyResult(repo=Path(repo), base=choice.commit, base_reason=choice.reason, applied=[],
                         failed=None, head=choice.commit, warnings=warnings, missing_prerequisites=missing)
    committer = _committer(git)
    applier = committer if signoff else None
    scratch = Path(tempfile.mkdtemp(prefix="patchbench-apply-"))
    try:
        (scratch / "worktree").mkdir()
        private = Git(git.git_dir, index=scratch / "index", work_tree=scratch / "worktree")
        index_file = SparseIndex(private, git.out("rev-parse", choice.commit + "^{tree}"), named)
        for patch, (index, files) in zip(series.patches, scanned):
            if not files:
                result.failed = ApplyFailure(index, None, None, "the patch contains no diff")
                break
            patch_file = scratch / f"{index:04d}.patch"
            patch_file.write_text(patch.diff, encoding="utf-8", errors="surrogateescape")
            three_way, failure = _apply_one(private, patch_file, files, index)
            if failure:
                result.failed = failure
                break
            links = (f"Link: {LINK_PREFIX}{patch.message_id}",) if add_link and patch.message_id else ()
            message = commit_message(patch, applier, links)
            commit = _commit(private, patch, index_file.write_tree(), result.head, committer, message, scratch)
            result.ref = result.ref or series_ref(series, choice.commit)
            _update_ref(git, result.ref, commit)
            result.applied.append(AppliedPatch(index=index, commit=commit, parent=result.head, subject=patch.subject,
                                               files=[f.path for f in files], three_way=three_way))
            result.head = commit
    finally:
        with signals_deferred():  # a second Ctrl-C must not cut the cleanup short
            shutil.rmtree(scratch, ignore_errors=True)
    return result


def _commit(git: Git, patch: Patch, tree: str, parent: str, committer: Identity, message: str, scratch: Path) -> str:
    message_file = scratch / "message"
    message_file.write_text(message, encoding="utf-8", errors="surrogateescape")
    return git.out("commit-tree", tree, "-p", parent, "-F", str(message_file), env=identity_env(patch, committer))
