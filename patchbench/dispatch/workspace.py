"""Where builds happen: cached build directories keyed by tree, base, config and make variables.

Layout under the cache root (``$PATCHBENCH_CACHE``, default ``~/.cache/patchbench``)::

    builds/<key>/slot-<n>/src      a detached `git worktree` of the user's repository
    builds/<key>/slot-<n>/obj      the configured O= directory, kept between runs
    builds/<key>/slot-<n>/ccache   this build directory's compiler cache

Kbuild recompiles whatever sees a changed command line, so every set of make variables gets its own
directory. A slot is held under an exclusive lock; a second build with the same key waits for the
warm slot rather than making a cold one (configuring and compiling a kernel from nothing takes far
longer than the wait, and an interrupted cold slot would be left half made). Switching a slot's
worktree to another commit rewrites only the files that differ, and make then rebuilds only what
depends on them.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator

from patchbench.errors import BadInput
from patchbench.tree.git import Git

SLOT_POLL_SECONDS = 0.5            # how often a build waiting for its key's slot looks again


def cache_root() -> Path:
    return Path(os.environ.get("PATCHBENCH_CACHE", Path.home() / ".cache" / "patchbench"))


@dataclass(frozen=True)
class Slot:
    root: Path
    repo: Path

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def obj(self) -> Path:
        return self.root / "obj"

    @property
    def ccache(self) -> Path:
        return self.root / "ccache"

    def _attached(self) -> bool:
        """The slot's worktree is still one of the repository's. A repository made again at the same
        path (re-cloned, rebuilt from a new tarball) has forgotten it, and git then refuses it."""
        if not (self.src / ".git").exists():
            return False
        code, out, _ = Git.at(self.src).run("rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
        common = git(self.repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
        return code == 0 and Path(out.strip()).resolve() == Path(common).resolve()

    def checkout(self, commit: str) -> None:
        """Materialise `commit` in this slot's worktree, never touching the user's checkout."""
        if not self._attached():
            shutil.rmtree(self.src, ignore_errors=True)
            git(self.repo, "worktree", "prune")
            git(self.repo, "worktree", "add", "--detach", "--force", str(self.src), commit)
        else:
            git(self.src, "checkout", "--detach", "--force", "--quiet", commit)
        # A worktree is clean by construction; remove anything a previous run left behind.
        git(self.src, "clean", "-fdxq")


def git(repo: Path, *args: str) -> str:
    """`git -C repo ARGS` through tree.git's runner (the caller's GIT_* never apply)."""
    code, out, err = Git.at(repo).run(*args, check=False)
    if code != 0:
        last = (err.strip().splitlines() or ["failed"])[-1]
        raise BadInput(f"git {' '.join(args[:2])} in {repo}: {last}")
    return out.strip()


def resolve(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")


def build_key(repo: Path, base: str, config_text: str, make_vars: dict[str, str]) -> str:
    material = "\0".join([str(repo.resolve()), base, config_text,
                          *(f"{k}={v}" for k, v in sorted(make_vars.items()))])
    return hashlib.sha256(material.encode()).hexdigest()[:16]


@contextmanager
def hold_slot(repo: Path, key: str, root: Path | None = None,
              on_wait: Callable[[], None] = lambda: None) -> Iterator[Slot]:
    """Lock a slot of build directory `key`: a free configured one, else wait for one (`on_wait`
    is told once); slot-0 is made when the key has none. A cold slot is used only while no slot of
    the key is configured yet (slots left by versions that made a slot per concurrent build)."""
    key_dir = (root or cache_root()) / "builds" / key
    (key_dir / "slot-0").mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        slots = sorted(key_dir.glob("slot-*"))
        warm = [slot_dir for slot_dir in slots if (slot_dir / "obj" / ".config").exists()]
        lock = next(filter(None, map(_try_lock, warm or slots)), None)
        if lock is not None:
            break
        if not waited:
            on_wait()
            waited = True
        time.sleep(SLOT_POLL_SECONDS)
    try:
        slot_dir = Path(lock.name).parent
        (slot_dir / "repo").write_text(str(repo.resolve()) + "\n")
        slot = Slot(slot_dir, repo.resolve())
        for d in (slot.obj, slot.ccache):
            d.mkdir(exist_ok=True)
        yield slot
    finally:
        lock.close()


def _try_lock(slot_dir: Path) -> IO | None:
    """The slot's lock file, locked by us; None when another build holds it."""
    lock = open(slot_dir / ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock
