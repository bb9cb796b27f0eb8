"""The lock-imbalance analysis: a lock taken in a function is still held at one of its returns,
or released on a path that does not hold it (the rule is rules/lock_imbalance.py).

Accepted, not findings (decided by what the code does, never by a function's name or comment):
- a function meant to return with the lock: `__acquires`; a seq_file step or a registration whose
  counterpart releases (facts table [lock_handoff]: ->start, ->pre_doit), held where it succeeds;
- a lock this function never releases itself but to unwind a failure (the returns without it
  never took it, or report the failure), when
  something releases it: an in-file caller, or another function of the file that releases it
  and never takes it (the other half of a pair); or the returns say it (kept where it
  succeeds, absent where it fails: a lookup);
- a lock held only on the returns that report success and released on those that report failure,
  judged by the return type (0 or a count for int, true for bool, a pointer, against -EINVAL,
  false, NULL, ERR_PTR()) and by what the path tested: the trylock and lookup-locked shapes;
- locks released here that the caller took; `guard()` locks are released at the end of their
  block by the walk itself (locks.LockTransfer.leave_block).
A lock held on some returns and not on others whose values do not tell them apart (an error
code returned both with and without it) is a leak, whatever the function is called.
"""

from __future__ import annotations

import dataclasses
import re
from types import ModuleType

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.analyses import calling
from patchbench.checks.analyses import locks
from patchbench.checks.engine import flow
from patchbench.checks.engine import registry
from patchbench.checks.engine import summaries
from patchbench.checks.engine.finding import Finding, Place, render
from patchbench.checks.engine.model import FileModel, Function, squeeze

# Registrations whose counterpart releases what they return holding ("<struct>.<field>", facts table
# [lock_handoff]): seq_file's ->start, genetlink's ->pre_doit.
_HANDING_FIELDS = kfacts.names("lock_handoff", "fields")
# seq_file iterator steps: the lock taken by ->start or ->next is released by ->next or ->stop.
_SEQ_STEPS = kfacts.names("lock_handoff", "seq_steps")
_SEQ_END = kfacts.names("lock_handoff", "seq_end")
# Lookups of other files that return their object locked (netdev_get_by_index_lock()).
_RETURNS_LOCKED = kfacts.names("lock_handoff", "returns_locked")
_UNREPORTED = frozenset({"irq", "preempt"})
_FLAVOURS = frozenset({"bh", "irq"})   # what a spin_lock_bh()/_irq() disables until its own unlock
_EXCLUSIVE = frozenset({"spin", "mutex", "rwlock", "rwsem", "rtnl", "netdev", "devl", "wiphy", "sock"})
_GLOBAL_KEYS = frozenset(op.kind for op in kfacts.lock_ops().values() if op.key == "global")
_SECTIONS = frozenset({"rcu", "rcu_bh", "rcu_sched"})
_SLEEPING_WAITS = kfacts.names("waits", "sleeping")
_FAILURE = re.compile(r"^(NULL|false|ERR_PTR\(.*\)|-E\w+|-\d+)$")


def _takes(model: FileModel, call) -> bool:
    op = kfacts.lock_op(call.name)
    return (op is not None and op.action in ("acquire", "try", "try_fail")) or \
        locks.guard_call(call) is not None or \
        any(op.action != "release" for op, _ in locks.wrapped_ops(model, None, call))


def findings(model: FileModel, rule: ModuleType) -> list[Finding]:
    """The findings of `rule` (lock-imbalance) on the functions of model that take a lock."""
    called = {call.name for function in model.functions.values() for call in function.calls}
    taking = {name for name in called if locks.may_take(model, name)}   # each name asked once, not per call
    names = {name for name, function in model.functions.items()
             if any(_takes(model, c) for c in function.calls if c.name in taking)}
    if model.context.reports_unknown():   # functions entered holding RTNL: their callees must not take it
        names |= {name for name in model.functions if _entry_holding(model, name, "rtnl") is True}
    if not names:
        return []
    # and the callers of those returning a pointer: a lookup may return its object locked
    names |= {call.function for name in names if _return_kind(model, model.functions[name]) == "pointer"
              for call in model.callers.get(name, []) if call.function}
    results = summaries.solve(model, names | locks.lock_functions(model),
                              lambda s: locks.LockTransfer(model, s, values=True),
                              precondition=lambda f: _precondition(model, f), inherit=None,
                              report=names)
    found: list[Finding] = []
    for name in sorted(names):
        if _seq_step(model, name):
            continue
        found.extend(_check_function(model, results[name], rule))
        found.extend(_unheld_releases(model, results[name], rule))
    return _one_per_callee(found, rule)


def _one_per_callee(found: list[Finding], rule: ModuleType) -> list[Finding]:
    """Calls of one callee that takes a lock its callers of this file hold there are one defect
    (the callee's locking and its callers' disagree, mended in one place or the other): reported
    once, at the first of those calls, with the lines of the others."""
    calls: dict[str, list[Finding]] = {}
    for finding in found:
        if finding.kind.startswith("callee-takes"):
            calls.setdefault(dict(finding.args)["callee"], []).append(finding)
    kept = []
    for finding in found:
        same = calls.get(dict(finding.args).get("callee", ""), []) if finding.kind.startswith("callee-takes") else []
        if not same:
            kept.append(finding)
            continue
        first = min(same, key=lambda f: f.line)
        if finding is first:
            also = tuple(sorted(f.line for f in same if f is not first))
            kept.append(dataclasses.replace(finding, also=also,
                                            message=render(rule.MESSAGES[finding.kind], finding.args, also)))
    return kept


def _seq_step(model: FileModel, name: str) -> bool:
    """A seq_file iterator step (->start, ->next, ->stop), registered here or in another file:
    the lock ->start takes is kept by ->next and released by ->next or ->stop (the seq_file
    protocol, Documentation/filesystems/seq_file.rst): not judged for balance."""
    ways = calling.registered_ways(model, name)
    return bool(ways) and all(calling.listed(way, _SEQ_STEPS | _SEQ_END) for way in ways)


def _precondition(model: FileModel, function: Function) -> frozenset:
    keys = locks.annotated_keys(model, function, "__must_hold", "__releases")
    return frozenset({("held", k) for k in keys} | {("caller", k) for k in keys})


def _check_function(model: FileModel, summary: summaries.Summary, rule: ModuleType) -> list[Finding]:
    function = summary.function
    exits = summary.result.returns
    # interrupts and preemption: their pairs are often macros or other functions' business
    # (kunmap_atomic, put_cpu_var); not reported as leaks
    leaked = {fact[1] for _, state in exits for fact in state
              if fact[0] == "held" and ("caller", fact[1]) not in state and fact[1] not in _UNREPORTED}
    findings = []
    for key in sorted(leaked):
        # a return where the lock is the caller's (asserted held: ASSERT_RTNL() on the paths that
        # did not take it) neither leaks nor releases it
        holding = [(node, state) for node, state in exits
                   if ("held", key) in state and ("caller", key) not in state]
        releasing = [(node, state) for node, state in exits if ("held", key) not in state]
        if _intended(model, function, key, holding, releasing) or _retaken(model, summary, key):
            continue
        node = min((n for n, _ in holding), key=lambda n: n.start_byte)
        spelled = _spelling(model, function, key)
        taken = _taken_at(model, function, key)
        findings.append(registry.finding(
            rule, model, node, function.name, "held-released-elsewhere" if releasing else "held",
            related=Place("lock taken", taken.line) if taken is not None else None,
            because=(f"lock {key}: held at {len({n.start_byte for n, _ in holding})} of "
                     f"{len({n.start_byte for n, _ in exits})} returns",
                     "not handed over: no __acquires(), no hand-off registration of the facts table "
                     "([lock_handoff]), no caller here releasing it, no failure it reports",
                     *calling.explain(model, function.name)),
            lock=spelled, function=function.name))
    # spin_lock_bh() released by spin_unlock() (and no local_bh_enable()): softirqs stay off
    flavours = {(fact[1], fact[2]) for _, state in exits for fact in state
                if fact[0] == "implied" and fact[1] in _FLAVOURS and ("held", fact[2]) not in state}
    for implied, key in sorted(flavours):
        if _flags_handed_out(model, function, key):
            continue
        node = min((n for n, state in exits if ("implied", implied, key) in state), key=lambda n: n.start_byte)
        findings.append(registry.finding(
            rule, model, node, function.name, "other-flavour", lock=_spelling(model, function, key),
            because=(f"lock {key}: taken with {implied} disabled, released by an unlock that leaves them so",
                     "the saved flags are not handed to the caller", *calling.explain(model, function.name)),
            function=function.name, disabled="softirqs" if implied == "bh" else "interrupts"))
    return findings + _double_locks(model, summary, rule) + _callee_deadlocks(model, summary, rule)


def _taken_at(model: FileModel, function: Function, key: str):
    """The first call of the function that takes the lock `key`, or None."""
    for call in function.calls:
        op = kfacts.lock_op(call.name)
        if op is not None and op.action in ("acquire", "try", "try_fail") and \
                locks.lock_key(model, function, call, op) == key:
            return call
    return None


def _retaken(model: FileModel, summary: summaries.Summary, key: str) -> bool:
    """A global lock the function drops and takes again (`rtnl_unlock(); request_module();
    rtnl_lock();`) on a path where it had not taken it: the function is entered holding it,
    and the returns that hold it give the caller its own lock back (em_text_change())."""
    if key not in _GLOBAL_KEYS:
        return False
    transfer = locks.LockTransfer(model)
    return any((found := transfer.op(call)) is not None and found[1] == key and found[0].action == "acquire"
               and any(("caller", key) in state and ("held", key) not in state
                       for state in summary.result.states_at(call))
               for call in summary.function.calls)


def _flags_handed_out(model: FileModel, function: Function, key: str) -> bool:
    """The saved interrupt flags of the lock go to the caller (`*irqflags = flags;`): it
    restores them (mctp_lookup_key())."""
    transfer = locks.LockTransfer(model)
    saved = {call.args[1] for call in function.calls if len(call.args) > 1
             and (found := transfer.op(call)) and found[1] == key and found[0].action != "release"}
    return any(model.text(node.child_by_field_name("left")).startswith("*")
               and model.text(node.child_by_field_name("right")) in saved
               for node in function.shapes.get("assignment", []))


def _double_locks(model: FileModel, summary: summaries.Summary, rule: ModuleType) -> list[Finding]:
    """An exclusive lock taken again on a path that holds it since this function took it: a
    self-deadlock. Only a lock the function always names the same way (one argument text from a
    variable it never reassigns, never a _nested class, never a reader), so that two objects of
    one type are not one lock."""
    function = summary.function
    transfer = locks.LockTransfer(model)
    spelled: dict[str, set[str]] = {}
    for call in function.calls:
        found = transfer.op(call)
        if found is not None and found[0].action in ("acquire", "try", "try_fail"):
            spelled.setdefault(found[1], set()).add(call.args[found[0].argument] if found[0].key != "global"
                                                    else call.name)
    first_taken: dict[str, int] = {}
    for call in function.calls:
        found = transfer.op(call)
        if found is not None and found[0].action == "acquire":
            first_taken[found[1]] = min(first_taken.get(found[1], call.start), call.start)
    # a lock still held at a return is a leak or a hand-off (dpaa2's per-frame mutex), reported
    # or accepted as such: its acquisitions in a loop are not judged again
    kept = {fact[1] for _, state in summary.result.returns for fact in state if fact[0] == "held"}
    findings, reported = [], set()
    for call in function.calls:
        found = transfer.op(call)
        if found is None or found[0].action != "acquire" or found[1] in reported or found[1] in kept or \
                len(spelled.get(found[1], ())) != 1 or not _exclusive(call.name, found[0]):
            continue
        root = re.match(r"&?\(?(\w+)", call.args[found[0].argument]) if found[0].key != "global" else None
        if root is not None and locks.assigned_after(function, root.group(1), first_taken[found[1]]):
            continue   # `ssk = next_subflow()` after the first lock: another object
        key = found[1]
        if any(("held", key) in state and ("caller", key) not in state
               for state in summary.result.states_at(call)):
            reported.add(key)
            findings.append(registry.finding(
                rule, model, call.node, function.name, "taken-twice",
                related=Place("lock taken", model.source.count(b"\n", 0, first_taken[key]) + 1),
                because=(f"lock {key}: exclusive, always named {next(iter(spelled[key]))}, held here since "
                         f"{function.name}() took it", *calling.explain(model, function.name)),
                call=call.name, args=", ".join(call.args), function=function.name))
    return findings


def _callee_deadlocks(model: FileModel, summary: summaries.Summary, rule: ModuleType) -> list[Finding]:
    """A call, on a path holding an exclusive lock this function took, of a function that takes
    the same lock for itself (locks.taken_by_callee: every path of it that goes on takes it, not
    with a trylock nor a _nested class): the callee waits for its caller, a self-deadlock (or
    lockdep's "possible recursive locking"). A lock named through a variable is the same lock only
    when the caller names it through that variable alone, never reassigned after taking it
    (`foo(priv)` taking `p->lock` while the caller holds `priv->lock`)."""
    function = summary.function
    transfer = locks.LockTransfer(model)
    roots: dict[str, set] = {}   # key -> the variables the function takes it through
    first_taken: dict[str, int] = {}
    for call in function.calls:
        found = transfer.op(call)
        if found is not None and found[0].action in ("acquire", "try", "try_fail"):
            op, key = found
            root = locks.root(call.args[op.argument]) if op.key != "global" and op.argument < len(call.args) else None
            roots.setdefault(key, set()).add(root)
            first_taken[key] = min(first_taken.get(key, call.start), call.start)
    # a global lock every way in holds (.ndo_open: RTNL), judged by `check` and on a lone file
    # only (see docs/rules.md: lint of a tree leaves the existing code alone)
    entered = {key for key in sorted(_CONTEXT_LOCKS) if model.context.reports_unknown()
               and _entry_holding(model, function.name, key) is True}
    if not roots and not entered:
        return []
    # a lock still held at a return is a leak or a hand-off, reported or accepted as such
    kept = {fact[1] for _, state in summary.result.returns for fact in state if fact[0] == "held"}
    findings, reported = [], set()
    for call in function.calls:
        if transfer.op(call) is not None or call.name == function.name:
            continue
        states = summary.result.states_at(call)
        held = {fact[1] for state in states for fact in state
                if fact[0] == "held" and fact[1] in roots and ("caller", fact[1]) not in state}
        # held since entry where the function has done nothing to it (nor a callee elsewhere)
        from_entry = {key for key in entered if any(
            not any(fact[0] in ("caller", "released", "maybe") and fact[1] == key for fact in state)
            for state in states)}
        held = (held - kept | from_entry) - reported
        if not held:
            continue
        # judged by `check` and on a lone file: in `lint` of a tree it would put 6.1 over the cap of
        # 40 findings (docs/rules.md, "Waiting for a function that takes the held lock")
        waited = locks.awaited_takes(model, function, call) if model.context.reports_unknown() else []
        for op, key, spelling, awaited in waited:
            if key not in held or key in reported or not _exclusive(spelling, op):
                continue
            reported.add(key)
            entry = key in from_entry and key not in roots
            kind = "waits-for-itself" if awaited == function.name else \
                "waits-for-holder-atomic" if op.atomic and call.name in _SLEEPING_WAITS else "waits-for-holder"
            findings.append(registry.finding(
                rule, model, call.node, function.name, kind,
                because=(f"lock {key}: " + ("held on entry, every way in holding it" if entry else
                                            f"exclusive, held here since {function.name}() took it"),
                         f"{call.name}() waits until {awaited}() has finished, and {awaited}() takes "
                         f"it with {spelling}() on every path that goes on",
                         *calling.explain(model, function.name)),
                call=call.name, awaited=awaited, function=function.name,
                lock=key.upper() if entry else _spelling(model, function, key)))
        for op, key, root, spelling in locks.taken_by_callee(model, function, call):
            if key not in held or key in reported or not _exclusive(spelling, op):
                continue
            if key in from_entry and key not in roots:
                reported.add(key)
                findings.append(registry.finding(
                    rule, model, call.node, function.name, "callee-takes-entry-lock",
                    because=(f"lock {key}: held on entry, every way in holding it",
                             f"{call.name}() takes it with {spelling}() on every path that goes on",
                             *calling.explain(model, function.name)),
                    callee=call.name, lock=key.upper(), function=function.name))
                continue
            if op.key != "global" and (roots[key] != {root} or root is None
                                       or locks.assigned_after(function, root, first_taken[key])):
                continue
            reported.add(key)
            where = "in this file" if call.name in model.functions else "in another file (call index)"
            findings.append(registry.finding(
                rule, model, call.node, function.name, "callee-takes-held",
                related=Place("lock taken", model.source.count(b"\n", 0, first_taken[key]) + 1),
                because=(f"lock {key}: exclusive, held here since {function.name}() took it",
                         f"{call.name}() ({where}) takes it with {spelling}() on every path that goes on",
                         *calling.explain(model, function.name)),
                callee=call.name, lock=_spelling(model, function, key), function=function.name))
    return findings


def _exclusive(spelling: str, op) -> bool:
    """A lock a second acquisition waits for: not a reader, a nesting counter or a _nested class."""
    return op.kind in _EXCLUSIVE and "read" not in spelling and "nest" not in spelling


def _unheld_releases(model: FileModel, summary: summaries.Summary, rule: ModuleType) -> list[Finding]:
    """Releases of a lock the function takes itself, reached on a path where it is not held:
    an error path that unlocks before the lock was taken, a double unlock. A lock the function
    never takes, or releases before it first takes it, is its caller's (released for it); a lock
    held on entry (__must_hold, __releases, lockdep_assert_held) is held on every path."""
    function = summary.function
    transfer = locks.LockTransfer(model)
    first: dict[str, str] = {}   # key -> the action of the first call on it, in source order
    for call in sorted(function.calls, key=lambda c: c.start):
        found = transfer.op(call)
        if found is not None and found[0].action != "assert":
            first.setdefault(found[1], found[0].action)
    # a lock first released, then taken again (sch_direct_xmit's root_lock) is the caller's
    # global states (RTNL, BH) are often the caller's even when taken on another path here
    # (em_text_change: rtnl_unlock() of the caller's RTNL, or its own after a retry): named locks
    # and RCU read-side sections only (a section the function opens first is its own)
    taken = {key for key, action in first.items() if action in ("acquire", "try", "try_fail")
             and (key not in _GLOBAL_KEYS or key in _SECTIONS)}
    # a global lock no way in holds (_entry_holding) is the function's own too, judged only where its
    # release is unconditional: one under a flag (`if (rtnl_held) rtnl_unlock();`) may be reached
    # on paths the walk cannot judge (a replay loop setting the flag before jumping back)
    owned = {key for key, action in first.items() if action in ("acquire", "try", "try_fail")
             and key in _GLOBAL_KEYS and key not in taken and _entry_holding(model, function.name, key) is False}
    taken |= owned
    early = _taken_later(model, summary, transfer, first)
    named: dict[str, set[str]] = {}   # key -> the argument texts naming it
    spellings: dict[str, set[str]] = {}   # key -> the acquiring spellings (down_read and down_write)
    for call in function.calls:
        found = transfer.op(call)
        if found is not None and found[0].action != "release":
            spellings.setdefault(found[1], set()).add(call.name)
        if found is not None and found[0].key != "global" and found[0].argument < len(call.args):
            named.setdefault(found[1], set()).add(call.args[found[0].argument])
        elif found is not None:
            named.setdefault(found[1], {found[1]})
    findings = []
    reported = set()
    for call in function.calls:
        found = transfer.op(call)
        if found is None or found[0].action != "release":
            continue
        if found[1] in early and found[1] not in reported:
            finding = _early_release(model, summary, rule, call, found[1], early[found[1]],
                                     _caller_held(model, function, transfer, found[1]))
            if finding is not None:
                reported.add(found[1])
                findings.append(finding)
            continue
        key = _taken_key(found[0], found[1], taken)
        if key is None or key in reported:
            continue
        if _returned_locked(model, function, call, found[0]):
            continue
        # the names the released object goes by here: the one it was taken as and the one
        # released (`lock_sock(sk)` ... `release_sock(sock->sk)`); released through another
        # expression than the one taking it, also the one it is held on as once that variable
        # was given another value (`sk = ERR_PTR(-EBUSY)`: "sock:sock'")
        names = {key, found[1]}
        holding = names | ({key + "'"} if key != found[1] else set())
        states = summary.result.states_at(call)
        # ("caller", key): held on entry, asserted, or released unheld earlier on this path (the
        # earlier release is the one reported). Only the error-path shape is reported: a release
        # under a label or after a switch that a path reaches without holding the lock (never
        # taken, or released already); loops and correlated conditions the walk cannot follow leave other shapes
        # too uncertain.
        flags = _flag_guards(model, function, call)
        if key in owned and flags:
            continue
        callers = _caller_held(model, function, transfer, key)
        # "released already" only for a lock always named and taken the same way: hslot->lock
        # and hslot2->lock are one typed key, and releasing one does not release the other
        once = len(set().union(*(named.get(name, ()) for name in names))) == 1 and \
            len(set().union(*(spellings.get(name, ()) for name in names))) == 1
        if _on_joined_exit(function, call) and any(
                not _holding(state, holding)
                and (once or not any(("released", name) in state for name in names))
                # a section is reported released twice, never as not opened: `#if A || B` opens
                # it and `#ifdef A` jumps to its end, which the walk cannot tell apart
                and (key not in _SECTIONS or ("released", key) in state)
                and not any(fact[0] == "implied" and fact[1] in names for fact in state)
                and all(("set", flag) in state for flag in flags)
                and not any(("branch", text, truth) in state for text, truth in callers)
                for state in states):
            reported.add(key)
            findings.append(registry.finding(
                rule, model, call.node, function.name, "released-unheld",
                because=(f"lock {key}: first taken by {function.name}() itself, so not its caller's",
                         "a path reaches this release, where jumps join (a label, a switch's end), without holding it",
                         *calling.explain(model, function.name)),
                call=call.name, args=", ".join(call.args), function=function.name))
    return findings


def _taken_later(model: FileModel, summary: summaries.Summary, transfer: locks.LockTransfer,
                 first: dict[str, str]) -> dict[str, int]:
    """Named locks the function releases before it first takes them, in source order, that it
    takes exclusively where no path has released or asserted them first (key -> the start of
    its first take): a caller holding one would deadlock there, so no caller does, and a release
    before any take is of a lock nobody holds (an early exit unlocking what only a later path
    takes). Not sch_direct_xmit's shape: there every take follows the release of the caller's."""
    takes: dict[str, list] = {}
    for call in summary.function.calls:
        found = transfer.op(call)
        if found is not None and first.get(found[1]) == "release" and found[1] not in _GLOBAL_KEYS:
            takes.setdefault(found[1], []).append((call, found[0]))
    later = {}
    for key, ops in takes.items():
        acquires = [call for call, op in ops if op.action == "acquire"]
        if not acquires or not all(_exclusive(call.name, op) for call, op in ops if op.action != "release"):
            continue
        if any(_holding(state, (key,)) for call in acquires for state in summary.result.states_at(call)):
            continue
        later[key] = min(call.start for call in acquires)
    return later


def _early_release(model: FileModel, summary: summaries.Summary, rule: ModuleType, call, key: str,
                   taken_at: int, callers: set[tuple[str, bool]]) -> Finding | None:
    """A release of a lock of _taken_later before its first take, outside any loop (where a
    take later in the body may come first), that no path reaches holding it."""
    function = summary.function
    if call.start > taken_at or flow.in_loop(call.node, function.body):
        return None
    states = summary.result.states_at(call)
    if not states or any(_holding(state, (key,)) for state in states) or \
            any(("branch", text, truth) in state for state in states for text, truth in callers):
        return None
    return registry.finding(
        rule, model, call.node, function.name, "released-unheld",
        because=(f"lock {key}: taken by {function.name}() itself where no path released it first, so "
                 "no caller holds it (it would deadlock there)",
                 "this release comes before any take of it: no path reaches it holding the lock",
                 *calling.explain(model, function.name)),
        call=call.name, args=", ".join(call.args), function=function.name)


def _taken_key(op, key: str, taken: set[str]) -> str | None:
    """The key of the function's own lock a release names: its own key, or for an object lock
    named otherwise than where it was taken (`release_sock(sock->sk)` after `lock_sock(sk)`),
    the one object of that kind the function takes (LockTransfer.same_object's reading)."""
    return key if key in taken else locks.one_of_kind(op, taken)


def _holding(state: frozenset, names) -> bool:
    """Some path fact says the lock, under one of its names, may be held: taken here, the
    caller's (held on entry or released unheld already), or taken on some path of a callee."""
    return any((fact, name) in state for fact in ("held", "caller", "maybe") for name in names)


# Global locks a registration's calling context says are held or not (kfacts.Context.locks).
_CONTEXT_LOCKS = frozenset({"rtnl"})


def _entry_holding(model: FileModel, name: str, key: str) -> bool | None:
    """Whether every way into `name` holds the global lock `key` (True) or none does (False):
    nothing in its file calls it (static), and each of its registrations has a calling context the
    facts table knows (a work item, a genetlink doit without RTNL; an `.ndo_open`, an ethtool op
    with it). None otherwise. Without it, a release of RTNL is of the function's own taking, as for
    a named lock (an RTNL a work item releases on an early exit that never took it); with it, a
    callee taking RTNL waits for the function's caller."""
    function = model.functions.get(name)
    if key not in _CONTEXT_LOCKS or function is None or not function.is_static or model.callers.get(name):
        return None
    ways = calling.registered_ways(model, name)
    if not ways or any(way.context is None for way in ways):
        return None
    holding = {key in way.context.locks for way in ways}
    return holding.pop() if len(holding) == 1 else None


def _returned_locked(model: FileModel, function: Function, call, op) -> bool:
    """The released lock's object came from a lookup of another file that returns it locked
    (facts table [lock_handoff] returns_locked): the walk does not see that callee take it."""
    if op.key == "global" or op.argument >= len(call.args):
        return False
    root = re.match(r"&?\(?(\w+)", call.args[op.argument])
    if root is None:
        return False
    variable = root.group(1).encode()
    pairs = [(node.child_by_field_name("left"), node.child_by_field_name("right"))
             for node in function.shapes.get("assignment", [])]
    pairs += [(node.child_by_field_name("declarator"), node.child_by_field_name("value"))
              for node in function.shapes.get("declarator", [])]
    for target, value in pairs:
        if target is not None and value is not None and target.text == variable and \
                value.type == "call_expression":
            callee = model.text(value.child_by_field_name("function"))
            if callee not in model.functions and callee in _RETURNS_LOCKED:
                return True
    return False


def _caller_held(model: FileModel, function: Function, transfer: locks.LockTransfer,
                 key: str) -> set[tuple[str, bool]]:
    """(parameter, truth) of each `if (!lock_taken) mutex_lock(l);` taking the lock only when
    a parameter says the caller does not hold it: a path tagged with the other outcome reaches
    a release with the caller's lock (netlink_dump(sk, lock_taken))."""
    found = set()
    for call in function.calls:
        op = transfer.op(call)
        if op is None or op[1] != key or op[0].action not in ("acquire", "try", "try_fail"):
            continue
        node = call.node
        while node is not None and node != function.body:
            parent = node.parent
            if parent is not None and parent.type == "if_statement" and \
                    node == parent.child_by_field_name("consequence"):
                text = squeeze(model.text(parent.child_by_field_name("condition"))).strip("()")
                bare = text.lstrip("!")
                if bare in function.params:
                    found.add((bare, (len(text) - len(bare)) % 2 == 1))
            node = parent
    return found


def _flag_guards(model: FileModel, function: Function, call) -> set[str]:
    """The conditions guarding the call that are flags the function sets (`if (tx->pending_close)
    spin_unlock(...)` with `tx->pending_close = true;` where the lock is kept): a path that reaches
    the call without having set the flag (it left before any assignment; the test alone tagged
    it) says nothing of the lock."""
    guards = set()
    node = call.node
    while node is not None and node != function.body:
        parent = node.parent
        if parent is not None and parent.type == "if_statement" and \
                node == parent.child_by_field_name("consequence"):
            text = squeeze(model.text(parent.child_by_field_name("condition"))).strip("()").lstrip("!")
            guards.add(text)
        node = parent
    return guards & _flags(model, function)


def _flags(model: FileModel, function: Function) -> set[str]:
    """Texts (without spaces) of the variables and fields the function sets to a truth value
    (`done = true;`, `p = NULL;`: flow.KNOWN_TRUTH): flags a path carries. A variable only ever
    assigned what a call returns (`cfg = kzalloc(...)`) is set on every path that tests it."""
    return {squeeze(model.text(node.child_by_field_name("left"))) for node in function.shapes.get("assignment", [])
            if squeeze(model.text(node.child_by_field_name("right"))) in flow.KNOWN_TRUTH}


def _on_joined_exit(function: Function, call) -> bool:
    """The call follows, with no return between them, a point where jumps join: a label
    (`out_unlock:`), or the end of a switch the cases of which `break` to (a setsockopt's
    common exit after `case X: if (!ok) { err = -EPERM; break; }`)."""
    labelled, returns = function.labels_and_returns
    joins = [node.start_byte for node in labelled]
    joins += [node.end_byte for node in function.shapes.get("switch", [])
              if node.end_byte <= call.start and not _looped_apart(node, call.node)]
    return any(join < call.start and not any(join < r < call.start for r in returns) for join in joins)


def _looped_apart(switch, call) -> bool:
    """A loop holds the switch but not the call: its cases' breaks join inside the loop, whose
    other iterations (another object's lock and unlock) the walk folds into one state."""
    node = switch.parent
    while node is not None and not (node.start_byte <= call.start_byte and call.end_byte <= node.end_byte):
        if node.type in flow.LOOPS:
            return True
        node = node.parent
    return False


def _intended(model: FileModel, function: Function, key: str, holding, releasing) -> bool:
    """Returning with the lock is what the function is for, judged by what it and the rest of
    the file do, never by its name or its comment: annotated `__acquires`; a seq_file step, or a
    registration whose counterpart releases (facts table), held where it succeeds; released by
    its in-file callers or by another function of the file that never takes it (the other half
    of a pair), where it never releases it itself or holds it exactly where it succeeds; or
    returns that tell the caller whether it holds it (a trylock, a lookup returning it locked)."""
    if key in locks.annotated_keys(model, function, "__acquires") or \
            calling.only_reached_from(model, function.name, _SEQ_STEPS):
        return True
    ways = calling.registered_ways(model, function.name)
    handing = bool(ways) and all(calling.listed(way, _HANDING_FIELDS) for way in ways)
    kind = _return_kind(model, function)
    # .pre_doit takes what .post_doit releases: held where it succeeds, whatever its failures do
    if handing and _reports(kind, holding, "success"):
        return True
    callers = _callers_release(model, function, key)
    # never released here but to unwind a failure (the returns without it never took it, or
    # report the failure): a hand-off when something else releases it
    if not any(("released", key) in state and _outcome(kind, node, state) != "failure" for node, state in releasing) \
            and (handing or callers or _released_elsewhere(model, function, key)):
        return True
    # held for one answer and not for the other: a value the callers test and then release it
    return _tells_apart(kind, holding, releasing, _tried(model, function, key)) or (
        callers and _answers_apart(kind, holding, releasing))


def _tells_apart(kind: str, holding, releasing, tried: bool) -> bool:
    """Held on the returns that report success, not on those that report failure, by the
    kernel's conventions (0 or a count against -E..., a pointer against NULL or ERR_PTR(), true
    against false): neither side returns what the other does. Returns holding it whose value is
    unknown (`return esw->mode;`) count as successes only where the lock is taken by a trylock,
    whose failure the function reports."""
    held = {_outcome(kind, node, state) for node, state in holding}
    free = {_outcome(kind, node, state) for node, state in releasing}
    if kind in ("pointer", "bool") and held == {"success"}:
        # an object (or true) given back on every held return: the caller knows by what it gets
        # (another object than its own, an out-flag set beside it) which it must unlock
        return True
    return bool(releasing) and ((held == {"success"} and "success" not in free)
                                or (tried and free == {"failure"} and "failure" not in held))


def _tried(model: FileModel, function: Function, key: str) -> bool:
    """The function takes the lock with a trylock."""
    transfer = locks.LockTransfer(model)
    return any((found := transfer.op(call)) is not None and found[1] == key and found[0].action in ("try", "try_fail")
               for call in function.calls)


def _answers_apart(kind: str, holding, releasing) -> bool:
    """Every return's outcome is known and the held ones answer otherwise than the others
    (`return false;` holding both locks, `return true;` after releasing them)."""
    held = {_outcome(kind, node, state) for node, state in holding}
    free = {_outcome(kind, node, state) for node, state in releasing}
    return bool(releasing) and None not in held | free and held.isdisjoint(free)


def _released_elsewhere(model: FileModel, function: Function, key: str) -> bool:
    """Another function of the file releases the lock and never takes it (foo_close() enabling
    the softirqs foo_open() disabled, a completion unlocking what a transmit locked)."""
    transfer = locks.LockTransfer(model)

    def ops(call) -> list:
        """(op, key) of the call's own lock operation and of a header wrapper's."""
        found = transfer.op(call)
        return ([found] if found else []) + transfer.wrapped(call)

    def actions(other: Function) -> set[str]:
        """What other's calls do to the lock, and (one level down) those of the in-file functions
        it calls, seen from its call."""
        done = set()
        for call in other.calls:
            done |= {op.action for op, lock in ops(call) if lock == key}
            callee = model.functions.get(call.name)
            if callee is not None and callee is not function and callee is not other:
                done |= {op.action for inner in callee.calls for op, lock in ops(inner)
                         if model.at_call_site(lock, callee, call) == key}
        return done

    # an assert (ASSERT_RTNL() in a helper it calls) takes nothing
    return any(other is not function and "release" in (done := actions(other)) and done <= {"release", "assert"}
               for other in model.functions.values())


def _reports(kind: str, exits, outcome: str) -> bool:
    return all(_outcome(kind, node, state) == outcome for node, state in exits)


def _callers_release(model: FileModel, function: Function, key: str) -> bool:
    """Some in-file caller releases the lock this function returns holding: itself, or through
    an in-file function it calls (phy_select_page() ... phy_restore_page())."""
    transfer = locks.LockTransfer(model)

    def releases(caller: Function, lock: str) -> bool:
        return any((found := transfer.op(c)) and found[0].action == "release" and found[1] == lock
                   for c in caller.calls)

    for call in model.callers.get(function.name, []):
        caller = model.functions.get(call.function)
        if caller is None:
            continue
        mine = model.at_call_site(key, function, call)
        if releases(caller, mine) or any(
                c.name in model.functions and c.name != function.name
                and releases(model.functions[c.name], model.at_call_site(key, function, call))
                for c in caller.calls):
            return True
    return False


def _return_kind(model: FileModel, function: Function) -> str:
    """"pointer", "bool", "void" or "int": what the function's return values can mean."""
    declarator = function.node.child_by_field_name("declarator")
    if declarator is not None and declarator.type == "pointer_declarator":
        return "pointer"
    spelled = model.text(function.node.child_by_field_name("type") or function.node)
    return "bool" if spelled == "bool" else "void" if spelled == "void" else "int"


def _outcome(kind: str, node, state: frozenset) -> str | None:
    """Whether a return reports success or failure on this path; None when it cannot be told.
    A value tested on the way (`if (!p) { unlock; }` then `return p;`) is known on each path."""
    value = locks.returned_text(node)
    if value is None:
        return None
    for truth in (False, True):
        if ("branch", value, truth) in state:   # zero is success for an int, failure otherwise
            return "success" if (kind == "int") != truth else "failure"
        if kind == "int" and ("branch", f"{value}<0", truth) in state:   # `if (ret < 0)`: an errno
            return "failure" if truth else "success"
    value = locks.returned(node, state)   # `err = -EBUSY; goto out;` ... `return err;`
    if _FAILURE.match(value) or (kind in ("bool", "pointer") and value == "0"):
        return "failure"
    if kind == "bool":
        return "success" if value in ("true", "1") else None
    if kind == "pointer":
        return "success"
    return "success" if re.fullmatch(r"\d+", value) else None


def _spelling(model: FileModel, function: Function, key: str) -> str:
    """How the source names the lock: the argument text of its first acquisition."""
    key = key.rstrip("'")   # held on after its variable was reassigned
    transfer = locks.LockTransfer(model)
    for call in function.calls:
        found = transfer.op(call)
        if (found and found[1] == key and found[0].action != "release") or \
                any(k == key and op.action != "release" for op, k in transfer.wrapped(call)):
            return f"{call.name}({', '.join(call.args)})"
    return key   # taken by an in-file callee that returns it held
