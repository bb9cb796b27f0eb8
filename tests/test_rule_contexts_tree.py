"""Calling contexts and lock wrappers that come from elsewhere in the tree (the call index).

A small tree of our own (fixtures/checks/tree/: Kbuild and MAINTAINERS mark its root) holds a
header with a lock wrapper and an exported RCU helper, a file that registers and calls, and a
file that uses them; `lint` builds the index of that tree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchbench.checks import callindex, engine
from patchbench.commands.lint import lint
from tests.support.git_series import git

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "tree"


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PATCHBENCH_INDEX_CACHE", str(tmp_path / "index"))
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "linux"
    shutil.copytree(TREE, copy)
    return copy


def findings(tree: Path) -> set[tuple[str, str, str]]:
    return {(Path(f.file).name, f.function, f.rule) for f in lint([str(tree / "drivers")], jobs=1)}


def series_findings(tree: Path, name: str) -> list:
    """helpers.c's RCU findings as `check` sees them: the index active in series mode."""
    index = callindex.from_files(tree, 1)
    with callindex.active(index, tree, series=True):
        source = (tree / "drivers" / name).read_bytes()
        return engine.check_source(str(tree / "drivers" / name), source, {"rcu-deref-unprotected"})


def test_header_wrapper_is_a_lock(tree):
    assert findings(tree) == {("user.c", "user_leaks_chan", "lock-imbalance")}


def test_callers_in_other_files_give_the_entry(tree):
    found = {(f.function, f.severity) for f in series_findings(tree, "helpers.c")}
    # helper_reads: its only caller holds a section; the other helper has one caller without
    assert found == {("helper_needs_caller_section", "warning")}


def test_without_the_caller_section_elsewhere_the_exported_helper_is_reported(tree):
    user = tree / "drivers" / "user.c"
    user.write_text(user.read_text().replace("\trcu_read_lock();\n\tweight = helper_reads", "\tweight = helper_reads"))
    assert ("helper_reads", "warning") in {(f.function, f.severity) for f in series_findings(tree, "helpers.c")}
    # lint of the tree leaves it alone: the index reads other files lexically, its gaps are no evidence
    assert ("helpers.c", "helper_reads", "rcu-deref-unprotected") not in findings(tree)


def test_the_index_is_built_once_per_tree_content(tree):
    first = callindex.from_files(tree, 1)
    again = callindex.from_files(tree, 1)
    assert first.digest == again.digest
    assert again.wrapper_of("wrap_chan_lock") == [["chan"], [["mutex_lock_nested", "&chan->lock"]]]
    (tree / "drivers" / "user.c").write_text((tree / "drivers" / "user.c").read_text() + "\n")
    assert callindex.from_files(tree, 1).digest != first.digest


def test_a_checkout_is_indexed_from_git_as_from_its_files(tree):
    """In a git checkout the blob ids come from git's index; what is changed, untracked, linked
    or in a dot-directory must come out exactly as reading every file gives."""
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "tree")
    walked = callindex.from_files(tree, 1).digest
    (tree / "drivers" / "user.c").write_text((tree / "drivers" / "user.c").read_text() + "\n")
    (tree / "drivers" / "new.c").write_text("void new_one(void)\n{\n}\n")
    (tree / "drivers" / "linked.h").symlink_to("../include/wrap.h")
    (tree / ".hidden").mkdir()
    (tree / ".hidden" / "skipped.c").write_text("void skipped(void)\n{\n}\n")
    from_git = callindex._checkout_blobs(tree)
    assert sorted(from_git) == sorted(callindex._walked_blobs(tree))
    assert {"drivers/new.c", "drivers/linked.h"} <= {path for path, _ in from_git}
    assert callindex.from_files(tree, 1).digest != walked


def test_no_index_means_unknown_callers_and_a_warning_that_says_so():
    source = (TREE / "drivers" / "helpers.c").read_bytes()
    found = [f for f in engine.check_source("helpers.c", source, {"rcu-deref-unprotected"})
             if f.function == "helper_reads"]
    assert [f.severity for f in found] == ["warning"]
    assert "what helper_reads() holds on entry is not established" in found[0].message
