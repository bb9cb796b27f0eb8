"""queue-wake-wrong-queue: the completion side wakes a different queue than the one xmit stops.

The analysis (queue_flow) is shared with queue-stop-unmatched; this module reports its share.
"""

from __future__ import annotations

from typing import Iterable

from patchbench.checks.engine.finding import Finding
from patchbench.checks.engine.model import FileModel
from patchbench.checks.analyses.queue import flow as queue_flow

ID = queue_flow.WRONG_QUEUE
SEVERITY = "error"
MESSAGE = "the completion-side wake names a different queue than the stop"
MESSAGES = {
    "wrong-queue": "{wake}() on the completion side wakes {queue}, but {stopper}() stops {stopped}; the "
                   "stopped queue is never woken",
}

MENTIONS = queue_flow.stop_words


def check(model: FileModel) -> Iterable[Finding]:
    return queue_flow.findings(ID, model)
