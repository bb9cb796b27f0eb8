"""queue-stop-unmatched: a flow-control stop of a tx queue that nothing on the completion side wakes.

The analysis (queue_flow) is shared with queue-wake-wrong-queue; this module reports its share.
"""

from __future__ import annotations

from typing import Iterable

from patchbench.checks.finding import Finding
from patchbench.checks.model import FileModel
from patchbench.checks import queue_flow

ID = queue_flow.STOP_UNMATCHED
SEVERITY = "error"
MESSAGE = "a tx queue stop with no wake of the same queue on the path that frees space"

MENTIONS = queue_flow.stop_words


def check(model: FileModel) -> Iterable[Finding]:
    return queue_flow.findings(ID, model)
