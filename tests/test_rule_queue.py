"""queue-stop-unmatched and queue-wake-wrong-queue on hand-written drivers and on real 6.1 drivers.

Fixtures mark each expected finding's line with `/* expect: <rule> */`; the table below says which
findings (rule, function) each fixture must give, and nothing else. Real drivers are linted from
the cached Debian 6.1 tree: pristine files give no finding, and mutations of them (done in memory,
the tree is never touched) that break stop/wake pairing are found.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchbench.checks.run import checkfile
from patchbench.commands.lint import lint_files

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "queue"
QUEUE_RULES = {"queue-stop-unmatched", "queue-wake-wrong-queue"}
STOP, WRONG = "queue-stop-unmatched", "queue-wake-wrong-queue"

EXPECTED = {
    # true positives
    "tp_stop_no_wake.c": {(STOP, "dove_start_xmit")},
    "tp_wake_only_reset.c": {(STOP, "wren_xmit")},
    "tp_start_in_completion.c": {(STOP, "finch_tx_irq")},
    "tp_wrong_queue.c": {(WRONG, "heron_clean_tx")},
    "tp_wrong_queue_zero.c": {(WRONG, "kite_consume")},
    "tp_stop_after_submit.c": {(STOP, "lark_start_xmit")},
    "tp_reader_no_wake.c": {(STOP, "pipit_net_xmit")},
    "tp_recheck_no_barrier.c": {(STOP, "__martin_maybe_stop_tx")},
    "tp_wake_only_in_timeout_task.c": {(STOP, "shrike_start_xmit")},
    "tp_wake_only_in_open.c": {(STOP, "tern_xmit")},
    "tp_closed_never_reopened.c": {(STOP, "wren2_close")},
    # correct shapes that naive matching flags
    "ok_wrapper_from_napi.c": set(),
    "ok_recheck_start.c": set(),
    "ok_same_lock.c": set(),
    "ok_teardown.c": set(),
    "ok_conditional_stop.c": set(),
    "ok_ring_reader.c": set(),
    "ok_per_ring_field.c": set(),
    "ok_suppressed.c": set(),
    "ok_tty_write_wakeup.c": set(),
    "ok_ldisc_receive_wakes.c": set(),
    "ok_wake_every_queue_in_loop.c": set(),
    "ok_counted_in_flight.c": set(),
    "ok_periodic_poll.c": set(),
    "ok_stop_then_schedule.c": set(),
    "ok_stop_then_kick.c": set(),
    "ok_single_queue_device.c": set(),
    "ok_bql_completion_barrier.c": set(),
    "ok_closed_reopened_on_link_up.c": set(),
}

_EXPECT = re.compile(r"/\* expect: ([a-z-]+) \*/")


def lint(path: str, source: bytes):
    return checkfile.check_source(path, source, QUEUE_RULES)


def test_every_fixture_is_in_the_table():
    assert {p.name for p in FIXTURES.glob("*.c")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name):
    source = (FIXTURES / name).read_bytes()
    findings = lint(name, source)
    assert {(f.rule, f.function) for f in findings} == EXPECTED[name]
    marked = {(m.group(1), number) for number, line in enumerate(source.decode().splitlines(), 1)
              for m in _EXPECT.finditer(line)}
    assert {(f.rule, f.line) for f in findings} == marked


def test_messages_name_the_queues():
    [finding] = lint("tp_wrong_queue.c", (FIXTURES / "tp_wrong_queue.c").read_bytes())
    assert "heron_ring.reg_idx" in finding.message and "heron_ring.queue_index" in finding.message
    [finding] = lint("tp_wake_only_reset.c", (FIXTURES / "tp_wake_only_reset.c").read_bytes())
    assert "only in open, reset or deferred paths" in finding.message


def test_removing_the_suppression_brings_the_finding_back():
    source = (FIXTURES / "ok_suppressed.c").read_text()
    bare = re.sub(r"/\* patchbench: allow\([^)]*\)[^*]*\*/\n", "", source)
    assert bare != source
    assert [(f.rule, f.function) for f in lint("ok_suppressed.c", bare.encode())] == \
        [(STOP, "stork_start_xmit")]


# --- real 6.1 drivers ------------------------------------------------------------------------

PRISTINE = [
    "drivers/net/tun.c", "drivers/net/tap.c", "drivers/vhost/net.c", "drivers/net/virtio_net.c",
    "drivers/net/ethernet/intel/e1000/e1000_main.c", "drivers/net/ethernet/intel/igb/igb_main.c",
    "drivers/net/ethernet/realtek/r8169_main.c", "drivers/net/hyperv/netvsc.c",
    "drivers/net/hyperv/netvsc_drv.c", "drivers/net/xen-netfront.c",
    "drivers/net/bonding/bond_main.c",
]

E1000 = "drivers/net/ethernet/intel/e1000/e1000_main.c"
IGB = "drivers/net/ethernet/intel/igb/igb_main.c"
IGBVF = "drivers/net/ethernet/intel/igbvf/netdev.c"
R8169 = "drivers/net/ethernet/realtek/r8169_main.c"
XEN = "drivers/net/xen-netfront.c"
NETVSC = "drivers/net/hyperv/netvsc.c"
VIRTIO = "drivers/net/virtio_net.c"
TUN = "drivers/net/tun.c"

E1000_WAKE = "\t\t\tnetif_wake_queue(netdev);\n\t\t\t++adapter->restart_queue;"
IGB_WAKE = "netif_wake_subqueue(tx_ring->netdev,\n\t\t\t\t\t    tx_ring->queue_index);"
R8169_WAKE = "if (netif_queue_stopped(dev) && rtl_tx_slots_avail(tp))\n\t\t\tnetif_wake_queue(dev);"
XEN_WAKE = "\t\tnetif_tx_wake_queue(netdev_get_tx_queue(dev, queue->id));"
NETVSC_WAKE = "\t\t\tnetif_tx_wake_queue(txq);\n\t\t\tndev_ctx->eth_stats.wake_queue++;\n\t\t}\n\t}\n}"
VIRTIO_WAKE = "\t\tif (sq->vq->num_free >= 2 + MAX_SKB_FRAGS)\n\t\t\tnetif_tx_wake_queue(txq);"
TUN_PRODUCE = "\tif (ptr_ring_produce(&tfile->tx_ring, skb)) {"
TAP = "drivers/net/tap.c"
TAP_PRODUCE = "\t\tif (ptr_ring_produce(&q->ring, skb)) {\n\t\t\tdrop_reason = SKB_DROP_REASON_FULL_RING;\n\t\t\tgoto drop;\n\t\t}\n\t}"

# (file, text, replacement, rule, function the finding must be in)
MUTATIONS = {
    "e1000-wake-deleted": (E1000, E1000_WAKE, "\t\t\t++adapter->restart_queue;",
                           STOP, "__e1000_maybe_stop_tx"),
    "e1000-start-in-completion": (E1000, E1000_WAKE, E1000_WAKE.replace("wake", "start"),
                                  STOP, "e1000_clean_tx_irq"),
    "igb-wakes-register-index": (IGB, IGB_WAKE, IGB_WAKE.replace("queue_index", "reg_idx"),
                                 WRONG, "igb_clean_tx_irq"),
    "igb-wake-deleted": (IGB, IGB_WAKE, ";", STOP, "__igb_maybe_stop_tx"),
    "igb-start-in-completion": (IGB, IGB_WAKE, IGB_WAKE.replace("wake", "start"),
                                STOP, "igb_clean_tx_irq"),
    "r8169-wake-deleted": (R8169, R8169_WAKE, ";", STOP, "rtl8169_start_xmit"),
    "r8169-start-in-completion": (R8169, R8169_WAKE, R8169_WAKE.replace("wake", "start"),
                                  STOP, "rtl_tx"),
    "xen-wakes-queue-0": (XEN, XEN_WAKE, XEN_WAKE.replace("queue->id", "0"),
                          WRONG, "xennet_maybe_wake_tx"),
    "xen-wake-deleted": (XEN, XEN_WAKE, ";", STOP, "xennet_start_xmit"),
    "xen-completion-unlocked": (XEN, "\tspin_lock_irqsave(&queue->tx_lock, flags);\n\tif (xennet_tx_buf_gc",
                                "\tif (xennet_tx_buf_gc", STOP, "xennet_start_xmit"),
    "netvsc-start-in-completion": (NETVSC, NETVSC_WAKE, NETVSC_WAKE.replace("wake", "start"),
                                   STOP, "netvsc_send_tx_complete"),
    "netvsc-wake-deleted": (NETVSC, NETVSC_WAKE, NETVSC_WAKE.replace("netif_tx_wake_queue(txq);", ""),
                            STOP, "netvsc_send_pkt"),
    "virtio-start-in-napi-tx": (VIRTIO, VIRTIO_WAKE, VIRTIO_WAKE.replace("wake", "start"),
                                STOP, "virtnet_poll_cleantx"),
    "virtio-napi-tx-wakes-queue-0": (VIRTIO, "txq = netdev_get_tx_queue(vi->dev, index);\n\t__netif_tx_lock",
                                     "txq = netdev_get_tx_queue(vi->dev, 0);\n\t__netif_tx_lock",
                                     WRONG, "virtnet_poll_tx"),
    "e1000-no-barrier-before-recheck": (E1000, "\t */\n\tsmp_mb();\n\n\t/* We need to check again",
                                        "\t */\n\n\t/* We need to check again", STOP, "__e1000_maybe_stop_tx"),
    # igbvf, not e1000: e1000's netdev_completed_queue() (BQL, always built) fences its test anyway
    "igbvf-no-barrier-in-completion": (IGBVF, "\t\t */\n\t\tsmp_mb();\n\t\tif (netif_queue_stopped(netdev) &&",
                                       "\t\t */\n\t\tif (netif_queue_stopped(netdev) &&", STOP, "igbvf_clean_tx_irq"),
    "igb-no-barrier-before-recheck": (IGB, "\t */\n\tsmp_mb();\n\n\t/* We need to check again",
                                      "\t */\n\n\t/* We need to check again", STOP, "__igb_maybe_stop_tx"),
    "r8169-no-barrier-before-recheck": (R8169, "\t\tsmp_mb__after_atomic();\n\t\tif (rtl_tx_slots_avail(tp))",
                                        "\t\tif (rtl_tx_slots_avail(tp))", STOP, "rtl8169_start_xmit"),
    "r8169-completion-index-not-fenced": (R8169, "smp_store_mb(tp->dirty_tx, dirty_tx);",
                                          "WRITE_ONCE(tp->dirty_tx, dirty_tx);", STOP, "rtl_tx"),
    "tun-stops-without-consumer-wake": (TUN, TUN_PRODUCE,
                                        "\tif (__ptr_ring_full(&tfile->tx_ring))\n"
                                        "\t\tnetif_stop_subqueue(dev, txq);\n" + TUN_PRODUCE,
                                        STOP, "tun_net_xmit"),
    "tap-producer-stops-without-reader-wake": (TAP, TAP_PRODUCE, TAP_PRODUCE[:-3] +
                                               "\t\tif (__ptr_ring_full(&q->ring))\n"
                                               "\t\t\tnetif_stop_subqueue(dev, q->queue_index);\n\t}",
                                               STOP, "tap_handle_frame"),
}


@pytest.mark.kernel
@pytest.mark.parametrize("path", PRISTINE)
def test_pristine_driver_is_clean(kernel_tree, path):
    assert lint(path, (kernel_tree / path).read_bytes()) == []


@pytest.mark.kernel
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutated_driver_is_found(kernel_tree, name):
    path, text, replacement, rule, function = MUTATIONS[name]
    source = (kernel_tree / path).read_text()
    assert source.count(text) >= 1, f"{name}: the 6.1 text to mutate is not in {path}"
    findings = lint(path, source.replace(text, replacement, 1).encode())
    assert (rule, function) in {(f.rule, f.function) for f in findings}, findings
    assert {f.rule for f in findings} <= QUEUE_RULES


# A two-step series on tun.c, in memory: the xmit stop lands first, the reader-side wake second.
TUN_STOP = ("\tif (__ptr_ring_full(&tfile->tx_ring)) {\n"
            "\t\tnetif_tx_stop_queue(netdev_get_tx_queue(dev, txq));\n"
            "\t\tsmp_mb__after_atomic();\n"
            "\t\tif (!__ptr_ring_full(&tfile->tx_ring))\n"
            "\t\t\tnetif_tx_wake_queue(netdev_get_tx_queue(dev, txq));\n"
            "\t}\n")
TUN_CONSUME_HELPER = """static void *tun_ring_consume(struct tun_file *tfile)
{
	struct ptr_ring *ring = &tfile->tx_ring;
	struct tun_struct *tun;
	void *ptr;

	spin_lock(&ring->consumer_lock);
	ptr = __ptr_ring_consume(ring);
	if (ptr) {
		rcu_read_lock();
		tun = rcu_dereference(tfile->tun);
		if (tun)
			netif_wake_subqueue(tun->dev, tfile->queue_index);
		rcu_read_unlock();
	}
	spin_unlock(&ring->consumer_lock);
	return ptr;
}

static void *tun_ring_recv("""


def tun_series(source: str) -> tuple[str, str]:
    """tun.c after patch 1 (stop in tun_net_xmit) and after patch 2 (reader wakes the queue)."""
    stopped = source.replace(TUN_PRODUCE, TUN_STOP + TUN_PRODUCE, 1)
    woken = stopped.replace("static void *tun_ring_recv(", TUN_CONSUME_HELPER, 1)
    woken = woken.replace("ptr = ptr_ring_consume(&tfile->tx_ring);", "ptr = tun_ring_consume(tfile);")
    return stopped, woken


@pytest.mark.kernel
def test_stop_one_patch_before_its_wake_is_found_then_cleared(kernel_tree):
    stopped, woken = tun_series((kernel_tree / TUN).read_text())
    assert [(f.rule, f.function) for f in lint(TUN, stopped.encode())] == [(STOP, "tun_net_xmit")]
    assert woken.count("tun_ring_consume(tfile)") == 2
    assert lint(TUN, woken.encode()) == []


@pytest.mark.kernel
def test_reader_waking_another_queue_is_found(kernel_tree):
    _, woken = tun_series((kernel_tree / TUN).read_text())
    wrong = woken.replace("netif_wake_subqueue(tun->dev, tfile->queue_index)", "netif_wake_queue(tun->dev)")
    assert [(f.rule, f.function) for f in lint(TUN, wrong.encode())] == [(WRONG, "tun_ring_consume")]


@pytest.mark.kernel
def test_stop_after_produce_without_recheck_is_a_lost_wakeup(kernel_tree):
    _, woken = tun_series((kernel_tree / TUN).read_text())
    produced = "\t\tdrop_reason = SKB_DROP_REASON_FULL_RING;\n\t\tgoto drop;\n\t}\n"
    late_stop = woken.replace(TUN_STOP, "", 1).replace(
        produced, produced + "\tif (__ptr_ring_full(&tfile->tx_ring))\n"
        "\t\tnetif_tx_stop_queue(netdev_get_tx_queue(dev, txq));\n", 1)
    findings = lint(TUN, late_stop.encode())
    assert [(f.rule, f.function, f.severity) for f in findings] == [(STOP, "tun_net_xmit", "warning")]
    assert "ptr_ring_produce()" in findings[0].message


def _split_driver(tmp_path: Path, monkeypatch, tx_edit: tuple[str, str] | None = None) -> Path:
    """The split driver (robin_main.c stops, robin_tx.c completes) in a tree of its own (Kbuild
    and MAINTAINERS mark its root), with `tx_edit` applied to robin_tx.c; caches of the test's own."""
    split = FIXTURES / "split_driver"
    tree = tmp_path / "linux"
    driver = tree / "drivers" / "net" / "robin"
    driver.mkdir(parents=True)
    (tree / "Kbuild").write_text("obj-y += drivers/\n")
    (tree / "MAINTAINERS").write_text("")
    for name in ("robin.h", "robin_main.c", "robin_tx.c"):
        text = (split / name).read_text()
        (driver / name).write_text(text.replace(*tx_edit) if tx_edit and name == "robin_tx.c" else text)
    monkeypatch.setenv("PATCHBENCH_INDEX_CACHE", str(tmp_path / "index"))
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    return driver / "robin_main.c"


def _stops(main: Path) -> list[tuple[str, str]]:
    """The queue findings of linting the driver's main file in its tree."""
    return [(f.rule, f.function) for f in lint_files([str(main)], jobs=1) if f.rule in QUEUE_RULES]


def test_wake_in_a_sibling_file_of_the_driver(tmp_path, monkeypatch):
    """A stop whose completion lives in another file sharing the driver's header is not judged
    alone, when the tree is known (its call index); when no sibling wakes, it is reported; and
    without the tree, the file is judged alone."""
    main = _split_driver(tmp_path / "woken", monkeypatch)
    assert _stops(main) == []
    main = _split_driver(tmp_path / "unwoken", monkeypatch, ("netif_wake_queue(rp->dev);", "rp->free++;"))
    assert _stops(main) == [(STOP, "robin_xmit")]
    alone = FIXTURES / "split_driver" / "robin_main.c"
    assert [(f.rule, f.function) for f in lint(str(alone), alone.read_bytes())] == [(STOP, "robin_xmit")]


@pytest.mark.parametrize("queues, expected", [(1, []), (4, [(WRONG, "plover_tx_done")])])
def test_tx_queue_count_from_the_drivers_header(tmp_path, monkeypatch, queues, expected):
    """A device allocated with a count its driver's header defines: with one tx queue the ring's
    index and "the device's queue" are the same queue; with four they are not."""
    tree = tmp_path / "linux"
    driver = tree / "drivers" / "net" / "plover"
    driver.mkdir(parents=True)
    (tree / "Kbuild").write_text("obj-y += drivers/\n")
    (tree / "MAINTAINERS").write_text("")
    source = (FIXTURES / "ok_single_queue_device.c").read_text()
    define = "#define PLOVER_TX_QUEUES\t1\t/* one ring, one queue */\n"
    assert define in source
    (driver / "plover.h").write_text(f"#define PLOVER_TX_QUEUES ({queues}U) /* rings */\n")
    (driver / "plover_main.c").write_text(source.replace(define, '#include "plover.h"\n'))
    monkeypatch.setenv("PATCHBENCH_INDEX_CACHE", str(tmp_path / "index"))
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    assert _stops(driver / "plover_main.c") == expected


def test_a_sibling_waking_only_to_recover_is_no_completion_side(tmp_path, monkeypatch):
    """A sibling file whose only wake is in a function quiescing the device first (a reset)
    does not complete tx."""
    main = _split_driver(tmp_path, monkeypatch, ("\trp->free = 64;", "\tnapi_disable(&rp->napi);\n\trp->free = 64;"))
    assert _stops(main) == [(STOP, "robin_xmit")]
