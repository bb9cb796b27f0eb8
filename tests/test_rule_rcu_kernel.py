"""The RCU rules on the real Linux 6.1 tree: quiet on pristine drivers, loud on broken copies.

Mutations edit the file text in memory only; the kernel_tree repository is never touched."""

import os
import re

import pytest

from patchbench.checks.run import checkfile
from patchbench.checks.engine.context import TreeContext

RULES = {"rcu-deref-unprotected", "rcu-pointer-escapes"}
DEREF, ESCAPE = "rcu-deref-unprotected", "rcu-pointer-escapes"

PRISTINE = ["drivers/net/tun.c", "drivers/net/tap.c", "drivers/vhost/net.c",
            "drivers/net/virtio_net.c", "include/linux/ptr_ring.h",
            "drivers/net/bonding/bond_main.c", "drivers/net/wireguard/socket.c",
            "drivers/net/wireguard/send.c", "drivers/net/wireguard/receive.c"]

# (file, function, text in that function, replacement, rule, severity, functions reported in:
# the first is where the expected finding is; the others may also hold findings)
MUTATIONS = [
    # the unlock moved above the reference tun_get() takes
    ("drivers/net/tun.c", "tun_get",
     "\tif (tun)\n\t\tdev_hold(tun->dev);\n\trcu_read_unlock();\n",
     "\trcu_read_unlock();\n\tif (tun)\n\t\tdev_hold(tun->dev);\n", ESCAPE, "error", "tun_get"),
    # the section of tun_get() deleted
    ("drivers/net/tun.c", "tun_get", "\trcu_read_lock();\n", "", DEREF, "error", "tun_get"),
    # the mission's example: rcu_read_lock() and rcu_read_unlock() both deleted around
    # rcu_dereference(tfile->tun) in a helper the read path calls (file operations hold nothing)
    ("drivers/net/tun.c", "tun_get",
     "\trcu_read_lock();\n\ttun = rcu_dereference(tfile->tun);\n\tif (tun)\n\t\tdev_hold(tun->dev);\n"
     "\trcu_read_unlock();\n",
     "\ttun = rcu_dereference(tfile->tun);\n\tif (tun)\n\t\tdev_hold(tun->dev);\n", DEREF, "error",
     "tun_get"),
    # xmit without its own rcu_read_lock(): __dev_queue_xmit's rcu_read_lock_bh() is another flavour
    ("drivers/net/tun.c", "tun_net_xmit", "\trcu_read_lock();\n", "", DEREF, "warning",
     ("tun_net_xmit", "run_ebpf_filter")),
    # the caller's section removed: tun_xdp_one() relies on it (BH is still off: lockdep splat)
    ("drivers/net/tun.c", "tun_sendmsg", "\t\trcu_read_lock();\n", "", DEREF, "warning",
     "tun_xdp_one"),
    # the caller's section removed around the steering helpers of ndo_select_queue
    ("drivers/net/tun.c", "tun_select_queue", "\trcu_read_lock();\n", "", DEREF, "warning",
     ("tun_select_queue", "tun_ebpf_select_queue")),
    # tap: section deleted before the queue's tap is read
    ("drivers/net/tap.c", "tap_get_user",
     "\trcu_read_lock();\n\ttap = rcu_dereference(q->tap);\n\tif (!tap) {",
     "\ttap = rcu_dereference(q->tap);\n\tif (!tap) {", DEREF, "error", "tap_get_user"),
    # tap: the unlock moved above the use of the tap's device
    ("drivers/net/tap.c", "tap_get_user",
     "\tskb->dev = tap->dev;\n", "\trcu_read_unlock();\n\tskb->dev = tap->dev;\n\trcu_read_lock();\n",
     ESCAPE, "error", "tap_get_user"),
    # tap: the error path reads the tap after its section
    ("drivers/net/tap.c", "tap_get_user",
     "\tif (tap && tap->count_tx_dropped)\n\t\ttap->count_tx_dropped(tap);\n\trcu_read_unlock();\n",
     "\trcu_read_unlock();\n\tif (tap && tap->count_tx_dropped)\n\t\ttap->count_tx_dropped(tap);\n",
     ESCAPE, "error", "tap_get_user"),
    # virtio_net: receive_small's section deleted; it runs from NAPI poll (BH off: the object stays
    # alive, lockdep splats)
    ("drivers/net/virtio_net.c", "receive_small", "\trcu_read_lock();\n", "", DEREF, "warning",
     "receive_small"),
    # bonding: the relock after rtnl_unlock() forgotten in the ARP monitor
    ("drivers/net/bonding/bond_main.c", "bond_activebackup_arp_mon",
     "\t\trtnl_unlock();\n\t\trcu_read_lock();\n", "\t\trtnl_unlock();\n", DEREF, "error",
     "bond_activebackup_arp_mon"),
]


@pytest.fixture(scope="module")
def context_61(kernel_tree) -> TreeContext:
    """The call index of the 6.1 tree (built once per tree content, cached), given with every
    check here: entry states come from callers anywhere in the tree."""
    from patchbench.checks import callindex
    from tests.support.kernel import TAG
    return TreeContext(callindex.from_git(kernel_tree / ".git", TAG, os.cpu_count() or 1))


@pytest.fixture
def lint(context_61):
    """Findings of the rules on a file's text, judged in the 6.1 tree."""
    return lambda path, source: checkfile.check_source(path, source, RULES, context=context_61)


@pytest.mark.kernel
@pytest.mark.parametrize("path", PRISTINE)
def test_pristine_file_has_no_finding(kernel_tree, lint, path):
    assert lint(path, (kernel_tree / path).read_bytes()) == []


def mutate(source: str, function: str, old: str, new: str) -> str:
    start = re.search(rf"^[^\n;]*\b{re.escape(function)}\(", source, re.M)
    assert start, function
    end = source.index("\n}\n", start.start())
    body = source[start.start():end]
    assert body.count(old) == 1, f"{old!r} must occur once in {function}"
    return source[:start.start()] + body.replace(old, new) + source[end:]


@pytest.mark.kernel
@pytest.mark.parametrize("path,function,old,new,rule,severity,reported_in", MUTATIONS,
                         ids=[f"{m[0].rsplit('/', 1)[1]}:{m[1]}:{m[4]}" for m in MUTATIONS])
def test_mutation_is_found(kernel_tree, lint, path, function, old, new, rule, severity, reported_in):
    reported_in = (reported_in,) if isinstance(reported_in, str) else reported_in
    source = (kernel_tree / path).read_text()
    broken = mutate(source, function, old, new)
    found = lint(path, broken.encode())
    assert (rule, severity, reported_in[0]) in {(f.rule, f.severity, f.function) for f in found}
    assert all(f.function in reported_in for f in found), found


@pytest.mark.kernel
def test_a_late_use_the_callers_reader_covers_is_latent(kernel_tree, lint):
    """xmit's unlock moved above the last use of tfile: __dev_queue_xmit()'s rcu_read_lock_bh()
    still holds there and keeps tfile alive, and a plain use is nothing lockdep checks, so no path
    goes wrong (latent: docs/truth.md) and rcu-pointer-escapes stays quiet."""
    path = "drivers/net/tun.c"
    source = (kernel_tree / path).read_text()
    old = "\ttfile->socket.sk->sk_data_ready(tfile->socket.sk);\n\n\trcu_read_unlock();\n\treturn NETDEV_TX_OK;"
    broken = mutate(source, "tun_net_xmit", old,
                    "\trcu_read_unlock();\n\ttfile->socket.sk->sk_data_ready(tfile->socket.sk);\n\treturn NETDEV_TX_OK;")
    assert broken != source
    assert not [f for f in lint(path, broken.encode()) if f.function == "tun_net_xmit"]


# The seeds' helper (netdev, 2026): consume under the ring's lock and wake the queue through the
# RCU-protected tun pointer; `late` moves the wake after rcu_read_unlock() as a reviewer warned.
RING_CONSUME = """
static void *tun_ring_consume(struct tun_file *tfile)
{
	struct ptr_ring *ring = &tfile->tx_ring;
	struct net_device *dev;
	void *ptr;

	spin_lock(&ring->consumer_lock);

	ptr = __ptr_ring_consume(ring);
	if (unlikely(ptr && __ptr_ring_consume_created_space(ring, 1))) {
		rcu_read_lock();
		dev = rcu_dereference(tfile->tun)->dev;
		netif_wake_subqueue(dev, tfile->queue_index);
		rcu_read_unlock();
	}

	spin_unlock(&ring->consumer_lock);

	return ptr;
}

"""


@pytest.mark.kernel
@pytest.mark.parametrize("late", [False, True], ids=["wake-inside", "wake-after-unlock"])
def test_seed_ring_consume_helper_in_real_tun(kernel_tree, lint, late):
    source = (kernel_tree / "drivers/net/tun.c").read_text()
    helper = RING_CONSUME
    if late:
        helper = helper.replace("\t\tnetif_wake_subqueue(dev, tfile->queue_index);\n"
                                "\t\trcu_read_unlock();\n",
                                "\t\trcu_read_unlock();\n"
                                "\t\tnetif_wake_subqueue(dev, tfile->queue_index);\n")
    patched = source.replace("static void *tun_ring_recv(", helper + "static void *tun_ring_recv(")
    patched = patched.replace("\tptr = ptr_ring_consume(&tfile->tx_ring);",
                              "\tptr = tun_ring_consume(tfile);")
    assert patched.count("tun_ring_consume(tfile)") == 2
    found = lint("drivers/net/tun.c", patched.encode())
    if late:
        assert [(f.rule, f.function) for f in found] == [(ESCAPE, "tun_ring_consume")]
        assert "'dev'" in found[0].message
    else:
        assert found == []


# The mission's second example: a consume helper of the read path that reaches the device through
# rcu_dereference(tfile->tun)->dev with no read-side section at all.
NO_SECTION_CONSUME = """
static void *tun_ring_consume(struct tun_file *tfile)
{
	struct net_device *dev;
	void *ptr;

	ptr = ptr_ring_consume(&tfile->tx_ring);
	if (ptr) {
		dev = rcu_dereference(tfile->tun)->dev;
		netif_wake_subqueue(dev, tfile->queue_index);
	}
	return ptr;
}

"""


@pytest.mark.kernel
def test_consume_helper_without_a_section_is_reported(kernel_tree, lint):
    source = (kernel_tree / "drivers/net/tun.c").read_text()
    patched = source.replace("static void *tun_ring_recv(", NO_SECTION_CONSUME + "static void *tun_ring_recv(")
    patched = patched.replace("\tptr = ptr_ring_consume(&tfile->tx_ring);", "\tptr = tun_ring_consume(tfile);")
    found = lint("drivers/net/tun.c", patched.encode())
    assert [(f.rule, f.severity, f.function) for f in found] == [(DEREF, "error", "tun_ring_consume")]


@pytest.mark.kernel
def test_bh_section_deleted_under_a_callers_read_lock_bh_is_not_reported(kernel_tree, lint):
    """wireguard's send4() without its rcu_read_lock_bh(): both callers hold
    read_lock_bh(&peer->endpoint_lock), so BH is off and rcu_dereference_bh() is satisfied."""
    path = "drivers/net/wireguard/socket.c"
    broken = mutate((kernel_tree / path).read_text(), "send4", "\trcu_read_lock_bh();\n", "")
    assert [f for f in lint(path, broken.encode()) if f.function == "send4" and f.rule == DEREF] == []


@pytest.mark.kernel
def test_a_callee_elsewhere_that_needs_a_section_is_found_where_a_work_item_lacks_it(kernel_tree, lint, context_61):
    """hwsim's scan work calls mac80211's ieee80211_tx_prepare_skb(), whose helper reads the
    station with rcu_dereference() (net/mac80211/tx.c): the work item (process context) must
    hold the section; hwsim's own mutex, held there, is nothing to mac80211's data."""
    path = "drivers/net/wireless/mac80211_hwsim.c"
    summary = context_61.index.need_of("ieee80211_tx_prepare_skb")
    assert summary[0] == "rcu_dereference" and summary[1] == "net/mac80211/tx.c"
    assert summary[3] == "ieee80211_tx_prepare"
    source = (kernel_tree / path).read_text()
    assert [f for f in lint(path, source.encode()) if f.function == "hw_scan_work"] == []
    broken = mutate(source, "hw_scan_work", "\t\t\trcu_read_lock();\n\t\t\tif (!ieee80211_tx_prepare_skb(",
                    "\t\t\tif (!ieee80211_tx_prepare_skb(")
    found = [f for f in lint(path, broken.encode()) if f.function == "hw_scan_work"]
    assert [(f.rule, f.severity) for f in found] == [(DEREF, "error")]
    assert found[0].message == (
        "ieee80211_tx_prepare_skb() needs an RCU read-side section and is called outside one "
        f"(through ieee80211_tx_prepare(), rcu_dereference() at net/mac80211/tx.c:{summary[2]})")
