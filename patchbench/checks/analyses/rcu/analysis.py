"""The read-side analysis both RCU rules report from (a module of helpers: no rule ID here).

`analyse(model)` walks every function that dereferences RCU-protected pointers (and the in-file
callers those depend on) with `flow.walk`, from an entry state solved over the call graph, and
returns the `Site`s the rules judge: each dereference primitive with the states reaching it, and
each use of a pointer local with the states reaching that use.

Facts in a state (frozensets of tuples):
- ("r", family, level, origin): a reader/RTNL family held (see rcu_primitives); `level` counts
  nesting; origin is "own" (taken here), "entry" (a caller or stated precondition), "context"
  (the registration context: xmit's rcu_read_lock_bh(), NAPI's softirq);
- ("lock", key, origin): a named lock held, key as `locks.lock_key`;
- ("unknown",): no way into the function is known (no caller, no registration anywhere): nothing
  is assumed held, and what it needs is reported as a warning saying so;
- ("t", var, primitive, root, status, call, words): pointer local `var` holds a value obtained
  inside a section this function opened (`root` is the local it was first read into, `call` the
  start byte of the primitive call it was assigned from, -1 for derived values, `words` the names
  in the primitive's argument); status "live", or "stale" once the function's own last reader
  is released;
- ("a", var): `var` holds the result of rcu_access_pointer().

Entry of a function: its stated precondition plus what every known way in provides: each in-file
call site (the caller's state there), each registration context of the kernel facts table
(kfacts.context_of), and, for a function others may call, its callers elsewhere in the tree
(callindex). Ways of unknown state (a pointer stored where the table does not know the caller)
constrain nothing; a function with only such ways gets ("unknown",).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tree_sitter

from patchbench.checks.engine import flow
from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.analyses import calling
from patchbench.checks.analyses import locks
from patchbench.checks.engine import summaries
from patchbench.checks.engine.context import Way
from patchbench.checks.engine.model import CallSite, FileModel, Function, squeeze
from patchbench.checks.analyses.rcu import functions as F
from patchbench.checks.analyses.rcu import primitives as P
from patchbench.checks.analyses.rcu import sections_removed as rcu_sections_removed

ROUNDS = 8
MAX_LEVEL = 4
USE = F.USE      # the rules tell use sites from primitive calls by this name
MENTIONS = (b"rcu", b"rtnl_dereference")


def mentioned(source: bytes) -> bool:
    """The text names RCU (or rtnl_dereference()), the finer test after MENTIONS matched: "rcu"
    as a word or the part of one (rcu_read_lock, kfree_rcu, srcu, __rcu, "rcu read lock" in a
    comment), not only inside English words ("circuit", "circular", "overcurrent")."""
    if b"rtnl_dereference" in source:
        return True
    at = source.find(b"rcu")
    while at >= 0:   # usually the first one: a regex without a literal prefix reads the whole text
        before = source[max(0, at - 2):at]
        if not source[at + 3:at + 4].islower() or not before[-1:].islower() or \
                (before[-1:] == b"s" and not before[:-1].islower()):
            return True
        at = source.find(b"rcu", at + 3)
    return False


@dataclass
class Site:
    """A place the rules judge: a primitive call, a call of an in-file RCU helper, or a use."""
    call: CallSite
    need: P.Need | None            # None for uses
    states: set                    # states reaching it
    function: F.FunctionInfo


@dataclass
class Analysis:
    model: FileModel
    infos: dict[str, F.FunctionInfo]
    known_locks: frozenset
    mutexes: frozenset
    sites: list[Site] = field(default_factory=list)
    # the walks (function name -> flow result), the callees needing a section (need_of's
    # helpers) and the in-file section wrappers: what rcu_removed judges a removed section by
    results: dict = field(default_factory=dict)
    helpers: dict = field(default_factory=dict)
    section_effects: dict = field(default_factory=dict)


# -- facts -------------------------------------------------------------------------------------

def effective(state: frozenset, info: F.FunctionInfo, at: int) -> tuple[set, set]:
    """(families, lock keys) held in `state` at byte `at` of the function `info`."""
    families, locks = set(), set()
    for fact in state:
        if fact[0] in ("r", "lock") and info.holds(fact, at):
            (families if fact[0] == "r" else locks).add(fact[1])
    return families, locks


def _acquire(state: frozenset, family: str) -> frozenset:
    level = max((f[2] for f in state if f[0] == "r" and f[1] == family), default=0) + 1
    return state | {("r", family, min(level, MAX_LEVEL), "own")}


def _release(state: frozenset, family: str) -> frozenset:
    held = [f for f in state if f[0] == "r" and f[1] == family]
    if not held:
        return state
    # the innermost level, own before inherited; ties broken by origin, never by set order
    return state - {max(held, key=lambda f: (f[2], f[3] == "own", f[3]))}


def kept_alive(facts) -> bool:
    """Some reader that keeps RCU-protected memory alive is held (any origin: taken here, a
    caller's, the registration context's implicit one; facts table [rcu] readers, less "spin")."""
    return any(f[0] == "r" and f[1] in P.KEEPS_ALIVE for f in facts)


def update_side_held(state: frozenset, info: F.FunctionInfo, at: int, mutexes: frozenset) -> bool:
    """RTNL or a mutex known held: the sleeping configuration lock that writers take, which
    keeps the object alive past the read-side section (iwlwifi's mvm->mutex) and satisfies
    callees documented as needing a section (nftables' commit_mutex). A spinlock does not
    count: a ring's consumer_lock has nothing to do with the lifetime of the device it feeds."""
    for fact in state:
        if fact[0] == "r" and fact[1] == "rtnl":
            return True
        if fact[0] == "lock" and info.holds(fact, at) and \
                (fact[1] in mutexes or "mutex" in fact[1]):
            return True
    return False


def field_update_sides(model: FileModel, infos: dict[str, F.FunctionInfo]) -> dict[str, frozenset]:
    """The file's own evidence of which lock is the update side of each RCU-protected field (key
    `model.canonical()` of the pointer expression, "rtnl" for RTNL): the locks held at every one
    of its writes (rcu_assign_pointer(), RCU_INIT_POINTER(), rcu_replace_pointer()) that holds
    any, or else the locks the file's update-side reads name (rcu_dereference_protected() or
    _check() conditions, rtnl_dereference()). A field without such evidence is absent (then
    RTNL or a mutex counts, as before)."""
    return model.memo("rcu.update_sides", lambda: _field_update_sides(model, infos))


def _field_update_sides(model: FileModel, infos: dict[str, F.FunctionInfo]) -> dict[str, frozenset]:
    writes: dict[str, list[frozenset]] = {}
    named: dict[str, set] = {}
    assign = set(kfacts.table()["rcu"]["assign"])
    for name in sorted(infos):
        info = infos[name]
        function = info.function
        for call in function.calls:
            if not call.args:
                continue
            if call.name in assign:
                held = _held_lexically(model, info, call.start)
                if held:
                    writes.setdefault(model.canonical(function, call.args[0]), []).append(held)
                continue
            need = P.DEREFERENCES.get(call.name)
            if need is None or need.tracked and need.condition_arg is None:
                continue
            keys: set = set()
            if need.condition_arg is not None and need.condition_arg < len(call.args):
                wanted = condition_keys(model, function, call.args[need.condition_arg])
                keys = {"rtnl" if kind == "r" and key == "rtnl" else key
                        for kind, key in wanted or () if kind == "lock" or key == "rtnl"}
            elif need.update_only and "rtnl" in need.strict:
                keys = {"rtnl"}
            if keys:
                named.setdefault(model.canonical(function, call.args[0]), set()).update(keys)
    sides = {key: frozenset(set.intersection(*map(set, held))) for key, held in writes.items()}
    for key, keys in named.items():
        if not sides.get(key):
            sides[key] = frozenset(keys)
    return {key: held for key, held in sides.items() if held}


def _held_lexically(model: FileModel, info: F.FunctionInfo, at: int) -> frozenset:
    """Locks (and "rtnl") a function holds at byte `at` as its text reads: taken above and not
    released since, a guard whose block contains `at`, or stated held on entry."""
    held = {f[1] for f in info.precondition if f[0] == "lock"}
    # RTNL stated, or held by every known way in of the registrations and callers elsewhere
    ways = [w for w in ways_in(model, info.function) if UNKNOWN not in w and w != UNKNOWN_WAY]
    if any(f[:2] == ("r", "rtnl") for f in info.precondition) or \
            ways and all(any(f[:2] == ("r", "rtnl") for f in w) for w in ways):
        held.add("rtnl")
    for call in sorted(info.function.calls, key=lambda c: c.start):
        if call.start >= at:
            break
        guard = locks.guard_call(call)
        if guard is not None:
            op, args, block = guard
            if block.start_byte <= at < block.end_byte:
                key = "rtnl" if op.kind == "rtnl" else \
                    None if op.is_reader else locks.lock_key(model, info.function, call, op, args)
                if key is not None:
                    held.add(key)
            continue
        section = P.SECTIONS.get(call.name)
        if section is not None and section[0] == "rtnl":
            (held.add if section[1] > 0 else held.discard)("rtnl")
            continue
        lock = F.lock_op(model, info.function, call)
        if lock is not None and lock[0].action == "acquire":
            held.add(lock[1])
        elif lock is not None and lock[0].action == "release":
            held.discard(lock[1])
    return frozenset(held)


def field_update_side_held(state: frozenset, info: F.FunctionInfo, at: int, sides: frozenset) -> bool:
    """Whether a lock of `sides` (field_update_sides) is held in `state` at byte `at`."""
    return any((fact[0] == "r" and fact[1] == "rtnl" and "rtnl" in sides) or
               (fact[0] == "lock" and fact[1] in sides and info.holds(fact, at)) for fact in state)


# -- the transfer ------------------------------------------------------------------------------

class RcuTransfer(flow.Transfer):
    """Reader, RTNL and lock facts through calls; pointer tracking through assignments."""

    def __init__(self, model: FileModel, infos: dict[str, F.FunctionInfo], mutexes: frozenset,
                 lookups: frozenset = frozenset()):
        self.model = model
        self.infos = infos
        self.mutexes = mutexes
        self.lookups = lookups   # lookups of other files returning RCU-protected objects (F.lookups)
        # In-file functions that take or drop the caller's section (`__acquires(RCU)`, or a
        # wrapper that only calls rcu_read_lock()), and lock wrappers (`foo_lock(q)`).
        self.section_effects = {name: effect for name, info in infos.items()
                                if (effect := F.section_effect(info.function))}
        self.lock_effects = {name: info.taken_locks for name, info in infos.items() if info.taken_locks}
        self._wrapped: dict[tuple[str, int], list] = {}
        self._scope_starts: set[int] = set()   # the blocks a guard() was taken for (see guarded())

    def c_wrapped(self, info: F.FunctionInfo, call: CallSite) -> list:
        """What a lock wrapper of another .c file called here does (F.c_wrapper_ops), memoised."""
        key = (call.name, call.start)
        if key not in self._wrapped:
            self._wrapped[key] = F.c_wrapper_ops(self.model, info.function, call)
        return self._wrapped[key]

    def call(self, state: frozenset, call: CallSite) -> frozenset:
        if call.name == F.USE:
            return state
        if UNKNOWN in state and OPENED not in state and F._opens_or_closes(call):
            state = state | {OPENED}   # see _bypassed
        info = self.infos[call.function]
        section = P.SECTIONS.get(call.name)
        guard = locks.guard_call(call)
        if guard is not None:
            return self.guarded(state, call, info, *guard)
        if call.name in self.section_effects and call.name != call.function:
            section = ("rcu", self.section_effects[call.name])
        if section is not None:
            family, delta = section
            if delta > 0:
                return _acquire(state, family)
            if delta < 0:
                return self.released(_release(state, family))
            return state
        lock = F.lock_op(self.model, info.function, call)
        if lock is not None:
            op, key = lock
            if op.action in ("acquire", "try_fail"):
                return self.lock(state, op, key)
            if op.action == "release":
                return self.released(self.unlock(state, op, key))
            return state
        if call.name in self.lock_effects and call.name != call.function:
            return state | {("lock", key, "own") for key in self.lock_effects[call.name]}
        wrapped = self.c_wrapped(info, call)
        if wrapped:
            for op, key in wrapped:
                if op.action in ("acquire", "try_fail"):
                    state = self.lock(state, op, key)
                elif op.action == "release":
                    state = self.released(self.unlock(state, op, key))
            return state
        if P.REFERENCE.search(call.name):
            return self.referenced(state, call)
        return state

    def lock(self, state: frozenset, op, key: str) -> frozenset:
        state = state | {("lock", key, "own")}
        if op.atomic:
            state = _acquire(state, "spin")
        return _acquire(state, op.implies) if op.implies else state

    def unlock(self, state: frozenset, op, key: str) -> frozenset:
        state = frozenset(f for f in state if not (f[0] == "lock" and f[1] == key))
        if op.atomic:
            state = _release(state, "spin")
        return _release(state, op.implies) if op.implies else state

    def guarded(self, state: frozenset, call: CallSite, info: F.FunctionInfo, op, args, block) -> frozenset:
        """cleanup.h: the guard's reader or lock, held until control leaves `block`."""
        self._scope_starts.add(block.start_byte)
        if op.is_reader or op.kind == "rtnl":
            state = _acquire(state, op.kind)
            if op.implies:
                state = _acquire(state, op.implies)
            return state | {("scope", block.start_byte, op)}
        key = locks.lock_key(self.model, info.function, call, op, args)
        if key is None:
            return state
        return self.lock(state, op, key) | {("scope", block.start_byte, op, key)}

    def leave_block(self, state: frozenset, block) -> frozenset:
        if block.start_byte not in self._scope_starts:   # no guard() of this walk holds for this block
            return state
        ending = [f for f in state if f[0] == "scope" and f[1] == block.start_byte]
        if not ending:
            return state
        state = state - set(ending)
        for fact in ending:
            op = fact[2]
            if len(fact) == 4:
                state = self.unlock(state, op, fact[3])
            else:
                state = _release(state, op.kind)
                if op.implies:
                    state = _release(state, op.implies)
        return self.released(state)

    def assume(self, state: frozenset, call: CallSite, truth: bool) -> frozenset:
        if not truth and call.name in locks.SCOPED_GUARDS:   # scoped_cond_guard() failed
            guard = locks.guard_call(call)
            return self.leave_block(state, guard[2]) if guard else state
        if not truth:   # the value tested is NULL: nothing left to use after the section
            return frozenset(f for f in state if not (f[0] == "t" and f[5] == call.start))
        info = self.infos.get(call.function)
        if info is None:
            return state
        if call.name == "rtnl_trylock":
            return _acquire(state, "rtnl")
        lock = F.lock_op(self.model, info.function, call)
        if lock is not None and lock[0].action == "try":
            return self.lock(state, *lock)
        return state

    def released(self, state: frozenset) -> frozenset:
        """After a release: values read in the function's own sections go stale with the last reader."""
        # Tracked values were read with only the function's own readers held (see assign()).
        if any(f[0] == "r" and f[3] == "own" and f[1] in P.KEEPS_ALIVE | {"srcu"} for f in state):
            return state
        live = {f for f in state if f[0] == "t" and f[4] == "live"}
        return (state - live) | {f[:4] + ("stale",) + f[5:] for f in live}

    def referenced(self, state: frozenset, call: CallSite) -> frozenset:
        """A reference taken on a live local, a field of it, or the object it was read from
        (`bnxt_ulp_get(ulp)` for `ops = rcu_dereference(ulp->ulp_ops)`): the family of locals
        read from it may outlive the section."""
        mentioned = {w for argument in call.args for w in F.WORD.findall(argument)}
        roots = {f[3] for f in state if f[0] == "t" and f[4] == "live"
                 and (f[1] in mentioned or mentioned & set(f[6]))}
        if not roots:
            return state
        self.infos[call.function].referenced |= roots
        return frozenset(f for f in state if not (f[0] == "t" and f[3] in roots))

    def assign(self, state: frozenset, target: str, value: tree_sitter.Node, function: Function) -> frozenset:
        info = self.infos.get(function.name)
        if info is None:
            return state
        state = frozenset(f for f in state if not (f[0] in ("t", "a") and f[1] == target))
        if target not in info.pointers:
            return state
        origin = self.origin(value, state)
        if origin is None:
            return state
        if origin[0] == "access":
            return state | {("a", target)}
        if origin[0] == "derived":
            return state | {("t", target) + origin[1][2:5] + (-1,) + origin[1][6:]}
        # A fresh value: tracked only when the function's own section is all that protects it.
        readers = {f for f in state if f[0] == "r" and f[1] in P.KEEPS_ALIVE | {"srcu"}
                   and info.holds(f, value.start_byte)}
        # A caller's section (or an unknown one) makes the function's own a nested one, and so
        # does a registration whose kernel caller opens rcu_read_lock() around the call (the
        # receive handlers, UDP encapsulation, a seq_file's .start): that is a caller's section
        # too. A context's implicit reader does not (BH off in NAPI or a timer, xmit's
        # rcu_read_lock_bh()): it protects under consolidated RCU, but lockdep cannot see it and
        # the driver declared the section it meant.
        from_outside = any(f[1] != "srcu" and (f[3] == "entry" or (f[3] == "context" and f[1] == "rcu"))
                           for f in readers)
        # Only a section the function opened itself ends in it: a value read under the calling
        # context's reader (classify under rcu_read_lock_bh()) or a spinlock stays what it was.
        own = {f[1] for f in readers if f[3] == "own"}
        if not own & P.READ_SECTIONS or from_outside or target in info.referenced:
            return state
        _, primitive, call = origin
        arguments = call.child_by_field_name("arguments")
        # the update side keeps the object alive: the lock the file writes the field under when
        # it says (a mutex, a spinlock, RTNL), else RTNL or a mutex
        sides = field_update_sides(self.model, self.infos).get(
            self.model.canonical(function, self.model.text(arguments.named_children[0])), None) \
            if arguments.named_child_count and primitive in P.DEREFERENCES else None
        if update_side_held(state, info, value.start_byte, self.mutexes) if sides is None else \
                field_update_side_held(state, info, value.start_byte, sides):
            return state
        words = tuple(sorted(set(F.WORD.findall(self.model.text(arguments.named_children[0])))))\
            if arguments.named_child_count else ()
        return state | {("t", target, primitive, target, "live", value_call_start(value), words)}

    def origin(self, value: tree_sitter.Node, state: frozenset):
        """("rcu", primitive, call) | ("access",) | ("derived", track fact) | None for an assigned
        value. A pointer loaded from a field of a tracked local (`chan = conf->def.chan`) is not
        derived: it often points to an object of its own lifetime; loaded straight from the
        primitive's result (`dev = rcu_dereference(q->owner)->dev`), it is."""
        node = value
        loaded = False
        while True:
            kind = node.type
            if kind in ("parenthesized_expression", "cast_expression"):
                node = node.child_by_field_name("value") or node.named_children[-1]
            elif kind == "pointer_expression" and node.child_by_field_name("operator").type == "&":
                node = node.child_by_field_name("argument")
                while node.type in ("field_expression", "subscript_expression"):
                    node = node.child_by_field_name("argument")   # an address inside the object
            elif kind in ("field_expression", "subscript_expression"):
                loaded = True
                node = node.child_by_field_name("argument")
            elif kind == "call_expression":
                callee = squeeze(self.model.text(node.child_by_field_name("function")))
                if callee == P.ACCESS:
                    return ("access",) if node is value else None
                need = P.DEREFERENCES.get(callee)
                if need is not None:
                    return ("rcu", callee, node) if need.tracked else None
                if (P.named_helper(callee) or callee in self.lookups) and node is value:
                    # a *_rcu lookup (dev_get_by_index_rcu()), or one of another file returning
                    # what it read under its caller's section (F.lookups), returns an object the
                    # section keeps alive: valid until it ends, unless a reference is taken inside
                    return ("rcu", callee, node)
                if callee in P.CONTAINER and \
                        node.child_by_field_name("arguments").named_child_count:
                    node = node.child_by_field_name("arguments").named_children[0]
                else:
                    return None
            elif kind == "identifier":
                name = self.model.text(node)
                if loaded:
                    return None
                for fact in state:
                    if fact[0] == "t" and fact[1] == name:
                        return ("derived", fact)
                return None
            else:
                return None


def value_call_start(value: tree_sitter.Node) -> int:
    """Start byte of the call whose result is assigned (the walker tests it by that call), or -1."""
    while value.type == "parenthesized_expression" and value.named_child_count == 1:
        value = value.named_children[0]
    return value.start_byte if value.type == "call_expression" else -1


# -- solving the entries -----------------------------------------------------------------------

UNKNOWN = ("unknown",)
# A way in whose state is not known (a pointer stored where the table knows no caller): it
# constrains nothing when another way is known. A caller whose own entry is unknown passes
# UNKNOWN on with what it holds.
UNKNOWN_WAY = frozenset({("unknown", "way")})
# On a path of unknown entry: the function has opened (or closed) a section of its own.
OPENED = ("opened",)


def _bypassed(info: F.FunctionInfo, result: flow.FlowResult) -> frozenset:
    """The calls past the function's first section that a path of unknown entry reaches without
    having opened a section of its own (FunctionInfo.holds: the unknown entry still holds there).
    The guess that a function's own section shows its callers hold none is given up at such a call:
    the function relies on its callers' section on that path, so the one it opens on others is
    nested (nfqnl_reinject()'s section around the conntrack hook on accepting verdicts only)."""
    return frozenset(call.start for call in info.function.calls if call.start >= info.first_section
                     and any(UNKNOWN in s and OPENED not in s for s in result.states_at(call)))


def inherited(state: frozenset, caller: F.FunctionInfo, at: int) -> frozenset:
    """What a caller's state at a call site gives its callee: held facts, as entry facts, each
    family's levels renumbered from 1; an unknown caller makes an unknown way in."""
    facts = set()
    levels: dict[str, list] = {}
    for fact in state:
        if not caller.holds(fact, at):
            continue
        if fact == UNKNOWN:
            facts.add(UNKNOWN)
        elif fact[0] == "r":
            levels.setdefault(fact[1], []).append(fact)
        else:
            facts.add(("lock", fact[1], _passed(fact[2])))
    for family, held in levels.items():
        for level, fact in enumerate(sorted(held, key=lambda f: (f[2], f[3])), 1):   # not in set order
            facts.add(("r", family, level, _passed(fact[3])))
    return frozenset(facts)


def _passed(origin: str) -> str:
    """The origin a caller's fact has in its callee."""
    return origin if origin == "context" else "entry"


def _meet(contributions: list[frozenset]) -> frozenset:
    """Facts every contribution of known state provides (ignoring origin), ("unknown",) when
    none is known. A named lock counts when some contribution holds it: a helper whose
    update-side condition some callers meet is written for them (iwlwifi's mei handler reached
    without the mutex only on a path that never gets to the dereference); readers and RTNL must
    hold on every way in."""
    # ways of known state decide; callers whose own entry is unknown (they carry UNKNOWN) only
    # when no such way exists: what they hold at the call is known, what they got is not
    known = [c for c in contributions if UNKNOWN not in c and c != UNKNOWN_WAY] or \
        [c for c in contributions if c != UNKNOWN_WAY]
    if not known:
        return frozenset({UNKNOWN})

    def plain(fact):
        return fact if fact == UNKNOWN else fact[:-1]
    common = set.intersection(*({plain(f) for f in c} for c in known))
    unknown = UNKNOWN in common
    common.discard(UNKNOWN)
    common |= {plain(f) for c in known for f in c if f[0] == "lock"}
    if not kept_alive(common) and all(kept_alive(c) for c in known):
        common.add(("r", "any", 1))
    entry = {plain(f) for c in known for f in c if f[-1] == "entry"}
    return frozenset([p + ("entry" if p in entry else "context",) for p in common]
                     + ([UNKNOWN] if unknown else []))


MAX_WAYS = 4   # distinct entry states walked per function; more are met into one


def _entry_states(precondition: frozenset, contributions: list[frozenset]) -> tuple[frozenset, ...]:
    """The entry states of a function, one per distinct way in (its callers' held sets, its
    registration contexts), each with what the function states itself: a need is judged in every
    one, so it is reported when some real way in lacks the protection and never when each way
    provides one of the protections it accepts (rtnl_get_link() reached under rcu_read_lock() from
    one call and under RTNL from another). Which ways count is _meet's choice (ways of known state
    decide; callers of unknown entry only when there is none); a named lock some way holds is held
    in each (as in _meet). More than MAX_WAYS distinct ways: their meet, one state."""
    known = [c for c in contributions if UNKNOWN not in c and c != UNKNOWN_WAY] or \
        [c for c in contributions if c != UNKNOWN_WAY]
    if not known:
        return (precondition | _meet(contributions),)
    # callers whose own entry is unknown (callers in other files, read by the index) are real
    # ways in too: what they hold at the call is known. Their states carry UNKNOWN, so a need
    # only they miss is left to `check` (a warning) and never reported by a lint of the tree.
    partly = [c for c in contributions if UNKNOWN in c and c not in known]
    lock_origin: dict[tuple, str] = {}
    for c in known:
        for f in c:
            if f[0] == "lock" and lock_origin.get(f[:-1]) != "entry":
                lock_origin[f[:-1]] = "entry" if f[-1] == "entry" else "context"
    locks_held = frozenset(key + (origin,) for key, origin in lock_origin.items())
    states = {precondition | frozenset(f for f in c if f[0] != "lock") | locks_held for c in known}
    partial = {precondition | c for c in partly}
    # too many ways: the known ones met into one state, and the partly known into another
    if len(states) > MAX_WAYS:
        states = {precondition | _meet(known)}
    if len(states) + len(partial) > MAX_WAYS:
        partial = {precondition | _meet(partly)}
    return tuple(sorted(states | partial, key=lambda s: sorted(map(repr, s))))


def context_facts(context: kfacts.Context) -> frozenset:
    """Entry facts of a registration context: its readers, RTNL, and the locks it names."""
    return F.entry_facts(context.readers, "context") | {_held_by_context(lock) for lock in context.locks}


def _held_by_context(key: str) -> tuple:
    """The entry fact of a lock (its key, or "rtnl") that a registration context holds."""
    return ("r", "rtnl", 1, "context") if key == "rtnl" else ("lock", key, "context")


def genl_held(model: FileModel, name: str, kind: str) -> list[frozenset]:
    """What the pre_doit run before the generic netlink doit `name` leaves held, as entry facts, one
    set per ops entry registering it ([genl] of the facts table): the entry's own .pre_doit, or
    that of the family whose array holds the entry."""
    found = []
    for array, fields in model.ops_entries.get((name, kind), ()):
        pre_doit = fields.get("pre_doit") or \
            model.initialiser_naming(array, kfacts.genl_families()).get("pre_doit", "")
        facts = frozenset(_held_by_context("rtnl" if op.kind == "rtnl" else
                                           f"{op.kind}:{obj}" if op.key == "object" else obj)
                          for op, obj in kfacts.genl_held(pre_doit, fields.get(kfacts.table()["genl"]["flags"], "")))
        if facts not in found:
            found.append(facts)
    return found or [frozenset()]


def _way(way: Way) -> frozenset:
    """A way in of the call index as entry facts. What the index reads of callers in other files
    is lexical (no named locks, no conditional sections, no calls through pointers): what it finds
    held is believed, what it misses is not evidence, so its ways carry UNKNOWN (a verdict that
    depends on them alone is left to check, as a warning)."""
    if way.known not in ("yes", "caller"):
        return UNKNOWN_WAY
    return F.entry_facts(way.families, "entry") | {UNKNOWN}


def ways_in(model: FileModel, function: Function) -> tuple[frozenset, ...]:
    """Entry contributions that do not depend on the walk: registration contexts (analyses.calling),
    callers elsewhere in the tree, and ("unknown",) for ways whose state is not known. Once per
    function of a file (each update-side write asks again, and the call index's answer is costly)."""
    return model.memo(f"rcu.ways:{function.name}", lambda: tuple(_ways_in(model, function)))


def _ways_in(model: FileModel, function: Function) -> list[frozenset]:
    ways: list[frozenset] = []
    registered = calling.registrations(model, function.name, tree=False)
    for way in registered:
        opener = model.functions.get(way.follows or "")
        if way.context is not None and kfacts.genl_doit(way.kind, way.struct):
            ways.extend(context_facts(way.context) | held for held in genl_held(model, function.name, way.kind))
        elif way.context is not None:
            ways.append(context_facts(way.context))
        elif opener is not None and F.section_effect(opener) > 0:
            ways.append(F.entry_facts({"rcu"}, "context"))
        else:
            ways.append(UNKNOWN_WAY)
    if not function.is_static or model.path.endswith(".h"):
        ways.extend(_way(way) for way in model.context.entries(model.path, function.name))
    elif function.name in model.address_taken and not registered:
        ways.append(UNKNOWN_WAY)
    return ways


def analyse(model: FileModel) -> Analysis:
    """The analysis of model, shared by both rules (kept with the model)."""
    return model.memo("rcu.analysis", lambda: _analyse(model))


def _asserted_spinning(model: FileModel, infos: dict[str, F.FunctionInfo]) -> None:
    """A function that asserts a lock held (lockdep_assert_held(&rdev->bss_lock)) which the file
    only ever takes with a spinning spelling runs with preemption off (a "spin" reader: enough for
    rcu_read_lock_any_held(), the list walks and rcu_dereference_sched(); not for
    rcu_read_lock_held(), which plain rcu_dereference() checks), and with BH or IRQs off too when
    every such spelling implies it (spin_lock_bh())."""
    spellings: dict[str, list] = {}
    for info in infos.values():
        for call in info.function.calls:
            lock = F.lock_op(model, info.function, call)
            if lock is not None and lock[0].action in ("acquire", "try", "try_fail"):
                spellings.setdefault(lock[1], []).append(lock[0])
    for info in infos.values():
        asserted = [f[1] for f in info.precondition if f[0] == "lock" and f[2] == "entry"]
        added = set()
        for key in sorted(asserted):
            ops = spellings.get(key)
            if not ops or not all(op.atomic for op in ops):
                continue
            added.add(("r", "spin", 1, "entry"))
            implied = {op.implies for op in ops}
            if len(implied) == 1 and "" not in implied:
                added.add(("r", implied.pop(), 1, "entry"))
        if added:
            info.precondition = info.precondition | frozenset(
                f for f in added if not any(g[:2] == f[:2] for g in info.precondition))


def _analyse(model: FileModel) -> Analysis:
    if not mentioned(model.source) and not model.context.calls_a_need(model.source):
        # most files: nothing to judge, skip the walks
        return Analysis(model, {}, frozenset(), frozenset())
    helpers = F.callee_needs(model)
    functions = model.functions
    lines = model.source.split(b"\n")
    infos = {name: F.function_info(model, f, helpers, lines) for name, f in functions.items()}
    # In-file helpers whose stated precondition callers must meet; those named like one whose
    # body says otherwise need nothing (F._named_helper).
    helpers.update({name: P.HELPER_NEED if info.requires_reader else F.NO_NEED
                    for name, info in infos.items() if info.requires_reader or P.named_helper(name)})
    removed = rcu_sections_removed.removed_sections(model)   # check: functions the patch took a section from
    for name, info in infos.items():
        info.relevant = info.relevant or name in removed or any(c.name in helpers for c in info.function.calls)
    known_locks = frozenset(key for info in infos.values() for key in info.owned_locks)
    _asserted_spinning(model, infos)
    wanted = sorted(model.with_callers(n for n, i in infos.items() if i.relevant))
    mutexes = frozenset(lock[1] for info in infos.values() for call in info.function.calls
                        if (lock := F.lock_op(model, info.function, call)) and lock[0].sleeps) | \
        frozenset(key for info in infos.values() for call in info.function.calls
                  for op, key in F.c_wrapper_ops(model, info.function, call) if op.sleeps)
    transfer = RcuTransfer(model, infos, mutexes, F.lookups(model, helpers))
    static_ways = {name: ways_in(model, functions[name]) for name in wanted}
    results: dict[str, flow.FlowResult] = {}
    walked: dict[str, tuple] = {}     # name -> (entry, referenced) its current result was walked from
    entries: dict[str, tuple] = {}

    def entry_of(name: str) -> tuple:
        contributions = list(static_ways[name])
        for call in model.callers.get(name, []):
            if call.function in results:
                caller = infos[call.function]
                contributions.extend(inherited(state, caller, call.start)
                                     for state in results[call.function].states_at(call))
        return _entry_states(infos[name].precondition, contributions)

    # Callers before callees, each entry from its callers' latest walks: without recursion one
    # round settles every entry, and a second finds nothing to walk again.
    order = summaries.bottom_up(model, set(wanted))[::-1]
    for _ in range(ROUNDS):
        changed = False
        for name in order:
            entries[name] = entry_of(name)
            key = (entries[name], frozenset(infos[name].referenced))
            if walked.get(name) != key:   # a walk depends only on its entry and referenced locals
                results[name] = flow.walk_states(infos[name].function, transfer, entries[name])
                infos[name].bypassed = _bypassed(infos[name], results[name])
                walked[name] = key
                changed = True
        if not changed:
            break
    analysis = Analysis(model, infos, known_locks, mutexes, results=results, helpers=helpers,
                        section_effects=transfer.section_effects)
    for name in wanted:
        info = infos[name]
        if not info.relevant:
            continue
        result = results[name]
        for call in info.function.calls:
            if call.name in transfer.section_effects:
                continue
            need = None if call.name == F.USE else F.need_of(call, helpers)
            if call.name in (F.USE, P.ACCESS) or need is not None:
                analysis.sites.append(Site(call, need, result.states_at(call), info))
    return analysis


CHAIN_DEPTH = 8   # callers followed up from a finding to the way in that lacks its protection


def lacking_way(analysis: Analysis, site: Site) -> str:
    """The way into the site's function that lacks what the site needs, in words a reviewer can
    follow (issue: every finding names its way in): the chain of in-file callers up to the first
    function whose registration lacks it, or that holds none of it itself at its call; "" when no
    single way is to blame (the lack arises in the function itself, or only ways read from other
    files give it). The first such way in source order, so the same input names the same way."""
    if site.need is None or site.need.condition_arg is not None:
        return ""   # a lockdep condition names the function's own locals: not judged at its callers
    name = site.function.function.name
    chain = _lacking_chain(analysis, name, site.need, set())
    if not chain:
        return ""
    return "way in lacking it: " + " -> ".join(chain)


def _lacking_chain(analysis: Analysis, name: str, need: P.Need, seen: set) -> list[str]:
    """[`top()` (how it is entered), `next()` at line N, ..., `name()` at line M], or []."""
    if name in seen or len(seen) >= CHAIN_DEPTH:
        return []
    seen = seen | {name}
    model = analysis.model
    for way in calling.registrations(model, name, tree=False):
        if way.context is not None and not _protects(analysis, name, need, context_facts(way.context)):
            return [f"{name}() ({way.describe()})"]
    for call in model.callers.get(name, []):
        caller = analysis.infos.get(call.function)
        result = analysis.results.get(call.function)
        if caller is None or result is None:
            continue
        pseudo = Site(call, need, result.states_at(call), caller)
        if all(verdict(analysis, pseudo, state) == "ok" for state in pseudo.states):
            continue
        above = _lacking_chain(analysis, call.function, need, seen) or \
            [f"{call.function}() (" + ("its ways in not followed" if len(seen) >= CHAIN_DEPTH else
                                      "holding none of it at the call") + ")"]
        return above + [f"{name}() at line {call.line}"]
    return []


def _protects(analysis: Analysis, name: str, need: P.Need, facts: frozenset) -> bool:
    """Whether a registration context's entry facts give what `need` accepts, judged at the
    function's first statement."""
    info = analysis.infos.get(name)
    if info is None or not info.function.calls:
        return True
    first = min(info.function.calls, key=lambda c: c.start)
    entry = info.precondition | facts
    return verdict(analysis, Site(first, need, {entry}, info), entry) == "ok"


# -- judging a primitive -----------------------------------------------------------------------

def condition_keys(model: FileModel, function: Function, text: str):
    """The protections a lockdep condition names: a set of ("r", family) / ("lock", key), or None
    when it cannot be read (then it is accepted)."""
    if re.fullmatch(r"\(?\s*(1|true|!0)\s*\)?", text):
        return None
    wanted = set()
    for part in _split_top(text, "||"):
        part = part.strip()
        match = re.fullmatch(r"lockdep_is_held\((.*)\)", part)
        if match:
            wanted.add(("lock", model.canonical(function, match.group(1))))
        elif re.fullmatch(r"lockdep_rtnl_is_held\(\)|rtnl_is_locked\(\)", part):
            wanted.add(("r", "rtnl"))
        elif re.fullmatch(r"rcu_read_lock_(bh_|sched_|any_)?held\(\)", part):
            wanted.add(("r", "rcu"))
        else:
            return None
    return wanted


def _split_top(text: str, separator: str) -> list[str]:
    """text split at the separators outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char in "(["
        depth -= char in ")]"
        if depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            start = i + len(separator)
    parts.append(text[start:])
    return parts


def condition_satisfied(analysis, info, call, condition_arg: int, families, locks) -> bool:
    """Whether the lockdep condition a checked dereference names (its argument `condition_arg`)
    holds in a state: a lock it names is held (or not one the file knows), or a flavour it names is
    in effect; a condition we cannot read counts as held."""
    wanted = condition_keys(analysis.model, info.function, call.args[condition_arg])
    if wanted is None:
        return True
    locks = set(locks) | {path for key in locks if (path := kfacts.object_lock_field(key))}
    return any((kind == "lock" and (key in locks or key not in analysis.known_locks)) or
               (kind == "r" and key in families) for kind, key in wanted)


def verdict(analysis: Analysis, site: Site, state: frozenset) -> str:
    """For a primitive in one state: "ok"; "weak" (another flavour) or "rtnl" (the update-side
    lock, known held, instead of a section): both lockdep splats; or "missing"."""
    need = site.need
    info = site.function
    families, locks = effective(state, info, site.call.start)
    rtnl_known = any(f[:2] == ("r", "rtnl") for f in state)
    if need.update_side:
        if update_side_held(state, info, site.call.start, analysis.mutexes):
            return "ok"
        families.discard("rtnl")   # RTNL stands in for a section only when known to be held
    if families & need.strict:
        return "ok"
    if need.condition_arg is not None and need.condition_arg < len(site.call.args):
        if condition_satisfied(analysis, info, site.call, need.condition_arg, families, locks):
            return "ok"
        if not need.strict and not need.weak:
            return "missing"
    if families & need.weak:
        return "weak"
    if rtnl_known and need.tracked:
        return "rtnl"
    return "missing"
