"""lock-held-inconsistent's filters before the walk (candidate_members, _may_be_believed) are only
necessary conditions of a verdict: with them disabled, the verdicts are the same, on our fixtures
and on the real files the mutation tests use (mutated and not)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchbench.checks.analyses import lock_consistency
from patchbench.checks.engine.model import FileModel
from patchbench.checks.run import checkfile

from tests.test_rule_lock_consistency_kernel import MUTATIONS

FIXTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "lock_consistency"
RULE = "lock-held-inconsistent"


def _verdicts(path: str, source: bytes) -> list[tuple[int, str, str, str]]:
    model = FileModel.build(path, source, checkfile.ALONE)
    return [(v.access.node.start_point[0], v.access.function, v.access.key, v.spelling)
            for v in lock_consistency._verdicts(model)]


def _unfiltered(monkeypatch, path: str, source: bytes) -> list[tuple[int, str, str, str]]:
    every_member = frozenset(re.findall(rb"(?:->|\.)\s*([A-Za-z_]\w*)", source))
    with monkeypatch.context() as patch:
        patch.setattr(lock_consistency, "candidate_members", lambda _: every_member)
        patch.setattr(lock_consistency, "_may_be_believed", lambda model, spotted, wanted, users, holding, head_changed: wanted)
        return _verdicts(path, source)


@pytest.mark.parametrize("fixture", sorted(FIXTURE_DIR.glob("*.c")), ids=lambda p: p.name)
def test_filters_change_no_verdict_on_fixtures(monkeypatch, fixture: Path):
    source = fixture.read_bytes()
    found = _verdicts(str(fixture), source)
    assert found and found == _unfiltered(monkeypatch, str(fixture), source)


def test_candidate_members_needs_a_head_and_enough_accesses():
    head = b"list_add(&e->node, &p->pending);\n"
    assert lock_consistency.candidate_members(head + b"x = p->pending.next;\n" * 5) == {b"pending"}
    assert lock_consistency.candidate_members(head + b"x = p->pending.next;\n" * 4) == frozenset()
    # a member only named outside a head's call is not a candidate, however often
    assert lock_consistency.candidate_members(b"foo(&p->other);\n" + b"y = p->other;\n" * 9) == frozenset()
    # an iterator macro's head counts as a call; hlist_ names too
    walk = b"hlist_for_each_entry(pos, &t->buckets, link) {}\n" + b"t->buckets.first = 0;\n" * 5
    assert lock_consistency.candidate_members(walk) == {b"buckets"}


def test_files_without_candidates_are_not_parsed_for_the_rule():
    from patchbench.checks.engine import registry

    module = registry.rule(RULE)
    assert module.mentioned(b"list_add(&e->node, &p->pending);\n" + b"p->pending.next = 0;\n" * 6)
    assert not module.mentioned(b"list_add(&e->node, &p->pending);\n")


@pytest.mark.kernel
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_filters_change_no_verdict_on_72_files(monkeypatch, kernel_tree_new: Path, name: str):
    path, edits, _ = MUTATIONS[name]
    pristine = (kernel_tree_new / path).read_bytes()
    mutated = pristine
    for old, new in edits:
        mutated = mutated.replace(old.encode(), new.encode())
    for source in (pristine, mutated):
        assert _verdicts(path, source) == _unfiltered(monkeypatch, path, source)
