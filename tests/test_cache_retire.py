"""Caches of code versions nobody runs any more are removed: each change of the checker (facts) or
of the index's scan (call index) starts a directory of its own, and a call index costs gigabytes.
A directory another installed version still uses is marked by its runs and stays."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from patchbench.checks import callindex
from patchbench.checks.run import cache as findings_cache
from patchbench.checks.engine import blob_store
from tests.support.fixture_tree import isolated_copy
from tests.support.git_series import git

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "rcu_unknown_tree"
DAY = 86400


def _aged(path: Path, days: float) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "entry.json").write_text("[]")
    then = time.time() - days * DAY
    os.utime(path, (then, then))
    return path


def test_other_versions_unused_for_two_weeks_go_the_rest_stay(tmp_path):
    current = _aged(tmp_path / "0123456789abcdef", 30)
    old = _aged(tmp_path / "fedcba9876543210", blob_store.STALE_DAYS + 1)
    recent = _aged(tmp_path / "00000000000000aa", blob_store.STALE_DAYS - 1)
    foreign = _aged(tmp_path / "notes", 100)   # not a fingerprint: not ours to judge
    blob_store.retire_other_versions(current)
    assert not old.exists()
    assert recent.is_dir() and foreign.is_dir()
    assert (current / "entry.json").is_file()
    assert time.time() - current.stat().st_mtime < DAY   # marked as used now


def test_lint_retires_old_facts_and_index_directories(tmp_path, monkeypatch):
    tree = isolated_copy(TREE, tmp_path, monkeypatch)
    stale_facts = _aged(tmp_path / "cache" / "facts" / "fedcba9876543210", 40)
    stale_index = _aged(tmp_path / "index" / "fedcba9876543210", 40)
    kept_index = _aged(tmp_path / "index" / "00000000000000aa", 2)
    from patchbench.commands.lint import lint
    lint([str(tree / "drivers")], jobs=1)
    assert not stale_facts.exists() and not stale_index.exists()
    assert kept_index.is_dir()
    assert (tmp_path / "cache" / "facts" / findings_cache.checker_fingerprint()).is_dir()


def _index_file(directory: Path, name: str, days: float) -> Path:
    path = directory / name
    path.write_bytes(b"")
    then = time.time() - days * DAY
    os.utime(path, (then, then))
    return path


@pytest.mark.parametrize("opened_from", ["work tree", "git"])
def test_indexes_of_other_trees_unused_for_two_weeks_go_the_one_opened_stays(tmp_path, monkeypatch, opened_from):
    """Every base checked or tree linted leaves an index of its own (130-160 MB for a kernel): the
    ones no run has used for STALE_DAYS go, with the partial ones a killed build left behind. The
    index opened is marked as used, however long ago it was built."""
    tree = isolated_copy(TREE, tmp_path, monkeypatch)
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "tree")

    def opened() -> callindex.CallIndex:
        if opened_from == "git":
            return callindex.from_git(tree / ".git", "HEAD", 1)
        return callindex.from_files(tree, 1)

    built = opened()
    in_use = built.directory / f"{built.digest}.sqlite"
    built_long_ago = time.time() - 30 * DAY
    os.utime(in_use, (built_long_ago, built_long_ago))
    stale = _index_file(built.directory, "0" * 40 + ".sqlite", blob_store.STALE_DAYS + 1)
    recent = _index_file(built.directory, "1" * 40 + ".sqlite", blob_store.STALE_DAYS - 1)
    left_by_a_killed_build = _index_file(built.directory, "2" * 40 + ".4242.tmp", blob_store.STALE_DAYS + 1)
    notes = built.directory / ("trees" if opened_from == "git" else "checkouts")
    [this_note] = notes.iterdir()   # the digest of this tree's index, noted by the first opening
    os.utime(this_note, (built_long_ago, built_long_ago))
    stale_note = _index_file(notes, "3" * 40, blob_store.STALE_DAYS + 1)
    again = opened()
    assert again.digest == built.digest
    assert time.time() - in_use.stat().st_mtime < DAY
    assert time.time() - this_note.stat().st_mtime < DAY, "a note looked up is marked used"
    assert again.defs("mesh_data"), "the index still answers"
    assert not stale.exists() and not left_by_a_killed_build.exists() and not stale_note.exists()
    assert recent.is_file()
