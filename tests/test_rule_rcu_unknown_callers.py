"""A function of unknown entry that reaches a call both with and without a section of its own
relies on its callers' section there: the way into the callee stays unknown.

fixtures/checks/rcu_unknown_tree: mesh_data() (reached only from rx.c, whose caller the index does
not place) takes a nested section on one branch and then calls fast_forward(), which reads under
its caller's section. The path that skips the branch reaches the call without a section of
mesh_data()'s own, so that section is not taken as evidence that its callers hold none (as a
section every path goes through is: preconditions.c's pre_implicit_callers()): `lint` of the tree
reports nothing, `check` warns that the entry is not established."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchbench.checks import callindex
from patchbench.checks.run import checkfile
from patchbench.checks.engine.context import TreeContext
from patchbench.commands.lint import lint
from tests.support.fixture_tree import isolated_copy

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "rcu_unknown_tree"


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    return isolated_copy(TREE, tmp_path, monkeypatch)


def test_lint_reports_no_read_whose_only_way_in_is_unknown(tree):
    found = lint([str(tree / "drivers")], jobs=1)
    assert [(f.function, f.rule) for f in found if f.rule.startswith("rcu")] == []


def test_check_warns_that_the_entry_is_not_established(tree):
    context = TreeContext(callindex.from_files(tree, 1), tree, series=True)
    path = tree / "drivers" / "mesh.c"
    found = checkfile.check_source(str(path), path.read_bytes(), {"rcu-deref-unprotected"}, context=context)
    assert {(f.function, f.severity) for f in found} == {("fast_forward", "warning")}
    assert all("not established" in f.message for f in found)
