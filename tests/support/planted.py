"""Planted series for dispatch tests and benches: commits made from edit lists (fixtures/dispatch/*.json).

The commits are written with git plumbing and a private index and kept under refs/patchbench-tests/,
so the kernel repository's HEAD, index, branches and work tree stay as they were.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "dispatch"
IDENTITY = {"GIT_AUTHOR_NAME": "Planted Series", "GIT_AUTHOR_EMAIL": "planted@patchbench.invalid",
            "GIT_COMMITTER_NAME": "Planted Series", "GIT_COMMITTER_EMAIL": "planted@patchbench.invalid",
            "GIT_AUTHOR_DATE": "2024-02-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-02-01T00:00:00Z"}


def _git(repo: Path, *args: str, stdin: str | None = None, env: dict | None = None, raw: bool = False) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], input=stdin, check=True, capture_output=True,
                         text=True, env={**os.environ, **IDENTITY, **(env or {})}).stdout
    return out if raw else out.strip()


def plant(repo: Path, name: str, base: str, salt: str = "") -> tuple[str, list[str]]:
    """Commit fixture `name` on `base` ({salt} in its edits replaced); returns (head, commits).

    Same inputs give the same commits."""
    series = json.loads((FIXTURES / f"{name}.json").read_text().replace("{salt}", salt))
    parent, commits = base, []
    with tempfile.TemporaryDirectory() as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(repo, "read-tree", base, env=index)
        for patch in series["patches"]:
            for edit in patch["edits"]:
                text = _git(repo, "cat-file", "blob", f":{edit['file']}", env=index, raw=True)
                if text.count(edit["find"]) != 1:
                    raise ValueError(f"{name}: {edit['find']!r} is not found exactly once in {edit['file']}")
                blob = _git(repo, "hash-object", "-w", "--stdin", stdin=text.replace(edit["find"], edit["replace"]))
                _git(repo, "update-index", "--cacheinfo", f"100644,{blob},{edit['file']}", env=index)
            tree = _git(repo, "write-tree", env=index)
            parent = _git(repo, "commit-tree", tree, "-p", parent, "-m", patch["subject"])
            commits.append(parent)
    _git(repo, "update-ref", f"refs/patchbench-tests/{name}{'-' + salt if salt else ''}", parent)
    return parent, commits
