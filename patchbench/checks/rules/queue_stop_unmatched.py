"""queue-stop-unmatched: a flow-control stop of a tx queue that nothing on the completion side wakes.

The analysis (queue_flow) is shared with queue-wake-wrong-queue; this module reports its share.
"""

from __future__ import annotations

from typing import Iterable

from patchbench.checks.engine.finding import Finding
from patchbench.checks.engine.model import FileModel
from patchbench.checks.analyses.queue import flow as queue_flow

ID = queue_flow.STOP_UNMATCHED
SEVERITY = "error"
MESSAGE = "a tx queue stop with no wake of the same queue on the path that frees space"
_UNMATCHED = ("{stop}() stops {queue} on the transmit path, but no completion-side path (NAPI poll, "
              "tx interrupt, consumer/reader) wakes it")
MESSAGES = {
    "unmatched": _UNMATCHED,
    "unmatched-wakes-elsewhere": _UNMATCHED + "; its wakes are only in open, reset or deferred paths, "
                                              "which do not run as tx space frees",
    "start-not-wake": "{start}() on the completion side restarts {queue} that {stopper}() stops, but a "
                      "start does not reschedule the qdisc: packets queued meanwhile stay stuck until "
                      "the next transmit; use a wake",
    "lost-wakeup": "{stop}() runs after {publisher}() has handed work to the completion side, with no "
                   "re-check of the ring after the stop and no lock shared with the wake: a completion "
                   "in between sees a running queue and the wake-up is lost",
    "recheck-no-barrier": "{stop}() is re-checked with no full barrier (smp_mb()) between the stop and "
                          "the re-check, while the completion side fences its test: the ring read can "
                          "pass the stop, a completion that ran meanwhile saw a running queue, and the "
                          "wake-up is lost",
    "wake-test-no-barrier": "{test}() is tested before {wake}() with no full barrier after the ring index "
                            "is published, while {stopper}() fences its re-check: a concurrent stop can "
                            "be missed and the queue stays stopped",
    "guard-removed": "{stop}() is no longer followed by a full barrier and a re-check of ring space, as it "
                     "was before this patch: a completion that frees the ring between the space test and "
                     "the stop sees a running queue, does not wake it, and the queue stays stopped",
    "wake-turned-start": "{start}() replaces the {wake}() the code had here: a start does not reschedule the "
                         "qdisc, so packets queued while {stopper}() had {queue} stopped stay stuck until "
                         "the next transmit",
    "release-unwoken": "this patch leaves {function}() on a path that releases tx space ({release}()) "
                       "without waking the queue, as every such path did before: the queue stays stopped "
                       "when the transmit path stopped it for that space",
    "closed-never-reopened": "{stop}() stops {queue} when the device is closed, and nothing {opener}() "
                             "(.ndo_open) reaches starts or wakes it again: after the device is brought "
                             "down and up, transmit stays stopped",
}

MENTIONS = queue_flow.stop_words


def check(model: FileModel) -> Iterable[Finding]:
    return queue_flow.findings(ID, model)
