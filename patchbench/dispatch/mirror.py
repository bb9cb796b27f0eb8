"""The series' commits for a farm worker that shares nothing with the submitter but the broker.

Every farm task carries a `Source`: where the kernel tree is (`--tree-url`, else git config
`patchbench.tree-url` of the repository, else the repository's own path), the base commits the tree
has, the series' own commits as a git bundle (they exist only in the submitter's repository), and
the tree id of every commit a job names.

A worker given a URL keeps a bare mirror of it under its cache (`mirrors/<digest of the URL>.git`),
fetches a base it lacks (that commit alone, `--depth 1`: jobs read trees, never history), takes the
series' commits from the bundle, and checks that each commit has the tree the submitter applied
before any job runs on it. A worker given a path (the default) runs in that repository, as on a
shared file system; a worker that cannot see the path says so.

A bundle rather than the mbox and the apply result: the worker then runs on the very commits the
submitter made (dates, trailers, the base chosen), with no second apply that could come out different.
"""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from patchbench.tree.git import Git, GitFailed

FETCH_TIMEOUT = 600.0              # a whole kernel tree into a cold mirror, over a slow link


class FetchFailed(Exception):
    """The worker cannot get or trust the commits a job names; the message says which and why."""


@dataclass(frozen=True)
class Source:
    url: str                           # a path (shared file system) or anything git fetches from
    bases: tuple[str, ...]             # commits the tree at `url` has and the series is built on
    bundle: bytes                      # the series' own commits, on top of `bases` (empty for a path)
    trees: tuple[tuple[str, str], ...]  # (commit, tree id) of every commit a job names

    @property
    def is_path(self) -> bool:
        return "://" not in self.url and ":" not in self.url.split("/")[0]   # not scp-like host:path either


def tree_url(repo: Path, given: str | None) -> str:
    """--tree-url, else the repository's `patchbench.tree-url`, else its path."""
    if given:
        return given
    configured = Git.at(repo).run("config", "--get", "patchbench.tree-url", check=False)[1].strip()
    return configured or str(repo.resolve())


def source_for(repo: Path, url: str, bases: set[str], commits: set[str]) -> Source:
    """What a worker needs to have `commits` (made on top of `bases`) from `url` and the bundle."""
    names = sorted(commits | bases)
    trees = Git.at(repo).out("rev-parse", *(f"{name}^{{tree}}" for name in names)).split()
    source = Source(url, tuple(sorted(bases - commits)), b"", tuple(zip(names, trees)))
    own = sorted(commits - bases)
    if source.is_path or not own:
        return source
    return Source(source.url, source.bases, _bundle(repo, own, source.bases), source.trees)


def _bundle(repo: Path, commits: list[str], bases: tuple[str, ...]) -> bytes:
    """A bundle of `commits` down to `bases`. git bundles only named refs: they are made in a scratch
    repository that borrows the submitter's objects, so the submitter's refs stay untouched."""
    objects = Path(Git.at(repo).out("rev-parse", "--path-format=absolute", "--git-common-dir")) / "objects"
    with tempfile.TemporaryDirectory(prefix="patchbench-bundle-") as tmp:
        scratch = Path(tmp) / "scratch.git"
        Git.at(Path(tmp)).run("init", "-q", "--bare", str(scratch))
        (scratch / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        git = Git(scratch)
        git.run("update-ref", "--stdin", input="".join(f"create refs/heads/{c} {c}\n" for c in commits).encode())
        git.run("bundle", "create", "-q", str(Path(tmp) / "series.bundle"), "--branches", "--not", *bases)
        return (Path(tmp) / "series.bundle").read_bytes()


# (mirror, commit, tree) found there by this process: a mirror only gains objects, so the next task
# of a run (the same commits) costs no git call.
_CHECKED: set[tuple[Path, str, str]] = set()


def checkout_repo(source: Source, cache: Path) -> Path:
    """The repository this worker runs the jobs in, holding every commit of `source` with the tree
    the submitter applied; FetchFailed when it cannot have them."""
    if source.is_path:
        repo = Path(source.url)
        if not (repo / ".git").exists() and not (repo / "HEAD").is_file():
            raise FetchFailed(f"{source.url} is not a git repository on this worker (it shares no file system "
                              "with the submitter: give the submitter --tree-url or git config patchbench.tree-url)")
        _verify(repo, source)
        return repo
    repo = cache / "mirrors" / (hashlib.sha256(source.url.encode()).hexdigest()[:16] + ".git")
    wanted = {(repo, commit, tree) for commit, tree in source.trees}
    if wanted <= _CHECKED:
        return repo
    with _locked(repo):
        _fill(repo, source)
    _verify(repo, source)
    _CHECKED.update(wanted)
    return repo



@contextmanager
def _locked(mirror: Path) -> Iterator[None]:
    """One fetch into a mirror at a time (a worker run with --concurrency above 1)."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with open(mirror.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _fill(mirror: Path, source: Source) -> None:
    if not (mirror / "HEAD").is_file():
        Git.at(mirror.parent).run("init", "-q", "--bare", str(mirror))
    git = Git(mirror)
    missing = [base for base in source.bases if git.commit_exists(base) is None]
    if missing:
        try:
            git.run("fetch", "-q", "--no-tags", "--depth", "1", source.url,
                    *(f"{base}:refs/bases/{base}" for base in missing), timeout=FETCH_TIMEOUT)
        except GitFailed as failed:
            last = (failed.stderr.strip().splitlines() or ["failed"])[-1]
            raise FetchFailed(f"cannot fetch {', '.join(b[:12] for b in missing)} from {source.url}: {last}") from None
    wanted = [commit for commit, _ in source.trees if commit not in source.bases]
    if source.bundle and any(git.commit_exists(commit) is None for commit in wanted):
        with tempfile.NamedTemporaryFile(dir=mirror, suffix=".bundle") as bundle:
            bundle.write(source.bundle)
            bundle.flush()
            try:
                git.run("fetch", "-q", "--no-tags", bundle.name, "+refs/heads/*:refs/series/*", timeout=FETCH_TIMEOUT)
            except GitFailed as failed:
                raise FetchFailed(f"the series' bundle does not apply to the mirror of {source.url}: "
                                  f"{failed.stderr.strip()[-200:]}") from None


def _verify(repo: Path, source: Source) -> None:
    """Each commit a job names is here with the tree the submitter applied."""
    names = "".join(f"{commit}^{{tree}}\n" for commit, _ in source.trees)
    got = Git.at(repo).out("cat-file", "--batch-check=%(objectname)", input=names.encode()).splitlines()
    for (commit, tree), have in zip(source.trees, got):
        if have != tree:
            where = "is missing" if have.endswith(" missing") else f"has tree {have[:12]}"
            raise FetchFailed(f"commit {commit[:12]} {where} on this worker; the submitter applied tree {tree[:12]}")
