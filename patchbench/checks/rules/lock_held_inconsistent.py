"""lock-held-inconsistent: a field accessed without the lock that nearly all of its other accesses
hold (the code's own belief about which lock protects it: analyses/lock_consistency.py)."""

from __future__ import annotations

from typing import Iterable

from patchbench.checks.analyses import calling, lock_consistency
from patchbench.checks.engine import registry
from patchbench.checks.engine.finding import Finding, Place
from patchbench.checks.engine.model import FileModel

ID = "lock-held-inconsistent"
SEVERITY = "warning"
# Run only when named (`--checks lock-held-inconsistent`, `lint --rules`): on 7.2's and 6.1's
# drivers/net + net it reports 2 and 3 findings, 1 and 2 of them true under the strict criterion
# (docs/rules.md): below the 70% a default rule needs (the false one is an invariant of setup).
DEFAULT = False
MESSAGE = "a list or queue in a field is changed or walked without the lock nearly all of its other accesses hold"

MESSAGES = {
    "unlocked": "{call}() on {field} without {lock}, which {holding} of the {others} accesses in other "
                "functions of this file hold (as {first}() and {second}() do)",
}

# what is reported is a structure primitive's access (facts table [lock_consistency] structure)
MENTIONS = (b"list_", b"__skb_", b"skb_queue_", b"rb_", b"idr_", b"hash_")


def mentioned(source: bytes) -> bool:
    """Of the files MENTIONS lets through, those where a field handed to a structure primitive is
    named often enough to carry a belief (lock_consistency.candidate_members): the others are not
    parsed for this rule."""
    return bool(lock_consistency.candidate_members(source))


def check(model: FileModel) -> Iterable[Finding]:
    module = registry.rule(ID)
    for verdict in lock_consistency.verdicts(model):
        access = verdict.access
        first, second = (verdict.sites + verdict.sites)[:2]
        yield registry.finding(
            module, model, access.node, access.function, "unlocked",
            related=Place(f"{first.function}() accesses {access.key} holding {verdict.spelling}",
                          first.node.start_point[0] + 1),
            because=(f"{access.key}: {verdict.holding} of the {verdict.others} accesses in other functions of this file hold "
                     f"{verdict.spelling}, in {verdict.functions} functions (the belief needs at least "
                     f"{lock_consistency.MIN_OTHERS}, {lock_consistency.MIN_SHARE:.0%} and "
                     f"{lock_consistency.MIN_FUNCTIONS} functions)",
                     f"for instance {first.function}() at line {first.node.start_point[0] + 1} and "
                     f"{second.function}() at line {second.node.start_point[0] + 1}",
                     f"here {verdict.spelling} is not held on every path from the function's entry",
                     *calling.explain(model, access.function)),
            call=access.call, field=access.key,
            lock=verdict.spelling, holding=verdict.holding, others=verdict.others,
            first=first.function, second=second.function)
