"""Which lock protects a field, as the code itself believes it, and the accesses that do without it
(rule lock-held-inconsistent).

An **access** is a field of a struct reached from a variable of known struct type, by its whole
access path (`priv->stats.tx_dropped` -> "foo_priv.stats.tx_dropped": `FileModel.canonical`): read,
written (`=`, `+=`, `++`) or its address handed to a call (`list_add(&e->node, &priv->list)`).
Not accesses: the lock itself (the argument of a lock operation), and accesses spelt to run without
a lock (READ_ONCE(), atomic and bit operations, RCU accessors: facts table [lock_consistency]
lockless). What is held at an access comes from the lock walk (locks.LockTransfer) from the
function's entry: its annotations, the global locks its registrations' calling context holds
(RTNL for a `.ndo_open`), and what every in-file caller holds at its calls. Only named locks count,
not RCU readers or BH/preemption/IRQ-off sections.

Accesses that are not counted at all: those of functions the kernel reaches only before the object
is published or after it is withdrawn (probe, ndo_init, pernet init, and their teardown
counterparts: [lock_consistency] unpublished), directly or through in-file callers reached only from
them (and a helper's calls from such functions do not decide what its entry holds, when its other
calls hold the lock); and those through a variable the function itself set to new memory (an
allocator of [rcu.private]), or of a struct on the function's stack (`hook.list`), which no other
context can see.

The **belief**: lock L protects field F where, among the counted accesses of F in the file's *other*
functions, at least MIN_OTHERS hold L, in at least MIN_FUNCTIONS functions, and they are at least
MIN_SHARE of them. What is reported is a **structure** access of such a field without L on every
path reaching it: the field handed as the head to a primitive that changes or walks a linked
structure (list_add(e, head), __skb_queue_tail(head, skb), list_for_each_entry(pos, head, m):
[lock_consistency] heads), where a race corrupts the structure or follows a freed node; a walk
not where every change of F the file shows holds a lock the walk holds as well (the changes are
then serialised against it by that lock, whatever readers elsewhere take L for), nor where the
file changes F by its head but none of those changes holds L (its writers do not share the
belief: a list built only at setup). Other
accesses (a counter, a flag, a configuration value read on the data path) are evidence only: without
the lock they race, but do not by themselves crash. One verdict per function and field (its first
such access), and only where the function's ways in are all known (registered in a context the facts
table knows, or static with every caller in the file, whose own ways are known), or the function
takes L itself (exclusively, not nested: no caller can hold it at entry), or L is a static
variable of the file that no other file can hold and the function is static itself (other files
reach it only through this file's functions) with no registration in a context the facts table does
not know: a function other files may call could be called with L held. Accesses in functions of
unknown ways in count as evidence only when they hold L.

Only what can give a verdict is found and walked: candidate_members() and _may_be_believed() are
necessary conditions read before the walk (the text's members, the functions where a lock may be
held at all), so they change no verdict and spare most of the rule's cost.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import tree_sitter

from patchbench.checks.analyses import calling, locks
from patchbench.checks.engine import parse as cparse
from patchbench.checks.engine import summaries
from patchbench.checks.engine.model import FileModel, Function
from patchbench.checks.kernel import facts as kfacts

MIN_OTHERS = 5       # other accesses holding the lock, at least
MIN_SHARE = 0.9      # of the other accesses, the share that hold it
MIN_FUNCTIONS = 2    # functions those accesses are in, at least

_FACTS = kfacts.table()["lock_consistency"]
_LOCKLESS = re.compile(_FACTS["lockless"])
_HEADS = {name: frozenset(positions) for name, positions in _FACTS["heads"].items()}
_WALKS = frozenset(_FACTS["walks"])
_RCU_CHANGES = frozenset(_FACTS["rcu_changes"])
_SAME_OBJECT = {kind: group[0] for group in _FACTS["same_object"] for kind in group}
_OBJECT_KINDS = frozenset(op.kind for op in kfacts.lock_ops().values() if op.key == "object")
_UNPUBLISHED = frozenset(_FACTS["unpublished"])
_SELF_TAKEN_SHARED = frozenset(_FACTS["self_taken_shared"])
_SELF_TAKEN_NESTED = frozenset(_FACTS["self_taken_nested"])
_ALLOCATORS = re.compile(kfacts.table()["rcu"]["private"]["allocators"])
_GLOBAL_LOCKS = frozenset(op.kind for op in kfacts.lock_ops().values() if op.key == "global" and not op.is_reader)
_ACCESS = cparse.query("(field_expression) @access")
_PATH = re.compile(r"^[A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*|\[[^\]]*\])*$")
_WRITES = frozenset({"assignment_expression", "update_expression"})
# what every head primitive's name contains (found with bytes.find: a regex alternation of the
# names costs five times as much over a file)
_HEAD_STEMS = (b"list_", b"skb_", b"rb_", b"idr_", b"hash_")
assert all(any(stem in name.encode() for stem in _HEAD_STEMS) for name in _HEADS)
_HEAD_NAMES = frozenset(name.encode() for name in _HEADS)
_WORD = re.compile(rb"\w*")
_OPEN = re.compile(rb"\s*\(")
_MEMBER = re.compile(rb"(?:->|\.)\s*([A-Za-z_]\w*)")


@dataclass(eq=False)
class Access:
    function: str
    key: str                  # the field, by its root's struct type and path
    node: tree_sitter.Node
    kind: str                 # read | write | address | structure (a list or queue primitive's)
    call: str                 # for address and structure: the call it is passed to
    held: frozenset[str]      # named locks held on every path reaching it (by _identity)
    paths: tuple[frozenset[str], ...]   # per path reaching it: the named locks held, and READER
                                        # when an RCU reader or BH/preemption-off section is too
    spelled: dict[str, str]   # identity -> the key of the lock as held here
    known: bool               # every way into the function is known


@dataclass(frozen=True)
class Verdict:
    access: Access
    lock: str                 # the lock the belief names (its _identity)
    spelling: str             # how a holding access names it
    holding: int              # other accesses holding it
    others: int               # other counted accesses
    functions: int            # functions the holding accesses are in
    sites: tuple[Access, ...]  # two of them, in other functions where there are


def verdicts(model: FileModel) -> list[Verdict]:
    return model.memo("lock_consistency.verdicts", lambda: _verdicts(model))


@lru_cache(maxsize=8)
def candidate_members(source: bytes) -> frozenset[bytes]:
    """The members a reported field can end in, read from the text alone (the pre-pass keeps
    every node's text, so an access `p->a.m` is `->`/`.` then `m` in the source): named inside
    the parentheses of a head primitive's call (a structure access hands `&p->...m` to one),
    and after `->` or `.` more than MIN_OTHERS times (the belief needs that many other
    accesses). A field ending in any other member can give no verdict: its accesses need not be
    found, nor its functions walked; a file with none need not even be parsed for this rule."""
    heads: set[bytes] = set()
    for start, end in _head_calls(source):
        opened = _OPEN.match(source, end)
        if opened is None:
            continue
        close = cparse.matching_paren(source, opened.end() - 1)
        heads.update(_MEMBER.findall(source, opened.end(), close if close >= 0 else len(source)))
    if not heads:
        return frozenset()
    named = re.compile(rb"(?:->|\.)\s*(" + b"|".join(re.escape(m) for m in sorted(heads)) + rb")\b")
    counts = Counter(named.findall(source))
    return frozenset(member for member in heads if counts[member] > MIN_OTHERS)


def _head_calls(source: bytes):
    """(start, end) of each whole word of the text that names a head primitive."""
    for stem in _HEAD_STEMS:
        at = source.find(stem)
        while at >= 0:
            start = at
            while start > 0 and (source[start - 1] == 95 or 48 <= source[start - 1] <= 57 or
                                 65 <= source[start - 1] <= 90 or 97 <= source[start - 1] <= 122):
                start -= 1
            end = _WORD.match(source, at).end()
            if source[start:end] in _HEAD_NAMES:
                yield start, end
            at = source.find(stem, end)


def _verdicts(model: FileModel) -> list[Verdict]:
    by_key: dict[str, list[Access]] = {}
    accesses, results, head_changed = _accesses(model)
    for access in accesses:
        by_key.setdefault(access.key, []).append(access)
    found = []
    for key, accesses in sorted(by_key.items()):
        if len(accesses) <= MIN_OTHERS:
            continue
        judged: set[str] = set()
        # changed here only in ways an RCU walker survives (or not changed here): a walk in a
        # read-side section is then safe
        rcu_walkable = not any(a.kind == "structure" and a.call not in _WALKS and a.call not in _RCU_CHANGES
                               for a in accesses)
        for access in sorted(accesses, key=lambda a: a.node.start_byte):
            if access.kind != "structure" or access.function in judged:
                continue
            # the other functions' accesses: a function's own repeated accesses are one judgement
            others = [a for a in accesses if a.function != access.function and (a.known or a.held)]
            lock, holding = _majority(others)
            if lock is None or len(holding) < MIN_OTHERS or len(holding) < MIN_SHARE * len(others) or \
                    not (access.known or _only_file_entered(model, access.function, lock)
                         or _takes_itself(model, access.function, {a.spelled[lock] for a in holding})):
                continue
            # another lock the others hold as often may be what protects the field (the majority
            # may be one held beside it): holding one of them, or (a walk) being in a read-side
            # section that writers freeing by RCU allow, covers a path
            alternatives = _shared_locks(others) | {lock}
            walk = access.call in _WALKS and rcu_walkable
            if all(path & alternatives or (walk and READER in path) for path in access.paths):
                continue
            # a walk only conflicts with changes: where the file changes F by its head and none of
            # those changes holds L (or a lock the others hold as often), its own writers do not
            # share the belief (a list built only before publication, or at setup by a function of
            # unknown ways without a lock): no change the checker can name runs under the
            # discipline the walk breaks.
            # A file that changes F only through entries' links (list_del(&e->node), an insert
            # after a cursor) shows no head change, and the walk is judged as before
            if access.call in _WALKS and key in head_changed and \
                    not any(a.held & alternatives for a in accesses if a.kind == "structure" and a.call not in _WALKS):
                continue
            # where the file's changes of F all hold a lock that
            # every path of the walk holds too (writers serialised by a lock beside L, such as RTNL or
            # a registration mutex, with L for readers elsewhere), the walk sees no change
            changes = [a for a in others if a.kind == "structure" and a.call not in _WALKS]
            if access.call in _WALKS and changes:
                writers = frozenset.intersection(*(a.held for a in changes))
                if all(path & writers for path in access.paths):
                    continue
            functions = {a.function for a in holding}
            if len(functions) < MIN_FUNCTIONS or _unlocked_only_before_publication(model, results, access, lock):
                continue
            judged.add(access.function)   # its first access without the lock stands for the others
            sites = sorted({a.function: a for a in reversed(holding)}.values(), key=lambda a: a.node.start_byte)[:2]
            spelling = sites[0].spelled[lock]
            found.append(Verdict(access, lock, lock if ":" in spelling else spelling, len(holding), len(others),
                                 len(functions), tuple(sites)))
    return found


def _only_file_entered(model: FileModel, name: str, lock: str) -> bool:
    """Callers elsewhere cannot hold the lock where it matters: it is a static variable of this
    file, and the function is static itself (other files reach it only through this file's
    functions, which would have to take the lock) with no registration of a context the facts
    table does not know (a seq_file ->show, which its ->start may have locked for it)."""
    function = model.functions[name]
    return function.is_static and _file_static(model, lock) and \
        not any(way.context is None for way in calling.registered_ways(model, name))


def _takes_itself(model: FileModel, name: str, keys: set[str]) -> bool:
    """The function takes one of these locks itself, exclusively and not as a nested acquire: no
    caller holds it at the entry (facts table [lock_consistency] why_self_taken)."""
    function = model.functions[name]
    for call in function.calls:
        op = kfacts.lock_op(call.name)
        if op is None or op.action != "acquire" or op.kind in _SELF_TAKEN_SHARED or call.name in _SELF_TAKEN_NESTED:
            continue
        if keys & set(_lock_arguments(model, function, call)):
            return True
    return False


def _file_static(model: FileModel, lock: str) -> bool:
    """The lock is a static variable of this file (`static DEFINE_SPINLOCK(mfc_unres_lock)`): no
    other file can hold it, so callers elsewhere, unknown as they are, do not hold it either."""
    declared = re.compile(rb"\bstatic\s+(?:DEFINE_\w*(?:LOCK|MUTEX|SEM)\w*\s*\(\s*|[\w\s]*?\b(?:spinlock_t|rwlock_t|"
                          rb"struct\s+mutex|struct\s+rw_semaphore)\s+)" + re.escape(lock.encode()) + rb"\b")
    return "." not in lock and " " not in lock and declared.search(model.source) is not None


def _holders(accesses: list[Access]) -> Counter:
    """How many of the accesses hold each lock."""
    return Counter(lock for access in accesses for lock in access.held)


def _shared_locks(accesses: list[Access]) -> set[str]:
    """The locks the belief would name as well: held by MIN_SHARE of the accesses."""
    return {lock for lock, count in _holders(accesses).items() if count >= MIN_SHARE * len(accesses)}


def _majority(accesses: list[Access]) -> tuple[str | None, list[Access]]:
    """The lock most of the accesses hold (ties: the first key), and those accesses."""
    counts = _holders(accesses)
    if not counts:
        return None, []
    lock = min(counts, key=lambda k: (-counts[k], k))
    return lock, [a for a in accesses if lock in a.held]


def _unlocked_only_before_publication(model: FileModel, results: dict[str, summaries.Summary], access: Access,
                                      lock: str) -> bool:
    """The function does not operate on the lock itself, and every in-file call of it without the
    lock comes from a function the kernel reaches only before publication or after withdrawal
    (a helper that the probe's error path calls too): the calls that matter all hold it."""
    name = access.function
    if model.has_unknown_callers(name) or not model.callers.get(name):
        return False
    function = model.functions[name]
    if any(_identity(key) == lock for call in function.calls for key in _lock_arguments(model, function, call)):
        return False
    for call in model.callers[name]:
        caller = results.get(call.function)
        states = caller.result.states_at(call) if caller is not None else set()
        if states and all(lock in {_identity(key) for key in locks.held(state)} for state in states):
            continue
        if not (call.function and calling.only_reached_from(model, call.function, _UNPUBLISHED)):
            return False
    return True


def _accesses(model: FileModel) -> tuple[list[Access], dict[str, summaries.Summary], set[str]]:
    """Every counted access of the file (see the module), with the locks held at it, the lock
    walks they come from, and the fields the file changes by their head anywhere (before
    publication too)."""
    spotted: dict[str, list[tuple[str, tree_sitter.Node, str, str]]] = {}
    members = candidate_members(model.source)
    if not members:
        return [], {}, set()
    named = re.compile(rb"(?:->|\.)\s*(?:" + b"|".join(re.escape(m) for m in sorted(members)) + rb")\b")
    for name, function in model.functions.items():
        if named.search(model.source, function.body.start_byte, function.body.end_byte) is None:
            continue   # no access of a field that can be reported on
        found = list(_spot(model, function, members))
        if found:
            spotted[name] = found
    if not spotted:
        return [], {}, set()
    structures = {key for found in spotted.values() for key, _, kind, _ in found if kind == "structure"}
    counts = Counter(key for found in spotted.values() for key, _, _, _ in found)
    wanted = {key for key, count in counts.items() if count > MIN_OTHERS and key in structures}
    if not wanted:
        return [], {}, set()
    lock_keys = {key for function in model.functions.values() for call in function.calls
                 for key in _lock_arguments(model, function, call)}
    wanted -= lock_keys
    # the bound first over every function with an access (cheap), then again without those
    # only reached before publication (asking the registrations costs more): the fields kept
    # are those the second bound alone keeps, since a field's bound looks at its own functions
    holding = _MayHold(model)
    head_changed = {key for found in spotted.values() for key, _, kind, call in found
                    if kind == "structure" and call not in _WALKS}
    users = {name for name, found in spotted.items() if any(key in wanted for key, _, _, _ in found)}
    wanted = _may_be_believed(model, spotted, wanted, users, holding, head_changed)
    users = {name for name in users if any(key in wanted for key, _, _, _ in spotted[name])
             and not calling.only_reached_from(model, name, _UNPUBLISHED)}
    wanted = _may_be_believed(model, spotted, wanted, users, holding, head_changed)
    users = {name for name in users if any(key in wanted for key, _, _, _ in spotted[name])}
    if not users:
        return [], {}, set()
    results = summaries.solve(model, users | locks.lock_functions(model), lambda s: _transfer(model, s),
                              precondition=lambda f: _precondition(model, f),
                              inherit=_inherited,
                              report=users)
    accesses = []
    for name in sorted(users):
        result = results[name].result
        known = _known_ways(model, name)
        for key, node, kind, call in spotted[name]:
            if key not in wanted:
                continue
            states = result.states_before(node)
            if not states:
                continue   # unreachable
            keys = frozenset.intersection(*(locks.held(state) for state in states))
            spelled = {_identity(k): k for k in sorted(keys, reverse=True) if _named_lock(k)}
            paths = tuple(sorted({_path_locks(state) for state in states}, key=sorted))
            accesses.append(Access(name, key, node, kind, call, frozenset(spelled), paths, spelled, known))
    return accesses, results, head_changed


def _may_be_believed(model: FileModel, spotted: dict[str, list], wanted: set[str], users: set[str],
                     holding: "_MayHold", head_changed: set[str]) -> set[str]:
    """The fields of wanted that can give a verdict whatever the lock walks find: a structure
    access (a change, or a walk where _verdicts judges walks of the field) in a function that
    _verdicts can judge (its ways in known, or it takes a lock itself, or it is static in a file
    declaring a static lock), and at least MIN_OTHERS accesses, in at
    least MIN_FUNCTIONS other functions, that may hold a lock at all (_MayHold). The walks are
    the cost of this rule: the other fields' functions are not walked (the walks of the rest
    do not depend on them: summaries.solve)."""
    static_lock = _STATIC_LOCK.search(model.source) is not None
    kept = set()
    for key in sorted(wanted):
        per_function = Counter(name for name in users for k, _, _, _ in spotted[name] if k == key)
        # a walk is judged only where no head change is seen or one may hold a lock (_verdicts)
        walks_judged = key not in head_changed or \
            any(holding(name) for name in per_function
                if any(k == key and kind == "structure" and call not in _WALKS for k, _, kind, call in spotted[name]))
        for name in sorted(per_function):
            function = model.functions[name]
            if not any(k == key and kind == "structure" and (walks_judged or call not in _WALKS)
                       for k, _, kind, call in spotted[name]) or \
                    not (_known_ways(model, name) or _calls_lock_op(function) or (function.is_static and static_lock)):
                continue
            others = [other for other in per_function if other != name and holding(other)]
            if len(others) >= MIN_FUNCTIONS and sum(per_function[other] for other in others) >= MIN_OTHERS:
                kept.add(key)
                break
    return kept


_STATIC_LOCK = re.compile(rb"\bstatic\s+(?:DEFINE_\w*(?:LOCK|MUTEX|SEM)\w*\s*\(|[\w\s]*?\b(?:spinlock_t|rwlock_t|"
                          rb"struct\s+mutex|struct\s+rw_semaphore)\s+)")


def _calls_lock_op(function: Function) -> bool:
    return any(kfacts.lock_op(call.name) is not None for call in function.calls)


class _MayHold:
    """Whether the lock walk can find any lock held in a function (a sound superset, asked per
    function): it takes one itself or through an in-file callee (a lock op, a sparse context
    statement, a guard, a header wrapper), or its precondition holds one (an annotation, a
    registration's global lock), or its callers are all in the file and one of them may hold
    one at the call (what every call site holds is the entry). A callee of another file only
    makes a lock maybe held, never held."""

    def __init__(self, model: FileModel):
        self.model = model
        self.answers: dict[str, bool] = {}
        self.taking: set[str] | None = None

    def takes(self) -> set[str]:
        """The functions that take a lock themselves or through in-file callees."""
        if self.taking is None:
            model = self.model
            self.taking = model.with_callers(
                name for name, function in model.functions.items()
                if any(locks.may_take(model, call.name, statements=True) for call in function.calls))
        return self.taking

    def __call__(self, name: str) -> bool:
        if name not in self.answers:
            # may hold: a function reached through known callers only (g -> its callers) that
            # takes a lock or has a precondition holding one
            seen, pending, found = {name}, [name], False
            while pending and not found:
                current = pending.pop()
                if self.answers.get(current) or current in self.takes() or \
                        _precondition(self.model, self.model.functions[current]):
                    found = True
                elif not self.model.has_unknown_callers(current):
                    for call in self.model.callers.get(current, []):
                        if call.function and call.function in self.model.functions and call.function not in seen:
                            seen.add(call.function)
                            pending.append(call.function)
            self.answers[name] = found
        return self.answers[name]


def _inherited(facts: frozenset) -> frozenset:
    """What a call site gives the callee: the locks held, and each also by its identity, so that
    callers reaching one lock by different paths (`svc->sched_lock`, `tbl->svc->sched_lock`) agree."""
    held = frozenset(f for f in facts if f[0] == "held")
    return held | {("held", _identity(f[1])) for f in held if _named_lock(f[1])}


def _transfer(model: FileModel, results: dict) -> locks.LockTransfer:
    transfer = locks.LockTransfer(model, results)
    transfer.record_statements = True
    return transfer


def _precondition(model: FileModel, function: Function) -> frozenset:
    keys = set(locks.annotated_keys(model, function, "__must_hold", "__releases"))
    ways = calling.registered_ways(model, function.name)
    if ways and all(way.context is not None for way in ways):
        keys |= frozenset.intersection(*(way.context.locks for way in ways)) & _GLOBAL_LOCKS
    return frozenset({("held", k) for k in keys} | {("caller", k) for k in keys})


def _known_ways(model: FileModel, name: str, seen: frozenset[str] = frozenset()) -> bool:
    """Every way into the function is known: registrations whose context the facts table gives,
    or (with none) in-file callers only, whose own ways are known (a static helper of a function
    other files call inherits that function's unknown entry)."""
    ways = calling.registered_ways(model, name)
    if ways:
        return all(way.context is not None for way in ways)
    callers = model.callers.get(name)
    if not callers or model.has_unknown_callers(name):
        return False
    return all(call.function and (call.function in seen or
                                  _known_ways(model, call.function, seen | {name})) for call in callers)


def _identity(key: str) -> str:
    """One name for a lock however it is reached: an object lock by its kind (see the facts
    table's same_object), a lock in a field by the field's name (`work->sp->router->lock`,
    `router->lock` and `r->lock` of a `struct mlxsw_sp_router *r` are one lock to the belief:
    paths through other roots and types name it differently, and a lock wrongly taken for
    another only silences a verdict)."""
    kind, colon, _ = key.partition(":")
    if colon and kind in _OBJECT_KINDS:
        return f"{_SAME_OBJECT.get(kind, kind)} lock"
    return key.rsplit(".", 1)[-1]


READER = "(reader)"   # in Access.paths: an RCU reader, or BH, preemption or interrupts off


def _path_locks(state: frozenset) -> frozenset[str]:
    held = locks.held(state)
    found = {_identity(key) for key in held if _named_lock(key)}
    if any(not _named_lock(key) for key in held):
        found.add(READER)
    return frozenset(found)


def _named_lock(key: str) -> bool:
    """A lock that excludes other holders, not a reader section or an interrupt/preemption state."""
    return key not in kfacts.READER_KINDS and not key.startswith("srcu:")


def _lock_arguments(model: FileModel, function: Function, call) -> list[str]:
    op = kfacts.lock_op(call.name)
    if op is None or op.key == "global" or op.argument >= len(call.args):
        return []
    return [model.canonical(function, call.args[op.argument])]


def _spot(model: FileModel, function: Function, members: frozenset[bytes]):
    """(key, node, kind, call) of each field access of the function reached from a typed variable,
    of the fields ending in one of members (candidate_members)."""
    fresh = _fresh(model, function)
    for node in cparse.captures(_ACCESS, function.body).get("access", []):
        member = node.child_by_field_name("field")
        if member is None or model.source[member.start_byte:member.end_byte] not in members:
            continue
        parent = node.parent
        if parent is not None and parent.type == "field_expression" and \
                parent.child_by_field_name("argument") == node:
            continue   # part of a longer path, judged as that path
        text = model.text(node)
        if not _PATH.match(text.replace(" ", "").replace("\n", "").replace("\t", "")):
            continue
        root = re.match(r"[A-Za-z_]\w*", text).group(0)
        if root not in function.types or root in fresh or text[len(root):].lstrip().startswith("."):
            continue   # untyped, just allocated, or a struct on the stack (`hook.list`): not shared
        kind, call, position = _use(model, node)
        if call and (_LOCKLESS.match(call) or kfacts.lock_op(call) is not None):
            continue
        if _inside_lockless(model, node, function):
            continue
        if position in _HEADS.get(call, ()):
            kind = "structure"
        yield model.canonical(function, text), node, kind, call


def _use(model: FileModel, node: tree_sitter.Node) -> tuple[str, str, int]:
    """How the access is used: (read | write | address, the call its address is passed to or "",
    the argument's position in that call or -1)."""
    parent = node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        node, parent = parent, parent.parent
    if parent is None:
        return "read", "", -1
    if parent.type in _WRITES and (parent.child_by_field_name("left") == node or
                                   parent.child_by_field_name("argument") == node):
        return "write", "", -1
    if parent.type != "pointer_expression" or parent.children[0].type != "&":
        return "read", "", -1
    arguments = parent.parent
    if arguments is not None and arguments.type == "argument_list":
        callee = arguments.parent.child_by_field_name("function")
        position = [child.id for child in arguments.named_children].index(parent.id)
        return "address", model.text(callee) if callee is not None else "", position
    head = arguments
    while head is not None and head.type in ("comma_expression", "parenthesized_expression"):
        head = head.parent
    if head is not None and head.type == "while_statement" and arguments.type == "comma_expression":
        # an iterator macro the pre-pass made a loop (`list_for_each_entry(pos, &p->list, m)`
        # -> `while (pos, &p->list, m)`): the source still names it
        condition = head.child_by_field_name("condition")
        items = _comma_items(condition.named_children[0] if condition.named_children else condition)
        position = [item.id for item in items].index(parent.id) if parent.id in {i.id for i in items} else -1
        return "address", re.match(r"\w*", model.text(head)).group(0), position
    return "address", "", -1


def _comma_items(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The operands of a comma list `a, b, c`, in order."""
    if node.type != "comma_expression":
        return [node]
    return [item for child in node.named_children for item in _comma_items(child)]


def _inside_lockless(model: FileModel, node: tree_sitter.Node, function: Function) -> bool:
    """The access is an argument (at any depth) of a lockless accessor: READ_ONCE(p->x)."""
    current = node.parent
    while current is not None and current != function.body:
        if current.type == "call_expression":
            callee = current.child_by_field_name("function")
            if callee is not None and _LOCKLESS.match(model.text(callee)):
                return True
        if current.type in ("expression_statement", "declaration", "return_statement"):
            return False
        current = current.parent
    return False


def _fresh(model: FileModel, function: Function) -> set[str]:
    """Variables the function assigns new memory from an allocator: unpublished objects."""
    fresh = set()
    for call in function.calls:
        if not _ALLOCATORS.match(call.name):
            continue
        holder = call.node.parent
        while holder is not None and holder.type in ("parenthesized_expression", "cast_expression"):
            holder = holder.parent
        if holder is None:
            continue
        if holder.type == "assignment_expression":
            target = holder.child_by_field_name("left")
        elif holder.type == "init_declarator":
            target = holder.child_by_field_name("declarator")
            while target is not None and target.type == "pointer_declarator":
                target = target.child_by_field_name("declarator")
        else:
            continue
        if target is not None and target.type == "identifier":
            fresh.add(model.text(target))
    return fresh
