"""git send-email's files of one send, kept until the last one so that the series is checked once.

git (>= 2.41) runs the sendemail-validate hook once per outgoing file, each time in a new process,
with GIT_SENDEMAIL_FILE_COUNTER and GIT_SENDEMAIL_FILE_TOTAL. The files are copied into
`<git dir>/patchbench/presend/<send>/`, where <send> names the git send-email process (pid and
start time, from /proc). Only the standard library here: every file but the last costs a process
start and this, nothing more.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from patchbench.errors import BadInput

STALE_AFTER = 24 * 3600   # a send killed before its last file leaves its directory: removed a day later
_REPO_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


def counters() -> tuple[int, int] | None:
    """(counter, total) from git send-email's environment, or None (git < 2.41, or not from it)."""
    try:
        counter = int(os.environ["GIT_SENDEMAIL_FILE_COUNTER"])
        total = int(os.environ["GIT_SENDEMAIL_FILE_TOTAL"])
    except (KeyError, ValueError):
        return None
    return (counter, total) if 1 <= counter <= total else None


def _process(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, start time, command line) of a process, from /proc; None where there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()    # after "pid (comm) ": state, ppid, ...; field 22 starttime
    return int(fields[1]), fields[19], cmdline


def send_key() -> str:
    """Names the running send: the git send-email process above us (pid and start time, so that a
    reused pid is another send), else our parent. Every hook call of one send shares it."""
    pid, first = os.getppid(), None
    while pid > 1:
        found = _process(pid)
        if found is None:
            break
        parent, started, cmdline = found
        first = first or f"{pid}-{started}"
        if "send-email" in cmdline:
            return f"{pid}-{started}"
        pid = parent
    return first or str(os.getppid())


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """git in `repo`, whatever GIT_DIR & co. the caller's environment has (a hook's has them)."""
    env = {k: v for k, v in os.environ.items() if k not in _REPO_VARS}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)


def git_dir(repo: Path) -> Path:
    proc = git(repo, "rev-parse", "--absolute-git-dir")
    if proc.returncode != 0:
        raise BadInput(f"{repo} is not a git repository")
    return Path(proc.stdout.strip())


def _remove_stale(root: Path) -> None:
    for old in root.iterdir() if root.is_dir() else ():
        try:
            if time.time() - old.stat().st_mtime > STALE_AFTER:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass   # another send removed it


def collect(repo: Path, mail: Path, counter: int, total: int) -> Path | None:
    """Keep the outgoing `mail` (file `counter` of `total` of this send) in the send's private
    directory; that directory once the last file is in it, else None."""
    root = git_dir(repo) / "patchbench" / "presend"
    store = root / send_key()
    if counter == 1:
        shutil.rmtree(store, ignore_errors=True)
        _remove_stale(root)
    try:
        store.mkdir(parents=True, exist_ok=True)
        partial = store / f".{counter:05d}.tmp"
        shutil.copyfile(mail, partial)
        partial.replace(store / f"{counter:05d}.patch")
    except OSError as exc:
        raise BadInput(f"{mail}: cannot keep it for the series check: {exc.strerror}") from None
    return store if counter >= total else None


def is_cover_letter(source: str) -> bool:
    """Every mail of `source` is a [PATCH 0/N] cover letter: git send-email validates those too."""
    from patchbench.mail import read_mails
    from patchbench.mail.subject import parse_subject

    try:
        indexes = [parse_subject(mail.subject).index for mail in read_mails(source)]
    except BadInput:
        return False
    return bool(indexes) and set(indexes) == {0}
