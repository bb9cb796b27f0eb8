"""Thread shapes where reading a series used to lose patches or trailers (issue 9): a part resent in its
thread, a same-version RESEND, trailers carried across versions by patch-id, wrapped trailer lines,
reviewers writing from related addresses, and a bare diff. bench/b4_agreement.py runs b4 on the same
mailboxes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from patchbench.errors import BadInput
from patchbench.mail import read_mails
from patchbench.mail.content import reply_trailers, same_person_address, split_patch
from patchbench.mail.patchid import patch_id
from patchbench.series import load_series
from tests.support.git_series import RepoState, git
from tests.support.thread_cases import ACKED, REVIEWED, cases, diff

ROOT = Path(__file__).resolve().parents[1]
CASES = {case.name: case for case in cases()}
READABLE = [case for case in cases() if not case.error]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchbench", *args], capture_output=True, text=True, cwd=ROOT)


def _written(case, tmp_path: Path) -> Path:
    path = tmp_path / f"{case.name}.mbox"
    path.write_bytes(case.mbox())
    return path


@pytest.mark.parametrize("case", READABLE, ids=[case.name for case in READABLE])
def test_series_keeps_every_patch_and_every_trailer(case, tmp_path):
    series = load_series(str(_written(case, tmp_path)))
    assert [p.message_id for p in series.patches] == case.message_ids, case.expected
    assert series.missing == [] and series.total == 3
    assert series.cover is not None
    reviews = {p.index: [t for t in p.trailers if not t.startswith("Signed-off-by")] for p in series.patches}
    assert reviews == case.trailers, case.expected


def test_a_part_resent_in_its_thread_replaces_the_first_copy_and_keeps_its_review(tmp_path):
    case = CASES["resend-of-2-of-3-in-the-thread"]
    series = load_series(str(_written(case, tmp_path)))
    second = series.patches[1]
    assert "r->mask + 0" in second.diff          # the newer copy's diff is the one applied
    assert series.cover.message_id == "dup-0@example.org"
    assert second.carried_trailers == []          # same thread, same version: nothing to carry
    assert second.older_copies == ["dup-2@example.org"]
    assert [p.older_copies for p in (series.patches[0], series.patches[2])] == [[], []]
    text = _cli("series", str(_written(case, tmp_path))).stdout
    assert "note: sent 2 times in the thread; the newest copy is used" in text


def test_carried_trailers_are_said_in_json_and_text(tmp_path):
    path = _written(CASES["trailers-carried-when-patch-id-unchanged"], tmp_path)
    proc = _cli("series", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    first, second, _ = json.loads(proc.stdout)["patches"]
    assert first["carried_trailers"] == [{"trailer": REVIEWED, "from_version": 1, "from_message_id": "old-1@example.org",
                                          "reason": "patch-id unchanged"}]
    assert second["carried_trailers"] == [] and REVIEWED not in second["trailers"]
    assert first["patch_id"] == patch_id(diff(1, line=99))
    text = _cli("series", str(path)).stdout
    assert "note: Reviewed-by carried from v1 (patch-id unchanged)" in text


def test_a_resend_says_the_trailers_came_from_its_first_posting(tmp_path):
    series = load_series(str(_written(CASES["same-version-resend"], tmp_path)))
    first = series.patches[0]
    assert series.subject_prefix == "PATCH RESEND"
    assert {(c.trailer, c.from_version, c.reason) for c in first.carried_trailers} == {
        (REVIEWED, 2, "its first posting, patch-id unchanged"), (ACKED, 2, "its first posting, patch-id unchanged")}


def test_asking_for_the_older_version_takes_nothing_from_the_newer(tmp_path):
    series = load_series(str(_written(CASES["trailers-carried-when-patch-id-unchanged"], tmp_path)), version=1)
    assert all(p.carried_trailers == [] for p in series.patches)


def test_a_bare_diff_is_refused_before_anything_is_applied(tmp_path):
    case = CASES["bare-git-diff"]
    path = _written(case, tmp_path)
    with pytest.raises(BadInput, match="has no author"):
        load_series(str(path))
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("x\n")
    git(repo, "add", "README")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@example.org", "commit", "-qm", "init")
    before = RepoState.of(repo)
    proc = _cli("apply", str(path), "--tree", str(repo))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("patchbench: error: patch 1 (message 1) has no")
    assert RepoState.of(repo) == before


@pytest.mark.parametrize("given,sender,same", [
    ("bob@example.com", "BOB@example.com", True),
    ("bob@example.com", "bob+netdev@example.com", True),
    ("bob+a@example.com", "bob+b@example.com", True),
    ("jo@intel.com", "jo@linux.intel.com", True),
    ("jo@intel.com", "jo@a.b.intel.com", False),       # two levels apart: b4 does not take it either
    ("jo@intel.com", "jo@notintel.com", False),
    ("jo@intel.com", "joe@linux.intel.com", False),
])
def test_related_addresses_as_b4_judges_them(given, sender, same):
    assert same_person_address(given, sender) is same


def test_wrapped_trailers_in_a_reply_are_joined():
    text = ("> quoted\n\nReviewed-by: Bob Reviewer\n<bob@example.com>\n"
            'Fixes: 0123456789ab ("ringbuf: add a toy\n ring buffer")\n')
    assert reply_trailers(text, "bob@example.com") == [
        REVIEWED, 'Fixes: 0123456789ab ("ringbuf: add a toy ring buffer")']
    # a name on its own line followed by prose is not a trailer address
    assert reply_trailers("Reviewed-by: Bob Reviewer\nThanks!\n", "bob@example.com") == []


def _git_patch_id(text: str) -> str | None:
    out = subprocess.run(["git", "patch-id", "--stable"], input=text.encode("utf-8", "surrogateescape"),
                         capture_output=True, check=True).stdout.split()
    return out[0].decode() if out else None


def test_patch_id_is_gits_stable_patch_id():
    two_files = diff(1) + diff(2, " + 3")
    swapped = diff(2, " + 3") + diff(1)
    for text in (diff(1), diff(1, line=400), two_files, swapped):
        assert patch_id(text) == _git_patch_id(text)
    assert patch_id(diff(1)) == patch_id(diff(1, line=400))      # moved: same id
    assert patch_id(two_files) == patch_id(swapped)               # --stable: file order does not matter
    assert patch_id(diff(1)) != patch_id(diff(1, " + 1"))
    assert patch_id("no diff here\n") is None


def test_patch_id_agrees_with_git_on_the_corpus(corpus):
    checked = 0
    for path in sorted(corpus.rglob("*")):
        if path.suffix not in (".mbox", ".patch", ".eml") or "fuzz" in path.parts:
            continue
        try:
            mails = list(read_mails(str(path)))
        except BadInput:
            continue
        for mail in mails:
            text = split_patch(mail.text).diff
            if text:
                assert patch_id(text) == _git_patch_id(text), f"{path}: {mail.subject}"
                checked += 1
    assert checked > 100
