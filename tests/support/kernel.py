"""Real Linux git trees for tests and benchmarks, built once from Debian's kernel source packages.

Two kernels, each named by the line it stands for, never by a point release:

- ``6.1``: Debian 12's ``linux-source-6.1``, whichever 6.1.y is installed (``.ci/run`` installs it),
  else the newest that Debian 12 serves (bookworm and bookworm-security);
- ``newest``: the newest kernel source Debian's unstable archive serves, found by asking the
  archive for its ``linux-source-X.Y`` packages (not by a package name written here).

What is not installed is fetched with apt-get through a private configuration (own sources list,
lists and cache directories under the test cache): the system's apt set-up is never changed.
``PATCHBENCH_KERNEL_6_1`` / ``PATCHBENCH_KERNEL_NEWEST`` name a source tarball to use instead (a
locally built package's, or another point release's).

A tree is one commit holding every file of the tarball, tagged ``debian-6.1`` / ``debian-newest``,
and records what it was built from: the package and its version, and the kernel version read from
the tree's own Makefile. Trees live outside the checkout (``$PATCHBENCH_TEST_CACHE``, default
``~/.cache/patchbench-tests``), keyed by the tarball's content, so a new point release gets a new
tree and later runs on the same machine reuse it. Nothing here is copied into the project: the
kernel source comes from the Debian packages at test time.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

CACHE = Path(os.environ.get("PATCHBENCH_TEST_CACHE", Path.home() / ".cache" / "patchbench-tests"))
# Fixed identity and dates so that the base commit id depends on the tarball's content alone.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Debian linux-source", "GIT_AUTHOR_EMAIL": "linux-source@debian.invalid",
    "GIT_COMMITTER_NAME": "Debian linux-source", "GIT_COMMITTER_EMAIL": "linux-source@debian.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
ARCHIVE_LISTS_MAX_AGE = 24 * 3600   # the archive is asked again when its lists are older than this


@dataclass(frozen=True)
class Kernel:
    name: str                        # "6.1" | "newest"
    sources: tuple[str, ...]         # apt source lines (after "deb [signed-by=…] ") that serve it
    packages: str                    # regex (POSIX ERE and Python alike): the source packages of this line
    installed: str | None            # the tarball apt installs, used before any fetch

    @property
    def tag(self) -> str:
        return f"debian-{self.name}"

    @property
    def override(self) -> str:
        return "PATCHBENCH_KERNEL_" + self.name.upper().replace(".", "_")


KERNELS = {
    "6.1": Kernel("6.1", ("http://deb.debian.org/debian bookworm main",
                          "http://deb.debian.org/debian-security bookworm-security main"),
                  r"linux-source-6\.1", "/usr/src/linux-source-6.1.tar.xz"),
    "newest": Kernel("newest", ("http://deb.debian.org/debian sid main",),
                     r"linux-source-[0-9]+\.[0-9]+", None),
}
NEWEST = "newest"
TAG = KERNELS["6.1"].tag   # the 6.1 tree's tag, which most tests use


@dataclass(frozen=True)
class Source:
    """A kernel source tarball and where it came from."""
    tarball: str
    package: str            # linux-source-7.2
    package_version: str    # 7.2.13-1 ("" when unknown: a tarball named by the override)
    origin: str             # "installed" | "Debian sid" | "$PATCHBENCH_KERNEL_NEWEST" | …


@dataclass(frozen=True)
class Tree:
    """A built tree: its path, the kernel line, the Linux version its Makefile states, its source."""
    path: str
    kernel: str
    linux: str              # 7.2.13, from VERSION/PATCHLEVEL/SUBLEVEL of the tree's Makefile
    base: str               # the commit tagged Kernel.tag
    source: Source

    def describe(self) -> str:
        package = f"{self.source.package} {self.source.package_version}".strip()
        return f"{self.kernel}: Linux {self.linux} ({package}, {self.source.origin})"


# --- asking the archive ---------------------------------------------------------------------------

def _apt_root(kernel: Kernel) -> Path:
    return CACHE / "apt" / kernel.name


def _private_apt(kernel: Kernel) -> list[str]:
    """apt options that keep every file of a fetch under the cache: the system's apt set-up is untouched."""
    root = _apt_root(kernel)
    for sub in ("lists/partial", "cache/archives/partial", "etc"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    sources = root / "etc" / "sources.list"
    sources.write_text("".join(f"deb [signed-by={DEBIAN_KEYRING}] {line}\n" for line in kernel.sources))
    return ["-o", f"Dir::Etc::SourceList={sources}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={root / 'lists'}", "-o", f"Dir::Cache={root / 'cache'}",
            "-o", "Dir::State::status=/dev/null", "-o", "Debug::NoLocking=1",
            "-o", "APT::Sandbox::User=root", "-q"]


def _run(argv: list[str], timeout: int, cwd: Path | None = None) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=timeout, cwd=cwd).stdout


def _newest_first(items: list, of=lambda item: item) -> list:
    """`items` ordered by (package, version) of each, `of(item)`, newest first: the X.Y of
    linux-source-X.Y, then the package version, each compared as dpkg compares versions."""
    def older(a: str, b: str) -> bool:
        return subprocess.run(["dpkg", "--compare-versions", a, "lt", b], timeout=60).returncode == 0

    def compare(x, y) -> int:
        (package_x, version_x), (package_y, version_y) = of(x), of(y)
        for a, b in ((package_x.removeprefix("linux-source-"), package_y.removeprefix("linux-source-")),
                     (version_x, version_y)):
            if a != b:
                return -1 if older(a, b) else 1
        return 0
    return sorted(items, key=functools.cmp_to_key(compare), reverse=True)


def served(kernel: Kernel, refresh: bool = False) -> list[tuple[str, str]]:
    """(package, version) of every source package of `kernel`'s line the archive serves, newest first.

    The archive's lists are fetched again when `refresh` or when they are older than a day.
    Raises subprocess.SubprocessError / OSError when the archive cannot be asked.
    """
    options = _private_apt(kernel)
    stamp = _apt_root(kernel) / "lists" / ".updated"
    if refresh or not stamp.exists() or time.time() - stamp.stat().st_mtime > ARCHIVE_LISTS_MAX_AGE:
        _run(["apt-get", *options, "update"], timeout=600)
        stamp.touch()
    names = [line.split(" - ")[0] for line in
             _run(["apt-cache", *options, "search", "--names-only", f"^{kernel.packages}$"], timeout=120).splitlines()]
    found = []
    for name in names:
        for line in _run(["apt-cache", *options, "madison", name], timeout=120).splitlines():
            version = line.split("|")[1].strip()
            found.append((name, version))
    return _newest_first(sorted(set(found)))


def _download(kernel: Kernel, package: str, version: str) -> Source:
    """Download one version of a source package privately and unpack its tarball under the cache."""
    unpacked = CACHE / "sources" / f"{package}_{version}"
    record = unpacked / "source.json"
    if record.exists():
        return Source(**json.loads(record.read_text()))
    options = _private_apt(kernel)
    debs = _apt_root(kernel) / "debs"
    shutil.rmtree(debs, ignore_errors=True)
    debs.mkdir()
    _run(["apt-get", *options, "download", f"{package}={version}"], timeout=1800, cwd=debs)
    (deb,) = debs.glob(f"{package}_*.deb")
    staging = unpacked.with_name(unpacked.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    _run(["dpkg-deb", "-x", str(deb), str(staging)], timeout=600)
    shutil.rmtree(debs)
    (tarball,) = staging.glob(f"usr/src/{package}*.tar.*")
    suite = " + ".join(line.split()[1] for line in kernel.sources)
    source = Source(str(unpacked / tarball.relative_to(staging)), package, version, f"Debian {suite}")
    (staging / "source.json").write_text(json.dumps(asdict(source)) + "\n")
    shutil.rmtree(unpacked, ignore_errors=True)
    staging.rename(unpacked)
    for older in _cached_sources(kernel):   # keep one fetched source per line: each is 150 MB
        if older != source:
            shutil.rmtree(Path(older.tarball).parents[2], ignore_errors=True)
    return source


def _cached_sources(kernel: Kernel) -> list[Source]:
    """Sources of `kernel`'s line fetched earlier, newest first."""
    found = []
    for record in (CACHE / "sources").glob("*/source.json"):
        source = Source(**json.loads(record.read_text()))
        if re.fullmatch(kernel.packages, source.package) and Path(source.tarball).exists():
            found.append(source)
    return _newest_first(found, lambda s: (s.package, s.package_version))


def source(name: str) -> Source:
    """The source `name`'s tree is built from: the override, the installed package, else the newest
    the archive serves (fetched). With the archive out of reach, the newest fetched earlier is used.
    Raises FileNotFoundError when there is none."""
    kernel = KERNELS[name]
    override = os.environ.get(kernel.override)
    if override:
        if not Path(override).is_file():
            raise FileNotFoundError(f"{kernel.override}={override}: no such file")
        return Source(override, Path(override).name.split(".tar")[0], "", f"${kernel.override}")
    if kernel.installed and Path(kernel.installed).is_file():
        package = Path(kernel.installed).name.split(".tar")[0]
        try:
            version = _run(["dpkg-query", "-W", "-f", "${Version}", package], timeout=60)
        except (subprocess.SubprocessError, OSError):
            version = ""
        return Source(kernel.installed, package, version, "installed")
    cached = _cached_sources(kernel)
    try:
        newest = served(kernel)
    except (subprocess.SubprocessError, OSError) as exc:
        if cached:
            return cached[0]
        raise FileNotFoundError(f"could not ask Debian's archive for the {name} kernel source ({exc})") from exc
    if not newest:
        raise FileNotFoundError(f"Debian's archive serves no package matching {kernel.packages}")
    match = next((s for s in cached if (s.package, s.package_version) == newest[0]), None)
    if match:
        return match
    try:
        return _download(kernel, *newest[0])
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        raise FileNotFoundError(f"could not fetch Debian's {newest[0][0]} {newest[0][1]} ({exc})") from exc


# --- building the tree ----------------------------------------------------------------------------

def _git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env={**env, **GIT_ENV},
                          capture_output=True, text=True).stdout.strip()


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def linux_version(makefile: str) -> str:
    """6.1.192 from a kernel Makefile's VERSION, PATCHLEVEL, SUBLEVEL and EXTRAVERSION lines."""
    values = dict(re.findall(r"^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)\s*=[ \t]*(\S*)", makefile, re.M))
    if "VERSION" not in values or "PATCHLEVEL" not in values:
        raise ValueError("not a kernel Makefile: no VERSION and PATCHLEVEL")
    version = f"{values['VERSION']}.{values['PATCHLEVEL']}"
    if values.get("SUBLEVEL"):
        version += f".{values['SUBLEVEL']}"
    return version + values.get("EXTRAVERSION", "")


def _ready(repo: Path) -> Path:
    return repo / ".git" / "patchbench-tree.json"


def tree(name: str = "6.1") -> Tree:
    """The built tree of kernel `name`, building it on first use (one builder at a time).

    Raises FileNotFoundError when the source cannot be had (6.1 neither installed nor served; the
    archive out of reach and nothing fetched before).
    """
    kernel = KERNELS[name]
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time, across pytest workers and benches
        src = source(name)
        tarball = Path(src.tarball)
        repo = CACHE / "trees" / f"{name}-{_digest(tarball)[:16]}"
        ready = built(repo)
        if ready is not None:
            return replace(ready, source=src)   # the same content, as found today
        for stale in (CACHE / "trees").glob(f"{name}-*"):   # an older point release of this line
            shutil.rmtree(stale, ignore_errors=True)
        staging = repo.with_name(repo.name + ".partial")
        staging.mkdir(parents=True)
        subprocess.run(["tar", "-xf", str(tarball), "-C", str(staging)], check=True, timeout=1800)
        (top,) = staging.iterdir()
        top.rename(repo)
        staging.rmdir()
        linux = linux_version((repo / "Makefile").read_text(errors="replace"))
        _git(repo, "init", "-q", "-b", "master")
        _git(repo, "config", "gc.auto", "0")
        _git(repo, "config", "user.name", "patchbench tests")
        _git(repo, "config", "user.email", "tests@patchbench.invalid")
        # The tarball's top-level .gitignore ignores everything: force-add so every file is tracked.
        _git(repo, "add", "-A", "-f")
        _git(repo, "commit", "-q", "-m", f"Linux {linux} ({src.package} {src.package_version})".strip())
        _git(repo, "tag", kernel.tag)
        made = Tree(str(repo), name, linux, _git(repo, "rev-parse", "HEAD"), src)
        _ready(repo).write_text(json.dumps(asdict(made), indent=1) + "\n")
        return made


def kernel_repo(name: str = "6.1") -> Path:
    """Path of the built tree of kernel `name` (work tree checked out); see `tree`."""
    return Path(tree(name).path)


def base_commit(repo: Path, name: str = "6.1") -> str:
    return _git(repo, "rev-parse", KERNELS[name].tag)


def built(repo: Path) -> Tree | None:
    """What the tree at `repo` was built from, or None when it is not one of ours."""
    ready = _ready(repo)
    if not ready.exists():
        return None
    data = json.loads(ready.read_text())
    return Tree(**{**data, "source": Source(**data["source"])})


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["6.1"]:
        print(tree(arg).describe(), kernel_repo(arg))
