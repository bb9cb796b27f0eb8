"""b4's own apply cases: clone its bundle, apply its mbox, and compare with b4's expected `git log`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.git_series import RepoState, git

# (mbox, expected log, extra options, git log format b4's test used for that oracle)
CASES = [
    ("shazam-git1-just-series.mbox", "shazam-git1-just-series-defaults.verify", [], "%ae%n%ce%n%s%n%b---"),
    ("shazam-git1-just-series.mbox", "shazam-git1-just-series-addlink.verify", ["--add-link"], "%ae%n%ce%n%s%n%b---"),
    # The patches already carry that Link: it must not be doubled.
    ("shazam-git1-with-link.mbox", "shazam-git1-just-series-addlink.verify", ["--add-link"], "%ae%n%ce%n%s%n%b---"),
    ("trailers-thread-with-followups.mbox", "trailers-thread-with-followups.verify", ["--signoff"], "%ae%n%s%n%b---"),
    ("trailers-thread-with-cover-followup.mbox", "trailers-thread-with-cover-followup.verify", ["--signoff"],
     "%ae%n%s%n%b---"),
]


@pytest.fixture
def b4_repo(corpus: Path, tmp_path: Path) -> Path:
    repo = tmp_path / "gitdir"
    subprocess.run(["git", "clone", "-q", str(corpus / "b4" / "samples" / "gitdir.bundle"), str(repo)], check=True)
    git(repo, "config", "user.name", "Test Override")
    git(repo, "config", "user.email", "test-override@example.com")
    return repo


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchbench", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])


@pytest.mark.parametrize("mbox,verify,options,log_format", CASES)
def test_b4_series_applies_exactly_as_b4_expects(b4_repo, corpus, mbox, verify, options, log_format):
    samples = corpus / "b4" / "samples"
    before = RepoState.of(b4_repo)
    proc = _cli("apply", str(samples / mbox), "--tree", str(b4_repo), "--json", *options)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    # The series names its base-commit: the bundle's master, which HEAD also is.
    assert result["base"] == git(b4_repo, "rev-parse", "master")
    assert result["base_reason"].startswith("base-commit:")
    assert [p["index"] for p in result["applied"]] == [1, 2, 3, 4]
    assert result["failed"] is None
    assert git(b4_repo, "rev-parse", result["ref"]) == result["head"]
    log = git(b4_repo, "log", f"--format={log_format}", "-4", result["head"])
    assert log + "\n" == (samples / verify).read_text()
    assert RepoState.of(b4_repo) == before


def test_b4_series_onto_a_base_without_its_files_fails_on_the_first_patch(b4_repo, corpus):
    first = git(b4_repo, "rev-list", "--max-parents=0", "master")
    proc = _cli("apply", str(corpus / "b4" / "samples" / "shazam-git1-just-series.mbox"), "--tree", str(b4_repo),
                "--base", first, "--json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["applied"] == [] and result["head"] == result["base"] == first
    assert result["failed"]["index"] == 1
    assert result["failed"]["file"] == "file2.txt"
    assert "file2.txt" in result["failed"]["reason"]
    assert git(b4_repo, "for-each-ref", "refs/patchbench/") == ""


def test_text_output_says_which_base_and_why_and_lists_each_commit(b4_repo, corpus):
    proc = _cli("apply", str(corpus / "b4" / "samples" / "shazam-git1-just-series.mbox"), "--tree", str(b4_repo))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    master = git(b4_repo, "rev-parse", "master")
    assert lines[0] == f"base {master} (base-commit: from the series)"
    head = git(b4_repo, "for-each-ref", "--format=%(objectname)", "refs/patchbench/")
    assert lines[4].startswith(f"[4/4] {head[:12]} Minor typo changes imitation")
    assert lines[5].startswith("applied series: refs/patchbench/20221025-test1-v1-0-e4f28f57990c@linuxfoundation.org/")
