"""`patchbench check` on the seeds' tun series against 6.1: RCU findings land on the right patch.

Patch 1 adds tun_ring_consume(), patch 2 wakes the subqueue through rcu_dereference(tfile->tun)->dev
(tests/support/ring_series.py). Moving the wake after rcu_read_unlock() is the reviewers' warning;
a later repair does not take the finding away from the patch that introduced it.
"""

from __future__ import annotations

import pytest

from tests.support.ring_series import TUN, TUN_HELPER, WAKE_PATCH, tun_patch

INSIDE = "\t\tif (tun)\n\t\t\tnetif_wake_subqueue(tun->dev, tfile->queue_index);\n\t\trcu_read_unlock();\n"
AFTER = "\t\trcu_read_unlock();\n\t\tif (tun)\n\t\t\tnetif_wake_subqueue(tun->dev, tfile->queue_index);\n"
LATE_WAKE_PATCH = (TUN, WAKE_PATCH[1], [(WAKE_PATCH[2][0][0], WAKE_PATCH[2][0][1].replace(INSIDE, AFTER))])
REPAIR_PATCH = (TUN, "tun: wake the subqueue inside the read-side section", [(AFTER, INSIDE)])
# A patch that drops the section tun_get() takes around its dereference.
NO_SECTION_PATCH = (TUN, "tun: tun_get() without rcu_read_lock()", [
    ("\trcu_read_lock();\n\ttun = rcu_dereference(tfile->tun);\n\tif (tun)\n\t\tdev_hold(tun->dev);\n",
     "\ttun = rcu_dereference(tfile->tun);\n\tif (tun)\n\t\tdev_hold(tun->dev);\n")])


def rcu_findings(report: dict) -> list[tuple]:
    return [(f["rule"], f["function"], f["patch"]) for f in report["findings"] if f["rule"].startswith("rcu-")]


@pytest.mark.kernel
def test_wake_inside_the_section_is_clean(check_on_61):
    _, report = check_on_61(tun_patch(TUN_HELPER), WAKE_PATCH)
    assert rcu_findings(report) == []


@pytest.mark.kernel
def test_late_wake_is_reported_on_its_patch_even_when_repaired_later(check_on_61):
    code, report = check_on_61(tun_patch(TUN_HELPER), LATE_WAKE_PATCH, REPAIR_PATCH)
    assert code == 1
    assert rcu_findings(report) == [("rcu-pointer-escapes", "tun_ring_consume", 2)]


@pytest.mark.kernel
def test_dropped_section_is_reported_on_its_patch(check_on_61):
    code, report = check_on_61(tun_patch(TUN_HELPER), WAKE_PATCH, NO_SECTION_PATCH)
    assert code == 1
    assert rcu_findings(report) == [("rcu-deref-unprotected", "tun_get", 3)]
