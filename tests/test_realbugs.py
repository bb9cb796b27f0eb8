"""The real-bug benchmark as regressions: each genuine upstream fix, undone on the Debian tree that
holds it (patch 1) and redone (patch 2), checked with `patchbench check` as a user runs it.

A case passes when its bug is reported on patch 1 under the expected rule, in the expected file and
function, and nothing at all is reported on patch 2 (the fix). Cases the checker misses today carry
their reason in fixtures/realbugs/cases.toml and are strict xfails: one that starts passing fails
the run until its mark is removed. The recall floor keeps the benchmark as a whole from sliding.
"""

from __future__ import annotations

import pytest

from tests.conftest import NOT_APPLICABLE
from tests.support import introduced, realbugs
from tests.support.git_series import git

CASES = realbugs.load_cases()
MUTATIONS = realbugs.load_cases(realbugs.MUTATIONS)
VALIDATION = realbugs.load_validation()
TWINS = introduced.load_introduced(cases=VALIDATION + CASES)
# In-scope recall (upstream fixes, both kernels, over the cases whose code the trees hold) measured
# when the marks were last set; it may only rise.
RECALL_FLOOR = 0.76
APPLICABLE_FLOOR = realbugs.APPLICABLE_FLOOR   # of each kernel's cases, the share that must apply
# Planted bugs found in real drivers (fixtures/realbugs/mutations.toml), and findings allowed on its
# pristine files: measured when the marks were last set (36/38 since the twelve NULL-belief
# mutations of 7.2 joined: 25/26 on 6.1, 11/12 on 7.2, the ovpn one a strict xfail).
MUTATION_FLOOR = 36 / 38
# Of the development cases of upstream fixes, the share whose fix's diff was found and digested
# (39 of 43 on 2026-12-05; the others say why not)
DIGESTED_FLOOR = 0.9
PRISTINE_FINDINGS = 1


@pytest.fixture(scope="session")
def bench(tmp_path_factory, request) -> realbugs.Bench:
    trees = {}
    for name, fixture in (("6.1", "kernel_tree"), ("newest", "kernel_tree_new")):
        if any(c.kernel == name for c in CASES + MUTATIONS + VALIDATION):
            trees[name] = request.getfixturevalue(fixture)
    return realbugs.Bench(tmp_path_factory.mktemp("realbugs"), trees)


def outcome_of(bench: realbugs.Bench, case: realbugs.Case, config: pytest.Config) -> realbugs.Outcome:
    """The case's outcome; one whose code the tree lacks is noted for the run's summary and skipped."""
    outcome = bench.outcome(case)
    if outcome.not_applicable:
        config.stash.setdefault(NOT_APPLICABLE, {})[case.id] = outcome.not_applicable
        pytest.skip(f"not applicable: {outcome.not_applicable}")
    return outcome


def _param(case: realbugs.Case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=f"{case.kernel}-{case.id}", marks=marks)


def test_recorded_edits_are_our_own_small_operations():
    """No kernel code in the data: each edit names a token or a short call, never a whole line of C."""
    for case in CASES + MUTATIONS + VALIDATION:
        for edit in case.edits:
            for text in (edit.line, edit.after, edit.old, edit.new, edit.to, edit.text):
                assert text is None or len(text) <= 60, (case.id, text)
    assert len({c.subject for c in CASES if c.origin == "upstream"}) >= 30
    assert {c.family for c in CASES} == set(realbugs.FAMILIES.values())


@pytest.mark.kernel
@pytest.mark.parametrize("case", [_param(c) for c in CASES + MUTATIONS])
def test_bug_reported_on_patch_1_and_fix_clean(bench, case, pytestconfig):
    outcome = outcome_of(bench, case, pytestconfig)
    assert outcome.error is None, outcome.error
    assert outcome.on_fix == [], f"finding on the fix: {outcome.on_fix}"
    assert outcome.caught, f"not reported as {case.rule} in {case.function}; patch 1 had {outcome.patch1}"


@pytest.mark.kernel
def test_recall_floor_and_no_finding_on_any_fix(bench):
    upstream = [bench.outcome(c) for c in CASES if c.origin == "upstream"]
    for name in bench.trees:
        mine = [o for o in upstream if o.case.kernel == name]
        held = realbugs.applicable(mine)
        assert len(held) >= APPLICABLE_FLOOR * len(mine), (
            f"only {len(held)} of {len(mine)} cases apply to Linux {bench.linux(name)} ({name}); not: "
            + "; ".join(f"{o.case.id}: {o.not_applicable}" for o in mine if o.not_applicable))
    caught, total = realbugs.recall(upstream)
    assert caught / total >= RECALL_FLOOR, f"in-scope recall {caught}/{total} fell below {RECALL_FLOOR:.0%}"
    marked = {c.id for c in CASES if c.xfail}
    assert [o.case.id for o in upstream if o.on_fix and o.case.id not in marked] == []


@pytest.mark.kernel
def test_planted_bugs_found_and_pristine_files_quiet(bench, tmp_path):
    outcomes = [bench.outcome(c) for c in MUTATIONS]
    found, planted = realbugs.recall(outcomes)
    assert planted >= APPLICABLE_FLOOR * len(outcomes), f"only {planted} of {len(outcomes)} planted bugs apply"
    assert found / planted >= MUTATION_FLOOR, f"found {found} of {planted} planted bugs"
    for kernel, listed in realbugs.load_correct().items():
        files, absent = bench.present(kernel, listed)
        assert len(files) >= APPLICABLE_FLOOR * len(listed), f"pristine files not in the tree: {absent}"
        findings = realbugs.lint_files(bench.trees[kernel], files, tmp_path / "cache")
        assert len(findings) <= PRISTINE_FINDINGS, [f"{f['file']}:{f['line']} {f['rule']}" for f in findings]


@pytest.mark.kernel
@pytest.mark.parametrize("name", ["validation", "development"])
def test_cases_redo_exactly_the_upstream_fix(bench, name):
    """Each case names its upstream fix, and its patch 2 makes exactly that fix's change (the
    recorded digest of its removed and added lines) on the tree at hand: a case that undoes
    something else, or only part of the fix, fails here. Every validation case has a digest; a
    development case of an upstream fix has one or says why not (its diff was not found), and one
    whose fix the tree can no longer redo is "adapted", says why, and counts apart. Cases whose
    code the tree lacks are counted apart; most must apply."""
    if name == "validation":
        cases = VALIDATION
        assert len(cases) >= 40 and all(c.commit and c.fix_digest and c.seen for c in cases)
    else:
        upstream = [c for c in CASES if c.origin == "upstream"]
        assert [c.id for c in upstream if bool(c.fix_digest) == bool(c.undigested)] == []
        assert [c.id for c in CASES if (c.origin == "adapted") != bool(c.unfaithful) or
                (c.origin == "adapted" and c.fix_digest)] == []
        cases = [c for c in upstream if c.fix_digest]
        assert len(cases) >= DIGESTED_FLOOR * len(upstream), f"only {len(cases)} of {len(upstream)} fixes digested"
    applying = []
    for case in cases:
        if bench.not_applicable(case):
            continue
        repo, base = bench.clone(case.kernel)
        fixed = git(repo, "show", f"{base}:{case.file}") + "\n"
        assert realbugs.fix_digest_of(realbugs.apply_edits(fixed, case), fixed) == case.fix_digest, case.id
        applying.append(case.id)
    assert len(applying) >= APPLICABLE_FLOOR * len(cases), f"only {len(applying)} {name} cases apply"


@pytest.mark.kernel
def test_introduced_twins_replay_exactly_the_introducing_commit(bench):
    """Each "as introduced" twin names the commit that introduced its case's bug, and its patch 1
    makes exactly that commit's change as mailed (the recorded digest) on the tree at hand, its
    base lacking it; patch 2 is the case's fix. Twins whose code the tree lacks, or that no longer
    replay exactly, are counted apart; most must replay."""
    assert len(TWINS) >= 15 and all(t.commit and t.seen and t.intro_digest for t in TWINS)
    replaying = []
    for twin in TWINS:
        repo, base = bench.clone(twin.case.kernel)
        if introduced.applicability(repo, base, twin, bench.linux(twin.case.kernel)) is None:
            before, buggy = introduced.versions(repo, base, twin)
            assert before != buggy and buggy[twin.case.file] != git(repo, "show", f"{base}:{twin.case.file}") + "\n"
            replaying.append(twin.id)
    assert len(replaying) >= APPLICABLE_FLOOR * len(TWINS), f"only {len(replaying)} of {len(TWINS)} twins replay"


@pytest.mark.kernel
def test_whole_file_lint_of_the_buggy_code_tells_it_from_the_fix(bench):
    """bench/realbugs.py --lint: the buggy file linted whole (no diff) is reported under the case's
    rule in its function, and the fixed file is not (an error path returning with the mutex held)."""
    case = next(c for c in CASES if c.id == "ocelot-tas-set-unlock")
    if bench.not_applicable(case):
        pytest.skip(f"not applicable: {bench.not_applicable(case)}")
    assert realbugs.lint_of_case(*bench.clone(case.kernel), case) == (True, False)
