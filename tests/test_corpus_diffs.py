"""Files touched, per EXPECTED.md rows for the diff-parser fixtures (python-unidiff, whatthepatch):
status, path and line counts, with our own expected values."""

from __future__ import annotations

import pytest

from patchbench.mail.files import files_touched

M, A, D, R, B = "modified", "added", "deleted", "renamed", "binary"
THREE_FILES = [("added_file", A, 4, 0), ("modified_file", M, 3, 1), ("removed_file", D, 0, 3)]

UNIDIFF = {
    "sample0.diff": [("/path/to/new", M, 12, 8), ("/path/to/another_new", A, 9, 0), ("/path/to/existing", D, 0, 9)],
    "sample3.diff": [("added_file", A, 4, 0), ("modified_file", M, 4, 2), ("removed_file", D, 0, 3)],
    "sample4.diff": THREE_FILES,
    "sample5.diff": [("modified_file1", M, 3, 1), ("modified_file2", M, 3, 1)],
    "sample8.diff": [("boo.bin", A, 0, 0), ("foo.bin", A, 0, 0), ("bar.bin", B, 0, 0), ("baz.bin", D, 0, 0),
                     ("fuz.bin", A, 0, 0)],
    "debdiff.diff": [("new/added.txt", A, 1, 0), ("/t/p2/a.png", B, 0, 0), ("/t/p2/b.png", B, 0, 0)],
    "git.diff": THREE_FILES,
    "hg.diff": THREE_FILES,
    "bzr.diff": THREE_FILES,
    "svn.diff": [THREE_FILES[1], THREE_FILES[2], THREE_FILES[0]],
    "git_rename.diff": [("moved", R, 1, 1), ("newfile", R, 1, 1), ("sub/otherfile", R, 0, 0)],
    "git_no_prefix.diff": [("file1", D, 0, 3), ("file2", M, 6, 0), ("file3", A, 3, 0)],
    "git_filenames_with_spaces.diff": [("has spaces/t.sql", A, 1, 0)],
    "git_quoted_filename.diff": [("A \u00e2 B.py", A, 1, 0)],
    "git_delete.diff": [("somefile.c", D, 0, 10)],
    "git_symlink.diff": [("bin/check", A, 1, 0)],
    "git_cr.diff": [("src/test/org/apache/commons/math/util/ExpandableDoubleArrayTest.java", A, 3, 0)],
    "binary.diff": [("1x1.png", A, 0, 0)],
}

WHATTHEPATCH = {
    "git.patch": [("novel/src/java/edu/ua/eng/software/novel/NovelFrame.java", M, 4, 8),
                  ("novel/src/java/edu/ua/eng/software/novel/NovelPrefPane.java", M, 2, 0)],
    "git-bin.patch": [("fox.bin", A, 0, 0), ("fox.txt", M, 1, 1), ("lorem.bin", A, 0, 0), ("lorem.zip", B, 0, 0)],
    "git-binary-files.diff": [("project/media/i/asc.gif", A, 0, 0)],
    "git-new-empty-file.diff": [("somefile.txt", A, 0, 0)],
    "git-oneline-add.diff": [("oneline.txt", A, 1, 0)],
    "git-oneline-change.diff": [("oneline.txt", M, 1, 1)],
    "git-oneline-rm.diff": [("oneline.txt", D, 0, 1)],
    "linux-29e1dfcd5150097f32f34891c85a50d9ead19df3.patch": [("net/bluetooth/6lowpan.c", M, 5, 0)],
}

BINARY = {"sample8.diff": ["foo.bin", "bar.bin", "baz.bin"], "binary.diff": ["1x1.png"],
          "debdiff.diff": ["/t/p2/a.png", "/t/p2/b.png"],
          "git-bin.patch": ["fox.bin", "lorem.bin", "lorem.zip"], "git-binary-files.diff": ["project/media/i/asc.gif"]}


def _read(path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")  # keep CRs: they may be content


@pytest.mark.parametrize("folder, name", [("python-unidiff/samples", n) for n in UNIDIFF]
                         + [("whatthepatch/casefiles", n) for n in WHATTHEPATCH])
def test_files_touched(corpus, folder, name):
    expected = (UNIDIFF if folder.startswith("python") else WHATTHEPATCH)[name]
    changes = files_touched(_read(corpus / folder / name))
    assert [(c.path, c.status, c.added, c.removed) for c in changes] == expected
    assert sorted(c.path for c in changes if c.binary) == sorted(BINARY.get(name, []))


def test_rename_keeps_the_old_path(corpus):
    changes = files_touched(_read(corpus / "python-unidiff" / "samples" / "git_rename.diff"))
    assert [c.old_path for c in changes] == ["added", "oldfile", "sub/onefile"]


def test_mode_and_copy_headers(corpus):
    modes = files_touched(_read(corpus / "git" / "t4100" / "t-apply-4.patch"))
    assert [(c.status, c.old_mode, c.new_mode) for c in modes] == [("mode", "100644", "100755")] * 2
    copy = files_touched(_read(corpus / "git" / "t4100" / "t-apply-2.patch"))
    assert [(c.path, c.status, c.old_path) for c in copy if c.status == "copied"] == [
        ("git-fetch-script", "copied", "git-pull-script")]
