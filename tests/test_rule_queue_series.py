"""`patchbench check` on tun/tap flow-control series against 6.1: queue findings on the right patch.

The series build on the seeds' tun_ring_consume() helper (tests/support/ring_series.py): one patch
makes tun_net_xmit() stop its subqueue when the ring is full, another makes the consume helper wake
it. A stop that lands one patch before its wake must be reported on that patch, and only there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchbench.cli import main
from tests.support.git_series import git
from tests.support.ring_series import TUN, TUN_HELPER, WAKE_PATCH, make_series, tun_patch

PRODUCE = "\tif (ptr_ring_produce(&tfile->tx_ring, skb)) {\n"
STOP_WITH_RECHECK = ("\tif (ptr_ring_full(&tfile->tx_ring)) {\n"
                     "\t\tnetif_tx_stop_queue(netdev_get_tx_queue(dev, txq));\n"
                     "\t\tsmp_mb__after_atomic();\n"
                     "\t\tif (!ptr_ring_full(&tfile->tx_ring))\n"
                     "\t\t\tnetif_tx_wake_queue(netdev_get_tx_queue(dev, txq));\n"
                     "\t}\n")
STOP_PATCH = (TUN, "tun: stop the subqueue when the tx ring is full", [(PRODUCE, STOP_WITH_RECHECK + PRODUCE)])
# The consumer restarts the queue with a start instead of a wake.
START_PATCH = (TUN, "tun: restart the subqueue when consuming made room",
               [(WAKE_PATCH[2][0][0], WAKE_PATCH[2][0][1].replace("netif_wake_subqueue", "netif_start_subqueue"))])


@pytest.fixture(scope="module")
def kernel_clone(kernel_tree: Path, tmp_path_factory) -> tuple[Path, str]:
    repo = tmp_path_factory.mktemp("queue-check") / "linux"
    git(repo.parent, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
    return repo, git(repo, "rev-parse", "v6.1-debian")


@pytest.fixture
def check(kernel_clone, tmp_path, capsys):
    repo, base = kernel_clone

    def run(*patches) -> tuple[int, dict]:
        series = make_series(repo, base, list(patches), tmp_path / "series")
        code = main(["check", str(series), "--tree", str(repo), "--format", "json"])
        return code, json.loads(capsys.readouterr().out)
    return run


def queue_findings(report: dict) -> list[tuple]:
    return [(f["rule"], f["function"], f["patch"]) for f in report["findings"] if f["rule"].startswith("queue-")]


@pytest.mark.kernel
def test_wake_before_stop_is_clean(check):
    code, report = check(tun_patch(TUN_HELPER), WAKE_PATCH, STOP_PATCH)
    assert queue_findings(report) == []
    assert code == 0


@pytest.mark.kernel
def test_stop_one_patch_before_its_wake_is_reported_on_that_patch(check):
    code, report = check(tun_patch(TUN_HELPER), STOP_PATCH, WAKE_PATCH)
    assert code == 1
    assert queue_findings(report) == [("queue-stop-unmatched", "tun_net_xmit", 2)]
    assert [p["new_findings"] for p in report["patches"]] == [0, 1, 0]


@pytest.mark.kernel
def test_consumer_start_instead_of_wake_is_reported_on_its_patch(check):
    code, report = check(tun_patch(TUN_HELPER), START_PATCH, STOP_PATCH)
    assert code == 1
    assert queue_findings(report) == [("queue-stop-unmatched", "tun_ring_consume", 3)]
