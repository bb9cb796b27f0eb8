"""`patchbench check` on real series: each patch's new findings, by identity, on the right patch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchbench.cli import main
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
# Patch 3 of the seeds' design: wake the subqueue when the consume made room, under RCU.
TUN_WAKE = ("\tptr = __ptr_ring_consume(ring);\n\tspin_unlock(&ring->consumer_lock);\n",
            """	ptr = __ptr_ring_consume(ring);
	if (unlikely(ptr && __ptr_ring_consume_created_space(ring, 1))) {
		struct net_device *dev;

		rcu_read_lock();
		dev = rcu_dereference(tfile->tun)->dev;
		netif_wake_subqueue(dev, tfile->queue_index);
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


def make_series(repo: Path, base: str, patches, out: Path) -> Path:
    parent = base
    for n, (path, subject, edits) in enumerate(patches, 1):
        content = git(repo, "show", f"{parent}:{path}") + "\n"
        for old, new in edits:
            assert content.count(old) == 1, f"{old!r} is not unique in {path}"
            content = content.replace(old, new)
        parent = commit_files(repo, parent, {path: content.encode()},
                              f"{subject}\n\nWhy {n}.\n\nSigned-off-by: Ada Series <ada@example.org>",
                              date=f"2024-03-0{n}T09:30:00-05:00")
    format_patch(repo, base, parent, out)
    return out


def check_json(capsys, series: Path, repo: Path, *extra: str) -> tuple[int, dict]:
    code = main(["check", str(series), "--tree", str(repo), "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def kernel_clone(kernel_tree: Path, tmp_path_factory) -> tuple[Path, str]:
    repo = tmp_path_factory.mktemp("check") / "linux"
    git(repo.parent, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
    return repo, git(repo, "rev-parse", "v6.1-debian")


@pytest.mark.kernel
def test_seed_series_done_right_has_no_findings(kernel_clone, tmp_path, capsys):
    repo, base = kernel_clone
    series = make_series(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER), WAKE_PATCH], tmp_path / "ok")
    code, report = check_json(capsys, series, repo)
    assert report["findings"] == []
    assert [p["new_findings"] for p in report["patches"]] == [0, 0, 0]
    assert report["base"] == base and code == 0


@pytest.mark.kernel
def test_consume_without_the_lock_is_reported_on_its_patch(kernel_clone, tmp_path, capsys):
    repo, base = kernel_clone
    series = make_series(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK), WAKE_PATCH],
                         tmp_path / "nolock")
    code, report = check_json(capsys, series, repo)
    assert code == 1
    assert [(f["rule"], f["file"], f["function"], f["patch"]) for f in report["findings"]] == [
        ("ptr-ring-consume-unlocked", TAP, "tap_ring_consume", 2)]
    assert [p["new_findings"] for p in report["patches"]] == [0, 1, 0]


@pytest.mark.kernel
def test_unlock_before_consume_on_one_path_is_reported_on_patch_1(kernel_clone, tmp_path, capsys):
    repo, base = kernel_clone
    series = make_series(repo, base, [tun_patch(TUN_HELPER_UNLOCKED_PATH), tap_patch(TAP_HELPER), WAKE_PATCH],
                         tmp_path / "onepath")
    code, report = check_json(capsys, series, repo)
    assert code == 1
    # patch 3 adds __ptr_ring_consume_created_space() after that consume: unlocked on the same path
    assert [(f["rule"], f["function"], f["patch"], f["message"].split("(")[0]) for f in report["findings"]] == [
        ("ptr-ring-consume-unlocked", "tun_ring_consume", 1, "__ptr_ring_consume"),
        ("ptr-ring-consume-unlocked", "tun_ring_consume", 3, "__ptr_ring_consume_created_space")]
    assert all("on some paths" in f["message"] for f in report["findings"])


@pytest.mark.kernel
def test_bug_repaired_by_a_later_patch_still_counts_against_its_patch(kernel_clone, tmp_path, capsys):
    repo, base = kernel_clone
    series = make_series(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK), TAP_FIX_PATCH],
                         tmp_path / "repaired")
    code, report = check_json(capsys, series, repo)
    assert code == 1
    assert [(f["function"], f["patch"]) for f in report["findings"]] == [("tap_ring_consume", 2)]
    main(["check", str(series), "--tree", str(repo), "--format", "terse"])
    terse = capsys.readouterr().out.splitlines()
    assert len(terse) == 1 and terse[0].startswith(f"{TAP}:")
    assert terse[0].endswith("ptr-ring-consume-unlocked: __ptr_ring_consume(q->ring) without "
                             "q->ring's consumer_lock held here or in every caller")


SMALL = """#include <linux/ptr_ring.h>

static void *old_unlocked(struct ptr_ring *r)
{
	return __ptr_ring_consume(r);
}
"""


def test_identity_ignores_line_shifts_and_repeats(tmp_path, capsys):
    """A small repository: moving an old finding or repeating it is not new; a new function is."""
    repo = tmp_path / "small"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = commit_files(repo, None, {"drivers/net/small.c": SMALL.encode()}, "base", ref="refs/heads/main")
    shifted = SMALL.replace("#include <linux/ptr_ring.h>\n", "#include <linux/ptr_ring.h>\n\n/* moved down */\n\n")
    repeated = shifted.replace("\treturn __ptr_ring_consume(r);\n",
                               "\t__ptr_ring_consume(r);\n\treturn __ptr_ring_consume(r);\n")
    added = repeated + "\nstatic void *new_unlocked(struct ptr_ring *r)\n{\n\treturn __ptr_ring_peek(r);\n}\n"
    parent = base
    for n, content in enumerate([shifted, repeated, added], 1):
        parent = commit_files(repo, parent, {"drivers/net/small.c": content.encode()}, f"small: step {n}\n\nWhy.")
    series = format_patch(repo, base, parent, tmp_path / "series")
    code, report = check_json(capsys, tmp_path / "series", repo)
    assert series and code == 1
    assert [(f["function"], f["patch"], f["line"]) for f in report["findings"]] == [("new_unlocked", 3, 14)]
    assert git(repo, "rev-parse", "HEAD") == base   # the user's branch is where it was
