"""rcu-deref-null-unchecked: the code's own belief that an RCU field may be NULL.

fixtures/checks/rcu/null_belief.c holds the file-alone cases (its marked lines are checked by
tests/test_checks_rules.py); here, what the rule accepts on purpose, the thresholds, the finding
as data, and the belief learnt from the rest of a tree (fixtures/checks/rcu_null_tree)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchbench.checks import callindex
from patchbench.checks.analyses.rcu import nullness
from patchbench.checks.engine.context import TreeContext
from patchbench.checks.run import checkfile
from patchbench.commands.lint import lint
from tests.support.fixture_tree import isolated_copy

RULE = "rcu-deref-null-unchecked"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks"
TREE = FIXTURES / "rcu_null_tree"

HEAD = """struct owner { struct net_device *dev; int up; };
struct queue { struct owner __rcu *owner; int index; };

static void detach(struct queue *q)
{
	RCU_INIT_POINTER(q->owner, NULL);
}
"""
UNCHECKED = """
static struct net_device *bad(struct queue *q)
{
	return rcu_dereference(q->owner)->dev;
}
"""


def reader(name: str, body: str) -> str:
    return f"""
static int {name}(struct queue *q)
{{
	struct owner *o = rcu_dereference(q->owner);

{body}
}}
"""


def findings(source: str, path: str = "drivers/net/demo.c"):
    return checkfile.check_source(path, source.encode(), {RULE})


TESTS = {
    "early_return": "\tif (!o)\n\t\treturn 0;\n\treturn o->up;",
    "early_goto": "\tint up = 0;\n\n\tif (o == NULL)\n\t\tgoto out;\n\tup = o->up;\nout:\n\treturn up;",
    "guarded_block": "\tif (o) {\n\t\treturn o->up;\n\t}\n\treturn 0;",
    "and": "\treturn o && o->up;",
    "conditional": "\treturn o ? o->up : 0;",
    "warn": "\tif (WARN_ON_ONCE(!o))\n\t\treturn -1;\n\treturn o->up;",
    "likely": "\tif (likely(o))\n\t\treturn o->up;\n\treturn 0;",
    "compare": "\tif (NULL != o)\n\t\treturn o->up;\n\treturn 0;",
}


@pytest.mark.parametrize("shape", sorted(TESTS))
def test_each_shape_of_test_is_a_test(shape):
    source = HEAD + reader("r1", TESTS[shape]) + reader("r2", TESTS[shape]) + UNCHECKED
    assert [(f.function, f.severity) for f in findings(source)] == [("bad", "error")]
    model_reads = _reads(source)
    assert [r.kind for r in model_reads if r.function in ("r1", "r2")] == ["tested", "tested"]


def _reads(source: str):
    from patchbench.checks.engine.model import FileModel
    return [r for f in nullness.fields(FileModel.build("d.c", source.encode())).values() for r in f.reads]


def test_one_testing_reader_is_no_belief():
    assert findings(HEAD + reader("r1", TESTS["early_return"]) + UNCHECKED) == []


def test_readers_that_mostly_do_not_test_are_no_belief():
    plain = "\treturn o->up;"
    source = HEAD + "".join(reader(f"t{i}", TESTS["and"]) for i in range(3)) + \
        "".join(reader(f"u{i}", plain) for i in range(1)) + UNCHECKED
    # 3 testing and 1 untested besides bad(): 75% -> believed; both untested reads reported
    assert sorted(f.function for f in findings(source)) == ["bad", "u0"]
    source += reader("u1", plain)
    # 3 of 5 other reads test: 60%, below the threshold
    assert findings(source) == []


def test_a_field_never_set_to_null_is_no_belief():
    source = HEAD.replace("RCU_INIT_POINTER(q->owner, NULL)", "RCU_INIT_POINTER(q->owner, NULL + 0)") + \
        reader("r1", TESTS["and"]) + reader("r2", TESTS["and"]) + UNCHECKED
    assert findings(source) == []


def test_a_plain_null_store_of_the_field_counts():
    source = HEAD.replace("RCU_INIT_POINTER(q->owner, NULL);", "q->owner = NULL;") + \
        reader("r1", TESTS["and"]) + reader("r2", TESTS["and"]) + UNCHECKED
    assert [f.function for f in findings(source)] == ["bad"]


def test_rcu_access_pointer_is_no_load_and_unknown_uses_stay_silent():
    source = HEAD + reader("r1", TESTS["and"]) + reader("r2", TESTS["and"]) + """
static bool peek(struct queue *q)
{
	return rcu_access_pointer(q->owner)->up;
}

static void hand(struct queue *q)
{
	struct owner *o = rcu_dereference(q->owner);

	consume(o);
	o->up = 1;
}

static int sized(struct queue *q)
{
	struct owner *o = rcu_dereference(q->owner);

	return sizeof(*o);
}
"""
    assert findings(source) == []


def test_a_variable_of_unknown_type_names_no_field():
    source = HEAD + reader("r1", TESTS["and"]) + reader("r2", TESTS["and"]) + """
#define BAD(q) (rcu_dereference((q)->owner)->dev)
static struct net_device *bad(void *p)
{
	return rcu_dereference(p->owner)->dev;
}
"""
    assert findings(source) == []


def test_the_finding_is_data_without_line_numbers():
    source = HEAD + reader("r1", TESTS["early_return"]) + reader("r2", TESTS["and"]) + UNCHECKED
    [found] = findings(source)
    assert found.kind == "same_file" and found.severity == "error"
    assert dict(found.args) == {"expression": "rcu_dereference(q->owner)->dev", "field": "queue.owner",
                                "primitive": "rcu_dereference", "store": "detach", "reader": "r1"}
    assert found.related.line == source.splitlines().index("\tstruct owner *o = rcu_dereference(q->owner);") + 1
    assert found.because[0].startswith("queue.owner is set to NULL in detach()")
    assert "2 of its 2 other reads" in found.because[1]
    # moving the code down keeps the identity
    [moved] = findings("\n\n" + source)
    assert moved.args == found.args and moved.line == found.line + 2


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    return isolated_copy(TREE, tmp_path, monkeypatch)


def test_the_belief_learnt_from_other_files_is_a_warning(tree):
    found = lint([str(tree / "drivers")], jobs=1)
    assert sorted((Path(f.file).name, f.function, f.severity, f.kind) for f in found if f.rule == RULE) == [
        ("rx.c", "widget_rx_carrier", "warning", "tree"), ("rx.c", "widget_rx_wake", "warning", "tree")]
    wake = next(f for f in found if f.function == "widget_rx_wake")
    assert dict(wake.args)["store"] == "widget_detach"
    assert "drivers/widget/core.c" in wake.because[0]


def test_a_reader_only_in_another_file_is_named_with_its_file(tree):
    rx = tree / "drivers" / "widget" / "rx.c"
    text = rx.read_text()
    rx.write_text(text[:text.index("int widget_rx_carrier_checked")])
    context = TreeContext(callindex.from_files(tree, 1), tree)
    found = checkfile.check_source(str(rx), rx.read_bytes(), {RULE}, context=context)
    assert {(f.function, f.kind) for f in found} == {("widget_rx_wake", "tree_elsewhere"),
                                                      ("widget_rx_carrier", "tree_elsewhere")}
    assert {dict(f.args)["reader_file"] for f in found} == {"drivers/widget/core.c"}
    assert all(f.related is None for f in found)


def test_alone_the_other_files_say_nothing(tree):
    rx = tree / "drivers" / "widget" / "rx.c"
    assert checkfile.check_source(str(rx), rx.read_bytes(), {RULE}) == []
