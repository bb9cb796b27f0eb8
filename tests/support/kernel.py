"""Real Linux git trees for tests and benchmarks, built once from Debian's kernel source packages.

Two kernels: Debian 12's `linux-source-6.1` (installed by apt, as `.ci/run` does) and the newest
source Debian has (`linux-source-7.2`, served by its unstable archive). The newer one is fetched
with apt-get through a private configuration (own sources list, lists and cache directories under
the test cache), so the system's apt set-up is never changed, and unpacked with dpkg-deb.

The trees live outside the checkout (``$PATCHBENCH_TEST_CACHE``, default
``~/.cache/patchbench-tests``) so that later runs on the same machine reuse them. Each is one commit
holding every file of the tarball, tagged ``v<version>-debian``. Nothing here is copied into the
project: the kernel source comes from the Debian packages at test time.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("PATCHBENCH_TEST_CACHE", Path.home() / ".cache" / "patchbench-tests"))
# Fixed identity and dates so that the base commit id is the same on every machine.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Debian linux-source", "GIT_AUTHOR_EMAIL": "linux-source@debian.invalid",
    "GIT_COMMITTER_NAME": "Debian linux-source", "GIT_COMMITTER_EMAIL": "linux-source@debian.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


@dataclass(frozen=True)
class Kernel:
    version: str          # "6.1"
    suite: str | None     # Debian suite to fetch from privately; None: installed by apt (.ci/run)

    @property
    def package(self) -> str:
        return f"linux-source-{self.version}"

    @property
    def tag(self) -> str:
        return f"v{self.version}-debian"


KERNELS = {"6.1": Kernel("6.1", None), "7.2": Kernel("7.2", "sid")}
NEWEST = "7.2"
TAG = KERNELS["6.1"].tag   # the 6.1 tree's tag, which most tests use


def _private_apt(root: Path, suite: str) -> list[str]:
    """apt options that keep every file of a fetch under `root`: the system's apt set-up is untouched."""
    for sub in ("lists/partial", "cache/archives/partial", "etc"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    sources = root / "etc" / "sources.list"
    sources.write_text(f"deb [signed-by={DEBIAN_KEYRING}] http://deb.debian.org/debian {suite} main\n")
    return ["-o", f"Dir::Etc::SourceList={sources}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={root / 'lists'}", "-o", f"Dir::Cache={root / 'cache'}",
            "-o", "Dir::State::status=/dev/null", "-o", "Debug::NoLocking=1",
            "-o", "APT::Sandbox::User=root", "-q"]


def _fetch_private(kernel: Kernel) -> Path:
    """Download and unpack `kernel`'s source package through a private apt configuration."""
    root = CACHE / "apt" / kernel.suite
    unpacked = root / "unpacked" / kernel.package
    found = sorted(unpacked.glob(f"usr/src/{kernel.package}*.tar.xz"))
    if found:
        return found[-1]
    options = _private_apt(root, kernel.suite)
    subprocess.run(["apt-get", *options, "update"], check=True, capture_output=True, timeout=600)
    debs = root / "debs"
    debs.mkdir(exist_ok=True)
    subprocess.run(["apt-get", *options, "download", kernel.package], check=True, cwd=debs,
                   capture_output=True, timeout=1200)
    (deb,) = sorted(debs.glob(f"{kernel.package}_*.deb"))[-1:]
    shutil.rmtree(unpacked, ignore_errors=True)
    unpacked.mkdir(parents=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True, timeout=600)
    deb.unlink()  # the unpacked tarball is all we keep
    return sorted(unpacked.glob(f"usr/src/{kernel.package}*.tar.xz"))[-1]


def source_tarball(version: str = "6.1", fetch: bool = False) -> Path | None:
    """The source tarball of `version`, or None when it is not there (and not fetched)."""
    kernel = KERNELS[version]
    found = sorted(Path("/usr/src").glob(f"{kernel.package}*.tar.xz"))
    if found:
        return found[-1]
    if kernel.suite is None:
        return None
    private = sorted((CACHE / "apt" / kernel.suite / "unpacked" / kernel.package).glob(
        f"usr/src/{kernel.package}*.tar.xz"))
    if private:
        return private[-1]
    if not fetch:
        return None
    try:
        return _fetch_private(kernel)
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        raise FileNotFoundError(f"could not fetch Debian's {kernel.package} ({exc})") from exc


def _git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env={**env, **GIT_ENV},
                          capture_output=True, text=True).stdout.strip()


def kernel_repo(version: str = "6.1") -> Path:
    """Path of the cached repository of `version` (work tree checked out), building it on first use.

    Raises FileNotFoundError when the source cannot be had (6.1 not installed; 7.2 not fetchable).
    """
    kernel = KERNELS[version]
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time, across pytest workers and benches
        tarball = source_tarball(version, fetch=True)
        if tarball is None:
            raise FileNotFoundError(f"Debian's {kernel.package} is not installed (/usr/src/{kernel.package}*.tar.xz)")
        repo = CACHE / tarball.name.removesuffix(".tar.xz")
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
        _git(repo, "tag", kernel.tag)
        (repo / ".git" / "patchbench-ready").write_text(_git(repo, "rev-parse", "HEAD") + "\n")
        return repo


def base_commit(repo: Path, version: str = "6.1") -> str:
    return _git(repo, "rev-parse", KERNELS[version].tag)


if __name__ == "__main__":
    for name in sys.argv[1:] or ["6.1"]:
        print(kernel_repo(name))
