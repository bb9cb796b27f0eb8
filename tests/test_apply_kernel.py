"""Stage 3 on the real Linux 6.1 tree: a netdev-style series made with git format-patch --cover-letter --base.

The cached kernel repository is never written to: the series is made in one `clone --shared` of it and
applied in another (the "user's" repository, whose HEAD is on a branch of its own).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchbench.series import load_series
from patchbench.tree import apply_series
from tests.support import kernel
from tests.support.git_series import RepoState, commit_files, format_patch, git, hunk_in_mail, series_from_mails

pytestmark = pytest.mark.kernel
PROJECT = Path(__file__).resolve().parents[1]
TUN, TAP = "drivers/net/tun.c", "drivers/net/tap.c"


def edit(repo: Path, rev: str, path: str, old: str, new: str) -> bytes:
    content = git(repo, "show", f"{rev}:{path}") + "\n"
    assert content.count(old) == 1, f"{old!r} is not unique in {path}"
    return content.replace(old, new).encode()


def make_commits(repo: Path, base: str, edits: list[tuple[str, str, str, str]]) -> list[str]:
    """One commit per (path, old, new, subject) on top of `base`, each with a netdev-style message."""
    commits, parent = [], base
    for n, (path, old, new, subject) in enumerate(edits, 1):
        body = f"{subject}\n\nExplain change {n} for the reviewers.\n\nSigned-off-by: Ada Series <ada@example.org>"
        parent = commit_files(repo, parent, {path: edit(repo, parent, path, old, new)}, body,
                              date=f"2024-03-0{n}T09:30:00-05:00")
        commits.append(parent)
    return commits


SERIES = [
    (TUN, '#define DRV_VERSION\t"1.6"', '#define DRV_VERSION\t"1.7"', "tun: bump the driver version"),
    (TUN, "/* Net device open. */", "/* Net device open: start every tx queue. */", "tun: say what open does"),
    (TAP, 'MODULE_LICENSE("GPL");', 'MODULE_LICENSE("GPL");\nMODULE_DESCRIPTION("tap");', "tap: describe the module"),
]
# The conflicting series was written on a tree where tun_net_open already changed.
MOVED_ON = (TUN, "\tnetif_tx_start_all_queues(dev);\n\n\treturn 0;",
            "\tnetif_tx_start_all_queues(dev);\n\tnetif_carrier_on(dev);\n\n\treturn 0;", "tun: carrier on in open")
CONFLICTING = [
    (TAP, 'MODULE_LICENSE("GPL");', 'MODULE_LICENSE("GPL");\nMODULE_ALIAS("tap");', "tap: add an alias"),
    (TUN, "\tnetif_tx_start_all_queues(dev);\n\tnetif_carrier_on(dev);\n",
     "\tnetif_tx_start_all_queues(dev);\n\tnetif_carrier_on(dev);\n\tnetdev_info(dev, \"open\\n\");\n",
     "tun: log open"),
]


@pytest.fixture(scope="module")
def workspace(kernel_tree: Path, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("kernel-apply")
    author = root / "author"
    git(root, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(author))
    base = git(author, "rev-parse", kernel.TAG)
    commits = make_commits(author, base, SERIES)
    mails = format_patch(author, base, commits[-1], root / "series")
    moved = make_commits(author, base, [MOVED_ON])[0]
    conflicting = format_patch(author, moved, make_commits(author, moved, CONFLICTING)[-1], root / "conflicting")
    return {"root": root, "author": author, "base": base, "commits": commits, "mails": mails,
            "conflicting": conflicting}


@pytest.fixture
def user_repo(kernel_tree: Path, tmp_path: Path) -> Path:
    """A maintainer's repository: HEAD on a branch of its own, a real 78,000-entry index."""
    repo = tmp_path / "maintainer"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
    git(repo, "config", "user.name", "Maintainer Person")
    git(repo, "config", "user.email", "maint@example.org")
    work = commit_files(repo, "HEAD", {"drivers/net/dummy.c": b"/* not the real dummy */\n"}, "elsewhere",
                        ref="refs/heads/work")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/work")
    git(repo, "read-tree", work)
    return repo


def git_am_trees(workspace: dict) -> list[str]:
    """The trees `git am` makes from the same mails, in a sparse worktree of the series' base."""
    worktree = workspace["root"] / "am"
    if not worktree.exists():
        author = workspace["author"]
        git(author, "worktree", "add", "-q", "--no-checkout", "--detach", str(worktree), workspace["base"])
        git(worktree, "sparse-checkout", "set", "drivers/net")
        git(worktree, "read-tree", "-mu", "HEAD")
        git(worktree, "am", "-q", *[str(m) for m in workspace["mails"][1:]])
    return git(worktree, "log", "--reverse", "--format=%T", f"{workspace['base']}..HEAD").split()


def test_series_lands_on_its_base_commit_with_the_trees_git_am_makes(workspace, user_repo):
    before = RepoState.of(user_repo)
    result = apply_series(load_series(str(workspace["root"] / "series")), user_repo)
    assert result.base == workspace["base"] != git(user_repo, "rev-parse", "HEAD")
    assert result.base_reason == "base-commit: from the series"
    assert result.failed is None
    trees = [git(user_repo, "rev-parse", p.commit + "^{tree}") for p in result.applied]
    assert trees == git_am_trees(workspace)
    assert trees == [git(workspace["author"], "rev-parse", c + "^{tree}") for c in workspace["commits"]]
    assert git(user_repo, "log", "--format=%s", f"{result.base}..{result.ref}").splitlines() == \
        [subject for *_, subject in reversed(SERIES)]
    assert RepoState.of(user_repo) == before


def test_conflicting_series_names_the_patch_and_file_and_keeps_what_applied(workspace, user_repo):
    before = RepoState.of(user_repo)
    result = apply_series(series_from_mails(workspace["conflicting"]), user_repo)
    assert result.warnings and "is not in this repository" in result.warnings[0]
    assert result.base == git(user_repo, "rev-parse", "HEAD")
    assert [p.index for p in result.applied] == [1]
    assert (result.failed.index, result.failed.file) == (2, TUN)
    # the hunk of tun.c that meets the tree without the line it adds to (wherever tun.c puts it)
    hunk, _ = hunk_in_mail(Path(workspace["conflicting"][2]).read_bytes(), TUN, "\tnetdev_info(dev, \"open\\n\");")
    assert result.failed.hunk and result.failed.hunk.startswith(hunk.split(" +")[0])
    assert "patch does not apply" in result.failed.reason
    assert git(user_repo, "rev-parse", result.ref) == result.applied[0].commit
    assert RepoState.of(user_repo) == before


# Stands in front of git on PATH: the second `git apply` (patch 2 of 3, patch 1 already committed)
# says so in a file and blocks until the test's signal arrives, so the signal always lands mid-apply.
BLOCKING_GIT = """#!/bin/sh
if [ "$1" = apply ]; then
    echo x >> "$BLOCK_COUNT"
    if [ "$(wc -l < "$BLOCK_COUNT")" -eq 2 ]; then
        : > "$BLOCK_READY"
        exec sleep 300
    fi
fi
exec {git} "$@"
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_mid_apply_leaves_the_users_repository_as_it_was(workspace, user_repo, tmp_path, signum):
    before = RepoState.of(user_repo)
    scratch, wrapper = tmp_path / "tmp", tmp_path / "bin"
    scratch.mkdir()
    wrapper.mkdir()
    (wrapper / "git").write_text(BLOCKING_GIT.format(git=shutil.which("git")))
    (wrapper / "git").chmod(0o755)
    ready, count = tmp_path / "blocked", tmp_path / "applies"
    env = {**os.environ, "TMPDIR": str(scratch), "PATH": f"{wrapper}:{os.environ['PATH']}",
           "BLOCK_READY": str(ready), "BLOCK_COUNT": str(count)}
    proc = subprocess.Popen([sys.executable, "-m", "patchbench", "apply", str(workspace["root"] / "series"),
                             "--tree", str(user_repo)], cwd=PROJECT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ready.exists(), f"apply never reached patch 2: {proc.poll()} {proc.stderr.read() if proc.poll() else ''}"
    assert any(scratch.iterdir())            # its scratch index and work tree exist right now
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.decode().strip() == "patchbench: error: interrupted"
    assert list(scratch.iterdir()) == []
    assert RepoState.of(user_repo) == before


def test_cli_json_shape(workspace, user_repo):
    proc = subprocess.run([sys.executable, "-m", "patchbench", "apply", str(workspace["root"] / "series"),
                           "--tree", str(user_repo), "--json"], cwd=PROJECT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["base"] == workspace["base"] and result["failed"] is None
    assert [p["index"] for p in result["applied"]] == [1, 2, 3]
    assert result["head"] == result["applied"][-1]["commit"] == git(user_repo, "rev-parse", result["ref"])


def test_two_cli_runs_on_the_same_tree_at_once(workspace, user_repo):
    """Two processes, two series, one repository: each gets its own result and ref, the user's state stays."""
    before = RepoState.of(user_repo)
    conflicting = workspace["root"] / "conflicting"
    runs = [subprocess.Popen([sys.executable, "-m", "patchbench", "apply", str(source), "--tree", str(user_repo),
                              "--json"], cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for source in (workspace["root"] / "series", conflicting, workspace["root"] / "series")]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 1, 0], [err for _, err in outputs]
    first, failed, again = (json.loads(out) for out, _ in outputs)
    assert first["head"] == again["head"] == git(user_repo, "rev-parse", first["ref"])
    assert failed["failed"]["index"] == 2 and failed["ref"] != first["ref"]
    assert git(user_repo, "rev-parse", failed["ref"]) == failed["applied"][0]["commit"]
    assert RepoState.of(user_repo) == before
