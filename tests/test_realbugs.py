"""The real-bug benchmark as regressions: each genuine upstream fix, undone on the Debian tree that
holds it (patch 1) and redone (patch 2), checked with `patchbench check` as a user runs it.

A case passes when its bug is reported on patch 1 under the expected rule, in the expected file and
function, and nothing at all is reported on patch 2 (the fix). Cases the checker misses today carry
their reason in fixtures/realbugs/cases.toml and are strict xfails: one that starts passing fails
the run until its mark is removed. The recall floor keeps the benchmark as a whole from sliding.
"""

from __future__ import annotations

import pytest

from tests.support import realbugs

CASES = realbugs.load_cases()
MUTATIONS = realbugs.load_cases(realbugs.MUTATIONS)
# In-scope recall (upstream fixes, both kernels) measured when the marks were last set; it may only rise.
RECALL_FLOOR = 0.92
# Planted bugs found in real drivers (fixtures/realbugs/mutations.toml), and findings allowed on its
# pristine files: measured when the marks were last set.
MUTATION_FLOOR = 25 / 26
PRISTINE_FINDINGS = 1


@pytest.fixture(scope="session")
def bench(tmp_path_factory, request) -> realbugs.Bench:
    trees = {}
    for version, fixture in (("6.1", "kernel_tree"), ("7.2", "kernel_tree_new")):
        if any(c.kernel == version for c in CASES + MUTATIONS):
            trees[version] = request.getfixturevalue(fixture)
    return realbugs.Bench(tmp_path_factory.mktemp("realbugs"), trees)


def _param(case: realbugs.Case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=f"{case.kernel}-{case.id}", marks=marks)


def test_recorded_edits_are_our_own_small_operations():
    """No kernel code in the data: each edit names a token or a short call, never a whole line of C."""
    for case in CASES + MUTATIONS:
        for edit in case.edits:
            for text in (edit.line, edit.after, edit.old, edit.new, edit.to, edit.text):
                assert text is None or len(text) <= 60, (case.id, text)
    assert len({c.subject for c in CASES if c.origin == "upstream"}) >= 30
    assert {c.family for c in CASES} == set(realbugs.FAMILIES.values())


@pytest.mark.kernel
@pytest.mark.parametrize("case", [_param(c) for c in CASES + MUTATIONS])
def test_bug_reported_on_patch_1_and_fix_clean(bench, case):
    outcome = bench.outcome(case)
    assert outcome.error is None, outcome.error
    assert outcome.on_fix == [], f"finding on the fix: {outcome.on_fix}"
    assert outcome.caught, f"not reported as {case.rule} in {case.function}; patch 1 had {outcome.patch1}"


@pytest.mark.kernel
def test_recall_floor_and_no_finding_on_any_fix(bench):
    upstream = [bench.outcome(c) for c in CASES if c.origin == "upstream"]
    caught, total = realbugs.recall(upstream)
    assert caught / total >= RECALL_FLOOR, f"in-scope recall {caught}/{total} fell below {RECALL_FLOOR:.0%}"
    marked = {c.id for c in CASES if c.xfail}
    assert [o.case.id for o in upstream if o.on_fix and o.case.id not in marked] == []


@pytest.mark.kernel
def test_planted_bugs_found_and_pristine_files_quiet(bench, tmp_path):
    found, planted = realbugs.recall([bench.outcome(c) for c in MUTATIONS])
    assert found / planted >= MUTATION_FLOOR, f"found {found} of {planted} planted bugs"
    for kernel, files in realbugs.load_correct().items():
        findings = realbugs.lint_files(bench.trees[kernel], files, tmp_path / "cache")
        assert len(findings) <= PRISTINE_FINDINGS, [f"{f['file']}:{f['line']} {f['rule']}" for f in findings]
