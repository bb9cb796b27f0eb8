"""The offset-preserving pre-pass and the tree-sitter parse of kernel C."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from patchbench.checks.analyses import calling
from patchbench.checks.engine import parse as cparse
from patchbench.checks.engine import flow
from patchbench.checks.engine.model import FileModel

KERNEL_SHAPES = b"""static const u8 table[4] __aligned(8) = { 1, 2, 3, 4 };

static int __init first(struct demo __rcu *p) __must_hold(&p->lock)
{
	int cpu;

	for_each_possible_cpu(cpu)
		touch(cpu);
	list_for_each_entry(p, &head, node) {
		if (unlikely(p->dead))
			continue;
	}
	scoped_guard(rcu) {
		look(container_of(p, struct demo, node));
	}
	return 0;
}

static void second(void)
{
}
"""


def test_prepare_keeps_length_and_lines():
    prepared = cparse.prepare(KERNEL_SHAPES)
    assert len(prepared) == len(KERNEL_SHAPES)
    assert [len(line) for line in prepared.split(b"\n")] == [len(line) for line in KERNEL_SHAPES.split(b"\n")]


@given(st.text(alphabet="abcdefor_(){};,&*-> \n\t#_", max_size=300))
def test_prepare_never_moves_a_byte_or_a_line(text):
    source = text.encode()
    prepared = cparse.prepare(source)
    assert len(prepared) == len(source)
    assert [i for i, c in enumerate(prepared) if c == 10] == [i for i, c in enumerate(source) if c == 10]


def test_kernel_shapes_parse_without_errors_and_keep_every_function():
    model = FileModel.build("shapes.c", KERNEL_SHAPES)
    assert not model.tree.root_node.has_error
    assert list(model.functions) == ["first", "second"]
    first = model.functions["first"]
    assert first.annotations == [("__must_hold", "&p->lock")]
    assert (first.start_line, model.functions["second"].start_line) == (3, 19)
    loops = [n for n in first.body.named_children if n.type == "while_statement"]
    assert len(loops) == 2   # both iterator heads are loops, not nested function definitions
    call = next(c for c in first.calls if c.name == "container_of")
    assert (call.line, call.node.start_point[1]) == (14, 7)
    assert call.args == ["p", "demo", "node"]   # the type argument, its keyword blanked


def test_canonical_access_paths_resolve_locals_and_types():
    source = b"""static void f(struct tun_file *tfile, struct ptr_ring **rings, int i)
{
	struct ptr_ring *ring = &tfile->tx_ring;
	spin_lock(&ring->consumer_lock);
	spin_lock(&rings[i]->consumer_lock);
}
"""
    model = FileModel.build("f.c", source)
    f = model.functions["f"]
    assert model.canonical(f, "&ring->consumer_lock") == "tun_file.tx_ring.consumer_lock"
    assert model.canonical(f, "&(tfile->tx_ring)") == "tun_file.tx_ring"
    assert model.canonical(f, "&rings[i]->consumer_lock") == "ptr_ring[].consumer_lock"


def test_registrations_and_unknown_callers():
    source = b"""static int poll(struct napi_struct *n, int b) { return helper(n); }
static int helper(struct napi_struct *n) { return 0; }
static netdev_tx_t xmit(struct sk_buff *s, struct net_device *d) { return 0; }
static void tick(struct timer_list *t) { }
static const struct net_device_ops ops = { .ndo_start_xmit = xmit };
static void setup(struct priv *p) { netif_napi_add(p->dev, &p->napi, poll); timer_setup(&p->t, tick, 0); }
"""
    model = FileModel.build("r.c", source)
    assert model.registrations["poll"] == {"napi_poll"}
    assert model.registrations["xmit"] == {"ndo_start_xmit"}
    assert model.registrations["tick"] == {"timer"}
    assert model.has_unknown_callers("xmit") and not model.has_unknown_callers("helper")
    assert calling.only_reached_from(model, "helper", {"napi_poll"})
    assert not calling.only_reached_from(model, "xmit", {"napi_poll"})
    assert calling.only_reached_from(model, "xmit", {"net_device_ops.ndo_start_xmit"})


class _Held(flow.Transfer):
    def call(self, state, call):
        if call.name == "take":
            return state | {call.args[0]}
        if call.name == "drop":
            return state - {call.args[0]}
        return state

    def assume(self, state, call, truth):
        return state | {call.args[0]} if call.name == "try_take" and truth else state


def test_walker_paths_through_goto_switch_loops_and_trylock():
    source = b"""static int f(int x)
{
	take(a);
	if (x)
		goto out;
	switch (x) {
	case 1:
		drop(a);
		break;
	default:
		;
	}
	while (x--) {
		if (x == 3)
			break;
		take(b);
		drop(b);
	}
	if (!try_take(c))
		return 1;
	mark();
out:
	probe();
	return 0;
}
"""
    model = FileModel.build("w.c", source)
    function = model.functions["f"]
    result = flow.walk(function, _Held())
    call = {c.name: c for c in function.calls}
    assert result.held_at(call["mark"]) == {"c"}
    assert result.maybe_at(call["mark"]) == {"a", "c"}
    assert result.states_at(call["probe"]) == {frozenset({"a"}), frozenset({"c"}), frozenset({"a", "c"})}
    assert sorted(n.start_point[0] + 1 for n, _ in result.returns) == [20, 20, 24, 24, 24]


@pytest.mark.kernel
def test_few_functions_of_the_tun_driver_parse_with_errors(kernel_tree: Path):
    model = FileModel.build("drivers/net/tun.c", (kernel_tree / "drivers/net/tun.c").read_bytes())
    assert len(model.functions) > 120
    assert sum(f.node.has_error for f in model.functions.values()) <= 2


NESTED_ACCESSES = b"""static void f(struct t *t, struct u *u)
{
	t->a.b = u->c->d;
	g(&t->list, &u->list);
	h(t->x[u->y].z);
}
"""


def test_captures_come_in_document_order():
    """tree-sitter's cursor hands nested captures out of order (and not in the same order in every
    process): a rule quoting a function's first access of a field quoted another from run to run."""
    root = cparse.parse(NESTED_ACCESSES).root_node
    found = cparse.captures(cparse.query("(field_expression) @access"), root)["access"]
    assert [node.start_byte for node in found] == sorted(node.start_byte for node in found)
    assert [cparse.node_text(NESTED_ACCESSES, n) for n in found][:3] == ["t->a.b", "t->a", "u->c->d"]
