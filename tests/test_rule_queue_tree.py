"""Tx queues named through a driver's header wrappers, in a small mac80211 driver of our own
(fixtures/checks/queue_tree/: Kbuild and MAINTAINERS mark its root). Without QoS its wrappers
stop and wake hardware queue 0 whatever the frame's queue mapping; `lint` reads them from the
call index of the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchbench.commands.lint import lint
from tests.support.fixture_tree import isolated_copy

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "queue_tree"
QUEUE_RULES = {"queue-stop-unmatched", "queue-wake-wrong-queue"}


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    return isolated_copy(TREE, tmp_path, monkeypatch)


def queue_findings(tree: Path):
    return [f for f in lint([str(tree / "drivers")], jobs=1) if f.rule in QUEUE_RULES]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_wrappers_on_both_sides_are_clean(tree):
    assert queue_findings(tree) == []


def test_waking_the_mapped_queue_directly_misses_queue_0(tree):
    """The b43 bug: the stop goes through the wrapper (queue 0 without QoS), the wake names the
    frame's queue directly, so without QoS the stopped queue is never woken."""
    edit(tree / "drivers/gull/gull_dma.c", "gull_wake_queue(gd,", "ieee80211_wake_queue(gd->hw,")
    [finding] = queue_findings(tree)
    assert (finding.rule, finding.function) == ("queue-wake-wrong-queue", "gull_dma_tx_status")
    assert "queue 0 (ieee80211_stop_queue() in gull_stop_queue())" in finding.message


def test_a_netdev_queue_is_not_a_hardware_queue(tree):
    """ieee80211 queue numbers are the hardware's: waking netdev queue 0 does not wake them."""
    edit(tree / "drivers/gull/gull_dma.c", "gull_wake_queue(gd, ring->queue_prio);",
         "netif_wake_queue(gd->ndev);")
    edit(tree / "drivers/gull/gull.h", "\tbool busy;\n", "\tbool busy;\n\tstruct net_device *ndev;\n")
    assert {(f.rule, f.function) for f in queue_findings(tree)} == {("queue-wake-wrong-queue", "gull_dma_tx_status")}


def test_mac80211_tx_op_stop_is_matched_by_a_wrapper_wake_in_a_sibling_file(tree):
    """gull_op_tx (ieee80211_ops.tx) stops and its interrupt has no wake; gull_dma.c wakes,
    through the wrapper. Without that wake the stop is reported where it is."""
    edit(tree / "drivers/gull/gull_dma.c", "\t\tgull_wake_queue(gd, ring->queue_prio);\n", "")
    assert {(f.rule, f.function) for f in queue_findings(tree)} == {("queue-stop-unmatched", "gull_op_tx")}
