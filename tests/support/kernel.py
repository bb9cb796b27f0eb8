"""A real Linux 6.1 git tree for tests and benchmarks, built once from Debian's linux-source-6.1.

The tree lives outside the checkout (``$PATCHBENCH_TEST_CACHE``, default ``~/.cache/patchbench-tests``)
so that later runs on the same machine reuse it. It is one commit holding every file of the tarball.
Nothing here is copied into the project: the kernel source comes from the Debian package at test time.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

CACHE = Path(os.environ.get("PATCHBENCH_TEST_CACHE", Path.home() / ".cache" / "patchbench-tests"))
SOURCE_GLOB = "linux-source-6.1*.tar.xz"
TAG = "v6.1-debian"
# Fixed identity and dates so that the base commit id is the same on every machine.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Debian linux-source", "GIT_AUTHOR_EMAIL": "linux-source@debian.invalid",
    "GIT_COMMITTER_NAME": "Debian linux-source", "GIT_COMMITTER_EMAIL": "linux-source@debian.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}


def source_tarball() -> Path | None:
    """Debian's linux-source-6.1 tarball, or None when the package is not installed."""
    found = sorted(Path("/usr/src").glob(SOURCE_GLOB))
    return found[-1] if found else None


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env=env,
                          capture_output=True, text=True).stdout.strip()


def kernel_repo() -> Path:
    """Path of the cached 6.1 repository (work tree checked out), building it on first use.

    Raises FileNotFoundError when linux-source-6.1 is not installed.
    """
    tarball = source_tarball()
    if tarball is None:
        raise FileNotFoundError("Debian's linux-source-6.1 is not installed (/usr/src/" + SOURCE_GLOB + ")")
    repo = CACHE / tarball.name.removesuffix(".tar.xz")
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time, across pytest workers and benches
        if (repo / ".git" / "patchbench-ready").exists():
            return repo
        shutil.rmtree(repo, ignore_errors=True)
        staging = CACHE / (repo.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        subprocess.run(["tar", "-xJf", str(tarball), "-C", str(staging)], check=True)
        (top,) = staging.iterdir()
        top.rename(repo)
        staging.rmdir()
        _git(repo, "init", "-q", "-b", "master")
        _git(repo, "config", "gc.auto", "0")
        _git(repo, "config", "user.name", "patchbench tests")
        _git(repo, "config", "user.email", "tests@patchbench.invalid")
        # The tarball's top-level .gitignore ignores everything: force-add so every file is tracked.
        _git(repo, "add", "-A", "-f")
        _git(repo, "commit", "-q", "-m", f"Linux {tarball.name.removesuffix('.tar.xz')}")
        _git(repo, "tag", TAG)
        (repo / ".git" / "patchbench-ready").write_text(_git(repo, "rev-parse", "HEAD") + "\n")
        return repo


def base_commit(repo: Path) -> str:
    return _git(repo, "rev-parse", TAG)


if __name__ == "__main__":
    print(kernel_repo())
