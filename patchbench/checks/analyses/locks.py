"""Lock semantics shared by the lock rules: which calls take and drop which lock, as a flow.Transfer.

Facts (in frozenset states):
- ("held", key): the lock is held here. Keys are `FileModel.canonical()` access paths of the lock
  argument ("foo_queue.tx_ring.consumer_lock"), or a fixed name for global locks ("rcu", "rcu_bh",
  "rcu_sched", "rtnl"), or "<kind>:<path>" for object locks (`lock_sock(sk)` -> "sock:sock").
- ("caller", key): the lock belongs to the caller: it was released here without being taken here,
  or the function states it holds it on entry (`__must_hold`, `lockdep_assert_held`).
- ("scope", block start byte, key): taken by cleanup.h's `guard(k)(&l)` (to the end of the
  enclosing block) or `scoped_guard(k, &l) { }` (for its block): `leave_block` releases it there,
  on every way out of the block, so a guard never reaches a caller.
- ("released", key): taken and released again on this path.
- ("nested", key): a reader section opened again inside itself (rcu_read_lock() twice); the next
  release closes the inner one only.
- ("stale", variable): the variable that named a held lock was given a constant (`sk =
  ERR_PTR(-EBUSY)` after `lock_sock(sk)`): the lock is held on as `key'`, a lock no expression
  names any more, and a release through the variable releases something else.
- ("value", variable, constant) (with `values=True`): the variable was last assigned a constant
  here (`err = -EINVAL`, `p = NULL`, `ret = 0`; error codes as "-E"), for rules that judge what a
  return reports.

`LockTransfer(model, summaries)` also gives calls of in-file functions their summarised effect:
a callee that exits holding a lock on every path (a lock wrapper) takes it for its caller, and one
that releases its caller's lock on every path releases it.
"""

from __future__ import annotations

import re

import tree_sitter

from patchbench.checks.engine import parse as cparse
from patchbench.checks.engine import flow
from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.engine.model import SCOPED_GUARDS, CallSite, FileModel, Function, squeeze


LockOp = kfacts.LockOp


def lock_key(model: FileModel, function: Function | None, call: CallSite, op: LockOp,
             args: list[str] | None = None) -> str | None:
    """The key of the lock `call` (with lock arguments `args`, default its own) operates on (see
    the module docstring), None if unnamed."""
    if op.key == "global":
        return op.kind
    args = call.args if args is None else args
    if op.argument >= len(args):
        return None
    key = model.canonical(function, args[op.argument])
    return f"{op.kind}:{key}" if op.key == "object" else key



def may_take(model: FileModel, name: str, statements: bool = False) -> bool:
    """A call of `name` may take a lock, by its name alone: a lock operation, a guard, a header
    wrapper of one, and (with `statements`) a sparse context statement such as __acquire()."""
    return kfacts.lock_op(name) is not None or name.startswith("guard(") or name in SCOPED_GUARDS \
        or (statements and kfacts.statement_op(name) is not None) \
        or (name not in model.functions and model.context.wrapper(name) is not None)


def guard_call(call: CallSite) -> tuple[LockOp, list[str], tree_sitter.Node] | None:
    """(op, lock arguments, block it is held for) of a cleanup.h guard: `guard(k)(&l)` holds to
    the end of its enclosing block, `scoped_guard(k, &l) {...}` for its statement."""
    if call.name.startswith("guard("):
        found = kfacts.guard_op(call.name)
        block = call.node.parent
        while block is not None and block.type != "compound_statement":
            block = block.parent
        args = call.args
    elif call.name in SCOPED_GUARDS and call.args:
        found = kfacts.guard_op(f"guard({call.args[0]})")
        args = call.args[2:] if call.name == "scoped_cond_guard" else call.args[1:]
        condition = call.node.parent
        block = condition.parent.child_by_field_name("consequence") \
            if condition is not None and condition.parent is not None else None
    else:
        return None
    if found is None or block is None:
        return None
    if found[1].kind == "guard" and args:   # a class the table does not know: its DEFINE_GUARD
        defined = call.defined_guard
        op = kfacts.lock_op(defined[0]) if defined else None
        if op is not None:
            return op, [_instantiate(argument, args[0]) for argument in defined[1]], block
    return found[1], args, block


def _instantiate(template: str, guarded: str) -> str:
    """A guard class's lock argument with _T replaced by the guarded object's text."""
    if _SIMPLE.fullmatch(guarded):
        if guarded.startswith("&"):   # guard(foo)(&x): &x->lock is x.lock
            template = re.sub(r"\b_T->", guarded[1:] + ".", template)
    else:
        guarded = f"({guarded})"
    return re.sub(r"\b_T\b", lambda _: guarded, template)


_SIMPLE = re.compile(r"&?[A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*)*")


def annotated_keys(model: FileModel, function: Function, *names: str) -> frozenset[str]:
    """Keys named by the function's annotations of the given names (`__must_hold(&q->lock)`)."""
    keys = set()
    for name, argument in function.annotations:
        if name in names:
            keys.add("rcu" if argument == "RCU" else model.canonical(function, argument))
    return frozenset(keys)


class LockTransfer(flow.Transfer):
    """Held-lock semantics of calls; pass `summaries` (name -> summaries.Summary) for in-file
    callees, `values=True` to track constants assigned to variables."""

    correlate_branches = True

    def __init__(self, model: FileModel, summaries: dict | None = None, values: bool = False):
        self.model = model
        self.summaries = summaries if summaries is not None else {}
        self.values = values
        self._named: dict[Function, dict[str, set[str]]] = {}   # variable -> keys of locks it names
        self._returned: dict[Function, set[str]] = {}
        self._conditional: dict[str, tuple] = {}   # callee -> (its summary, conditional_effects())
        self._exit_plans: dict[CallSite, tuple] = {}   # call -> (callee's summary, _exit_effects())
        self._via: set[str] = set()   # the variables ("via", variable, key) was ever given for
        self._valued: set[str] = set()   # the variables ("value", ...) or ("iff", ...) was ever given for
        self._handed: dict[tuple, tuple] = {}   # (call, key, truth) -> (callee's summary, handed_key())
        self._tested: dict[tuple[Function, str], str] = {}   # (function, tested text) -> its key
        self._through: dict[tuple[Function, str], frozenset] = {}   # see through()
        # What each call does to which lock is the same for every transfer of the file (the walk's
        # and those the judgement makes per function, ten of them): kept once with the model.
        # _ops: call -> its op and key; _blocks: guard call -> start byte of the block it holds
        # for; _scope_starts: those blocks' start bytes, the only ones a leave ends a guard of;
        # _wrapped: call -> the ops of the header wrapper it calls
        self._ops: dict[CallSite, tuple[LockOp, str] | None]
        self._blocks: dict[CallSite, int]
        self._scope_starts: set[int]
        self._wrapped: dict[CallSite, list]
        self._ops, self._blocks, self._scope_starts, self._wrapped = model.memo(
            "locks.calls", lambda: ({}, {}, set(), {}))
        self._elsewhere: dict[CallSite, list] = {}
        self._locking: dict[Function, bool] = {}
        self._assignments: dict[tuple, tuple] = {}   # see _assignment()

    def op(self, call: CallSite) -> tuple[LockOp, str] | None:
        """The lock operation of the call and its lock's key (computed once per call: every path
        and every walk of the function asks again)."""
        if call not in self._ops:
            self._ops[call] = self._op(call)
        return self._ops[call]

    def taken_through(self, call: CallSite) -> tuple[LockOp, str, str] | None:
        """(op, key, argument text) when the call takes (or tries) a lock of an object through
        its argument (`spin_lock(&b->lock)`), not a global one; None for others."""
        found = self.op(call)
        if found is None or found[0].action == "release" or found[0].key == "global" \
                or found[0].argument >= len(call.args):
            return None
        return found[0], found[1], call.args[found[0].argument]

    def _op(self, call: CallSite) -> tuple[LockOp, str] | None:
        guard = guard_call(call)
        if guard is not None:
            op, args, block = guard
            key = lock_key(self.model, self.function_of(call), call, op, args)
            if key is None:
                return None
            self._blocks[call] = block.start_byte
            self._scope_starts.add(block.start_byte)
            return LockOp("acquire", op.kind, op.key, op.argument, op.atomic, op.implies), key
        op = kfacts.lock_op(call.name) or kfacts.statement_op(call.name)
        if op is None:
            return None
        key = lock_key(self.model, self.function_of(call), call, op)
        return (op, key) if key is not None else None

    def function_of(self, call: CallSite) -> Function | None:
        return self.model.functions.get(call.function)

    def predicate(self, name: str) -> Function | None:
        function = self.model.functions.get(name)
        return function if function is not None and function.is_static else None

    def changes(self, call: CallSite) -> bool:
        return self.op(call) is not None or call.name in self.summaries or bool(self.wrapped(call)) \
            or bool(self.elsewhere(call))

    def elsewhere(self, call: CallSite) -> list[tuple[LockOp, str]]:
        """The locks a function of another file called here takes or releases on some of its
        paths (elsewhere_ops), when this function names any lock at all."""
        if call not in self._elsewhere:
            function = self.function_of(call)
            self._elsewhere[call] = elsewhere_ops(self.model, function, call) \
                if function is not None and self.locking(function) else []
        return self._elsewhere[call]

    def locking(self, function: Function) -> bool:
        if function not in self._locking:
            self._locking[function] = any(self.op(c) is not None for c in function.calls)
        return self._locking[function]

    def call(self, state: frozenset, call: CallSite) -> frozenset:
        found = self.op(call)
        if found is None:
            if call.name in self.summaries:
                return self.callee_effect(state, call)
            for op, key in self.wrapped(call):
                state = self.apply(state, op, key)
            for op, key in self.elsewhere(call):
                # taken or released on some of the callee's paths: from here the walk cannot
                # tell whether it is held (a release after it is no double release either)
                if op.action != "release" or ("held", key) in state:
                    state = (state - {("held", key)} - self.implied_by(state, key)) | {("maybe", key)}
            return state
        op, key = found
        if call in self._blocks:
            return state | {("held", key), ("scope", self._blocks[call], key)}
        if op.kind == "context":   # __acquire(&l) / __release(&l): what the code says it holds
            if op.action == "acquire":
                return state | {("held", key)}
            return released(state, key) if ("held", key) in state else state
        variable = root(call.args[op.argument]) if op.key != "global" else None
        if ("stale", variable) in state:
            if op.action != "release":   # the variable names a new lock from here on
                return self.through_variable(self.apply(state - {("stale", variable)}, op, key), op, key, variable)
            return self.apply(state, op, key, renamed=True)
        return self.through_variable(self.apply(state, op, key), op, key, variable)

    def through_variable(self, state: frozenset, op: LockOp, key: str, variable: str | None) -> frozenset:
        """With `values`: ("via", variable, key) for a lock just taken through `variable`
        (`spin_lock(&owner->lock)`), kept while the variable (or a copy of it, `prev = owner`, or
        a variable found equal to it, `if (owner == prev)`) still points at the locked object:
        a later `if (!owner)` then knows the lock is not held on its NULL side."""
        if not self.values or variable is None or op.action not in ("acquire", "try_fail") or \
                ("held", key) not in state:
            return state
        self._via.add(variable)
        return state | {("via", variable, key)}

    def wrapped(self, call: CallSite) -> list[tuple[LockOp, str]]:
        """The lock operations a header wrapper (static inline foo_chan_lock() around
        mutex_lock(&chan->lock)) leaves done in its caller, with keys of the caller's arguments."""
        if call not in self._wrapped:
            self._wrapped[call] = wrapped_ops(self.model, self.function_of(call), call)
        return self._wrapped[call]

    def apply(self, state: frozenset, op: LockOp, key: str, renamed: bool = False) -> frozenset:
        """The operation's effect; `renamed`: its variable no longer names the lock it named."""
        if op.action in ("acquire", "try_fail"):
            if op.is_reader and ("held", key) in state:   # rcu_read_lock() inside a section
                return state | {("nested", key)}
            return state | {("held", key)} | self.implied(op, key)
        if op.action == "assert":
            return state | {("held", key), ("caller", key)}
        if op.action == "release":
            if ("nested", key) in state:   # the inner section ends, the outer one goes on
                return state - {("nested", key)}
            if op.implies and not self.implied(op, key) <= state:
                # spin_lock_irqsave(a); spin_unlock(a); spin_lock(b); spin_unlock_irqrestore(b):
                # the disabled interrupts passed from a to b, and are enabled here
                state = state - {fact for fact in state if fact[0] == "implied" and fact[1] == op.implies
                                 and ("held", fact[2]) not in state}
            state = state - self.implied(op, key)
            if ("held", key) in state:
                return _unvia(state - {("held", key)}, key) | {("released", key)}
            if op.field:   # wiphy_unlock(w) after mutex_lock_nested(&w->mtx, 1)
                mutex = f"{key.split(':', 1)[1]}.{op.field}"
                if ("held", mutex) in state:
                    return released(state, mutex)
            left = next((fact for fact in state if fact[0] == "implied" and fact[1] == key), None)
            if left is not None:   # spin_lock_bh(); spin_unlock(); local_bh_enable();
                return state - {left}
            same = None if renamed else self.same_object(state, op, key)
            if same is not None:
                return released(state, same)
            if ("maybe", key) in state:   # a callee elsewhere may have taken it
                return state
            return state | {("caller", key)}
        return state

    @staticmethod
    def same_object(state: frozenset, op: LockOp, key: str) -> str | None:
        """The one lock of the released object's kind held here, when the release names it
        differently (netdev_lock(dev) ... netdev_unlock(bp->dev); lock_sock(sk) with sk loaded
        from sock->sk ... release_sock(sock->sk)): an object lock of one kind held once is the
        object released. Path-named locks (spin, mutex) never match by kind."""
        return one_of_kind(op, [fact[1] for fact in state if fact[0] == "held"])

    @staticmethod
    def implied(op: LockOp, key: str) -> frozenset:
        """("implied", "bh", key): softirqs disabled by spin_lock_bh(&key), until spin_unlock_bh()
        or, after a plain spin_unlock(), local_bh_enable()."""
        return frozenset({("implied", op.implies, key)}) if op.implies else frozenset()

    def decisive(self, state: frozenset) -> frozenset:
        return frozenset(fact for fact in state if fact[0] == "held")

    def assigns(self, target: str, value, function: Function) -> bool:
        source = value.text.decode("utf-8", "replace") if value.type == "identifier" else None
        _, remembered, keys = self._assignment(target, value, function)
        return target in self._via or source in self._via or target in self._valued or remembered or bool(keys)

    def assign(self, state: frozenset, target: str, value, function: Function) -> frozenset:
        if self._via:
            source = value.text.decode("utf-8", "replace") if value.type == "identifier" else None
            if (target in self._via or source in self._via) and any(fact[0] == "via" for fact in state):
                # `prev = owner;` names what owner names; `owner = next;` no longer does
                copied = {("via", target, fact[2]) for fact in state if fact[0] == "via" and fact[1] == source}
                if copied:
                    self._via.add(target)
                state = frozenset(f for f in state if not (f[0] == "via" and f[1] == target)) | copied
        constant, remembered, keys = self._assignment(target, value, function)
        if target in self._valued:   # no state can hold a fact of a variable never given one
            stale = [f for f in state if (f[0] == "iff" or (self.values and f[0] == "value")) and f[1] == target]
            if stale:
                state = state.difference(stale)
        if remembered:
            self._valued.add(target)
            state = state | {("value", target, constant)}
        # only a constant (`sk = ERR_PTR(-EBUSY)`, `p = NULL`) surely names no lock: `p = p->next`,
        # `sk = sock->sk` or `c = lookup()` may name the same one; a declaration is a new variable
        for key in keys:
            if ("held", key) in state:
                moved = {f for f in state if f[0] in ("held", "implied") and f[-1] == key}
                state = (state - moved) | {f[:-1] + (key + "'",) for f in moved} | {("stale", target)}
        return state

    def _assignment(self, target: str, value, function: Function) -> tuple[str | None, bool, tuple[str, ...]]:
        """What `target = value` means for any state, worked out once per assignment (every path
        through it asks): the constant assigned, whether to remember it as the variable's value,
        and the lock keys the assignment moves off target."""
        memo = (function.name, target, value.start_byte, value.end_byte)
        if memo not in self._assignments:
            constant = _constant(squeeze(value.text.decode("utf-8", "replace")))
            remembered = self.values and constant is not None and target in self.returned(function)
            keys = self.named_by(function).get(target)
            moves = bool(keys) and constant is not None and value.parent.type != "init_declarator"
            self._assignments[memo] = (constant, remembered, tuple(sorted(keys)) if moves else ())
        return self._assignments[memo]

    def returned(self, function: Function) -> set[str]:
        """Variables the function returns (`return err;`) and changes only by plain assignments
        (the walk is not told of `n++`, `n += k`, `foo(&n)` or an iterator's cursor): those whose
        constants are worth knowing."""
        if function not in self._returned:
            shapes, text = function.shapes, self.model.text
            returned = {text(node.named_children[0]) for node in shapes.get("return", [])
                        if node.named_child_count == 1 and node.named_children[0].type == "identifier"}
            updated = {squeeze(text(node.child_by_field_name("argument"))) for node in shapes.get("update", [])}
            updated |= {squeeze(text(node.child_by_field_name("left"))) for node in shapes.get("assignment", [])
                        if node.child_by_field_name("operator").type != "="}
            # foo(&err) may set it; an iterator head `while (pos, head, member)` sets its cursor
            updated |= {squeeze(text(node.child_by_field_name("argument"))) for node in shapes.get("address", [])}
            updated |= {text(n) for node in shapes.get("cursor", []) for n in node.named_children
                        if n.type == "identifier"}
            self._returned[function] = returned - updated
        return self._returned[function]

    def named_by(self, function: Function) -> dict[str, set[str]]:
        """variable -> the keys of the locks the function takes through it alone (`lock_sock(sk)`)."""
        if function not in self._named:
            named: dict[str, set[str]] = {}
            for call in function.calls:
                taken = self.taken_through(call)
                if taken is not None and call not in self._blocks:
                    variable = root(taken[2])
                    if variable:
                        named.setdefault(variable, set()).add(taken[1])
            # keys are typed paths: two variables of one type taking their locks name one key,
            # and reassigning either says nothing of which is held
            shared = {key for keys in named.values() for key in keys
                      if sum(key in other for other in named.values()) > 1}
            # `prev = p; p = next(p);`: the lock taken through p is still named by prev
            copied = _copied(self.model, function)
            self._named[function] = {variable: keys - shared for variable, keys in named.items()
                                     if variable not in copied}
        return self._named[function]

    def assume(self, state: frozenset, call: CallSite, truth: bool) -> frozenset:
        found = self.op(call)
        if found is None:
            summary = self.summaries.get(call.name)
            if summary is not None and call.name != call.function:
                for kind, key, when in self.conditional_effects(summary):
                    if truth != when:
                        continue
                    mine = self.model.at_call_site(key, summary.function, call)
                    handed = self.handed_key(summary, key, when, call) if kind == "held" else None
                    if handed is not None:   # `b = find_locked(t, &slot); if (!b)`: b's and slot's locks
                        state = state | {("held", handed[0])} | {("implied", flavour, handed[0])
                                                                 for flavour in handed[1]}
                    elif kind == "held":   # `obj = lookup_locked(); if (!obj)`: a lookup returning it locked
                        # only the returned object's lock or one named through a parameter: a
                        # lock reached through an out-parameter (*cbdr) or a global is not followed
                        declarator = summary.function.node.child_by_field_name("declarator")
                        if mine != key or (declarator is not None and declarator.type == "pointer_declarator"):
                            state = state | {("held", mine)}
                    elif ("held", mine) in state:   # `if (tcp_add_backlog(sk, skb)) goto discard;`
                        state = released(state, mine)
            return state
        if call in self._blocks:   # scoped_cond_guard() failed: its block is skipped unlocked
            return state if truth else self.leave_block(state, guard_call(call)[2])
        op, key = found
        if op.action == "try" and truth:
            return state | {("held", key)} | self.implied(op, key)
        if op.action == "try_fail" and truth:   # nonzero: interrupted, not taken
            return state - {("held", key)}
        return state

    def handed_key(self, summary, key: str, when: bool, call: CallSite) -> tuple[str, frozenset] | None:
        """The caller's key of a lock the callee returns holding (conditional_effects) when it
        took it through a variable it hands to its caller: the variable it returns (`return b;`
        where it holds the lock) or stores through an out-parameter (`*slot_ret = slot;`). The
        caller names it through the variable it receives it in (`b = find(t, &slot)`: `b->lock`,
        `slot->lock`); with the flavours (bh, irq) the callee's lock call disabled, when every
        holding return has them. None when the lock is not handed that way."""
        memo = (call, key, when)
        cached = self._handed.get(memo)
        if cached is None or cached[0] is not summary:
            cached = (summary, self._handed_key(summary, key, when, call))
            self._handed[memo] = cached
        return cached[1]

    def _handed_key(self, summary, key: str, when: bool, call: CallSite) -> tuple[str, frozenset] | None:
        callee = summary.function
        roots = set()
        for taking in callee.calls:
            taken = self.taken_through(taking)
            if taken is None or taken[1] != key or taking in self._blocks:
                continue
            roots.add((root(taken[2]), taken[2], taken[0]))
        if len({variable for variable, _, _ in roots}) != 1:
            return None
        variable, argument, op = sorted(roots, key=lambda r: (r[1], r[2].kind))[0]
        holding = [(node, state) for node, state in summary.result.returns
                   if returned_truth(node, state, self.holds_through(callee, node, state)) == when]
        if not holding or any(("held", key) not in state for _, state in holding):
            return None
        flavours = frozenset.intersection(*(frozenset(fact[1] for fact in state if fact[0] == "implied"
                                                      and fact[2] == key) for _, state in holding))
        receiver = None
        if all(returned_text(node) == variable for node, _ in holding):
            receiver = _receiver(call)
        else:
            index = _out_parameter(callee, variable)
            if index is not None and index < len(call.args) and call.args[index].startswith("&") \
                    and call.args[index][1:].isidentifier():
                receiver = call.args[index][1:]
        if receiver is None:
            return None
        match = _ROOT.match(argument)
        text = match.group(1) + receiver + argument[match.end():]
        mine = lock_key(self.model, self.function_of(call), call, op, [text] * (op.argument + 1))
        return (mine, flavours) if mine is not None else None

    def holds_through(self, function: Function, node, state: frozenset) -> bool:
        """The return gives a variable through which the function took a lock still held on
        this path (`spin_lock(&b->lock); ... return b;`): it is not NULL."""
        text = returned_text(node)
        if text is None or not text.isidentifier():
            return False
        for call in function.calls:
            taken = self.taken_through(call)
            if taken is not None and root(taken[2]) == text and ("held", taken[1]) in state:
                return True
        return False

    def leave_block(self, state: frozenset, block) -> frozenset:
        if block.start_byte not in self._scope_starts:   # no guard() holds a lock for this block
            return state
        ending = {fact for fact in state if fact[0] == "scope" and fact[1] == block.start_byte}
        if not ending:
            return state
        keys = {fact[2] for fact in ending}
        return (state - ending - {("held", key) for key in keys}) | {("released", key) for key in keys}

    def equal(self, state: frozenset, left: str, right: str, truth: bool) -> frozenset:
        """`if (owner == prev)`: equal pointers name the same locked objects."""
        if not truth or not self.values:
            return state
        if left not in self._via and right not in self._via:
            return state
        named = {fact for fact in state if fact[0] == "via" and fact[1] in (left, right)}
        if not named:
            return state
        self._via.update((left, right))
        return state | {("via", right if fact[1] == left else left, fact[2]) for fact in named}

    def test(self, state: frozenset, expression: str, truth: bool, function: Function) -> frozenset:
        if not truth and expression in self._via:
            # `if (owner) flush(owner);`: a NULL owner names no lock it was taken through
            for fact in sorted(f for f in state if f[0] == "via" and f[1] == expression):
                if ("held", fact[2]) in state:
                    state = _unvia(state - {("held", fact[2])} - self.implied_by(state, fact[2]), fact[2])
        flagged = {fact for fact in state if fact[0] == "iff" and fact[1] == expression} \
            if expression in self._valued else None
        if flagged:   # the callee dropped the lock exactly when it set this flag
            state = state - flagged
            for _, _, key in sorted(flagged):
                state = released(state, key) if truth and ("held", key) in state else state
        # `if (lock) spin_unlock(lock);`: a NULL lock pointer is not held
        if truth:
            return state
        found = (function, expression)
        if found not in self._tested:
            self._tested[found] = self.model.canonical(function, expression)
        state = state - {("held", self._tested[found])}
        # `mutex_lock(&conn->lock); ... out: if (conn) mutex_unlock(&conn->lock);`: a NULL conn
        # took no lock through it (when conn is not assigned again after the lock)
        if expression.isidentifier():
            for key in self.through(function, expression):
                if ("held", key) in state:
                    state = state - {("held", key)} - self.implied_by(state, key)
        return state

    def through(self, function: Function, variable: str) -> frozenset[str]:
        """The keys of the locks the function takes through `variable` alone (`&conn->lock`),
        when it never assigns the variable after the first of them (nor in a loop): a path
        where the variable is NULL took none of them."""
        memo = (function, variable)
        if memo not in self._through:
            keys, first, others = set(), None, set()
            for call in function.calls:
                found = self.op(call)
                if found is None or found[0].key == "global" or found[0].action == "release" or \
                        found[0].argument >= len(call.args) or call in self._blocks:
                    continue
                if root(call.args[found[0].argument]) == variable:
                    keys.add(found[1])
                    first = call.start if first is None else min(first, call.start)
                else:
                    others.add(found[1])
            keys -= others   # a typed key another variable also names
            self._through[memo] = frozenset() if first is None or \
                assigned_after(function, variable, first) else frozenset(keys)
        return self._through[memo]

    @staticmethod
    def implied_by(state: frozenset, key: str) -> frozenset:
        return frozenset(fact for fact in state if fact[0] == "implied" and fact[2] == key)

    def flagged_release(self, state: frozenset, summary, call: CallSite) -> frozenset:
        """("iff", flag, key) for a lock the callee releases exactly on the paths where it sets
        the caller's flag (`rxrpc_send_data(..., &dropped_lock)`: `mutex_unlock(&call->user_mutex);
        *_dropped_lock = true;`): a later `if (!dropped_lock) mutex_unlock()` releases it once."""
        for index, argument in enumerate(call.args):
            if not (argument.startswith("&") and argument[1:].isidentifier()) or \
                    index >= len(summary.function.params):
                continue
            flag = "*" + summary.function.params[index]
            setting = [s for s in summary.exits if ("branch", flag, True) in s]
            others = [s for s in summary.exits if ("branch", flag, True) not in s]
            if not setting:
                continue
            dropped = {fact[1] for fact in flow.intersection(setting)
                       if fact[0] == "caller" and ("held", fact[1]) not in frozenset().union(*setting)}
            for key in sorted(dropped):
                if any(("caller", key) in s and ("held", key) not in s for s in others):
                    continue
                mine = self.model.at_call_site(key, summary.function, call)
                if ("held", mine) in state:
                    self._valued.add(argument[1:])
                    state = state | {("iff", argument[1:], mine)}
        return state

    def conditional_effects(self, summary) -> list[tuple[str, str, bool]]:
        """(kind, key, truth): ("held", key) for a lock the function returns holding exactly when
        its result is nonzero (truth) or zero -- a lookup that returns its object locked, NULL
        when it fails; ("caller", key) for its caller's lock it releases exactly then
        (tcp_add_backlog() unlocks the socket when it returns true)."""
        cached = self._conditional.get(summary.function.name)
        if cached is not None and cached[0] is summary:
            return cached[1]
        found = []
        exits = [(returned_truth(node, state, self.holds_through(summary.function, node, state)), state)
                 for node, state in summary.result.returns]
        entry = {fact for fact in summary.entry if fact[0] in ("held", "caller")}
        facts = {fact for _, state in exits for fact in state if fact[0] in ("held", "caller")} - entry
        retaken = {key for kind, key in facts if kind == "caller" and ("held", key) in facts}

        def has(fact, state) -> bool:
            # a caller's lock dropped and taken again on a path (tg3_restart_hw()) is not
            # released there; one dropped and retaken only where it succeeds
            # (brcmf_fwvid_request_module()) is released where it fails
            if fact[0] == "caller" and fact[1] in retaken:
                return fact in state and ("held", fact[1]) not in state
            return fact in state

        for fact in sorted(facts):
            if fact[0] == "held" and fact[1] in retaken:
                continue
            having = {truth for truth, state in exits if has(fact, state)}
            others = {truth for truth, state in exits if not has(fact, state)}
            if len(having) == 1 and None not in having and others == {not next(iter(having))}:
                found.append((fact[0], fact[1], next(iter(having))))
        self._conditional[summary.function.name] = (summary, found)
        return found

    def callee_effect(self, state: frozenset, call: CallSite) -> frozenset:
        """A callee that exits holding a lock on every path takes it; one that releases a lock
        its caller took, on every path, releases it."""
        summary = self.summaries.get(call.name)
        if summary is None or call.name == call.function:
            return state
        # the callee's own statement (`__acquires(RCU)`, `__releases(&priv->lock)`) is believed
        # over its walk, which may miss a path's retake in a callee of its own
        stated = set()
        acquires = annotated_keys(self.model, summary.function, "__acquires")
        releases = annotated_keys(self.model, summary.function, "__releases")
        stated.update(acquires & releases)   # dropped and taken again (neigh_invalidate()): no effect
        for annotation, action in (("__acquires", "acquire"), ("__releases", "release")):
            for key in sorted((acquires if action == "acquire" else releases) - (acquires & releases)):
                never = not any(("held", key) in exit for exit in summary.exits)
                if action == "acquire" and not never and _returns_pointer(summary.function) and not any(
                        returned_text(node) in ("NULL", "0") and ("held", key) in exit
                        for node, exit in summary.result.returns):
                    # a lookup (mctp_lookup_key()) holds it only where it finds something: the
                    # walk's own conditional effect (assume()) says where
                    continue
                mine = self.model.at_call_site(key, summary.function, call)
                stated.add(key)
                if action == "acquire" and never:
                    # taken by a callee of its own elsewhere, on the paths that succeed (an
                    # ERR_PTR() return may not hold it): from here the walk cannot tell
                    state = (state - {("held", mine)}) | {("maybe", mine)}
                elif action == "acquire":
                    state = state | {("held", mine)}
                else:
                    state = released(state, mine) if ("held", mine) in state else state | {("caller", mine)}
        if not summary.exits:
            return state
        state = self.flagged_release(state, summary, call)
        for kind, mine in self._exit_effects(summary, call, stated):
            if kind == "held":
                state = state | {("held", mine)}
            else:
                state = released(state, mine) if ("held", mine) in state else state | {("caller", mine)}
        return state

    def _exit_effects(self, summary, call: CallSite, stated: set) -> list[tuple[str, str]]:
        """("held", key) for each lock the callee exits holding on every path, ("caller", key) for
        each it releases for its caller on every path, keys as named at the call: the same for
        every state that reaches the call, so worked out once per call and summary."""
        memo = self._exit_plans.get(call)
        if memo is not None and memo[0] is summary:
            return memo[1]
        # `if (busy) spin_unlock(busy);`: the paths that found a parameter NULL had no lock to
        # release; the callee releases the lock it is given whenever there is one
        given = [exit for exit in summary.exits
                 if not any(("branch", param, False) in exit for param in summary.function.params)]
        always = flow.intersection(summary.exits)
        always |= {fact for fact in flow.intersection(given or summary.exits) if fact[0] == "caller"}
        ever_held = frozenset().union(*summary.exits)
        effects = []
        for fact in always:
            kind, key = fact[0], fact[1]
            if key in stated:
                continue
            if kind == "held" and ("caller", key) not in always and ("held", key) not in summary.entry:
                effects.append(("held", self.model.at_call_site(key, summary.function, call)))
            elif kind == "caller" and ("held", key) not in ever_held:
                effects.append(("caller", self.model.at_call_site(key, summary.function, call)))
        self._exit_plans[call] = (summary, effects)
        return effects


_ROOT = re.compile(r"^(&?\(?)([A-Za-z_]\w*)")
_ACCESS_PATH = re.compile(r"^&?[A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*|\[[^\]]*\])*$")
_CONSTANT = re.compile(r"^(-?\d+|NULL|true|false|ERR_PTR\(.*\)|-E[A-Z0-9_]+)$")


def _returns_pointer(function: Function) -> bool:
    declarator = function.node.child_by_field_name("declarator")
    return declarator is not None and declarator.type == "pointer_declarator"


def released(state: frozenset, key: str) -> frozenset:
    """The lock released whole, by a callee or through another name: with what it disabled."""
    ending = {fact for fact in state if fact[0] == "implied" and fact[2] == key} | {("held", key)}
    return _unvia(state - ending, key) | {("released", key)}


def _unvia(state: frozenset, key: str) -> frozenset:
    """state without the variables that named the lock `key` (it is no longer held)."""
    stale = {fact for fact in state if fact[0] == "via" and fact[2] == key}
    return state - stale if stale else state


def one_of_kind(op: LockOp, keys) -> str | None:
    """The one key among `keys` of an object lock of op's kind (`sock:`, `netdev:`), None when
    there are none or several, or op names a path lock (spin, mutex), never matched by kind."""
    if op.key != "object":
        return None
    same = [key for key in keys if key.startswith(f"{op.kind}:")]
    return same[0] if len(same) == 1 else None


def assigned_after(function: Function, variable: str, after: int) -> bool:
    """`variable` is assigned after byte `after`, or inside a loop (again on each turn)."""
    return any(node.child_by_field_name("left").text == variable.encode()
               and (node.start_byte > after or flow.in_loop(node, function.body))
               for node in function.shapes.get("assignment", []))


def _copied(model: FileModel, function: Function) -> set[str]:
    """The variables the function copies into another (`prev = p;`, `T *q = p;`), read off the
    assignments and initialised declarators the function's shapes hold."""
    values = [node.child_by_field_name("right") for node in function.shapes.get("assignment", [])] + \
        [node.child_by_field_name("value") for node in function.shapes.get("declarator", [])]
    return {model.text(value) for value in values if value is not None and value.type == "identifier"}


def returned_text(node: tree_sitter.Node) -> str | None:
    """The returned expression's text without spaces (None for `return;` or falling off the end)."""
    if node.type != "return_statement" or node.named_child_count == 0:
        return None
    return squeeze(node.named_children[0].text.decode("utf-8", "replace"))


def returned(node: tree_sitter.Node, state: frozenset) -> str | None:
    """What a return returns on this path: the constant last assigned to a returned variable
    (see ("value", ...)), else the expression's text."""
    text = returned_text(node)
    return next((fact[2] for fact in state if fact[0] == "value" and fact[1] == text), text)


def returned_truth(node: tree_sitter.Node, state: frozenset, dereferenced: bool = False) -> bool | None:
    """Whether a return gives a nonzero value on this path, when the path tested it
    (`if (c) lock(c); return c;`) or it is a constant; None when unknown. `dereferenced`: the
    returned pointer was dereferenced on this path (a lock taken through it is held)."""
    text = returned_text(node)
    if text is None:
        return None
    for truth in (False, True):
        if ("branch", text, truth) in state:
            return truth
    value = returned(node, state)
    if value in ("0", "NULL", "false"):
        return False
    return True if _CONSTANT.match(value) or (dereferenced and value == text) else None


def _receiver(call: CallSite) -> str | None:
    """The variable the call's value is stored in (`b = find(...)`, `T *b = find(...)`)."""
    parent = call.node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        parent = parent.parent
    target = parent.child_by_field_name("left") if parent is not None and parent.type == "assignment_expression" \
        else parent.child_by_field_name("declarator") if parent is not None and parent.type == "init_declarator" \
        else None
    while target is not None and target.type == "pointer_declarator":
        target = target.child_by_field_name("declarator")
    return target.text.decode("utf-8", "replace") if target is not None and target.type == "identifier" else None


def _out_parameter(function: Function, variable: str) -> int | None:
    """The index of the parameter P the function stores `variable` through (`*P = variable;`)."""
    for node in function.shapes.get("assignment", []):
        if node.child_by_field_name("right").type == "identifier" \
                and node.child_by_field_name("right").text.decode() == variable:
            left = node.child_by_field_name("left")
            if left.type == "pointer_expression" and left.child_by_field_name("argument").type == "identifier":
                name = left.child_by_field_name("argument").text.decode()
                if name in function.params:
                    return function.params.index(name)
    return None


def root(argument: str) -> str | None:
    """The variable an argument starts from (`&sk->sk_lock` -> "sk")."""
    match = _ROOT.match(argument)
    return match.group(2) if match else None


def _constant(text: str) -> str | None:
    """A constant's text as the return judges it (any error code as "-E"), None for others."""
    if not _CONSTANT.match(text):
        return None
    return "-E" if text.startswith("-E") else "ERR_PTR()" if text.startswith("ERR_PTR(") else text


def wrapped_ops(model: FileModel, function: Function | None, call: CallSite) -> list[tuple[LockOp, str]]:
    """(op, key) of each lock a header wrapper called here leaves taken or released (see
    callindex.wrapper); [] for other calls and for in-file functions (summarised instead)."""
    found = model.context.wrapper(call.name) if call.name not in model.functions else None
    if found is None:
        return []
    return _mapped(model, function, call, *found)


def elsewhere_ops(model: FileModel, function: Function | None, call: CallSite) -> list[tuple[LockOp, str]]:
    """(op, key) of each lock a global function of another .c file called here takes or
    releases on some of its paths (callindex.effect), with keys of the caller's arguments; a
    global lock (local_bh_enable(), rcu_read_unlock()) by its kind, and the softirqs a
    spin_unlock_bh() of a lock of its own enables as "bh"."""
    if call.name in model.functions or model.context.wrapper(call.name) is not None:
        return []
    found = model.context.effect(call.name)
    if found is None:
        return []
    params, effect = found
    ops = _mapped(model, function, call, params, effect)
    for spelling, _ in effect:
        op = kfacts.lock_op(spelling)
        if op is not None and op.key == "global":
            ops.append((op, op.kind))
        elif op is not None and op.action == "release" and op.implies == "bh":
            ops.append((op, "bh"))
    return ops


def _mapped(model: FileModel, function: Function | None, call: CallSite, params: list[str],
            effect: list[list[str]]) -> list[tuple[LockOp, str]]:
    ops = []
    for spelling, argument in effect:
        op = kfacts.lock_op(spelling)
        if op is None:
            continue
        if op.key == "global":
            continue   # kmap_atomic()'s preempt_disable(): its pair is often a macro, not a function
        match = _ROOT.match(argument)
        if match is None or match.group(2) not in params:
            continue
        index = params.index(match.group(2))
        if index >= len(call.args) or not _ACCESS_PATH.match(call.args[index]):
            continue
        # "&chan->lock" with chan = "&priv->chan" -> "&priv->chan->lock" (keys read -> as .)
        text = match.group(1).replace("(", "") + call.args[index].lstrip("&") + argument[match.end():]
        key = lock_key(model, function, call, op, [text] * (op.argument + 1))
        if key is not None:
            ops.append((op, key))
    return ops


# Statements whose parts run on some paths only: a call inside one is not made on every path.
_CONDITIONAL = frozenset({"if_statement", "for_statement", "while_statement", "do_statement", "switch_statement",
                          "conditional_expression", "compound_statement"})


def unconditional(function: Function, call: CallSite, may_fail: bool = False) -> bool:
    """The call is made by a statement of the function's body itself (or is the value that
    statement assigns or returns): every path that goes on past it makes it. `may_fail`: also
    the whole condition of an `if` of the body whose branch leaves (`if (mutex_lock_interruptible
    (&l)) return -EINTR;`), for a blocking lock that may fail instead."""
    node = call.node
    condition = node.parent
    if may_fail and condition is not None and condition.type == "parenthesized_expression" and \
            condition.parent is not None and condition.parent.type == "if_statement" and \
            condition.parent.parent == function.body and _leaves(condition.parent.child_by_field_name("consequence")):
        return True
    while node.parent is not None and node.parent != function.body:
        node = node.parent
        if node.type in _CONDITIONAL:
            return False
    return node.parent == function.body


def _leaves(branch) -> bool:
    """The branch ends in a return or a goto."""
    if branch is not None and branch.type == "compound_statement" and branch.named_child_count:
        branch = branch.named_children[-1]
    return branch is not None and branch.type in ("return_statement", "goto_statement")


# In-file calls followed below a callee for the locks it takes (own_takes): `flush(p)` calling
# `reset(p->rx)` taking `r->lock` is two.
TAKES_DEPTH = 2


def own_takes(model: FileModel, function: Function, depth: int = TAKES_DEPTH) -> list[tuple[LockOp, str, str]]:
    """(op, spelling, argument text; "" for a global lock) of each lock the function takes for
    itself: a blocking acquisition (not a trylock) that comes before anything else it does to
    that lock, made on every path (unconditional()) and released again (a guard by its scope, not
    a wrapper handing it to its caller); and, in its own terms, those of the in-file functions it
    calls on every path, `depth` calls down. A caller already holding one of them deadlocks at the
    call."""
    memo = model.memo("locks.own_takes", dict)
    if (function.name, depth) in memo:
        return memo[(function.name, depth)]
    transfer = LockTransfer(model)
    first: dict[str, tuple[CallSite, LockOp]] = {}
    released: set[str] = set()
    for call in sorted(function.calls, key=lambda c: c.start):
        found = transfer.op(call)
        if found is None or found[0].action == "assert":
            continue
        op, key = found
        first.setdefault(key, (call, op))
        if op.action == "release" or call in transfer._blocks:
            released.add(key)
    takes = []
    for key, (call, op) in first.items():
        if op.action in ("acquire", "try_fail") and key in released and \
                unconditional(function, call, may_fail=op.action == "try_fail"):
            guard = guard_call(call)
            args = guard[1] if guard is not None else call.args
            if op.key == "global" or op.argument < len(args):
                takes.append((op, call.name, "" if op.key == "global" else args[op.argument]))
    for call in function.calls if depth else ():
        callee = model.functions.get(call.name)
        if callee is None or callee is function or not unconditional(function, call):
            continue
        owned = own_takes(model, callee, depth - 1)
        file_scope = _file_locks(model, callee, function) if owned else frozenset()
        for op, spelling, argument in owned:
            text = argument_at_call(callee.params, call, op, argument, file_scope)
            if text is not None:
                takes.append((op, spelling, text))
    memo[(function.name, depth)] = takes
    return takes


def argument_at_call(params: list[str], call: CallSite, op: LockOp, argument: str,
                     file_scope: frozenset[str] = frozenset()) -> str | None:
    """The lock argument `argument` of a callee with parameters `params` as its caller names it
    at `call`: "" for a global lock, the argument with the parameter it starts from replaced by
    the caller's argument (`&p->lock` of foo(p) called as foo(priv): `&priv->lock`), unchanged
    when it starts from a name of `file_scope` (a lock defined outside any function of the
    caller's and the callee's file). None when the caller cannot name it (a local of the callee,
    an argument that is no access path)."""
    if op.key == "global":
        return ""
    match = _ROOT.match(argument)
    if match is None:
        return None
    variable = match.group(2)
    if variable in params:
        index = params.index(variable)
        if index >= len(call.args) or not _ACCESS_PATH.match(call.args[index]):
            return None
        # "&chan->lock" with chan = "&priv->chan" -> "&priv->chan->lock" (keys read -> as .)
        return match.group(1).replace("(", "") + call.args[index].lstrip("&") + argument[match.end():]
    return argument if variable in file_scope else None


_WORD = re.compile(rb"[A-Za-z_]\w*")


def _declared_inside(function: Function) -> frozenset[str]:
    """The names the function declares itself: its typed locals and those a macro declares
    (`DEFINE_MUTEX(mutex);`, whose first argument is the name)."""
    macros = {call.args[0] for call in function.calls if call.name.startswith("DEFINE_") and call.args}
    return frozenset(function.types) | frozenset(macros)


def file_scope_names(model: FileModel) -> frozenset[str]:
    """The words of the file's text outside its function definitions (`static DEFINE_MUTEX(m);`,
    `static spinlock_t l;`, struct definitions): a lock named by one of them and declared by
    neither function is the file's one lock (a local `DEFINE_MUTEX(mutex)` of two functions is
    two locks)."""
    def words() -> frozenset[str]:
        found: set[bytes] = set()
        pending = list(model.tree.root_node.children)
        while pending:
            node = pending.pop()
            if node.type == "function_definition":
                continue
            if node.type.startswith("preproc_") and node.type != "preproc_def" and node.named_child_count:
                pending.extend(node.children)   # #ifdef blocks hold functions too
                continue
            found.update(_WORD.findall(node.text))
        return frozenset(word.decode("latin-1") for word in found)
    return model.memo("locks.file_scope_names", words)


def _file_locks(model: FileModel, callee: Function, caller: Function) -> frozenset[str]:
    """The names a lock argument of `callee` may start from and still be the lock its caller
    names the same way: the file's names outside functions that neither function declares."""
    return file_scope_names(model) - _declared_inside(callee) - _declared_inside(caller)


# a key that is only a scalar or void type (`int irq`, `void *data`) names no object in particular
_SCALAR = re.compile(r"^(?:(?:un)?signed\s+|const\s+)*(?:int|long|short|char|bool|void|unsigned|size_t|[us](?:8|16|32|64))?$")


def bound_functions(model: FileModel) -> list[tuple[str, str, tuple[str, ...]]]:
    """(function, registration kind, keys of the objects it is bound to) of each function of the
    file a registration call binds to an object (kfacts.registration_objects: the work item of
    INIT_WORK(), an interrupt's number and dev_id), the keys canonical in the registering function."""
    def compute() -> list[tuple[str, str, tuple[str, ...]]]:
        objects = kfacts.registration_objects()
        bound = []
        for owner in model.functions.values():
            for call in owner.calls:
                if call.name not in objects:
                    continue
                keys = tuple(model.canonical(owner, call.args[i]) if i < len(call.args) else ""
                             for i in objects[call.name])
                for argument, kind in kfacts.registered_by(call.name, call.args):
                    if argument.lstrip("&") in model.functions:
                        bound.append((argument.lstrip("&"), kind, keys))
        return bound
    return model.memo("locks.bound_functions", compute)


def awaited_takes(model: FileModel, function: Function, call: CallSite) -> list[tuple[LockOp, str, str, str]]:
    """(op, key, spelling, function waited for) of each lock taken for itself (own_takes) by a
    function of the file that `call` waits to finish (kfacts.waits: cancel_work_sync() of the work
    item an INIT_WORK() bound it to, free_irq() of the interrupt a request_threaded_irq() did),
    keyed as that function names it: a lock of the same struct field is the lock the caller holds
    as lockdep sees it (one class per field)."""
    waits = kfacts.waits().get(call.name)
    if waits is None:
        return []
    indexes, kinds = waits
    wanted = tuple(model.canonical(function, call.args[i]) if i < len(call.args) else "" for i in indexes)
    awaited = sorted({name for name, kind, keys in bound_functions(model)
                      if kind in kinds and any(a == b and not _SCALAR.match(a) for a, b in zip(wanted, keys))})
    taken = []
    for name in awaited:
        callee = model.functions[name]
        for op, spelling, argument in own_takes(model, callee):
            key = lock_key(model, callee, call, op, [argument] * (op.argument + 1))
            if key is not None:
                taken.append((op, key, spelling, name))
    return taken


def taken_by_callee(model: FileModel, function: Function, call: CallSite) -> list[tuple[LockOp, str, str | None, str]]:
    """(op, key, variable the caller names it through or None for a global lock, spelling) of each
    lock the function called here takes for itself (own_takes; for a function of another file or a
    header, the call index's record of it), keyed as the caller names it."""
    callee = model.functions.get(call.name)
    if callee is function:
        return []
    if callee is not None:
        owned = own_takes(model, callee)
        if not owned:
            return []   # most callees take nothing: the file's names are not worked out for them
        file_scope = _file_locks(model, callee, function)
        taken = [(op, spelling, argument_at_call(callee.params, call, op, argument, file_scope))
                 for op, spelling, argument in owned]
    else:
        found = model.context.acquires(call.name) if model.context.wrapper(call.name) is None else None
        if found is None:
            return []
        params, effect = found
        taken = [(op, spelling, argument_at_call(params, call, op, argument)) for spelling, argument in effect
                 if (op := kfacts.lock_op(spelling)) is not None]
    keyed = []
    for op, spelling, text in taken:
        if text is None:
            continue
        key = lock_key(model, function, call, op, [text] * (op.argument + 1))
        if key is not None:
            keyed.append((op, key, root(text) if op.key != "global" else None, spelling))
    return keyed


def lock_functions(model: FileModel) -> set[str]:
    """Functions that take, drop or assert a lock themselves: whose summaries matter to callers."""
    return {name for name, function in model.functions.items()
            if any(kfacts.lock_op(c.name) or guard_call(c) for c in function.calls)}


def held(state: frozenset) -> frozenset[str]:
    """The keys held in a state."""
    return frozenset(fact[1] for fact in state if fact[0] == "held")
