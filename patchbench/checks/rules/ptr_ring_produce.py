"""ptr-ring-produce-unlocked: a lockless producer primitive without its ring's producer_lock."""

from __future__ import annotations

from typing import Iterable

from patchbench.checks.analyses import ptr_ring
from patchbench.checks.engine import registry
from patchbench.checks.engine.finding import Finding
from patchbench.checks.engine.model import FileModel

ID = "ptr-ring-produce-unlocked"
SEVERITY = "error"
MESSAGE = ("__ptr_ring_produce/__ptr_ring_full (and __skb_array_*) reached without the ring's "
           "producer_lock held, here or in every caller")

MESSAGES = ptr_ring.MESSAGES
MENTIONS = ptr_ring.MENTIONS


def check(model: FileModel) -> Iterable[Finding]:
    return ptr_ring.check_side(model, registry.rule(ID), "producer")
