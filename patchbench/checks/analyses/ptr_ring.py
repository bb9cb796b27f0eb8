"""Shared logic of the two ptr_ring rules: a lockless primitive needs its ring's own lock.

`check_side(model, rule, side)` finds the primitives of one side ("consumer" or "producer"),
walks the functions calling them with lock semantics (patchbench.checks.locks) to a fixpoint over
the file's call graph, and reports each call where the ring's lock is not held on every path.

Held means: taken before on every path (spin_lock*, true branch of spin_trylock*, guard()),
asserted (`lockdep_assert_held`), stated in a way the tools read (`__must_hold`), or held at every
in-file call site of a function nobody else can call. A comment's wording ("caller must hold",
"single consumer") decides nothing: nothing checks it.
The lock must belong to the same ring: keys are type-based access paths, so
`spin_lock(&q->ring.consumer_lock)` covers `__ptr_ring_consume(&q->ring)` whatever the local names;
a ring reached only through an untyped `struct ptr_ring *` parameter accepts any lock of its side.
Exempt: functions only reached from ways in that run one at a time (a NAPI poll, a kthread, a
qdisc's dequeue/peek/reset: facts table); consumers of rings that are single-consumer by contract
(a page_pool's); the primitives' own bodies (`__ptr_ring_*`).
"""

from __future__ import annotations

from types import ModuleType

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.analyses import calling, locks
from patchbench.checks.engine import registry
from patchbench.checks.engine import summaries
from patchbench.checks.engine.finding import Finding
from patchbench.checks.engine.model import CallSite, FileModel, Function

# Every file with a lockless primitive call says so: the rest are never walked.
MENTIONS = (b"__ptr_ring_", b"__skb_array_")
# the messages of both sides' rules
MESSAGES = {
    "unlocked": "{call}({ring}) without {ring}'s {lock} held here or in every caller",
    "unlocked-on-some-paths": "{call}({ring}) without {ring}'s {lock} held on some paths",
    "created-space-after-batch": "__ptr_ring_consume_created_space({ring}) after __ptr_ring_consume_batched()",
}
PRIMITIVES = {side: kfacts.names("ptr_ring", side) for side in ("consumer", "producer")}
# Lockless-safe only while the ring is never resized: a warning in files that resize rings.
RESIZE_SENSITIVE = kfacts.names("ptr_ring", "resize_sensitive")
_RESIZE = kfacts.names("ptr_ring", "resize")

# Ways in that run one at a time (a NAPI poll, a qdisc's dequeue): one consumer by construction.
_SERIALISED_CONTEXTS = kfacts.names("ptr_ring", "serialised_contexts")
_SINGLE_CONSUMER_RINGS = kfacts.names("ptr_ring", "single_consumer_rings")


def check_side(model: FileModel, rule: ModuleType, side: str) -> list[Finding]:
    if not registry.mentions(model.source, MENTIONS):
        return []   # the common case, decided without walking the tree
    resizes = any(c.name in _RESIZE for f in model.functions.values() for c in f.calls)
    wanted = PRIMITIVES[side] | (RESIZE_SENSITIVE if side == "consumer" and resizes else set())
    calls = [c for f in model.functions.values() if not f.name.startswith(("__ptr_ring", "__skb_array"))
             for c in f.calls if c.name in wanted]
    if not calls:
        return []
    lock_name = f"{side}_lock"
    results = model.memo("ptr_ring.locks", lambda: _held_locks(model))
    findings = []
    for call in calls:
        function = model.functions[call.function]
        states = results[call.function].result.states_at(call)
        ring = _ring_key(model, function, call)
        holding = [any(_covers(key, ring, lock_name) for key in locks.held(s)) for s in states]
        if all(holding) or calling.only_reached_from(model, function.name, _SERIALISED_CONTEXTS) or \
                (side == "consumer" and ring in _SINGLE_CONSUMER_RINGS):
            continue
        findings.append(registry.finding(rule, model, call.node, function.name,
                                       "unlocked-on-some-paths" if any(holding) else "unlocked",
                                       "warning" if call.name in RESIZE_SENSITIVE else None,
                                       because=(f"{ring}.{lock_name} held on {sum(holding)} of {len(holding)} "
                                                f"paths to the call",
                                                "not only reached from ways in that run one at a time "
                                                "(facts: ptr_ring.serialised_contexts)",
                                                *calling.explain(model, function.name)),
                                       call=call.name, ring=call.args[0].lstrip("&") if call.args else "the ring",
                                       lock=lock_name))
    findings.extend(_created_space_misuse(model, rule, calls))
    return findings


def _held_locks(model: FileModel) -> dict[str, summaries.Summary]:
    """Locks held in every function that calls a primitive, callers' included: one walk for both sides."""
    primitives = set().union(*PRIMITIVES.values(), RESIZE_SENSITIVE)
    users = {name for name, f in model.functions.items() if any(c.name in primitives for c in f.calls)}
    return summaries.solve(
        model, users | locks.lock_functions(model), lambda s: locks.LockTransfer(model, s),
        precondition=lambda f: _precondition(model, f),
        inherit=lambda facts: frozenset(f for f in facts if f[0] == "held"), report=users)


def _precondition(model: FileModel, function: Function) -> frozenset:
    keys = set(locks.annotated_keys(model, function, "__must_hold", "__releases"))
    return frozenset({("held", k) for k in keys} | {("caller", k) for k in keys})


def _ring_key(model: FileModel, function: Function, call: CallSite) -> str:
    ring = model.canonical(function, call.args[0]) if call.args else ""
    if call.name.startswith("__skb_array") or ring == "skb_array":
        ring += ".ring"
    return ring


def _covers(key: str, ring: str, lock_name: str) -> bool:
    """The held lock `key` is the `lock_name` of `ring` (or may be, for an opaque ring)."""
    if key == f"{ring}.{lock_name}" or key == f"*.{lock_name}":
        return True
    opaque = "." not in ring or ring == "skb_array.ring"
    return opaque and key.endswith(f".{lock_name}")


def _created_space_misuse(model: FileModel, rule: ModuleType, calls: list[CallSite]) -> list[Finding]:
    """__ptr_ring_consume_created_space() is documented as invalid after a batched consume."""
    findings = []
    for call in calls:
        if call.name != "__ptr_ring_consume_created_space":
            continue
        function = model.functions[call.function]
        ring = _ring_key(model, function, call)
        if any(c.name == "__ptr_ring_consume_batched" and c.end <= call.start
               and _ring_key(model, function, c) == ring for c in function.calls):
            findings.append(registry.finding(rule, model, call.node, function.name, "created-space-after-batch",
                                           because=("__ptr_ring_consume_batched() of the same ring comes first "
                                                    "in the function", *calling.explain(model, function.name)),
                                           ring=ring))
    return findings
