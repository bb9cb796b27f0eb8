"""`patchbench check` on tun/tap flow-control series against 6.1: queue findings on the right patch.

The series build on the seeds' tun_ring_consume() helper (tests/support/ring_series.py): one patch
makes tun_net_xmit() stop its subqueue when the ring is full, another makes the consume helper wake
it. A stop that lands one patch before its wake must be reported on that patch, and only there.
"""

from __future__ import annotations

import pytest

from tests.support.ring_series import STOP_PATCH, TUN, TUN_HELPER, WAKE_PATCH, tun_patch

# The consumer restarts the queue with a start instead of a wake.
START_PATCH = (TUN, "tun: restart the subqueue when consuming made room",
               [(WAKE_PATCH[2][0][0], WAKE_PATCH[2][0][1].replace("netif_wake_subqueue", "netif_start_subqueue"))])


def queue_findings(report: dict) -> list[tuple]:
    return [(f["rule"], f["function"], f["patch"]) for f in report["findings"] if f["rule"].startswith("queue-")]


@pytest.mark.kernel
def test_wake_before_stop_is_clean(check_on_61):
    code, report = check_on_61(tun_patch(TUN_HELPER), WAKE_PATCH, STOP_PATCH)
    assert queue_findings(report) == []
    assert code == 0


@pytest.mark.kernel
def test_stop_one_patch_before_its_wake_is_reported_on_that_patch(check_on_61):
    code, report = check_on_61(tun_patch(TUN_HELPER), STOP_PATCH, WAKE_PATCH)
    assert code == 1
    assert queue_findings(report) == [("queue-stop-unmatched", "tun_net_xmit", 2)]
    assert [p["new_findings"] for p in report["patches"]] == [0, 1, 0]


@pytest.mark.kernel
def test_consumer_start_instead_of_wake_is_reported_on_its_patch(check_on_61):
    code, report = check_on_61(tun_patch(TUN_HELPER), START_PATCH, STOP_PATCH)
    assert code == 1
    assert queue_findings(report) == [("queue-stop-unmatched", "tun_ring_consume", 3)]
