"""Run git plumbing against the user's object store with a private index and an empty private work tree.

Every call gets an environment that names the repository explicitly: variables a git hook or the
user's shell may have set (GIT_DIR, GIT_INDEX_FILE, GIT_WORK_TREE, ...) must never redirect a write
into the user's checkout. Arguments go to git as a list; nothing from a mail ever reaches a shell.
"""

from __future__ import annotations

import os
import subprocess
from functools import lru_cache
from pathlib import Path

from patchbench.errors import BadInput

# Kept from the caller's environment: tracing, config isolation, and who the committer is.
_KEPT_GIT_VARS = ("GIT_TRACE", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                  "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")

# Settings of the user's that must not act on our private index and refs: a split index would leave
# sharedindex files in their .git, logAllRefUpdates=always a reflog; hooks (reference-transaction)
# and fsmonitor are for their checkout.
_OVERRIDES = (("core.splitIndex", "false"), ("core.logAllRefUpdates", "false"), ("core.hooksPath", "/dev/null"),
              ("core.fsmonitor", "false"))


class GitFailed(Exception):
    def __init__(self, argv: list[str], returncode: int, stderr: str):
        super().__init__(f"git {' '.join(argv)}: exit {returncode}: {stderr.strip()}")
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr


@lru_cache(maxsize=16)   # each stage of a `check` asks for the same tree; GitPython's Repo costs 30-60 ms
def open_repository(tree: Path) -> Path:
    """The git directory of the repository at `tree` (its own for a linked worktree), or BadInput."""
    import git as gitpython   # here: what only reads blobs (lint, the call index) skips its import
    try:
        repo = gitpython.Repo(tree, search_parent_directories=True)
    except (gitpython.NoSuchPathError, gitpython.InvalidGitRepositoryError):
        raise BadInput(f"{tree} is not a git repository") from None
    return Path(repo.git_dir).resolve()


class Git:
    """git commands on one repository; `index` and `work_tree` are private scratch paths when given.

    `Git.at(directory)` instead runs git in a checkout (a build slot's worktree) and lets git find
    the repository from there, as `git -C directory` would, still with the caller's GIT_* cleared."""

    def __init__(self, git_dir: Path | None, index: Path | None = None, work_tree: Path | None = None):
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.cwd = work_tree or git_dir   # where git runs
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("GIT_") or k.startswith(_KEPT_GIT_VARS)}
        self.env.update(LC_ALL="C", LANGUAGE="C", GIT_TERMINAL_PROMPT="0",
                        GIT_LITERAL_PATHSPECS="1")  # a path from a patch is a path, never a glob
        if git_dir is not None:
            self.env["GIT_DIR"] = str(git_dir)
        for n, (key, value) in enumerate(_OVERRIDES):
            self.env[f"GIT_CONFIG_KEY_{n}"], self.env[f"GIT_CONFIG_VALUE_{n}"] = key, value
        self.env["GIT_CONFIG_COUNT"] = str(len(_OVERRIDES))
        if index is not None:
            self.env["GIT_INDEX_FILE"] = str(index)
        if work_tree is not None:
            self.env["GIT_WORK_TREE"] = str(work_tree)

    @classmethod
    def at(cls, directory: Path) -> "Git":
        git = cls(None)
        git.cwd = directory
        return git

    def popen(self, *args: str) -> subprocess.Popen:
        """A long-lived `git ARGS` reading stdin and writing stdout (pipes), stderr discarded."""
        return subprocess.Popen(["git", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=self.env, cwd=self.cwd)

    def blobs(self) -> "BlobReader":
        return BlobReader(self)

    def run(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None,
            check: bool = True, timeout: float | None = None) -> tuple[int, str, str]:
        """(returncode, stdout, stderr); raises GitFailed on a non-zero exit when `check`, and
        always when it runs longer than `timeout` seconds (a fetch from a server that stalls)."""
        argv = ["git", *args]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**self.env, **(env or {})}, cwd=self.cwd)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise GitFailed(list(args), -9, f"timed out after {timeout:.0f} s") from None
        except BaseException:
            # Ctrl-C or SIGTERM: let git remove its own lock files (it does on SIGTERM, not on SIGKILL).
            proc.terminate()
            proc.wait()
            raise
        stdout = out.decode("utf-8", "surrogateescape")
        stderr = err.decode("utf-8", "replace")
        if check and proc.returncode != 0:
            raise GitFailed(list(args), proc.returncode, stderr)
        return proc.returncode, stdout, stderr

    def out(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> str:
        return self.run(*args, input=input, env=env)[1].strip()

    def commit_exists(self, rev: str) -> str | None:
        """The full sha of commit `rev`, or None when the repository does not have it."""
        code, out, _ = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", rev + "^{commit}",
                                check=False)
        return out.strip() if code == 0 else None


class BlobReader:
    """One `git cat-file --batch` for many reads: the bytes of `<rev>:<path>` or of a blob id,
    None when absent. A context manager; after close() the git process is gone."""

    def __init__(self, git: Git):
        self.process = git.popen("cat-file", "--batch")

    def read(self, name: str) -> bytes | None:
        self.process.stdin.write(f"{name}\n".encode())
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
