"""git send-email's files of one send, kept until the last one so that the series is checked once.

git (>= 2.41) runs the sendemail-validate hook once per outgoing file, each time in a new process,
with GIT_SENDEMAIL_FILE_COUNTER and GIT_SENDEMAIL_FILE_TOTAL. The files are copied into
`<git dir>/patchbench/presend/<send>/`, where <send> names the git send-email process (pid and
start time, from /proc). Only the standard library here: every file but the last costs a process
start and this, nothing more.

Older git says nothing of the other files: the first patch file's check judges the patches of the
send after it too (the files beside it) and records each one's outcome in the same directory,
keyed by the file's bytes; their own hook runs give it back (`replay`) for the same cost.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
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


def _send_dir(repo: Path) -> Path:
    return git_dir(repo) / "patchbench" / "presend" / send_key()


def _record_name(mail: Path) -> str:
    return hashlib.sha256(mail.read_bytes()).hexdigest() + ".outcome"


@dataclass(frozen=True)
class Outcome:
    """What one hook run says about its file: exit code, stdout, stderr."""
    code: int
    out: str
    err: str


def record(repo: Path, outcomes: dict[Path, Outcome]) -> None:
    """Keep the outcomes of later files of this send for their own hook runs (best effort: a file
    whose outcome could not be kept is checked again when its turn comes)."""
    store = _send_dir(repo)
    _remove_stale(store.parent)
    try:
        store.mkdir(parents=True, exist_ok=True)
        for mail, outcome in outcomes.items():
            partial = store / f".{os.getpid()}.tmp"
            partial.write_text(json.dumps([outcome.code, outcome.out, outcome.err]))
            partial.replace(store / _record_name(mail))
    except OSError:
        pass


def replay(repo: Path, mail: Path) -> Outcome | None:
    """The outcome an earlier hook run of this send recorded for `mail`, removed as it is given;
    after a refusal (git send-email stops there) or the send's last record, nothing is kept."""
    try:
        store = _send_dir(repo)
        kept = store / _record_name(mail)
        code, out, err = json.loads(kept.read_text())
        kept.unlink()
    except (OSError, ValueError, BadInput):
        return None
    if code != 0 or not any(store.glob("*.outcome")):
        shutil.rmtree(store, ignore_errors=True)
    return Outcome(code, out, err)


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
