"""What a netdev check gets: the series as mailed, the commits made from it, and the base tree's files.

The tree's own scripts (checkpatch.pl, get_maintainer.pl, kernel-doc) are run as the base has them,
written out of the object store into a scratch directory that looks enough like a kernel tree for
them (the top-level files, the directories they test for, the files they read). The user's checkout
is never read nor written: it may be at another commit, have local edits, or not exist.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
import tempfile
import threading
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from patchbench.checks.engine.finding import Finding
from patchbench.tree.git import Git, open_repository
from patchbench.errors import BadInput
from patchbench.mail.content import message_trailers
from patchbench.mail.decode import parse_person
from patchbench.series import Patch, Series
from patchbench.tree import AppliedPatch, ApplyResult

SCRIPT_TIMEOUT = 300   # seconds; a tree script that runs longer is stuck, not slow


@lru_cache(maxsize=1)
def netdev_facts() -> dict:
    """netdev.toml: the trees, the series limits, the source-hygiene table."""
    return tomllib.loads(Path(__file__).with_name("netdev.toml").read_text())


def message_finding(rule: str, severity: str, message: str, patch: int) -> Finding:
    """A finding about a patch's mail or commit message rather than a line of a file."""
    return Finding(rule=rule, severity=severity, file="", line=0, function="", message=message, patch=patch)


class Skip(Exception):
    """A check cannot run on this machine or tree; the message says why."""


@dataclass
class Options:
    checkpatch_strict: bool = False


def run_tool(command: list[str], what: str, cwd: Path | None = None, env: dict | None = None,
             ok_codes: tuple[int, ...] | None = (0,)) -> subprocess.CompletedProcess:
    """Run one of the tree's scripts; a crash or hang is an error of the run, not a pass."""
    try:
        proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, errors="replace",
                              timeout=SCRIPT_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BadInput(f"{what} did not finish in {SCRIPT_TIMEOUT} s") from None
    if ok_codes is not None and proc.returncode not in ok_codes:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise BadInput(f"{what} failed (exit {proc.returncode}): {detail[0]}")
    return proc


class Tree:
    """Files of one commit of the repository, written on demand under a scratch directory."""

    def __init__(self, git_dir: Path, rev: str, root: Path):
        self.git_dir, self.rev, self.root = git_dir, rev, root
        self._lock = threading.Lock()
        self._written: set[str] = set()
        self._top_written = False
        self._exists: dict[str, bool] = {}

    def git(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(["git", "--git-dir", str(self.git_dir), *args], capture_output=True, text=True,
                              errors="replace", stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise BadInput(f"git {args[0]} failed: {proc.stderr.strip()}")
        return proc.stdout

    def is_ancestor(self, older: str, newer: str) -> bool:
        return subprocess.run(["git", "--git-dir", str(self.git_dir), "merge-base", "--is-ancestor", older, newer],
                              capture_output=True, stdin=subprocess.DEVNULL).returncode == 0

    def exists(self, path: str) -> bool:
        with self._lock:
            if path not in self._exists:
                self._exists[path] = bool(self.git("ls-tree", "--name-only", self.rev, "--", path).strip())
            return self._exists[path]

    def files(self, *paths: str) -> Path:
        """Write `paths` (files or whole directories, symlinks followed within the tree) and the
        top level a kernel tree has (its files, empty top directories); the root."""
        with self._lock:
            self._top_level()
            wanted = [p for p in paths if p not in self._written]
            while wanted:
                self._written.update(wanted)
                wanted = [target for target in self._write(wanted) if target not in self._written]
        return self.root

    def _top_level(self) -> None:
        if self._top_written:
            return
        self._top_written = True
        blobs = []
        for line in self.git("ls-tree", "-z", self.rev).split("\0"):
            if not line:
                continue
            meta, name = line.split("\t", 1)
            mode, kind, _ = meta.split()
            if kind == "tree":
                (self.root / name).mkdir(parents=True, exist_ok=True)
            elif mode in ("100644", "100755"):
                blobs.append(name)
        self._write(blobs)

    def _write(self, paths: list[str]) -> list[str]:
        """Write the blobs under `paths`; the in-tree targets of symlinks among them."""
        listing = self.git("ls-tree", "-r", "-z", self.rev, "--", *paths) if paths else ""
        targets = []
        with Git(self.git_dir).blobs() as blobs:
            for line in listing.split("\0"):
                if not line:
                    continue
                meta, path = line.split("\t", 1)
                mode = meta.split()[0]
                data = blobs.read(f"{self.rev}:{path}") or b""
                out = self.root / path
                out.parent.mkdir(parents=True, exist_ok=True)
                if out.is_symlink() or out.exists():
                    out.unlink()
                if mode == "120000":
                    target = data.decode("utf-8", "surrogateescape")
                    os.symlink(target, out)
                    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
                    if not resolved.startswith("../"):
                        targets.append(resolved)
                else:
                    out.write_bytes(data)
                    out.chmod(0o755 if mode == "100755" else 0o644)
        return targets

    def command(self, script: str) -> list[str]:
        """How to run `script` of the tree: its interpreter (from the #! line) and its path."""
        path = self.files(script) / script
        first = path.read_bytes()[:200].split(b"\n", 1)[0].decode("ascii", "replace")
        words = first[2:].split() if first.startswith("#!") else []
        if words and Path(words[0]).name == "env":
            words = words[1:]
        interpreter = Path(words[0]).name if words else "sh"
        found = shutil.which(interpreter)
        if found is None:
            raise Skip(f"{interpreter} is not installed (needed by {script})")
        return [found, *words[1:], str(path)]


@dataclass
class PatchContext:
    """Everything a check may read; built once per `check`/`run` and shared by the checks."""

    series: Series
    applied: ApplyResult
    tree: Tree
    scratch: Path
    options: Options = field(default_factory=Options)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _patch_files: dict[int, Path] = field(default_factory=dict)
    _mailmap: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def git_dir(self) -> Path:
        return self.tree.git_dir

    def mail(self, patch: AppliedPatch) -> Patch | None:
        """The mailed patch an applied commit was made from."""
        return next((p for p in self.series.patches if p.index == patch.index), None)

    def trailers(self, patch: AppliedPatch) -> list[str]:
        """The patch's own trailers (as its author wrote them; not those collected from replies)."""
        mail = self.mail(patch)
        return message_trailers(mail.body) if mail else []

    def patch_file(self, patch: AppliedPatch) -> Path:
        """The commit as `git format-patch -M` writes it: what the tree's scripts are given."""
        with self._lock:
            if patch.index not in self._patch_files:
                out = self.scratch / "patches" / f"{patch.index:04d}.patch"
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(self.tree.git("format-patch", "-M", "--stdout", "-1", patch.commit))
                self._patch_files[patch.index] = out
            return self._patch_files[patch.index]

    def canonical(self, people: list[str]) -> dict[str, tuple[str, str]]:
        """`Name <address>` -> (name, address) as the base's .mailmap maps them, lower-cased."""
        with self._lock:
            asked = [p for p in dict.fromkeys(people) if p not in self._mailmap]
            valid = [p for p in asked if parse_person(p)[1]]
            if valid:
                mapped = self.tree.git("-c", f"mailmap.blob={self.applied.base}:.mailmap", "-c", "mailmap.file=",
                                       "check-mailmap", *(_contact(p) for p in valid)).splitlines()
                for person, line in zip(valid, mapped):
                    name, address = parse_person(line)
                    self._mailmap[person] = (" ".join(name.lower().split()), address.lower())
            for person in asked:
                if person not in self._mailmap:
                    name, address = parse_person(person)
                    self._mailmap[person] = (" ".join(name.lower().split()), address.lower())
            return {p: self._mailmap[p] for p in people}


def _contact(person: str) -> str:
    name, address = parse_person(person)
    return f"{name} <{address}>" if name and name != address else f"<{address}>"


def open_context(series: Series, applied: ApplyResult,
                 options: Options) -> tuple[PatchContext, tempfile.TemporaryDirectory]:
    """A context for `applied`; the caller removes the scratch directory (the returned handle)."""
    scratch = tempfile.TemporaryDirectory(prefix="patchbench-netdev-")
    root = Path(scratch.name)
    tree = Tree(open_repository(applied.repo), applied.base, root / "tree")
    (root / "tree").mkdir()
    return PatchContext(series, applied, tree, root, options), scratch
