"""Lock semantics shared by the lock rules: which calls take and drop which lock, as a flow.Transfer.

Facts (in frozenset states):
- ("held", key): the lock is held here. Keys are `FileModel.canonical()` access paths of the lock
  argument ("tun_file.tx_ring.consumer_lock"), or a fixed name for global locks ("rcu", "rcu_bh",
  "rcu_sched", "rtnl"), or "<kind>:<path>" for object locks (`lock_sock(sk)` -> "sock:sock").
- ("caller", key): the lock belongs to the caller: it was released here without being taken here,
  or the function states it holds it on entry (`__must_hold`, `lockdep_assert_held`).
- ("scoped", key): taken by `guard(...)`, released by the compiler at the end of the scope.
- ("released", key): taken and released again on this path.

`LockTransfer(model, summaries)` also gives calls of in-file functions their summarised effect:
a callee that exits holding a lock on every path (a lock wrapper) takes it for its caller, and one
that releases its caller's lock on every path releases it.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchbench.checks import flow
from patchbench.checks.model import CallSite, FileModel, Function


@dataclass(frozen=True)
class LockOp:
    action: str        # "acquire" | "release" | "try" (held when the call returns nonzero)
                       # | "try_fail" (held unless it returns nonzero: mutex_lock_interruptible)
                       # | "assert" (lockdep_assert_held: held, by the caller)
    kind: str          # "spin" | "mutex" | "rwlock" | "rwsem" | "rcu" | "rtnl" | "sock" | "tx"
    argument: int | None = 0   # which argument names the lock; None for global locks


def _ops() -> dict[str, LockOp]:
    ops: dict[str, LockOp] = {}
    for prefix, kind in (("spin", "spin"), ("raw_spin", "spin"), ("read", "rwlock"),
                         ("write", "rwlock")):
        for suffix in ("", "_bh", "_irq", "_irqsave", "_nested", "_irqsave_nested", "_bh_nested"):
            ops[f"{prefix}_lock{suffix}"] = LockOp("acquire", kind)
        for suffix in ("", "_bh", "_irq", "_irqrestore"):
            ops[f"{prefix}_unlock{suffix}"] = LockOp("release", kind)
        for suffix in ("", "_bh", "_irq", "_irqsave"):
            ops[f"{prefix}_trylock{suffix}"] = LockOp("try", kind)
    ops.update({
        "mutex_lock": LockOp("acquire", "mutex"), "mutex_lock_nested": LockOp("acquire", "mutex"),
        "mutex_lock_io": LockOp("acquire", "mutex"),
        "mutex_lock_interruptible": LockOp("try_fail", "mutex"),
        "mutex_lock_killable": LockOp("try_fail", "mutex"),
        "mutex_trylock": LockOp("try", "mutex"), "mutex_unlock": LockOp("release", "mutex"),
        "down_read": LockOp("acquire", "rwsem"), "down_write": LockOp("acquire", "rwsem"),
        "down_read_trylock": LockOp("try", "rwsem"), "down_write_trylock": LockOp("try", "rwsem"),
        "down_read_killable": LockOp("try_fail", "rwsem"),
        "down_write_killable": LockOp("try_fail", "rwsem"),
        "up_read": LockOp("release", "rwsem"), "up_write": LockOp("release", "rwsem"),
        "rcu_read_lock": LockOp("acquire", "rcu", None),
        "rcu_read_unlock": LockOp("release", "rcu", None),
        "rcu_read_lock_bh": LockOp("acquire", "rcu_bh", None),
        "rcu_read_unlock_bh": LockOp("release", "rcu_bh", None),
        "rcu_read_lock_sched": LockOp("acquire", "rcu_sched", None),
        "rcu_read_unlock_sched": LockOp("release", "rcu_sched", None),
        "rtnl_lock": LockOp("acquire", "rtnl", None), "rtnl_unlock": LockOp("release", "rtnl", None),
        "rtnl_trylock": LockOp("try", "rtnl", None),
        "lock_sock": LockOp("acquire", "sock"), "release_sock": LockOp("release", "sock"),
        "bh_lock_sock": LockOp("acquire", "bh_sock"), "bh_unlock_sock": LockOp("release", "bh_sock"),
        "netif_tx_lock": LockOp("acquire", "netif_tx"), "netif_tx_lock_bh": LockOp("acquire", "netif_tx"),
        "netif_tx_unlock": LockOp("release", "netif_tx"),
        "netif_tx_unlock_bh": LockOp("release", "netif_tx"),
        "__netif_tx_lock": LockOp("acquire", "tx"), "__netif_tx_lock_bh": LockOp("acquire", "tx"),
        "__netif_tx_unlock": LockOp("release", "tx"), "__netif_tx_unlock_bh": LockOp("release", "tx"),
        "__netif_tx_trylock": LockOp("try", "tx"),
        "lockdep_assert_held": LockOp("assert", "any"),
        "lockdep_assert_held_once": LockOp("assert", "any"),
        "lockdep_assert_held_write": LockOp("assert", "any"),
        "lockdep_assert_held_read": LockOp("assert", "any"),
        "ASSERT_RTNL": LockOp("assert", "rtnl", None),
    })
    return ops


LOCK_OPS = _ops()
# The kinds whose key is a fixed name, not the argument's access path.
_GLOBAL_KEYS = {"rcu", "rcu_bh", "rcu_sched", "rtnl"}
# Kinds named by the object they lock rather than a lock field.
_OBJECT_KINDS = {"sock", "bh_sock", "netif_tx", "tx"}


def lock_key(model: FileModel, function: Function | None, call: CallSite, op: LockOp) -> str | None:
    """The key of the lock `call` operates on (see the module docstring), None if unnamed."""
    if op.argument is None or op.kind in _GLOBAL_KEYS:
        return op.kind
    if op.argument >= len(call.args):
        return None
    key = model.canonical(function, call.args[op.argument])
    return f"{op.kind}:{key}" if op.kind in _OBJECT_KINDS else key


def annotated_keys(model: FileModel, function: Function, *names: str) -> frozenset[str]:
    """Keys named by the function's annotations of the given names (`__must_hold(&q->lock)`)."""
    keys = set()
    for name, argument in function.annotations:
        if name in names:
            keys.add("rcu" if argument == "RCU" else model.canonical(function, argument))
    return frozenset(keys)


class LockTransfer(flow.Transfer):
    """Held-lock semantics of calls; pass `summaries` (name -> summaries.Summary) for in-file callees."""

    correlate_branches = True

    def __init__(self, model: FileModel, summaries: dict | None = None):
        self.model = model
        self.summaries = summaries if summaries is not None else {}
        self._ops: dict[CallSite, tuple[LockOp, str] | None] = {}
        self._tested: dict[tuple[Function, str], str] = {}   # (function, tested text) -> its key

    def op(self, call: CallSite) -> tuple[LockOp, str] | None:
        """The lock operation of the call and its lock's key (computed once per call: every path
        and every walk of the function asks again)."""
        if call not in self._ops:
            self._ops[call] = self._op(call)
        return self._ops[call]

    def _op(self, call: CallSite) -> tuple[LockOp, str] | None:
        if call.name.startswith("guard("):
            # guard(spinlock_irqsave)(&l): held until the end of the scope
            if not call.args:
                return None
            return LockOp("acquire", "guard"), self.model.canonical(self.function_of(call), call.args[0])
        op = LOCK_OPS.get(call.name)
        if op is None:
            return None
        key = lock_key(self.model, self.function_of(call), call, op)
        return (op, key) if key is not None else None

    def function_of(self, call: CallSite) -> Function | None:
        return self.model.functions.get(call.function)

    def changes(self, call: CallSite) -> bool:
        return self.op(call) is not None or call.name in self.summaries

    def call(self, state: frozenset, call: CallSite) -> frozenset:
        found = self.op(call)
        if found is None:
            return self.callee_effect(state, call)
        op, key = found
        if op.action == "acquire" and op.kind == "guard":
            return state | {("held", key), ("scoped", key)}
        if op.action in ("acquire", "try_fail"):
            return state | {("held", key)}
        if op.action == "assert":
            return state | {("held", key), ("caller", key)}
        if op.action == "release":
            if ("held", key) in state:
                return (state - {("held", key)}) | {("released", key)}
            return state | {("caller", key)}
        return state

    def assume(self, state: frozenset, call: CallSite, truth: bool) -> frozenset:
        found = self.op(call)
        if found is None:
            return state
        op, key = found
        if op.action == "try" and truth:
            return state | {("held", key)}
        if op.action == "try_fail" and truth:   # nonzero: interrupted, not taken
            return state - {("held", key)}
        return state

    def test(self, state: frozenset, expression: str, truth: bool, function: Function) -> frozenset:
        # `if (lock) spin_unlock(lock);`: a NULL lock pointer is not held
        if truth:
            return state
        found = (function, expression)
        if found not in self._tested:
            self._tested[found] = self.model.canonical(function, expression)
        return state - {("held", self._tested[found])}

    def callee_effect(self, state: frozenset, call: CallSite) -> frozenset:
        """A callee that exits holding a lock on every path takes it; one that releases a lock
        its caller took, on every path, releases it."""
        summary = self.summaries.get(call.name)
        if summary is None or call.name == call.function or not summary.exits:
            return state
        always = flow.intersection(summary.exits)
        ever_held = frozenset().union(*summary.exits)
        for fact in always:
            kind, key = fact[0], fact[1]
            mine = self.model.at_call_site(key, summary.function, call) if kind in ("held", "caller") else key
            if kind == "held" and ("caller", key) not in always and ("held", key) not in summary.entry:
                state = state | {("held", mine)}
            elif kind == "caller" and ("held", key) not in ever_held:
                state = state - {("held", mine)} if ("held", mine) in state else state | {("caller", mine)}
        return state


def lock_functions(model: FileModel) -> set[str]:
    """Functions that take, drop or assert a lock themselves: whose summaries matter to callers."""
    return {name for name, function in model.functions.items()
            if any(c.name in LOCK_OPS or c.name.startswith("guard(") for c in function.calls)}


def held(state: frozenset) -> frozenset[str]:
    """The keys held in a state."""
    return frozenset(fact[1] for fact in state if fact[0] == "held")
