"""Real series for the apply tests: commits made with git plumbing, mailed with `git format-patch`.

`series_from_mails` turns format-patch output into the stage-2 Series dataclasses so that the apply
stage is tested on what git itself produces (the mail reader has its own tests).
`RepoState` captures what must stay byte-identical in a user's repository.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.utils import parsedate_to_datetime
from pathlib import Path

from patchbench.series import Cover, Patch, Series

IDENTITY = {"GIT_AUTHOR_NAME": "Ada Series", "GIT_AUTHOR_EMAIL": "ada@example.org",
            "GIT_COMMITTER_NAME": "Ada Series", "GIT_COMMITTER_EMAIL": "ada@example.org"}
_PREFIX = re.compile(r"^\[[^\]]*\]\s*")


def git(repo: Path, *args: str, input: bytes | None = None, env: dict | None = None) -> str:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    full_env.update(IDENTITY, **(env or {}))
    return subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, check=True,
                          env=full_env).stdout.decode().strip()


def commit_files(repo: Path, parent: str | None, changes: dict[str, bytes | tuple[str, bytes] | None], message: str,
                 date: str = "2024-03-01T10:00:00+01:00", ref: str | None = None) -> str:
    """A commit on `parent` with files replaced (None = deleted, (mode, bytes) for 100755 or a
    120000 symlink), made without any checkout."""
    index = repo / ".git" / f"scratch-index-{os.getpid()}" if (repo / ".git").is_dir() else repo / "scratch-index"
    env = {"GIT_INDEX_FILE": str(index), "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    try:
        git(repo, "read-tree", *([parent] if parent else ["--empty"]), env=env)
        for path, content in changes.items():
            if content is None:
                git(repo, "update-index", "--force-remove", "--", path, env=env)
            else:
                mode, data = content if isinstance(content, tuple) else ("100644", content)
                blob = git(repo, "hash-object", "-w", "--stdin", input=data)
                git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
        tree = git(repo, "write-tree", env=env)
        commit = git(repo, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, env=env)
    finally:
        index.unlink(missing_ok=True)
    if ref:
        git(repo, "update-ref", ref, commit)
    return commit


def format_patch(repo: Path, base: str, tip: str, out: Path, *extra: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    names = git(repo, "format-patch", "--cover-letter", "--thread", f"--base={base}", "-o", str(out),
                *extra, f"{base}..{tip}")
    return [Path(name) for name in names.splitlines()]


def _split_mail(path: Path):
    msg = message_from_bytes(path.read_bytes(), policy=policy.default)
    text = msg.get_content()
    subject = _PREFIX.sub("", " ".join(str(msg["Subject"]).split()))
    return msg, subject, text


def series_from_mails(mails: list[Path]) -> Series:
    cover, patches, base, prereqs = None, [], None, []
    for path in mails:
        msg, subject, text = _split_mail(path)
        for line in text.splitlines():
            if line.startswith("base-commit: "):
                base = line.split()[1]
            elif line.startswith("prerequisite-patch-id: "):
                prereqs.append(line.split()[1])
        if "\ndiff --git " not in text:
            cover = Cover(subject=subject, message_id=str(msg["Message-ID"]).strip("<>"), body=text)
            continue
        body, _, rest = ("\n" + text).partition("\n---\n")
        diff = rest[rest.index("diff --git "):]
        diff = diff.split("\n-- \n")[0] + "\n"
        trailers = [line for line in body.strip().split("\n\n")[-1].splitlines() if re.match(r"^[\w-]+: ", line)]
        patches.append(Patch(index=len(patches) + 1, subject=subject, message_id=str(msg["Message-ID"]).strip("<>"),
                             author=str(msg["From"]), date=parsedate_to_datetime(str(msg["Date"])),
                             body=body.strip() + "\n", diff=diff, trailers=trailers))
    return Series(version=1, total=len(patches), tree=None, subject_prefix="PATCH", cover=cover,
                  patches=patches, base_commit=base, prerequisite_patch_ids=prereqs)


@dataclass(frozen=True)
class RepoState:
    """Everything of a repository a user sees, except refs/patchbench/ and the object store."""
    head: bytes
    index: str | None
    refs: str
    stash_log: bytes | None
    status: bytes

    @classmethod
    def of(cls, repo: Path) -> "RepoState":
        gitdir = Path(git(repo, "rev-parse", "--absolute-git-dir"))
        index = gitdir / "index"
        stash = gitdir / "logs" / "refs" / "stash"
        refs = "\n".join(line for line in git(repo, "for-each-ref", "--format=%(objectname) %(refname)").splitlines()
                         if " refs/patchbench/" not in line)
        status = b""
        if git(repo, "rev-parse", "--is-bare-repository") == "false":
            status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain=v2", "-z", "--untracked-files=all"],
                                    capture_output=True, check=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"}).stdout
        return cls(head=(gitdir / "HEAD").read_bytes(),
                   index=hashlib.sha256(index.read_bytes()).hexdigest() if index.exists() else None,
                   refs=refs, stash_log=stash.read_bytes() if stash.exists() else None, status=status)


def hunk_in_mail(mail: bytes, path: str, text: str) -> tuple[str, int]:
    """(header, new-file line) of the line `text` (without its +/-/space) in the hunk of `path` that
    holds it, in a patch mail: tests name positions as the tree at hand gives them, not a point
    release's line numbers. For a removed line the number is its old-file line."""
    from unidiff import PatchSet

    diff = mail.decode("utf-8", "replace")
    for patched in PatchSet(diff[diff.index("diff --git"):]):
        if patched.path != path:
            continue
        for hunk in patched:
            for line in hunk:
                if line.value.rstrip("\n") == text:
                    header = f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
                    return header, line.target_line_no or line.source_line_no
    raise ValueError(f"no line {text!r} in {path} of the mail")
