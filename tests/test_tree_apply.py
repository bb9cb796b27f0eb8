"""Stage 3 on small real repositories: base choice, commits, 3-way fallback, failures, safety, isolation."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import pytest

from patchbench.errors import BadInput
from patchbench.series import Patch, Series
from patchbench.tree import apply_series
from tests.support.git_series import RepoState, commit_files, format_patch, git, series_from_mails

LINES = [f"line {n}\n" for n in range(1, 31)]


def text(changes: dict[int, str] | None = None) -> bytes:
    lines = list(LINES)
    for number, value in (changes or {}).items():
        lines[number - 1] = value + "\n"
    return "".join(lines).encode()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "user"
    git(tmp_path, "init", "-q", "-b", "master", str(repo))
    git(repo, "config", "user.name", "Maintainer Person")
    git(repo, "config", "user.email", "maint@example.org")
    commit_files(repo, None, {"file.txt": text(), "dir/other.c": b"int x;\n"}, "base", ref="refs/heads/master")
    return repo


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch) -> Path:
    """apply's scratch directory goes here, so a test can see that nothing is left behind."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


def make_series(repo: Path, base: str, commits: list[tuple[dict, str]], out: Path) -> tuple[Series, list[str]]:
    """Commit each (changes, message) on top of `base` and mail them with format-patch --base."""
    tips, parent = [], base
    for changes, message in commits:
        parent = commit_files(repo, parent, changes, message, date=f"2024-03-0{len(tips) + 1}T10:00:00+01:00")
        tips.append(parent)
    series = series_from_mails(format_patch(repo, base, parent, out))
    return series, tips


def hand_patch(index: int, diff: str, subject: str = "hand-made patch") -> Patch:
    return Patch(index=index, subject=subject, message_id=f"hand-{index}@example.org", author="Hand Maker <h@example.org>",
                 date=datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc), body="Body.\n", diff=diff)


def hand_series(*diffs: str, base_commit: str | None = None) -> Series:
    patches = [hand_patch(n, diff) for n, diff in enumerate(diffs, 1)]
    return Series(version=1, total=len(patches), tree=None, subject_prefix="PATCH", cover=None, patches=patches,
                  base_commit=base_commit)


def loose_objects(repo: Path) -> str:
    return git(repo, "count-objects")


# --- commits -------------------------------------------------------------------------------------------

def test_each_patch_becomes_a_commit_with_the_mails_author_date_and_trailers(repo, tmp_path, private_tmp):
    base = git(repo, "rev-parse", "master")
    series, tips = make_series(repo, base, [
        ({"file.txt": text({3: "three"})}, "file: change line 3\n\nWhy it matters.\n\nSigned-off-by: Ada <ada@example.org>"),
        ({"dir/other.c": None, "dir/new.c": b"int y;\n"}, "dir: replace other.c\n\nSigned-off-by: Ada <ada@example.org>"),
    ], tmp_path / "mails")
    series.patches[0].trailers.append("Reviewed-by: Rae Viewer <rae@example.org>")
    result = apply_series(series, repo)

    assert result.base == base and result.base_reason == "base-commit: from the series"
    assert result.failed is None
    assert [p.index for p in result.applied] == [1, 2]
    assert [git(repo, "rev-parse", p.commit + "^{tree}") for p in result.applied] == \
           [git(repo, "rev-parse", tip + "^{tree}") for tip in tips]
    assert result.applied[1].parent == result.applied[0].commit and result.head == result.applied[1].commit
    assert result.applied[1].files == ["dir/new.c", "dir/other.c"]
    assert git(repo, "rev-parse", result.ref) == result.head and result.ref.startswith("refs/patchbench/")
    first = result.applied[0].commit
    assert git(repo, "log", "-1", "--format=%an <%ae>|%ad|%cn <%ce>", "--date=iso-strict", first) == \
        "Ada Series <ada@example.org>|2024-03-01T10:00:00+01:00|Maintainer Person <maint@example.org>"
    assert git(repo, "log", "-1", "--format=%B", first) == (
        "file: change line 3\n\nWhy it matters.\n\nSigned-off-by: Ada <ada@example.org>\n"
        "Reviewed-by: Rae Viewer <rae@example.org>")
    assert list(private_tmp.iterdir()) == []


def test_renames_modes_symlinks_binaries_and_emptied_directories_give_gits_own_trees(repo, tmp_path):
    base = git(repo, "rev-parse", "master")
    series, tips = make_series(repo, base, [
        ({"dir/other.c": None, "moved/deep/other.c": b"int x;\n"}, "move other.c, emptying dir/"),
        ({"run.sh": ("100755", b"#!/bin/sh\necho hi\n"), "latest": ("120000", b"moved/deep/other.c")},
         "add a script and a symlink"),
        ({"blob.bin": bytes(range(256)) * 4, "file.txt": None, "file.txt/now-a-dir": b"d\n"},
         "binary, and a file that becomes a directory"),
        ({"run.sh": ("100644", b"#!/bin/sh\necho hi\n"), "blob.bin": bytes(range(255, -1, -1)) * 4},
         "mode change and binary change"),
    ], tmp_path / "mails")
    assert "rename from dir/other.c" in series.patches[0].diff and "GIT binary patch" in series.patches[2].diff
    result = apply_series(series, repo)
    assert result.failed is None
    assert [git(repo, "rev-parse", p.commit + "^{tree}") for p in result.applied] == \
           [git(repo, "rev-parse", tip + "^{tree}") for tip in tips]
    assert "dir" not in git(repo, "ls-tree", "--name-only", result.applied[0].commit).split()


def test_signoff_goes_last_and_collected_trailers_go_above_an_existing_applier_signoff(repo, tmp_path):
    base = git(repo, "rev-parse", "master")
    series, _ = make_series(repo, base, [
        ({"file.txt": text({1: "one"})}, "a\n\nSigned-off-by: Ada <ada@example.org>"),
        ({"file.txt": text({1: "one", 2: "two"})},
         "b\n\nSigned-off-by: Ada <ada@example.org>\nSigned-off-by: Maintainer Person <maint@example.org>"),
    ], tmp_path / "mails")
    for patch in series.patches:
        patch.trailers += ["Acked-by: Ack Er <ack@example.org>", "Signed-off-by: Ada <ada@example.org>"]
    result = apply_series(series, repo, signoff=True)
    messages = [git(repo, "log", "-1", "--format=%b", p.commit) for p in result.applied]
    assert messages == [
        "Signed-off-by: Ada <ada@example.org>\nAcked-by: Ack Er <ack@example.org>\n"
        "Signed-off-by: Maintainer Person <maint@example.org>",
        "Signed-off-by: Ada <ada@example.org>\nAcked-by: Ack Er <ack@example.org>\n"
        "Signed-off-by: Maintainer Person <maint@example.org>",
    ]


def test_the_same_series_on_the_same_base_gives_the_same_commits(repo, tmp_path):
    base = git(repo, "rev-parse", "master")
    series, _ = make_series(repo, base, [({"file.txt": text({4: "four"})}, "four")], tmp_path / "mails")
    assert apply_series(series, repo).head == apply_series(series, repo).head


def test_subjects_and_names_from_mail_never_reach_a_shell(repo, tmp_path):
    canary = tmp_path / "pwned"
    evil = f"$(touch {canary}); `touch {canary}` | touch {canary}"
    diff = git(repo, "diff", "master", commit_files(repo, "master", {"file.txt": text({5: "five"})}, "x"))
    series = hand_series(diff + "\n", base_commit=git(repo, "rev-parse", "master"))
    series.patches[0].subject = evil
    series.patches[0].author = f"{evil} <evil@example.org>"
    result = apply_series(series, repo)
    assert git(repo, "log", "-1", "--format=%s", result.head) == evil
    assert not canary.exists()


# --- base ----------------------------------------------------------------------------------------------

def test_base_order_is_flag_then_base_commit_then_tree_branch_then_head(repo, tmp_path):
    master = git(repo, "rev-parse", "master")
    side = commit_files(repo, master, {"side.txt": b"side\n"}, "side", ref="refs/heads/side")
    series, _ = make_series(repo, master, [({"file.txt": text({7: "seven"})}, "seven")], tmp_path / "mails")

    assert apply_series(series, repo, base="side").base == side

    git(repo, "symbolic-ref", "HEAD", "refs/heads/side")
    chosen = apply_series(series, repo)
    assert (chosen.base, chosen.warnings) == (master, [])

    series.base_commit = "1234567890abcdef1234567890abcdef12345678"
    series.tree = "net-next"
    at_head = apply_series(series, repo)
    assert at_head.base == side and at_head.base_reason.startswith("HEAD")
    assert at_head.warnings == ["base-commit: 1234567890abcdef1234567890abcdef12345678 is not in this repository"]

    series.base_commit = "master"  # a ref, not an id: a mail may not pick the user's branches
    assert apply_series(series, repo).warnings == ["base-commit: 'master' is not a commit id; ignored"]

    remote = commit_files(repo, master, {"r.txt": b"r\n"}, "remote", ref="refs/remotes/origin/net-next")
    assert apply_series(series, repo).base == remote
    local = commit_files(repo, master, {"l.txt": b"l\n"}, "local", ref="refs/heads/net-next")
    by_branch = apply_series(series, repo)
    assert by_branch.base == local and "net-next" in by_branch.base_reason
    git(repo, "config", "patchbench.net-next.base", "master")
    configured = apply_series(series, repo)
    assert configured.base == master and "patchbench.net-next.base" in configured.base_reason


def test_a_base_that_is_not_a_commit_is_bad_input(repo, tmp_path):
    series, _ = make_series(repo, git(repo, "rev-parse", "master"), [({"file.txt": text({7: "7"})}, "7")],
                            tmp_path / "mails")
    with pytest.raises(BadInput, match="--base 'no-such-branch' is not a commit"):
        apply_series(series, repo, base="no-such-branch")
    with pytest.raises(BadInput, match="is not a git repository"):
        apply_series(series, tmp_path / "mails")


def test_missing_prerequisite_patch_is_named(repo, tmp_path):
    master = git(repo, "rev-parse", "master")
    prereq = commit_files(repo, master, {"file.txt": text({10: "ten"})}, "prerequisite", ref="refs/heads/topic")
    prereq_id = git(repo, "patch-id", "--stable", input=git(repo, "show", prereq).encode() + b"\n").split()[0]
    series, _ = make_series(repo, prereq, [({"file.txt": text({10: "ten", 20: "twenty"})}, "needs ten")],
                            tmp_path / "mails")
    series.prerequisite_patch_ids = [prereq_id, "f" * 40]
    result = apply_series(series, repo)
    assert result.missing_prerequisites == ["f" * 40]
    assert result.warnings == [f"prerequisite-patch-id: {'f' * 40} is not in the history of the base"]
    assert apply_series(series, repo, base="master").missing_prerequisites == [prereq_id, "f" * 40]


# --- failures and 3-way --------------------------------------------------------------------------------

def test_a_patch_that_does_not_apply_names_index_file_hunk_and_keeps_what_applied(repo, tmp_path, private_tmp):
    master = git(repo, "rev-parse", "master")
    series, _ = make_series(repo, master, [
        ({"dir/other.c": b"int x = 1;\n"}, "first"),
        ({"file.txt": text({2: "two", 25: "twenty-five"})}, "second"),
    ], tmp_path / "mails")
    # The user's tree moved on in both places the second patch touches, and lost the preimage blob's
    # history for the merge: a 3-way merge cannot help either.
    moved = commit_files(repo, master, {"file.txt": text({2: "TWO", 25: "TWENTY-FIVE"})}, "moved on")
    before = RepoState.of(repo)
    result = apply_series(series, repo, base=moved)
    assert [p.index for p in result.applied] == [1]
    assert result.failed.index == 2 and result.failed.file == "file.txt"
    assert result.failed.hunk == "@@ -1,5 +1,5 @@"
    assert "patch does not apply" in result.failed.reason and "3-way merge left conflicts in file.txt" in result.failed.reason
    assert result.head == result.applied[0].commit == git(repo, "rev-parse", result.ref)
    assert RepoState.of(repo) == before
    assert list(private_tmp.iterdir()) == []


def test_three_way_merge_when_the_preimage_blob_is_known(repo, tmp_path):
    master = git(repo, "rev-parse", "master")
    series, _ = make_series(repo, master, [({"file.txt": text({12: "twelve"})}, "change twelve")], tmp_path / "mails")
    # Line 10 moved on in the target: inside the patch's context, so a plain apply fails, but a merge is clean.
    moved = commit_files(repo, master, {"file.txt": text({9: "NINE"})}, "nine")
    result = apply_series(series, repo, base=moved)
    assert result.failed is None and result.applied[0].three_way
    assert git(repo, "show", f"{result.head}:file.txt").encode() + b"\n" == text({9: "NINE", 12: "twelve"})

    unknown = hand_series(series.patches[0].diff.replace(series.patches[0].diff.split("index ")[1][:7], "abcdef0"))
    plain = apply_series(unknown, repo, base=moved)
    assert plain.failed.index == 1 and plain.failed.file == "file.txt" and plain.failed.hunk == "@@ -9,7 +9,7 @@"


def test_an_incomplete_series_is_applied_with_a_warning(repo, tmp_path):
    master = git(repo, "rev-parse", "master")
    series, _ = make_series(repo, master, [({"file.txt": text({6: "six"})}, "six")], tmp_path / "mails")
    series.total, series.missing = 3, [2, 3]
    result = apply_series(series, repo)
    assert result.failed is None and len(result.applied) == 1
    assert result.warnings == ["the series is incomplete: 2/3, 3/3 missing; applying the patches that are there"]


def test_a_patch_without_a_diff_is_reported_not_committed(repo):
    result = apply_series(hand_series(""), repo)
    assert result.applied == [] and result.failed.index == 1 and "no diff" in result.failed.reason
    assert result.ref is None


def test_a_repository_git_cannot_read_is_bad_input_not_a_traceback(repo):
    tree = git(repo, "rev-parse", "master^{tree}")
    (repo / ".git" / "objects" / tree[:2] / tree[2:]).unlink()  # a corrupt object store
    with pytest.raises(BadInput, match="git ls-tree"):
        apply_series(hand_series(_creating("new.txt")), repo)


# --- safety --------------------------------------------------------------------------------------------

def _creating(path: str, mode: str = "100644", content: str = "x") -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode {mode}\nindex 0000000..1111111\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1 @@\n+{content}\n\\ No newline at end of file\n")


@pytest.mark.parametrize("path,why", [
    ("../outside.txt", "leaves the tree"),
    ("dir/../../outside.txt", "leaves the tree"),
    (".git/hooks/post-checkout", "goes through .git/"),
    ("dir/.GIT/config", "goes through .git/"),
    ("dir/.git. /config", "goes through .git/"),
])
def test_paths_leaving_the_tree_or_into_git_are_refused_before_anything_is_written(repo, path, why):
    before, objects = RepoState.of(repo), loose_objects(repo)
    safe = _creating("fine.txt")
    with pytest.raises(BadInput, match=f"patch 2: refusing .*{why}; nothing was written"):
        apply_series(hand_series(safe, _creating(path)), repo)
    assert (RepoState.of(repo), loose_objects(repo)) == (before, objects)
    assert git(repo, "for-each-ref", "refs/patchbench/") == ""


def test_a_bad_name_on_the_diff_git_line_alone_is_refused_too(repo):
    diff = _creating("fine.txt").replace("diff --git a/fine.txt b/fine.txt", "diff --git a/../x b/../x")
    with pytest.raises(BadInput, match="refusing '../x'"):
        apply_series(hand_series(diff), repo)


def test_writing_through_a_symlink_is_refused(repo):
    master = git(repo, "rev-parse", "master")
    link = git(repo, "hash-object", "-w", "--stdin", input=b"/etc")
    index = repo / ".git" / "tmp-index"
    env = {"GIT_INDEX_FILE": str(index)}
    git(repo, "read-tree", master, env=env)
    git(repo, "update-index", "--add", "--cacheinfo", f"120000,{link},etc-link", env=env)
    with_link = git(repo, "commit-tree", git(repo, "write-tree", env=env), "-p", master, "-m", "link", env=env)
    index.unlink()
    with pytest.raises(BadInput, match="through the symlink 'etc-link'"):
        apply_series(hand_series(_creating("etc-link/passwd")), repo, base=with_link)
    # The same attack inside one series: patch 1 makes the link, patch 2 writes through it.
    with pytest.raises(BadInput, match="patch 2: refusing 'sneaky/passwd'.*symlink 'sneaky'"):
        apply_series(hand_series(_creating("sneaky", "120000", "/etc"), _creating("sneaky/passwd")), repo)
    assert git(repo, "for-each-ref", "refs/patchbench/") == ""


# --- isolation -----------------------------------------------------------------------------------------

def test_users_head_index_worktree_branches_and_stash_are_untouched(repo, tmp_path, monkeypatch):
    master = git(repo, "rev-parse", "master")
    series, _ = make_series(repo, master, [({"file.txt": text({15: "fifteen"})}, "fifteen")], tmp_path / "mails")
    side = commit_files(repo, master, {"file.txt": text({15: "mine"})}, "mine", ref="refs/heads/mine")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/mine")
    git(repo, "reset", "-q", "--hard")
    (repo / "file.txt").write_bytes(text({15: "stashed"}))
    git(repo, "stash", "-q")
    (repo / "file.txt").write_bytes(text({1: "staged"}))
    git(repo, "add", "file.txt")
    (repo / "file.txt").write_bytes(text({1: "unstaged"}))
    (repo / "untracked.txt").write_text("u\n")
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(f"#!/bin/sh\necho ran >> {tmp_path / 'hook-ran'}\n")
    hook.chmod(0o755)
    git(repo, "config", "core.splitIndex", "true")  # would leave sharedindex.* files in .git/
    git(repo, "config", "core.logAllRefUpdates", "always")  # would leave .git/logs/refs/patchbench/
    shared = sorted(p.name for p in (repo / ".git").glob("sharedindex.*"))
    before = RepoState.of(repo)
    # Variables a git hook would set must not redirect anything into the user's index.
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    applied = apply_series(series, repo)
    failed = apply_series(series, repo, base=side)
    assert applied.failed is None and failed.failed is not None
    assert RepoState.of(repo) == before
    assert (repo / "file.txt").read_bytes() == text({1: "unstaged"})
    assert not (tmp_path / "hook-ran").exists()
    assert sorted(p.name for p in (repo / ".git").glob("sharedindex.*")) == shared
    assert not (repo / ".git" / "logs" / "refs" / "patchbench").exists()


@pytest.mark.parametrize("layout", ["linked worktree", "bare clone"])
def test_linked_worktrees_and_bare_repositories_work_too(repo, tmp_path, layout):
    master = git(repo, "rev-parse", "master")
    series, tips = make_series(repo, master, [({"file.txt": text({8: "eight"})}, "eight")], tmp_path / "mails")
    target = tmp_path / "target"
    if layout == "bare clone":
        git(tmp_path, "clone", "-q", "--bare", str(repo), str(target))
    else:
        git(repo, "worktree", "add", "-q", "-b", "wt", str(target), master)
        (target / "file.txt").write_text("dirty\n")
    before = RepoState.of(target)
    result = apply_series(series, target)
    assert git(target, "rev-parse", result.ref + "^{tree}") == git(repo, "rev-parse", tips[0] + "^{tree}")
    assert RepoState.of(target) == before


def test_two_runs_at_once_do_not_interfere(repo, tmp_path):
    master = git(repo, "rev-parse", "master")
    one, one_tips = make_series(repo, master, [({"file.txt": text({n: f"one {n}"})}, f"one {n}") for n in (1, 2, 3)],
                                tmp_path / "one")
    two, two_tips = make_series(repo, master, [({"dir/other.c": f"int x{n};\n".encode()}, f"two {n}") for n in (1, 2)],
                                tmp_path / "two")
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda s: apply_series(s, repo), [one, two, one, two]))
    assert results[0].head == results[2].head and results[1].head == results[3].head
    assert results[0].ref != results[1].ref
    for result, tips in ((results[0], one_tips), (results[1], two_tips)):
        assert git(repo, "rev-parse", result.ref + "^{tree}") == git(repo, "rev-parse", tips[-1] + "^{tree}")


def test_cli_reports_bad_tree_as_one_line_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "patchbench", "apply", str(tmp_path), "--tree", str(tmp_path)],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 2
    assert proc.stderr.startswith("patchbench: error: ") and proc.stderr.count("\n") == 1
