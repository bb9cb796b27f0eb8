"""`patchbench check` on real series: each patch's new findings, by identity, on the right patch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchbench.cli import main
from tests.support import kernel
from tests.support.git_series import commit_files, format_patch, git
from tests.support.ring_series import (TAP, TAP_FIX_PATCH, TAP_HELPER, TAP_HELPER_NO_LOCK, TUN_HELPER,
                                       TUN_HELPER_UNLOCKED_PATH, WAKE_PATCH, make_series, tap_patch, tun_patch)


def check_json(capsys, series: Path, repo: Path, *extra: str) -> tuple[int, dict]:
    code = main(["check", str(series), "--tree", str(repo), "--format", "json", "--checks", "rules", *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture(autouse=True)
def private_facts_cache(tmp_path, monkeypatch):
    """Analyse for real: no facts cached by an earlier run of the checker."""
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def kernel_clone(kernel_tree: Path, tmp_path_factory) -> tuple[Path, str]:
    repo = tmp_path_factory.mktemp("check") / "linux"
    git(repo.parent, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
    return repo, git(repo, "rev-parse", kernel.TAG)


@pytest.fixture
def check_kernel_series(kernel_clone, tmp_path, capsys):
    """Mail the patches on 6.1 and `patchbench check` them: (exit code, JSON report, mail directory)."""
    repo, base = kernel_clone

    def check(*patches) -> tuple[int, dict, Path]:
        series = make_series(repo, base, list(patches), tmp_path / "series")
        code, report = check_json(capsys, series, repo)
        return code, report, series
    return check


@pytest.mark.kernel
def test_seed_series_done_right_has_no_findings(check_kernel_series, kernel_clone):
    code, report, _ = check_kernel_series(tun_patch(TUN_HELPER), tap_patch(TAP_HELPER), WAKE_PATCH)
    assert report["findings"] == []
    assert [p["new_findings"] for p in report["patches"]] == [0, 0, 0]
    assert report["base"] == kernel_clone[1] and code == 0


@pytest.mark.kernel
def test_consume_without_the_lock_is_reported_on_its_patch(check_kernel_series):
    code, report, _ = check_kernel_series(tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK), WAKE_PATCH)
    assert code == 1
    assert [(f["rule"], f["file"], f["function"], f["patch"]) for f in report["findings"]] == [
        ("ptr-ring-consume-unlocked", TAP, "tap_ring_consume", 2)]
    assert [p["new_findings"] for p in report["patches"]] == [0, 1, 0]


@pytest.mark.kernel
def test_unlock_before_consume_on_one_path_is_reported_on_patch_1(check_kernel_series):
    code, report, _ = check_kernel_series(tun_patch(TUN_HELPER_UNLOCKED_PATH), tap_patch(TAP_HELPER), WAKE_PATCH)
    assert code == 1
    # patch 3 adds __ptr_ring_consume_created_space() after that consume: unlocked on the same path
    assert [(f["rule"], f["function"], f["patch"], f["message"].split("(")[0]) for f in report["findings"]] == [
        ("ptr-ring-consume-unlocked", "tun_ring_consume", 1, "__ptr_ring_consume"),
        ("ptr-ring-consume-unlocked", "tun_ring_consume", 3, "__ptr_ring_consume_created_space")]
    assert all("on some paths" in f["message"] for f in report["findings"])


@pytest.mark.kernel
def test_bug_repaired_by_a_later_patch_still_counts_against_its_patch(check_kernel_series, kernel_clone, capsys):
    code, report, series = check_kernel_series(tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK), TAP_FIX_PATCH)
    assert code == 1
    assert [(f["function"], f["patch"]) for f in report["findings"]] == [("tap_ring_consume", 2)]
    main(["check", str(series), "--tree", str(kernel_clone[0]), "--format", "terse", "--checks", "rules"])
    terse = capsys.readouterr().out.splitlines()
    assert len(terse) == 1 and terse[0].startswith(f"{TAP}:")
    assert terse[0].endswith("ptr-ring-consume-unlocked: patch 2/3: __ptr_ring_consume(q->ring) without "
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
