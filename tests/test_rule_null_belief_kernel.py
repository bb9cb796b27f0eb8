"""rcu-deref-null-unchecked on the seeds' v7 3/9 (tun/tap: a ptr_ring consume helper that wakes the
netdev queue), re-created as a one-patch series on the newest tree: both helpers dereference the
queue's owner from rcu_dereference() without the NULL test every other reader of it makes, and
nothing else is reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchbench.cli import main
from tests.support.git_series import commit_files, format_patch, git

TUN, TAP = "drivers/net/tun.c", "drivers/net/tap.c"
RULE = "rcu-deref-null-unchecked"

# Our own writing of what the seed's patch describes: a helper consuming under the ring's
# consumer_lock that wakes the queue's subqueue through the owner read under RCU.
TAP_HELPER = """static void *tap_ring_consume(struct tap_queue *q)
{
	struct ptr_ring *ring = &q->ring;
	struct net_device *dev;
	void *ptr;

	spin_lock(&ring->consumer_lock);
	ptr = __ptr_ring_consume(ring);
	if (ptr && __ptr_ring_consume_created_space(ring, 1)) {
		rcu_read_lock();
		dev = rcu_dereference(q->tap)->dev;
		netif_wake_subqueue(dev, q->queue_index);
		rcu_read_unlock();
	}
	spin_unlock(&ring->consumer_lock);

	return ptr;
}

"""
TUN_HELPER = TAP_HELPER.replace("tap_ring_consume(struct tap_queue *q)", "tun_ring_consume(struct tun_file *tfile)") \
    .replace("&q->ring", "&tfile->tx_ring").replace("q->tap", "tfile->tun").replace("q->queue_index", "tfile->queue_index")

PATCH = (None, "tun/tap: add ptr_ring consume helpers that wake the netdev queue", [
    (TAP, "static ssize_t tap_do_read(struct tap_queue *q,\n", TAP_HELPER + "static ssize_t tap_do_read(struct tap_queue *q,\n"),
    (TAP, "\t\tskb = ptr_ring_consume(&q->ring);\n", "\t\tskb = tap_ring_consume(q);\n"),
    (TUN, "static void *tun_ring_recv(struct tun_file *tfile, int noblock, int *err)\n",
     TUN_HELPER + "static void *tun_ring_recv(struct tun_file *tfile, int noblock, int *err)\n"),
    (TUN, "\tptr = ptr_ring_consume(&tfile->tx_ring);\n\tif (ptr)\n\t\tgoto out;",
     "\tptr = tun_ring_consume(tfile);\n\tif (ptr)\n\t\tgoto out;"),
    (TUN, "\t\tptr = ptr_ring_consume(&tfile->tx_ring);\n\t\tif (ptr)\n\t\t\tbreak;",
     "\t\tptr = tun_ring_consume(tfile);\n\t\tif (ptr)\n\t\t\tbreak;"),
])


@pytest.fixture(autouse=True)
def private_facts_cache(tmp_path, monkeypatch):
    """Analyse for real: no facts cached by an earlier run of the checker."""
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))


def one_patch_two_files(repo: Path, base: str, out: Path) -> Path:
    """The patch touching tap.c and tun.c, mailed as a one-patch series (make_series commits one
    file per patch; this one commits both files at once)."""
    contents = {path: git(repo, "show", f"{base}:{path}") + "\n" for path in (TAP, TUN)}
    for path, old, new in PATCH[2]:
        assert contents[path].count(old) == 1, f"{old!r} is not unique in {path}"
        contents[path] = contents[path].replace(old, new)
    tip = commit_files(repo, base, {path: text.encode() for path, text in contents.items()},
                       f"{PATCH[1]}\n\nWake the queue once a consume made room.\n\n"
                       "Signed-off-by: Ada Series <ada@example.org>", date="2024-03-01T09:30:00-05:00")
    format_patch(repo, base, tip, out)
    return out


@pytest.mark.kernel
def test_seed_v7_3_9_dereferences_the_detached_owner_in_both_helpers(kernel_tree_new: Path, tmp_path, capsys):
    repo = tmp_path / "linux"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree_new), str(repo))
    base = git(repo, "rev-parse", "debian-newest")
    series = one_patch_two_files(repo, base, tmp_path / "series")
    code = main(["check", str(series), "--tree", str(repo), "--format", "json", "--checks", "rules"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    found = sorted((f["rule"], f["file"], f["function"], f["severity"], f["patch"]) for f in report["findings"])
    assert found == [(RULE, TAP, "tap_ring_consume", "error", 1), (RULE, TUN, "tun_ring_consume", "error", 1)]
    by_file = {f["file"]: f for f in report["findings"]}
    assert "'rcu_dereference(q->tap)->dev'" in by_file[TAP]["message"]
    assert "tap_queue.tap" in by_file[TAP]["message"]
    assert "'rcu_dereference(tfile->tun)->dev'" in by_file[TUN]["message"]
    assert "tun_file.tun" in by_file[TUN]["message"]
