"""What the apply stage reads from diff headers: the paths it checks for safety and names in failures."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchbench.tree import apply_series
from patchbench.tree.diffscan import scan
from tests.support.git_series import commit_files, format_patch, git, series_from_mails


def test_quoted_names_renames_and_hunks():
    diff = ('diff --git "a/caf\\303\\251 \\"x\\".c" "b/caf\\303\\251 \\"x\\".c"\n'
            "index 1234567..89abcde 100644\n"
            '--- "a/caf\\303\\251 \\"x\\".c"\n+++ "b/caf\\303\\251 \\"x\\".c"\n'
            "@@ -10,2 +10,2 @@ int f(void)\n-a\n+b\n c\n"
            "diff --git a/has space/old.c b/has space/new.c\nsimilarity index 90%\n"
            "rename from has space/old.c\nrename to has space/new.c\n")
    first, second = scan(diff)
    assert first.paths() == ['café "x".c'] and first.old_blob == "1234567"
    assert [(h.header, h.old_start) for h in first.hunks] == [("@@ -10,2 +10,2 @@", 10)]
    assert (second.old_path, second.new_path) == ("has space/old.c", "has space/new.c")
    (binary,) = scan('diff --git "a/dir\\\\" "b/dir\\\\"\nindex 1234567..89abcde 100644\nGIT binary patch\n')
    assert binary.paths() == ["dir\\"]


def test_traditional_diff_strips_one_component_and_dev_null_means_created():
    files = scan("--- /dev/null\n+++ b/new/file.c\n@@ -0,0 +1 @@\n+x\n"
                 "--- a/old.c\t2024-01-01 00:00:00\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
    assert [(f.old_path, f.new_path) for f in files] == [(None, "new/file.c"), ("old.c", None)]


def test_hunk_lines_that_look_like_headers_are_content(tmp_path: Path):
    """A removed line "-- a/.git/config" shows as "--- a/.git/config": content, not a path to refuse."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "master", str(repo))
    lines = "".join(f"{n}\n" for n in range(10))
    base = commit_files(repo, None, {"notes.txt": f"-- a/.git/config\n+++ b/../../etc/passwd\n{lines}".encode()},
                        "base", ref="refs/heads/master")
    tip = commit_files(repo, base, {"notes.txt": lines.encode()}, "drop the odd lines")
    series = series_from_mails(format_patch(repo, base, tip, tmp_path / "mails"))
    assert "\n--- a/.git/config\n-+++ b/../../etc/passwd\n" in series.patches[0].diff
    assert [f.paths() for f in scan(series.patches[0].diff)] == [["notes.txt"]]
    result = apply_series(series, repo)
    assert result.failed is None
    assert git(repo, "rev-parse", result.head + "^{tree}") == git(repo, "rev-parse", tip + "^{tree}")


_NAME = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\0")
                | st.sampled_from(list(" \t\"\\\n")), min_size=1, max_size=8).filter(
    lambda name: name.strip(". ").lower() not in ("", ".git") and name == name.strip())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old=st.lists(_NAME, min_size=1, max_size=3), new=st.lists(_NAME, min_size=1, max_size=3),
       rename=st.booleans(), binary=st.booleans())
def test_paths_read_from_headers_are_the_paths_git_wrote(tmp_path_factory, old, new, rename, binary):
    """Whatever bytes a name holds (spaces, quotes, backslashes, tabs, newlines, non-ASCII), the scan reads
    it back; also from a binary patch, where only the `diff --git` line names the file."""
    work = tmp_path_factory.mktemp("names")
    repo = work / "repo"
    git(work, "init", "-q", str(repo))
    old_path, new_path = "/".join(old), "/".join(new)
    content = "".join(f"line {n}\n" for n in range(20)).encode() + (b"\0" if binary else b"")
    base = commit_files(repo, None, {old_path: content}, "base")
    changed = content.replace(b"line 3\n", b"line three\n")
    tip = commit_files(repo, base, {old_path: None, new_path: changed} if rename else {old_path: changed}, "change")
    (diff,) = [p.diff for p in series_from_mails(format_patch(repo, base, tip, work / "mails", "-M", "--binary")).patches]
    scanned = {path for f in scan(diff) for path in f.paths()}
    expected = git(repo, "diff", "--name-only", "-z", "--no-renames", base, tip).strip("\0").split("\0")
    assert scanned == set(expected)
