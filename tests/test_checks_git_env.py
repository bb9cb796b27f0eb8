"""`check` run from a git hook: GIT_DIR, GIT_WORK_TREE and GIT_INDEX_FILE name the hook's repository,
not the tree being checked. Every git call goes through one runner that clears them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from patchbench.cli import main
from tests.support import kernel
from tests.support.git_series import commit_files, git
from tests.support.ring_series import TAP, TAP_HELPER_NO_LOCK, TUN_HELPER, WAKE_PATCH, make_series, tap_patch, tun_patch


def _state(repo: Path) -> str:
    """A digest of everything under the repository's .git: its refs, index, objects and logs."""
    digest = hashlib.sha1()
    for path in sorted((repo / ".git").rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(repo)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.mark.kernel
def test_check_from_a_hook_environment_reads_the_checked_tree(kernel_tree: Path, tmp_path, monkeypatch, capsys):
    repo = tmp_path / "linux"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
    base = git(repo, "rev-parse", kernel.TAG)
    series = make_series(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK), WAKE_PATCH],
                         tmp_path / "series")
    hook = tmp_path / "hook"
    hook.mkdir()
    git(hook, "init", "-q")
    head = commit_files(hook, None, {TAP: b"int not_the_kernel;\n"}, "the hook's own repository")
    git(hook, "update-ref", "HEAD", head)
    git(hook, "read-tree", "HEAD")
    before = _state(hook)

    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GIT_DIR", str(hook / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(hook))
    monkeypatch.setenv("GIT_INDEX_FILE", str(hook / ".git" / "index"))
    code = main(["check", str(series), "--tree", str(repo), "--format", "json", "--checks", "rules"])
    report = json.loads(capsys.readouterr().out)

    assert code == 1
    assert [(f["rule"], f["file"], f["function"], f["patch"]) for f in report["findings"]] == [
        ("ptr-ring-consume-unlocked", TAP, "tap_ring_consume", 2)]
    assert report["base"] == base
    assert _state(hook) == before   # nothing written into the hook's repository
