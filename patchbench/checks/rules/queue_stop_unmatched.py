"""queue-stop-unmatched: a flow-control stop of a tx queue that nothing on the completion side wakes.

The analysis (queue_flow) is shared with queue-wake-wrong-queue; this module reports its share.
"""

from __future__ import annotations

from typing import Iterable

from patchbench.checks import engine
from patchbench.checks.finding import Finding
from patchbench.checks.model import FileModel
from patchbench.checks.rules import queue_flow

ID = queue_flow.STOP_UNMATCHED
SEVERITY = "error"
MESSAGE = "a tx queue stop with no wake of the same queue on the path that frees space"


def check(model: FileModel) -> Iterable[Finding]:
    module = engine.rule(ID)
    for verdict in queue_flow.analyse(model):
        if verdict.rule == ID:
            yield engine.finding(module, model, verdict.site.line, verdict.site.function.name,
                                 verdict.message, verdict.severity)
