"""Lock rules on hand-written fixtures (bugs and tricky correct shapes) and on pristine 6.1 files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchbench.checks.run import checkfile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks"
OUR_RULES = {"ptr-ring-consume-unlocked", "ptr-ring-produce-unlocked", "lock-imbalance", "rcu-deref-null-unchecked"}
# judged on the fixtures here; on real files by tests/test_rule_lock_consistency_kernel.py
FIXTURE_RULES = OUR_RULES | {"lock-held-inconsistent"}
EXPECT = re.compile(r"expect: ([\w-]+)")
FIXTURE_FILES = sorted([*FIXTURES.glob("ptr_ring/*.c"), *FIXTURES.glob("lock/*.c"), FIXTURES / "rcu" / "null_belief.c",
                        *FIXTURES.glob("lock_consistency/*.c")])


def expected(source: bytes) -> set[tuple[int, str]]:
    return {(number, match.group(1))
            for number, line in enumerate(source.decode().splitlines(), 1)
            for match in EXPECT.finditer(line)}


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_findings_are_exactly_the_marked_lines(fixture: Path):
    source = fixture.read_bytes()
    found = checkfile.check_source(str(fixture), source, FIXTURE_RULES)
    assert {(f.line, f.rule) for f in found} == expected(source)


def test_fixtures_hold_true_positives_for_every_rule():
    marked = set()
    for fixture in FIXTURE_FILES:
        marked |= {rule for _, rule in expected(fixture.read_bytes())}
    assert marked == FIXTURE_RULES


def test_messages_name_the_ring_and_the_missing_lock():
    source = (FIXTURES / "ptr_ring" / "consume_bugs.c").read_bytes()
    found = {f.function: f for f in checkfile.check_source("consume_bugs.c", source, OUR_RULES)}
    assert found["demo_consume_bare"].message == (
        "__ptr_ring_consume(q->tx_ring) without q->tx_ring's consumer_lock held here or in every caller")
    assert "on some paths" in found["demo_consume_unlock_on_one_path"].message
    assert "after __ptr_ring_consume_batched" in found["demo_batched_then_space"].message


def test_suppression_needs_the_rule_id():
    source = b"""static void *f(struct q *q)
{
	/* patchbench: allow(lock-imbalance) wrong rule named */
	return __ptr_ring_consume(&q->ring);
}
"""
    assert [f.rule for f in checkfile.check_source("s.c", source, OUR_RULES)] == ["ptr-ring-consume-unlocked"]
    allowed = source.replace(b"allow(lock-imbalance)", b"allow(lock-imbalance, ptr-ring-consume-unlocked)")
    assert checkfile.check_source("s.c", allowed, OUR_RULES) == []


PRISTINE = ["drivers/net/tun.c", "drivers/net/tap.c", "drivers/vhost/net.c", "drivers/net/virtio_net.c",
            "include/linux/ptr_ring.h", "include/linux/skb_array.h", "drivers/net/veth.c",
            "net/core/page_pool.c", "net/sched/sch_generic.c", "kernel/bpf/cpumap.c"]


@pytest.mark.kernel
@pytest.mark.parametrize("path", PRISTINE)
def test_pristine_61_files_have_no_lock_findings(kernel_tree: Path, path: str):
    found = checkfile.check_source(path, (kernel_tree / path).read_bytes(), OUR_RULES)
    assert found == []


def findings_of_mutation(kernel_tree: Path, path: str, old: bytes, new: bytes) -> list[tuple[str, str]]:
    """(rule, function) of our findings on a 6.1 file with its first `old` (which must be there) made `new`."""
    source = (kernel_tree / path).read_bytes()
    assert old in source
    found = checkfile.check_source(path, source.replace(old, new, 1), OUR_RULES)
    return [(f.rule, f.function) for f in found]


# Real code made wrong the way a patch would: each must be found, and nothing else.
MUTATIONS = {
    "tun_ring_recv consumes without the lock": (
        "drivers/net/tun.c", b"ptr = ptr_ring_consume(&tfile->tx_ring);", b"ptr = __ptr_ring_consume(&tfile->tx_ring);",
        ("ptr-ring-consume-unlocked", "tun_ring_recv")),
    "tap_get_user forgets one of its three RCU unlocks": (
        "drivers/net/tap.c", b"\t\tkfree_skb(skb);\n\t\trcu_read_unlock();\n\t\treturn total_len;\n",
        b"\t\tkfree_skb(skb);\n\t\treturn total_len;\n", ("lock-imbalance", "tap_get_user")),
    "tun_xdp_xmit (an .ndo_xdp_xmit) loses the unlock before its last return": (
        "drivers/net/tun.c", b"\t\t__tun_xdp_flush_tfile(tfile);\n\n\trcu_read_unlock();\n\treturn nxmit;\n",
        b"\t\t__tun_xdp_flush_tfile(tfile);\n\n\treturn nxmit;\n", ("lock-imbalance", "tun_xdp_xmit")),
    "tun_flow_flush takes tun->lock twice": (
        "drivers/net/tun.c", b"\tspin_lock_bh(&tun->lock);\n\tfor (i = 0;",
        b"\tspin_lock_bh(&tun->lock);\n\tspin_lock_bh(&tun->lock);\n\tfor (i = 0;",
        ("lock-imbalance", "tun_flow_flush")),
    "__tun_set_ebpf releases its spin_lock_bh() with spin_unlock()": (
        "drivers/net/tun.c", b"\trcu_assign_pointer(*prog_p, new);\n\tspin_unlock_bh(&tun->lock);",
        b"\trcu_assign_pointer(*prog_p, new);\n\tspin_unlock(&tun->lock);", ("lock-imbalance", "__tun_set_ebpf")),
    "tun_flow_cleanup returns early with tun->lock held": (
        "drivers/net/tun.c", b"\t\t\tcount++;\n", b"\t\t\tif (!delay)\n\t\t\t\treturn;\n\t\t\tcount++;\n",
        ("lock-imbalance", "tun_flow_cleanup")),
}


@pytest.mark.kernel
@pytest.mark.parametrize("name", MUTATIONS)
def test_mutated_61_driver_is_found(kernel_tree: Path, name: str):
    path, old, new, expected = MUTATIONS[name]
    assert findings_of_mutation(kernel_tree, path, old, new) == [expected]


def test_a_callee_taking_a_lock_its_callers_hold_is_one_finding_with_each_calls_line():
    """lock/callee_deadlock.c: cdl_set_mtu() takes the mutex cdl_change_mtu() and cdl_reset_mtu()
    both hold when they call it: one defect, reported at the first call with the other's line."""
    fixture = FIXTURES / "lock" / "callee_deadlock.c"
    lines = fixture.read_text().splitlines()
    calls = [number for number, line in enumerate(lines, 1) if "cdl_set_mtu(priv, " in line]
    found = [f for f in checkfile.check_source(str(fixture), fixture.read_bytes(), {"lock-imbalance"})
             if dict(f.args).get("callee") == "cdl_set_mtu"]
    assert [(f.line, f.also) for f in found] == [(calls[0], (calls[1],))]
    assert found[0].message == ("cdl_set_mtu() takes the lock cdl_change_mtu() holds since "
                                f"mutex_lock(&priv->cfg_lock): it deadlocks (also at line {calls[1]})")


def test_a_wait_for_a_function_that_takes_the_held_lock_names_that_function():
    """lock/wait_deadlock.c: free_irq() under cfg_lock waits for the interrupt's thread function,
    bound by request_threaded_irq() to the same dev_id, whose helper takes cfg_lock (its `priv`
    declared from the `void *` argument); napi_disable() under a spinlock the poll takes sleeps
    in atomic context as well."""
    fixture = FIXTURES / "lock" / "wait_deadlock.c"
    found = {f.function: f for f in checkfile.check_source(str(fixture), fixture.read_bytes(), {"lock-imbalance"})}
    assert found["wdl_teardown"].message == ("free_irq() waits for wdl_irq_thread() to finish, which takes "
                                             "mutex_lock(&priv->cfg_lock) that wdl_teardown() holds here: it deadlocks")
    assert found["wdl_close"].kind == "waits-for-holder-atomic"
    assert not {"wdl_stop_ordered", "wdl_clear", "wdl_pause"} & set(found)
