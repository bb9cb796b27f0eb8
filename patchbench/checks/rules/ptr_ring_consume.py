"""ptr-ring-consume-unlocked: a lockless consumer primitive without its ring's consumer_lock."""

from __future__ import annotations

from typing import Iterable

from patchbench.checks.analyses import ptr_ring
from patchbench.checks.engine import registry
from patchbench.checks.engine.finding import Finding
from patchbench.checks.engine.model import FileModel

ID = "ptr-ring-consume-unlocked"
SEVERITY = "error"
MESSAGE = ("__ptr_ring_consume*/__ptr_ring_peek/__ptr_ring_discard_one (and __skb_array_*) reached "
           "without the ring's consumer_lock held, here or in every caller")

MESSAGES = ptr_ring.MESSAGES
MENTIONS = ptr_ring.MENTIONS


def check(model: FileModel) -> Iterable[Finding]:
    return ptr_ring.check_side(model, registry.rule(ID), "consumer")
