"""The seeds' tun/tap_ring_consume() series, re-created on the 6.1 tree, right and broken.

Each patch is (path, subject, [(old, new), ...]); `make_series` commits them with git plumbing on a
base (no checkout) and mails them with `git format-patch` into a directory that `patchbench check`
reads. Used by tests/test_checks_series.py and bench/check_series.py.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.git_series import commit_files, format_patch, git

TUN, TAP = "drivers/net/tun.c", "drivers/net/tap.c"

TUN_HELPER = """static void *tun_ring_consume(struct tun_file *tfile)
{
	struct ptr_ring *ring = &tfile->tx_ring;
	void *ptr;

	spin_lock(&ring->consumer_lock);
	ptr = __ptr_ring_consume(ring);
	spin_unlock(&ring->consumer_lock);

	return ptr;
}

"""
# Drops the lock on one path and consumes anyway.
TUN_HELPER_UNLOCKED_PATH = """static void *tun_ring_consume(struct tun_file *tfile)
{
	struct ptr_ring *ring = &tfile->tx_ring;
	void *ptr;

	spin_lock(&ring->consumer_lock);
	if (unlikely(need_resched()))
		spin_unlock(&ring->consumer_lock);
	ptr = __ptr_ring_consume(ring);
	spin_unlock(&ring->consumer_lock);

	return ptr;
}

"""
TAP_HELPER = """static void *tap_ring_consume(struct tap_queue *q)
{
	struct ptr_ring *ring = &q->ring;
	void *ptr;

	spin_lock(&ring->consumer_lock);
	ptr = __ptr_ring_consume(ring);
	spin_unlock(&ring->consumer_lock);

	return ptr;
}

"""
TAP_HELPER_NO_LOCK = """static void *tap_ring_consume(struct tap_queue *q)
{
	return __ptr_ring_consume(&q->ring);
}

"""
# Patch 3 of the seeds' design: wake the subqueue when the consume made room, under RCU, done
# right: tfile->tun is NULL once the queue is detached (tun.c stores NULL in it and tun_get()
# tests it), so the wake tests it first. The seeds' v7 wrote `rcu_dereference(tfile->tun)->dev`
# untested (tests/test_rule_null_belief_kernel.py).
TUN_WAKE = ("\tptr = __ptr_ring_consume(ring);\n\tspin_unlock(&ring->consumer_lock);\n",
            """	ptr = __ptr_ring_consume(ring);
	if (unlikely(ptr && __ptr_ring_consume_created_space(ring, 1))) {
		struct tun_struct *tun;

		rcu_read_lock();
		tun = rcu_dereference(tfile->tun);
		if (tun)
			netif_wake_subqueue(tun->dev, tfile->queue_index);
		rcu_read_unlock();
	}
	spin_unlock(&ring->consumer_lock);
""")
TAP_FIX = ("\treturn __ptr_ring_consume(&q->ring);\n",
           "\tvoid *ptr;\n\n\tspin_lock(&q->ring.consumer_lock);\n\tptr = __ptr_ring_consume(&q->ring);\n"
           "\tspin_unlock(&q->ring.consumer_lock);\n\treturn ptr;\n")


def tun_patch(helper: str):
    return (TUN, "tun: add tun_ring_consume() and use it in tun_ring_recv()", [
        ("static void *tun_ring_recv(struct tun_file *tfile, int noblock, int *err)\n",
         helper + "static void *tun_ring_recv(struct tun_file *tfile, int noblock, int *err)\n"),
        ("\tptr = ptr_ring_consume(&tfile->tx_ring);\n\tif (ptr)\n\t\tgoto out;",
         "\tptr = tun_ring_consume(tfile);\n\tif (ptr)\n\t\tgoto out;"),
        ("\t\tptr = ptr_ring_consume(&tfile->tx_ring);\n\t\tif (ptr)\n\t\t\tbreak;",
         "\t\tptr = tun_ring_consume(tfile);\n\t\tif (ptr)\n\t\t\tbreak;"),
    ])


def tap_patch(helper: str):
    return (TAP, "tap: add tap_ring_consume() and use it in tap_do_read()", [
        ("static ssize_t tap_do_read(struct tap_queue *q,\n", helper + "static ssize_t tap_do_read(struct tap_queue *q,\n"),
        ("\t\tskb = ptr_ring_consume(&q->ring);\n", "\t\tskb = tap_ring_consume(q);\n"),
    ])


WAKE_PATCH = (TUN, "tun: wake the subqueue when consuming made room", [TUN_WAKE])
TAP_FIX_PATCH = (TAP, "tap: take the consumer lock in tap_ring_consume()", [TAP_FIX])
# tun_net_xmit() stops its queue when the ring is full, re-checking after a barrier: right once the
# consume helper wakes it (WAKE_PATCH), before or after this patch in the series.
PRODUCE = "\tif (ptr_ring_produce(&tfile->tx_ring, skb)) {\n"
STOP_WITH_RECHECK = ("\tif (ptr_ring_full(&tfile->tx_ring)) {\n"
                     "\t\tnetif_tx_stop_queue(netdev_get_tx_queue(dev, txq));\n"
                     "\t\tsmp_mb__after_atomic();\n"
                     "\t\tif (!ptr_ring_full(&tfile->tx_ring))\n"
                     "\t\t\tnetif_tx_wake_queue(netdev_get_tx_queue(dev, txq));\n"
                     "\t}\n")
STOP_PATCH = (TUN, "tun: stop the subqueue when the tx ring is full", [(PRODUCE, STOP_WITH_RECHECK + PRODUCE)])


def commit_series(repo: Path, base: str, patches, dated_now: bool = False) -> str:
    """One commit per patch on base; the tip. Fixed dates, or the current time with `dated_now`
    (b4 looks for its cover letter commit only among the last year's)."""
    parent = base
    for n, (path, subject, edits) in enumerate(patches, 1):
        content = git(repo, "show", f"{parent}:{path}") + "\n"
        for old, new in edits:
            assert content.count(old) == 1, f"{old!r} is not unique in {path}"
            content = content.replace(old, new)
        parent = commit_files(repo, parent, {path: content.encode()},
                              f"{subject}\n\nWhy {n}.\n\nSigned-off-by: Ada Series <ada@example.org>",
                              date=f"{int(time.time())} +0000" if dated_now else f"2024-03-0{n}T09:30:00-05:00")
    return parent


def make_series(repo: Path, base: str, patches, out: Path) -> Path:
    """The patches mailed by `git format-patch` (with a cover letter) into the directory out."""
    format_patch(repo, base, commit_series(repo, base, patches), out)
    return out


# For booting on 6.1 (which has no __ptr_ring_consume_created_space): tun_net_xmit stops the subqueue
# when its ring is full, and tun_ring_consume() wakes it once a consume made room.
TUN_STOP_PATCH = (TUN, "tun: stop the subqueue when the tx ring is full", [
    ("\tif (ptr_ring_produce(&tfile->tx_ring, skb)) {\n\t\tdrop_reason = SKB_DROP_REASON_FULL_RING;\n"
     "\t\tgoto drop;\n\t}\n",
     "\tif (ptr_ring_produce(&tfile->tx_ring, skb)) {\n\t\tdrop_reason = SKB_DROP_REASON_FULL_RING;\n"
     "\t\tgoto drop;\n\t}\n\tif (ptr_ring_full(&tfile->tx_ring))\n\t\tnetif_stop_subqueue(dev, txq);\n"),
])


def tun_wake_patch(read_side: bool):
    """Wake the stopped subqueue from tun_ring_consume(); `read_side`: inside rcu_read_lock()."""
    lock, unlock = ("\t\trcu_read_lock();\n", "\t\trcu_read_unlock();\n") if read_side else ("", "")
    return (TUN, "tun: wake the subqueue when consuming made room", [
        ("\tptr = __ptr_ring_consume(ring);\n\tspin_unlock(&ring->consumer_lock);\n",
         "\tptr = __ptr_ring_consume(ring);\n\tspin_unlock(&ring->consumer_lock);\n"
         "\tif (ptr) {\n\t\tstruct tun_struct *tun;\n\n" + lock
         + "\t\ttun = rcu_dereference(tfile->tun);\n"
           "\t\tif (tun && __netif_subqueue_stopped(tun->dev, tfile->queue_index))\n"
           "\t\t\tnetif_wake_subqueue(tun->dev, tfile->queue_index);\n" + unlock + "\t}\n"),
    ])


def tun_boot_series(wake: str):
    """The 3-patch tun series for booting: helper, stop when full, then the wake `wake` says:
    "rcu" (inside a read-side section), "bare" (rcu_dereference outside one) or "none" (no wake patch:
    the stop has no matching wake)."""
    patches = [tun_patch(TUN_HELPER), TUN_STOP_PATCH]
    if wake != "none":
        patches.append(tun_wake_patch(read_side=wake == "rcu"))
    return patches
