"""The pre-send gate end to end: real git send-email to a real SMTP server on loopback, real b4.

A contributor's clone of the 6.1 tree holds the seeds' ring series as commits (HEAD on it, as
when sending from one's branch): the broken one adds an unlocked __ptr_ring_consume() in patch 2.
Mails are made by `git format-patch --cover-letter --base`, sent by `git send-email` with our
hook installed, to an aiosmtpd server started here that keeps what arrives.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from email import message_from_bytes, policy
from pathlib import Path

import pytest

from patchbench import presend
from tests.conftest import missing
from tests.support.git_series import RepoState, commit_files, format_patch, git
from tests.support.kernel import TAG
from tests.support.ring_series import (STOP_PATCH, TAP_HELPER, TAP_HELPER_NO_LOCK, TUN, TUN_HELPER, WAKE_PATCH,
                                       commit_series, tap_patch, tun_patch)

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[1]
BAD = [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK), WAKE_PATCH]
GOOD = [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER), WAKE_PATCH]
FINDING = re.compile(r"^drivers/net/tap\.c:\d+: error: ptr-ring-consume-unlocked: __ptr_ring_consume", re.M)
# Patch 3 stops tun's tx queue, which patch 2's consume helper wakes: right only on top of patch 2.
STACKED = [tun_patch(TUN_HELPER), WAKE_PATCH, STOP_PATCH]
STOP_FIRST = [tun_patch(TUN_HELPER), STOP_PATCH, WAKE_PATCH]     # patch 2 stops what nothing wakes yet
UNMATCHED = re.compile(r"^drivers/net/tun\.c:\d+: error: queue-stop-unmatched: netif_tx_stop_queue", re.M)
SENDER = "Ada Series <ada@example.org>"


# --- the contributor's machine ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A HOME of its own: git identity, b4's cache and the checker's facts cache live there."""
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_text("[user]\n\tname = Ada Series\n\temail = ada@example.org\n")
    return home


def user_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_DATA_HOME=str(home / ".local"), GIT_CONFIG_NOSYSTEM="1", PATCHBENCH_CACHE=str(home / "pb"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.update(extra)
    return env


@pytest.fixture
def clone(kernel_tree: Path, tmp_path: Path) -> tuple[Path, str]:
    """A contributor's clone of the 6.1 tree (no checkout: git send-email and the gate need none)."""
    repo = tmp_path / "linux"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
    return repo, git(repo, "rev-parse", TAG)


def on_branch(repo: Path, base: str, patches, name: str, dated_now: bool = False) -> str:
    """The series committed on branch `name`, which HEAD is then on; its tip."""
    tip = commit_series(repo, base, patches, dated_now=dated_now)
    git(repo, "update-ref", f"refs/heads/{name}", tip)
    git(repo, "symbolic-ref", "HEAD", f"refs/heads/{name}")
    return tip


def mails(repo: Path, base: str, tip: str, out: Path) -> list[Path]:
    """format-patch's files, the cover letter written (git send-email refuses its template)."""
    files = format_patch(repo, base, tip, out)
    cover = files[0]
    cover.write_text(cover.read_text().replace("*** SUBJECT HERE ***", "tun, tap: consume under the consumer lock")
                     .replace("*** BLURB HERE ***", "Both drivers get a helper that takes the lock."))
    return files


def patchbench(home: Path, cwd: Path, *args: str, stdin: str | None = None, **env: str):
    return subprocess.run([sys.executable, "-m", "patchbench", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, env=user_env(home, **env), timeout=600)


# --- a real SMTP server on loopback -----------------------------------------------------------------

class Inbox:
    """aiosmtpd handler: keeps every message that arrives."""

    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(message_from_bytes(envelope.original_content or envelope.content, policy=policy.default))
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def smtp():
    from aiosmtpd.controller import Controller

    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    inbox.port = controller.port
    yield inbox
    controller.stop()


def send_email(home: Path, repo: Path, files: list[Path], smtp: Inbox, *extra: str) -> subprocess.CompletedProcess:
    if not (Path(git(repo, "--exec-path")) / "git-send-email").exists():
        missing("git send-email is not installed (Debian package git-email)")
    return subprocess.run(["git", "send-email", "--smtp-server=127.0.0.1", f"--smtp-server-port={smtp.port}",
                           f"--from={SENDER}", "--to=netdev@example.org", "--confirm=never", "--suppress-cc=all",
                           *extra, *map(str, files)],
                          cwd=repo, capture_output=True, text=True, env=user_env(home), timeout=600)


def install(home: Path, repo: Path) -> subprocess.CompletedProcess:
    proc = patchbench(home, repo, "hook", "install", "--repo", str(repo))
    assert proc.returncode == 0, proc.stderr
    return proc


def subjects(inbox: Inbox) -> list[str]:
    return [" ".join(str(m["Subject"]).split()) for m in inbox.messages]


def left_behind(repo: Path) -> list[str]:
    """What a check left in the repository that the user did not ask for."""
    gitdir = Path(git(repo, "rev-parse", "--absolute-git-dir"))
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/patchbench/").split()
    kept = [str(p.relative_to(gitdir)) for p in (gitdir / "patchbench" / "presend").glob("*/*")]
    return refs + kept


# --- git send-email ---------------------------------------------------------------------------------

def send_with_gate(home: Path, clone, patches, smtp: Inbox, out: Path, *extra: str):
    """The series committed on HEAD's branch, the gate installed, its mails sent: (git send-email's
    result, the repository, the repository's state before the send)."""
    repo, base = clone
    tip = on_branch(repo, base, patches, "ring")
    install(home, repo)
    before = RepoState.of(repo)
    return send_email(home, repo, mails(repo, base, tip, out), smtp, *extra), repo, before


def test_send_email_refuses_an_unlocked_consume_and_sends_nothing(home, clone, smtp, tmp_path):
    proc, repo, before = send_with_gate(home, clone, BAD, smtp, tmp_path / "out")
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert FINDING.search(output), output
    assert "send refused" in output and "patch 2/3" in output
    assert "git send-email --no-validate" in output      # how to send anyway
    assert "no patches were sent" in output               # git's own words
    assert smtp.messages == []
    assert RepoState.of(repo) == before and left_behind(repo) == []


def test_send_email_sends_the_clean_series(home, clone, smtp, tmp_path):
    proc, repo, before = send_with_gate(home, clone, GOOD, smtp, tmp_path / "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "does not apply" not in proc.stderr and "error" not in proc.stderr, proc.stderr
    assert [re.sub(r"\].*", "]", s) for s in subjects(smtp)] == [
        "[PATCH 0/3]", "[PATCH 1/3]", "[PATCH 2/3]", "[PATCH 3/3]"]
    assert "spin_lock(&ring->consumer_lock);" in smtp.messages[2].get_content()
    assert RepoState.of(repo) == before and left_behind(repo) == []


def test_send_email_no_validate_sends_the_refused_series(home, clone, smtp, tmp_path):
    proc, _, _ = send_with_gate(home, clone, BAD, smtp, tmp_path / "out", "--no-validate")
    assert proc.returncode == 0, proc.stderr
    assert len(smtp.messages) == 4


def send_from(where: str, home: Path, clone, patches, smtp: Inbox, out: Path):
    """The series sent by git send-email with the gate installed, from a checkout whose HEAD holds
    its commits ("head"), or not: its files made earlier, HEAD back on the base ("files"), or
    a revision range of another branch that git send-email formats itself ("range").
    (git send-email's result, the repository, its state before the send)."""
    repo, base = clone
    tip = on_branch(repo, base, patches, "ring")
    files = mails(repo, base, tip, out)
    if where != "head":
        git(repo, "update-ref", "refs/heads/master", base)
        git(repo, "symbolic-ref", "HEAD", "refs/heads/master")
    install(home, repo)
    before = RepoState.of(repo)
    sent = [f"{base}..ring"] if where == "range" else files    # no cover letter: its template is refused
    return send_email(home, repo, sent, smtp), repo, before


@pytest.mark.parametrize("where", ["head", "files", "range"])
def test_send_email_judges_each_patch_on_top_of_the_ones_before_it(home, clone, smtp, tmp_path, where):
    """git 2.39 validates one file at a time: patch 3's stop is judged with patch 2's wake applied
    under it, whether the commits are on HEAD or only the send's other files have them."""
    proc, repo, before = send_from(where, home, clone, STACKED, smtp, tmp_path / "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "queue-stop-unmatched" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert [re.sub(r"\].*", "]", s) for s in subjects(smtp)][-3:] == ["[PATCH 1/3]", "[PATCH 2/3]", "[PATCH 3/3]"]
    # patch 1's check judged the send's later files too; theirs gave its outcome back
    assert "1 patch checked on top of patches 1-2 of 3 from the send's files" in proc.stderr, proc.stderr
    assert RepoState.of(repo) == before and left_behind(repo) == []


@pytest.mark.parametrize("where", ["head", "files", "range"])
@pytest.mark.parametrize("patches,refused,finding", [
    (STOP_FIRST, "patch 2/3", UNMATCHED),      # the stop lands one patch before its wake
    (BAD, "patch 2/3", FINDING),               # the unlocked consume, on top of patch 1
])
def test_send_email_refuses_a_buggy_patch_with_or_without_its_commits_on_head(home, clone, smtp, tmp_path, where,
                                                                              patches, refused, finding):
    proc, repo, before = send_from(where, home, clone, patches, smtp, tmp_path / "out")
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert len(finding.findall(output)) == 1, output       # git send-email stops at the refused file
    assert "send refused" in output and refused in output and "no patches were sent" in output
    assert smtp.messages == []
    assert RepoState.of(repo) == before and left_behind(repo) == []


def alone(files: list[Path], index: int, out: Path) -> Path:
    """Patch `index`'s file copied into a directory of its own: the patches before it are nowhere."""
    out.mkdir()
    return Path(shutil.copy(files[index], out))


def test_a_patch_whose_earlier_patches_are_nowhere_is_judged_alone_and_says_what_does_not_block(home, clone, tmp_path):
    """Neither on HEAD nor beside it: patch 3's unmatched stop (patch 2's wake may match it) is a
    warning that says why, and the send goes ahead; patch 2 of the broken series is still refused
    for its own unlocked consume, which no earlier patch can lock."""
    repo, base = clone
    good = mails(repo, base, commit_series(repo, base, STACKED), tmp_path / "good")
    bad = mails(repo, base, commit_series(repo, base, BAD), tmp_path / "bad")
    proc = patchbench(home, repo, "hook", "sendemail-validate", str(alone(good, 3, tmp_path / "good-3")))
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    assert re.match(r"^drivers/net/tun\.c:\d+: warning: queue-stop-unmatched: netif_tx_stop_queue", line), line
    assert line.endswith("(checked without patches 1-2 of 3, which may resolve it: not blocking)")
    assert "patchbench: checked without patches 1-2 of 3 (not in HEAD's last 200 commits, not among the files " \
           "beside it): findings they may resolve do not block" in proc.stderr
    assert "nothing blocks the send (1 non-blocking finding above)" in proc.stderr
    proc = patchbench(home, repo, "hook", "sendemail-validate", str(alone(bad, 2, tmp_path / "bad-2")))
    assert proc.returncode == 1 and FINDING.search(proc.stdout) and "send refused" in proc.stderr
    # b4 am --check pipes each patch alone: the same verdict, in b4's words
    b4_good = patchbench(home, repo, "b4-check", stdin=good[3].read_text())
    assert b4_good.returncode == 0 and b4_good.stderr == ""
    (line,) = b4_good.stdout.splitlines()
    assert re.match(r"^drivers/net/tun\.c:\d+: WARNING: queue-stop-unmatched: .*: not blocking\)$", line), line
    git(repo, "config", "patchbench.presend.block", "warning")     # still not blocking
    assert patchbench(home, repo, "b4-check", stdin=good[3].read_text()).returncode == 0


def test_a_patch_alone_goes_on_top_of_heads_commits(home, clone, tmp_path):
    repo, base = clone
    files = mails(repo, base, on_branch(repo, base, STACKED, "ring"), tmp_path / "out")
    proc = patchbench(home, repo, "hook", "sendemail-validate", str(alone(files, 3, tmp_path / "3")))
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    assert "1 patch checked on top of patches 1-2 of 3 from HEAD's commits" in proc.stderr, proc.stderr


def test_the_earlier_patches_come_from_the_same_version_of_the_series(home, clone, tmp_path):
    """v1 and v2 files side by side: patch 3 of v2 goes on top of v2's patches 1 and 2 (on top of
    v1's, whose patch 2 made the same stop, it would not apply)."""
    repo, base = clone
    out = tmp_path / "out"
    format_patch(repo, base, commit_series(repo, base, STOP_FIRST), out, "-v1")
    v2 = format_patch(repo, base, commit_series(repo, base, STACKED), out, "-v2")
    proc = patchbench(home, repo, "hook", "sendemail-validate", str(v2[3]))
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    assert "1 patch checked on top of patches 1-2 of 3 from the send's files" in proc.stderr


def unappliable(repo: Path, base: str, out: Path) -> Path:
    """The tun patch as if made on another tree: one context line is nowhere in this one."""
    patch = mails(repo, base, commit_series(repo, base, GOOD[:1]), out)[1]
    text, changed = re.subn(r"^ static void \*tun_ring_recv\(", " static void *tun_ring_receive(", patch.read_text(),
                            flags=re.M)
    assert changed == 1
    patch.write_text(text)
    return patch


def test_a_patch_that_does_not_apply_is_reported_and_still_sent(home, clone, smtp, tmp_path):
    """Our failure (the local tree is not what the patch was made on) never stops a send by default."""
    repo, base = clone
    install(home, repo)
    proc = send_email(home, repo, [unappliable(repo, base, tmp_path / "out")], smtp)
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("patchbench:")]
    assert "does not apply" in line and "the send goes ahead" in line
    assert len(smtp.messages) == 1


def test_a_hook_that_was_there_keeps_running(home, clone, smtp, tmp_path):
    repo, base = clone
    tip = on_branch(repo, base, GOOD, "ring")
    hooks = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "hooks"
    theirs = hooks / "sendemail-validate"
    seen = tmp_path / "seen"
    # The user's own hook: logs every file and refuses a subject with "wake" in it.
    theirs.write_text(f"#!/bin/sh\ngrep '^Subject:' \"$1\" >> {seen}\n! grep -q '^Subject:.*wake' \"$1\"\n")
    theirs.chmod(0o755)
    original = theirs.read_bytes()
    assert "kept as" in install(home, repo).stdout
    files = mails(repo, base, tip, tmp_path / "out")
    proc = send_email(home, repo, files[:3], smtp)        # cover letter and patches 1 and 2
    assert proc.returncode == 0, proc.stderr
    assert len(seen.read_text().splitlines()) == 3 and len(smtp.messages) == 3
    proc = send_email(home, repo, files, smtp)            # patch 3 mentions "wake": their hook says no
    assert proc.returncode != 0 and "rejected by sendemail-validate hook" in proc.stderr
    assert len(smtp.messages) == 3
    proc = patchbench(home, repo, "hook", "uninstall", "--repo", str(repo))
    assert proc.returncode == 0 and "restored" in proc.stdout
    assert theirs.read_bytes() == original and os.access(theirs, os.X_OK)
    assert sorted(p.name for p in hooks.iterdir() if "sendemail" in p.name) == ["sendemail-validate"]


def test_install_twice_changes_nothing_and_honours_core_hookspath(home, clone):
    repo, _ = clone
    git(repo, "config", "core.hooksPath", "shared-hooks")
    hooks = repo / "shared-hooks"
    install(home, repo)
    hook = hooks / "sendemail-validate"
    first = (hook.read_bytes(), stat.S_IMODE(hook.stat().st_mode))
    assert "already installed" in install(home, repo).stdout
    assert (hook.read_bytes(), stat.S_IMODE(hook.stat().st_mode)) == first
    assert [p.name for p in hooks.iterdir()] == ["sendemail-validate"]
    assert not (Path(git(repo, "rev-parse", "--absolute-git-dir")) / "hooks" / "sendemail-validate").exists()
    # git itself runs it: `git hook run` is what git send-email calls.
    note = repo / "note.txt"
    note.write_text("not a patch\n")
    ran = subprocess.run(["git", "hook", "run", "sendemail-validate", "--", str(note)], cwd=repo,
                         capture_output=True, text=True, env=user_env(home))
    assert ran.returncode == 0 and "not checked" in ran.stderr
    assert patchbench(home, repo, "hook", "uninstall", "--repo", str(repo)).returncode == 0
    assert list(hooks.iterdir()) == []


def validate_counted(home: Path, repo: Path, files: list[Path], **env: str):
    """The hook on each file as git >= 2.41's send-email runs it, numbered; each run's result."""
    for counter, path in enumerate(files, 1):
        yield patchbench(home, repo, "hook", "sendemail-validate", str(path), GIT_SENDEMAIL_FILE_COUNTER=str(counter),
                         GIT_SENDEMAIL_FILE_TOTAL=str(len(files)), **env)


def test_collected_series_is_checked_once_at_its_last_file(home, clone, tmp_path):
    """git >= 2.41 numbers the files of a send: the hook keeps them and checks the series at the last."""
    repo, base = clone
    tip = on_branch(repo, base, BAD, "ring")
    files = mails(repo, base, tip, tmp_path / "out")
    gitdir = Path(git(repo, "rev-parse", "--absolute-git-dir"))
    for counter, proc in enumerate(validate_counted(home, repo, files, GIT_DIR=str(gitdir)), 1):
        if counter < len(files):
            assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
            assert len(list((gitdir / "patchbench" / "presend").glob("*/*.patch"))) == counter
    assert proc.returncode == 1
    assert len(FINDING.findall(proc.stdout)) == 1
    assert "send refused" in proc.stderr and "patch 2/3" in proc.stderr
    assert list((gitdir / "patchbench" / "presend").iterdir()) == []
    assert left_behind(repo) == []


def test_collected_clean_series_passes_on_its_base_commit(home, clone, tmp_path):
    repo, base = clone
    git(repo, "symbolic-ref", "HEAD", "refs/heads/elsewhere")   # HEAD unborn: the base must come from the mails
    files = mails(repo, base, commit_series(repo, base, GOOD), tmp_path / "out")
    *_, proc = validate_counted(home, repo, files)
    assert proc.returncode == 0, proc.stderr
    assert f"3 patches checked on {base[:12]} (base-commit: of the series)" in proc.stderr


def test_without_base_commit_a_patch_goes_onto_the_merge_base_with_its_target_branch(home, clone, tmp_path):
    """Mailed without --base, from a branch HEAD no longer is on: the tree named in the subject
    (a local net-next branch) gives the base, not HEAD (whose tun.c the patch no longer fits)."""
    repo, base = clone
    tip = commit_series(repo, base, GOOD[:1])
    out = tmp_path / "out"
    git(repo, "format-patch", "-q", "--subject-prefix=PATCH net-next", "-o", str(out), f"{base}..{tip}")
    (patch,) = out.iterdir()
    git(repo, "update-ref", "refs/heads/net-next", base)
    on_branch(repo, base, [(TUN, "tun: rename tun_ring_recv's err", [(
        "static void *tun_ring_recv(struct tun_file *tfile, int noblock, int *err)\n{",
        "static void *tun_ring_recv(struct tun_file *tfile, int noblock, int *error)\n{")])], "work")
    proc = patchbench(home, repo, "hook", "sendemail-validate", str(patch))
    assert proc.returncode == 0, proc.stderr
    assert f"1 patch checked on {base[:12]} (merge-base of HEAD and branch net-next)" in proc.stderr


def test_the_gate_removes_only_the_commits_it_made(home, clone, tmp_path):
    """A `patchbench apply` of the same series onto the same base keeps its ref; the gate's own goes."""
    repo, base = clone
    files = mails(repo, base, on_branch(repo, base, GOOD, "ring"), tmp_path / "out")
    applied = patchbench(home, repo, "apply", str(tmp_path / "out"), "--tree", str(repo))
    assert applied.returncode == 0, applied.stderr
    (ref,) = git(repo, "for-each-ref", "--format=%(refname)", "refs/patchbench/").split()
    *_, proc = validate_counted(home, repo, files)
    assert proc.returncode == 0 and "base-commit: of the series" in proc.stderr
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/patchbench/").split() == [ref]


# --- configuration ----------------------------------------------------------------------------------

def validate_bad_patch_with(home: Path, clone, tmp_path: Path, key: str, value: str):
    """The hook on patch 2 of the broken series under git config patchbench.presend.<key> = value."""
    repo, base = clone
    tip = on_branch(repo, base, BAD[:2], "ring")
    patch = mails(repo, base, tip, tmp_path / "out")[2]
    git(repo, "config", f"patchbench.presend.{key}", value)
    return repo, patchbench(home, repo, "hook", "sendemail-validate", str(patch))


@pytest.mark.parametrize("key,value,passes", [
    ("rules", "lock-imbalance rcu-deref-unprotected", True),   # the finding's rule is not selected
    ("rules", "ptr-ring-consume-unlocked", False),
    ("block", "none", True),
])
def test_git_config_selects_rules_and_blocking_severity(home, clone, tmp_path, key, value, passes):
    repo, proc = validate_bad_patch_with(home, clone, tmp_path, key, value)
    assert proc.returncode == (0 if passes else 1), proc.stderr
    shown = FINDING.search(proc.stdout)
    assert bool(shown) == (key == "block" or not passes)   # "none" still reports what it found


@pytest.mark.parametrize("key,value,says", [
    ("timeout", "0.01", "took longer than 0.01 s"),
    ("timeout", "soon", "not a number of seconds"),
    ("rules", "no-such-rule", "unknown rule(s): no-such-rule"),
    ("build", "maybe", "not a boolean"),
])
def test_a_configuration_we_cannot_follow_is_one_line_and_never_blocks(home, clone, tmp_path, key, value, says):
    repo, proc = validate_bad_patch_with(home, clone, tmp_path, key, value)
    assert proc.returncode == 0 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("patchbench: error: ") and says in line and "the send goes ahead" in line
    assert left_behind(repo) == []


def test_blocking_severity_decides_what_b4_sees_as_an_error():
    from patchbench.commands.b4_check import b4_line

    warning = "drivers/net/tun.c:12: warning: build(-Wunused-variable): unused variable 'x'"
    error = "drivers/net/tap.c:831: error: ptr-ring-consume-unlocked: __ptr_ring_consume(q->ring) without"
    by_default, warnings_too, never = (presend.Settings(block=b).blocks for b in ("error", "warning", "none"))
    assert b4_line(warning, by_default) == warning.replace(": warning:", ": WARNING:")
    assert b4_line(warning, warnings_too) == warning.replace(": warning:", ": ERROR:")
    assert b4_line(error, by_default) == error.replace(": error:", ": ERROR:")
    assert b4_line(error, never) == error.replace(": error:", ": WARNING:")    # reported, never failing


# --- bad input --------------------------------------------------------------------------------------

def _not_a_patch(repo: Path, base: str, tmp_path: Path) -> tuple[Path, Path]:
    note = tmp_path / "notes.txt"
    note.write_text("Subject: thoughts\n\njust some thoughts, no diff\n")
    return repo, note


def _not_a_kernel_tree(repo: Path, base: str, tmp_path: Path) -> tuple[Path, Path]:
    small = tmp_path / "small"
    git(tmp_path, "init", "-q", str(small))
    start = commit_files(small, None, {"README": b"small\n"}, "start")
    tip = commit_files(small, start, {"hello.c": b"int main(void) { return 0; }\n"}, "add hello",
                       ref="refs/heads/main")
    git(small, "symbolic-ref", "HEAD", "refs/heads/main")
    return small, format_patch(small, start, tip, tmp_path / "small-out")[1]


def _does_not_apply(repo: Path, base: str, tmp_path: Path) -> tuple[Path, Path]:
    return repo, unappliable(repo, base, tmp_path / "out")


def _outside_a_repository(repo: Path, base: str, tmp_path: Path) -> tuple[Path, Path]:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return elsewhere, mails(repo, base, commit_series(repo, base, GOOD[:1]), tmp_path / "out")[1]


STRICT = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "patchbench.presend.strict", "GIT_CONFIG_VALUE_0": "true"}


@pytest.mark.parametrize("make,says", [
    (_not_a_patch, "no patch found"),
    (_not_a_kernel_tree, "is not a Linux kernel tree"),
    (_does_not_apply, "patch 1 does not apply"),
    (_outside_a_repository, "is not a git repository"),
])
@pytest.mark.parametrize("strict", [False, True])
def test_our_own_failure_is_one_line_and_blocks_only_when_strict(home, clone, tmp_path, make, says, strict):
    repo, base = clone
    where, patch = make(repo, base, tmp_path)
    before = RepoState.of(where) if (where / ".git").exists() else None
    proc = patchbench(home, where, "hook", "sendemail-validate", str(patch), **(STRICT if strict else {}))
    (line,) = proc.stderr.splitlines()
    assert line.startswith("patchbench: error: ") and says in line, line
    assert proc.stdout == ""
    assert proc.returncode == (2 if strict else 0)
    assert ("send refused" in line) == strict and ("the send goes ahead" in line) == (not strict)
    if before is not None:
        assert RepoState.of(where) == before and left_behind(where) == []


def test_install_outside_a_repository_and_uninstall_of_a_foreign_hook_are_refused(home, clone, tmp_path):
    repo, _ = clone
    proc = patchbench(home, tmp_path, "hook", "install", "--repo", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("patchbench: error: ")
    theirs = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "hooks" / "sendemail-validate"
    theirs.write_text("#!/bin/sh\nexit 0\n")
    proc = patchbench(home, repo, "hook", "uninstall", "--repo", str(repo))
    assert proc.returncode == 2 and "not installed by patchbench" in proc.stderr
    assert theirs.read_text() == "#!/bin/sh\nexit 0\n"


# --- b4 ---------------------------------------------------------------------------------------------

def b4(home: Path, repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    # pip puts b4's script beside the Python that installed it, which need not be on PATH.
    found = shutil.which("b4", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if found is None:
        missing("b4 is not installed (pip install b4)")
    return subprocess.run([found, *args], cwd=repo, capture_output=True, text=True, env=user_env(home, **env),
                          timeout=600)


def test_b4_prep_check_shows_our_findings_per_patch_and_fails_the_bad_one(home, kernel_tree, tmp_path):
    repo = tmp_path / "linux"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
    git(repo, "sparse-checkout", "set", "--cone")          # b4 checks branches out: top-level files only
    git(repo, "checkout", "-q", "master")
    proc = b4(home, repo, "prep", "-n", "ring", "-f", TAG)
    assert proc.returncode == 0, proc.stderr
    tip = commit_series(repo, git(repo, "rev-parse", "HEAD"), BAD, dated_now=True)
    git(repo, "reset", "-q", "--hard", tip)
    # The README's .b4-config lines, with `patchbench` on PATH as an installed console script is.
    (repo / ".b4-config").write_text("[b4]\n    prep-perpatch-check-cmd = patchbench b4-check\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "patchbench").write_text(f"#!/bin/sh\nexec {sys.executable} -m patchbench \"$@\"\n")
    (bin_dir / "patchbench").chmod(0o755)
    proc = b4(home, repo, "prep", "--check", PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    output = proc.stdout + proc.stderr
    # b4 marks each patch with a dot: green for a pass, blinking red for a failure.
    verdicts = {re.sub(r"\x1b\[[0-9;]*m", "", line).split(": ", 1)[1]:
                "fail" if line.startswith("\x1b[31;5m") else "pass" if line.startswith("\x1b[32m") else line
                for line in output.splitlines() if re.match(r"^\S+ [0-9a-f]{12}: ", line)}
    assert verdicts == {"tun: add tun_ring_consume() and use it in tun_ring_recv()": "pass",
                        "tap: add tap_ring_consume() and use it in tap_do_read()": "fail",
                        "tun: wake the subqueue when consuming made room": "pass"}, output
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    assert re.search(r"[0-9a-f]{12}: tap: add tap_ring_consume\(\) and use it in tap_do_read\(\)\n"
                     r"\s+\S+ patchbench: drivers/net/tap\.c:\d+: ERROR: ptr-ring-consume-unlocked: ", plain), plain
    assert "Success: 2, Warning: 0, Error: 1" in plain


def test_b4_am_check_shows_our_verdict_on_each_patch_of_a_mailbox(home, clone, tmp_path):
    """am-perpatch-check-cmd: b4 am --check on a received series (each patch checked alone, onto
    the local tree: the first two apply there, the third needs the first)."""
    repo, base = clone
    files = mails(repo, base, commit_series(repo, base, BAD), tmp_path / "out")
    mbox = tmp_path / "series.mbox"
    mbox.write_text("".join(path.read_text() for path in files))
    git(repo, "config", "b4.am-perpatch-check-cmd", f"{sys.executable} -m patchbench b4-check")
    proc = b4(home, repo, "--offline-mode", "am", "--check", "-m", str(mbox), "-o", str(tmp_path / "am"))
    assert proc.returncode == 0, proc.stderr
    plain = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    verdicts = re.findall(r"^  \[PATCH (\d)/3\] .*\n    \S+ python[\d.]*: (.*)$", plain, re.M)
    assert [n for n, _ in verdicts] == ["1", "2", "3"], plain
    assert verdicts[0][1] == "passed all checks"
    assert re.match(r"drivers/net/tap\.c:\d+: ERROR: ptr-ring-consume-unlocked: ", verdicts[1][1])
    assert verdicts[2][1].startswith("patchbench: not checked: patch 3 does not apply")
    # b4's dots: green pass, blinking red failure, red warning (our own failure never fails a patch)
    marks = re.findall(r"^    (\x1b\[[0-9;]*m)\u25cf", proc.stdout + proc.stderr, re.M)
    assert marks == ["\x1b[32m", "\x1b[31;5m", "\x1b[31m"]


def test_b4_check_reads_one_patch_on_stdin_and_speaks_b4s_format(home, clone, tmp_path):
    repo, base = clone
    tip = on_branch(repo, base, BAD, "ring")
    files = mails(repo, base, tip, tmp_path / "out")
    bad = patchbench(home, repo, "b4-check", stdin=files[2].read_text())
    assert bad.returncode == 1 and bad.stderr == ""
    (line,) = bad.stdout.splitlines()
    assert re.match(r"^drivers/net/tap\.c:\d+: ERROR: ptr-ring-consume-unlocked: ", line)
    good = patchbench(home, repo, "b4-check", stdin=files[1].read_text())
    assert (good.returncode, good.stdout, good.stderr) == (0, "", "")          # b4: "passed all checks"
    garbage = patchbench(home, repo, "b4-check", stdin="hello\n")
    assert garbage.returncode == 0 and garbage.stderr == ""
    (line,) = garbage.stdout.splitlines()
    assert line.startswith("patchbench: not checked: ") and "ERROR:" not in line   # b4: a warning
    git(repo, "config", "patchbench.presend.strict", "true")
    strict = patchbench(home, repo, "b4-check", stdin="hello\n")
    assert strict.returncode == 2 and strict.stdout == ""
    assert strict.stderr.count("\n") == 1 and strict.stderr.startswith("patchbench: error: ")


# --- progress ---------------------------------------------------------------------------------------

def test_progress_is_shown_only_after_a_second():
    shown: list[str] = []
    quick = presend.Progress(shown.append)
    quick.step("applying 3 patches")
    quick.stop()
    time.sleep(presend.PROGRESS_AFTER + 0.3)
    assert shown == []
    slow = presend.Progress(shown.append)
    slow.step("applying 3 patches")
    time.sleep(presend.PROGRESS_AFTER + 0.3)
    slow.step("checking 3 patches")
    slow.stop()
    assert [re.sub(r"\(.*\)", "()", line) for line in shown] == [
        "patchbench: applying 3 patches ()", "patchbench: checking 3 patches ()"]


# --- the touched-object build -----------------------------------------------------------------------

@pytest.mark.slow
def test_build_on_the_gate_reports_a_new_compiler_warning_and_blocks_it_when_configured(home, kernel_tree, tmp_path):
    """patchbench.presend.build: each patch's touched objects compiled (W=1) before and after it."""
    from tests.conftest import require_tool
    from tests.support.kernel import CACHE
    from tests.support.planted import plant

    for tool in ("make", "gcc", "ccache", "bwrap", "flex", "bison", "bc"):
        require_tool(tool)
    # A clone at a fixed place per tree: its configured build directory (keyed by repository) serves
    # later runs; a new point release's tree gets its own (the clone borrows the tree's objects).
    repo = CACHE / f"presend-build-clone-{kernel_tree.name}"
    if not (repo / ".git" / "patchbench-ready").exists():
        shutil.rmtree(repo, ignore_errors=True)
        git(CACHE, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
        (repo / ".git" / "patchbench-ready").touch()
    base = git(repo, "rev-parse", TAG)
    head, commits = plant(repo, "warning-series", base)     # patch 1 adds an unused variable to tun.c
    git(repo, "update-ref", "refs/heads/warning", head)
    git(repo, "symbolic-ref", "HEAD", "refs/heads/warning")
    patch = format_patch(repo, base, commits[0], tmp_path / "out")[1]
    git(repo, "config", "patchbench.presend.build", "true")
    git(repo, "config", "patchbench.presend.timeout", "3600")   # the first run configures the build directory
    cache = {"PATCHBENCH_CACHE": str(Path.home() / ".cache" / "patchbench")}
    subprocess.run(["git", "-C", str(repo), "config", "--unset-all", "patchbench.presend.block"])
    shown = patchbench(home, repo, "hook", "sendemail-validate", str(patch), **cache)
    assert shown.returncode == 0, shown.stderr
    warning = re.compile(r"^drivers/net/tun\.c:\d+: warning: build\(-Wunused-variable\): .*open_count", re.M)
    assert warning.search(shown.stdout), shown.stdout + shown.stderr
    git(repo, "config", "patchbench.presend.block", "warning")
    refused = patchbench(home, repo, "hook", "sendemail-validate", str(patch), **cache)
    assert refused.returncode == 1 and warning.search(refused.stdout)
    assert "send refused" in refused.stderr and "git send-email --no-validate" in refused.stderr
    # b4 counts every stderr line as a failure: the build's progress must not reach it.
    b4_check = patchbench(home, repo, "b4-check", stdin=patch.read_text(), **cache)
    assert b4_check.returncode == 1 and b4_check.stderr == ""
    assert re.search(r"^drivers/net/tun\.c:\d+: ERROR: build\(-Wunused-variable\): .*open_count", b4_check.stdout, re.M)
