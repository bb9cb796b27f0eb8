"""Caches of code versions nobody runs any more are removed: each change of the checker (facts) or
of the index's scan (call index) starts a directory of its own, and a call index costs gigabytes.
A directory another installed version still uses is marked by its runs and stays."""

from __future__ import annotations

import os
import time
from pathlib import Path

from patchbench.checks import facts
from tests.support.fixture_tree import isolated_copy

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
    old = _aged(tmp_path / "fedcba9876543210", facts.STALE_DAYS + 1)
    recent = _aged(tmp_path / "00000000000000aa", facts.STALE_DAYS - 1)
    foreign = _aged(tmp_path / "notes", 100)   # not a fingerprint: not ours to judge
    facts.retire_other_versions(current)
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
    assert (tmp_path / "cache" / "facts" / facts.checker_fingerprint()).is_dir()
