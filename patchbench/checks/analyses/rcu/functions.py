"""What the RCU analysis reads from each function before walking it, and what the RCU rules ask of
one read (stack_private; no rule ID here).

`function_info()` gives a `FunctionInfo`: the families and locks the function takes itself, its
stated precondition (lockdep asserts, annotations, prose of [rcu.prose], the [rcu.helpers] naming
convention where its body and ways in agree), its pointer locals,
and a copy of the function whose call list also holds pseudo call sites named USE for each use of
a pointer local that may hold an RCU-protected value (p->f, *p, p[i], f(p)), so that the walker
reports the state reaching each use like it does for calls.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field

import tree_sitter

from patchbench.checks.engine import flow
from patchbench.checks.engine import parse as cparse
from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.analyses import locks
from patchbench.checks.engine.model import CallSite, FileModel, Function, squeeze
from patchbench.checks.analyses.rcu import primitives as P

USE = "<use>"    # name of the pseudo call sites that stand for uses of pointer locals
ESCAPES = "rcu-pointer-escapes"        # queries/<id>.scm
WORD = re.compile(r"[A-Za-z_]\w*")
_CALLED = re.compile(r"([A-Za-z_]\w*)\s*\(")
# A text without any of these has no call _reads_rcu_value() accepts: every name it accepts
# contains one (a named helper ends in its word), so most bodies need not be scanned name by name.
_MAY_READ_RCU_VALUE = re.compile("|".join(
    [re.escape(P.helper_word())] + sorted(re.escape(name) for name in {*P.DEREFERENCES, P.ACCESS, *P.CONTAINER}
                                          if P.helper_word() not in name)))


@dataclass
class FunctionInfo:
    function: Function             # with the pseudo use sites added to its calls
    owned_locks: frozenset         # lock keys it takes itself
    taken_locks: frozenset         # lock keys it takes and never releases (a lock wrapper)
    precondition: frozenset        # entry facts it states itself
    requires_reader: bool          # stated RCU precondition: callers must provide a section
    relevant: bool                 # holds a site the rules judge
    first_section: int             # start byte of its first own read-side section call (or its end)
    model: FileModel = field(repr=False, compare=False)
    # locals a reference was taken through inside a section on some path: not tracked on any
    # (`if (ops && try_module_get(ops->owner)) found = true;` then `if (found) ops->...`)
    referenced: set = field(default_factory=set)
    # call starts past first_section that some path of unknown entry reaches without having
    # opened a section of its own (rcu_analysis._bypassed, set from each walk)
    bypassed: frozenset = frozenset()

    @property
    def pointers(self) -> frozenset:
        """Pointer locals and parameters (asked only of the functions walked)."""
        return pointer_locals(self.model, self.function)

    def holds(self, fact: tuple, at: int) -> bool:
        """Whether a fact counts as held at byte `at` of the function: readers and locks do, and
        an unknown entry does until the function's own first section, which says what its
        callers hold (a receive path nesting a section of its own later is still theirs), and
        past it where a path reaches without the function having opened a section: there it
        relies on its callers', and the section it opens on other paths is a nested one."""
        return fact[0] in ("r", "lock") or \
            (fact[0] == "unknown" and (at < self.first_section or at in self.bypassed))


def entry_facts(families, origin: str) -> frozenset:
    return frozenset(("r", family, 1, origin) for family in families)


# -- per-function facts ------------------------------------------------------------------------

def pointer_locals(model: FileModel, function: Function) -> frozenset:
    return model.memo(f"rcu.pointers:{function.name}", lambda: _pointer_locals(model, function))


def _pointer_locals(model: FileModel, function: Function) -> frozenset:
    names = set()
    for node in cparse.captures(cparse.rule_query_capturing(ESCAPES, "pointer"), function.node).get("pointer", []):
        while node is not None and node.type != "identifier":
            node = node.child_by_field_name("declarator")
        if node is not None:
            names.add(model.text(node))
    return frozenset(names)


def _use_sites(model: FileModel, function: Function, candidates: frozenset) -> list[CallSite]:
    """Pseudo call sites for each use of a candidate local: p->f, *p, p[i], f(p)."""
    uses = []
    for found in cparse.matches(cparse.rule_query(ESCAPES), function.body):
        if "var" not in found:
            continue
        var = model.text(found["var"][0])
        if var not in candidates:
            continue
        if "callee" in found and squeeze(model.text(found["callee"][0])) in P.NOT_A_USE:
            continue
        how = "deref" if "deref" in found else "pass"
        node = found[how][0]
        uses.append(CallSite(USE, [var, how], node, node.start_point[0] + 1, function.name))
    return uses


_ITERATOR_HEAD = re.compile(rb"([A-Za-z_]\w*)\s*\(")


def _iterator_sites(model: FileModel, function: Function, helpers: dict[str, P.Need]) -> list[CallSite]:
    """Pseudo call sites for the RCU list iterators the pre-pass turned into loop heads
    (`list_for_each_entry_rcu(pos, head, member) {` -> `while (pos, head, member) {`): a site on
    the loop's condition, named by the macro, so that the walk judges the state at each test.
    The iterators are the read primitives of the facts table and the macros of other files the
    call index read walking an RCU list with nothing held (`helpers`: a subsystem's for-each)."""
    body = model.source[function.body.start_byte:function.body.end_byte]
    walkers = [name for name, need in helpers.items() if need is not NO_NEED and name not in model.functions]
    if b"_rcu" not in body and not any(name.encode() in body for name in walkers):
        return []
    sites = []
    pending = [function.body]
    while pending:
        node = pending.pop()
        pending.extend(node.named_children)
        if node.type != "while_statement":
            continue
        head = _ITERATOR_HEAD.match(model.source, node.start_byte)
        name = head.group(1).decode() if head else ""
        if not (name.endswith("_rcu") and name in P.DEREFERENCES or name in walkers):
            continue
        condition = node.child_by_field_name("condition")
        while condition is not None and condition.type == "parenthesized_expression" and \
                condition.named_child_count == 1:
            condition = condition.named_children[0]
        if condition is None:
            continue
        items = [condition]
        while items[-1].type == "comma_expression":
            last = items.pop()
            items.extend([last.child_by_field_name("left"), last.child_by_field_name("right")])
        args = [squeeze(model.text(item)) for item in items]
        sites.append(CallSite(name, args, condition, node.start_point[0] + 1, function.name))
    return sorted(sites, key=lambda c: c.start)


def lookups(model: FileModel, helpers: dict[str, P.Need]) -> frozenset[str]:
    """Functions of other files whose result is an object only the caller's section keeps alive:
    each global definition reads an RCU-protected pointer itself with nothing of its own held (the
    index's need, not one reached through a callee) and calls nothing that takes a reference (the
    facts table's [rcu.reference]): a lookup returning what it found, as a `*_rcu` one does. Their
    result assigned to a pointer is tracked as rcu_dereference()'s is."""
    def compute() -> frozenset[str]:
        found = set()
        for name, need in helpers.items():
            if need is NO_NEED or name in model.functions or name in P.DEREFERENCES:
                continue
            summary = model.context.need(name)
            callees = model.context.callees(name)
            if summary is None or summary[3] or callees is None or \
                    any(P.REFERENCE.search(callee) for callee in callees):
                continue
            found.add(name)
        return frozenset(found)
    return model.memo("rcu.lookups", compute)


def _reads_rcu_value(text: str, known: dict[str, bool], found: frozenset[str] = frozenset()) -> bool:
    """The text calls something whose result may be an RCU-protected value: a read primitive,
    rcu_access_pointer(), a container_of() form around one, a helper named by convention, or a
    lookup of another file (`found`, see lookups()).
    `known`: the answers already given for names of this file (a name's words are split once)."""
    if _MAY_READ_RCU_VALUE.search(text) is None:
        return False
    for name in _CALLED.findall(text):
        if name not in known:
            known[name] = name in P.DEREFERENCES or name == P.ACCESS or name in P.CONTAINER or \
                P.named_helper(name) or name in found
        if known[name]:
            return True
    return False


def _candidates(model: FileModel, function: Function, found: frozenset[str] = frozenset()) -> frozenset:
    """Pointer locals that may receive an RCU-protected value (directly or through another);
    `found`: the lookups of other files (see lookups())."""
    text = model.text(function.body)
    known = model.memo("rcu.returns_rcu_value", dict)
    if not _reads_rcu_value(text, known, found):
        return frozenset()
    pointers = pointer_locals(model, function)
    assigned = re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^;]*);", text)
    assigned = [(target, value, _reads_rcu_value(value, known, found)) for target, value in assigned
                if target in pointers]
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for target, value, reads in assigned:
            if target not in found and (reads or any(w in found for w in WORD.findall(value))):
                found.add(target)
                changed = True
    return frozenset(found)


def _named_helper(model: FileModel, function: Function, reads: bool) -> bool:
    """The function of this file is a helper its callers call inside a section, by the naming
    convention ([rcu.helpers]) as far as its body and ways in agree: it reads something needing a
    reader without opening a section of its own, and the file only calls it by name (one handed to
    call_rcu() or stored in an ops field runs where the kernel calls it, not in its callers')."""
    return P.named_helper(function.name) and reads and not opens_section(function) \
        and function.name not in model.registrations and function.name not in model.address_taken


def _stated_precondition(model: FileModel, function: Function, lines: list[bytes],
                         reads: bool) -> tuple[frozenset, bool]:
    """Entry facts the function states itself, and whether it requires a reader of its callers
    (`reads`: its body has a read needing one)."""
    facts: set = set()
    above = b"\n".join(lines[max(0, function.start_line - 6):function.start_line - 1]).decode(
        "utf-8", "replace")
    texts = (function.comment or "", function.body_comment or "",
             above if "/*" in above or "//" in above else "")
    reader = _named_helper(model, function, reads) or any(P.states(text, "rcu") for text in texts)
    for name, argument in function.annotations:
        if argument == "RCU" and name in ("__must_hold", "__releases"):
            reader = True
        elif name == "__must_hold":
            facts.add(("lock", model.canonical(function, argument), "entry"))
    facts |= _dropped_and_retaken(function)
    for call in function.calls:
        if call.name in P.RCU_ASSERTS:
            reader = True
        elif call.name in P.RTNL_ASSERTS:
            facts.add(("r", "rtnl", 1, "entry"))
        elif call.name in P.LOCK_ASSERTS:
            key = locks.lock_key(model, function, call, kfacts.lock_op(call.name))
            if key is not None:
                facts.add(("lock", key, "entry"))
    if reader:
        facts |= entry_facts(P.READERS - {"spin"}, "entry")
    if any(P.states(text, "rtnl") for text in texts):
        facts.add(("r", "rtnl", 1, "entry"))
    return frozenset(facts), reader


def _dropped_and_retaken(function: Function) -> frozenset:
    """Reader families (and RTNL) the function drops before it ever takes them, and takes again
    as often as it drops them (rcu_read_unlock(); might_sleep(); rcu_read_lock();): its caller's
    section, held on entry. Dropped more often than taken is a deleted rcu_read_lock(), not this."""
    deltas: dict[str, list[int]] = {}
    for call in function.calls:
        section = P.SECTIONS.get(call.name)
        if section is not None and section[0] in P.EXPLICIT_FAMILIES | {"rtnl"}:
            deltas.setdefault(section[0], []).append(section[1])
    return frozenset(("r", family, 1, "entry") for family, seen in deltas.items()
                     if seen[0] < 0 and seen.count(1) >= seen.count(-1))


def lock_op(model: FileModel, function: Function, call: CallSite) -> tuple[kfacts.LockOp, str] | None:
    """The named lock (not a reader, not RTNL) the call takes, tries or drops, and its key (of
    the call's own function: worked out once per call, which every path of every walk asks)."""
    op = kfacts.lock_op(call.name)
    if op is None or op.is_reader or op.kind == "rtnl" or op.action == "assert":
        return None
    keys = model.memo("rcu.lock_keys", dict)
    if call not in keys:
        keys[call] = locks.lock_key(model, function, call, op)
    return (op, keys[call]) if keys[call] is not None else None


_ROOT = re.compile(r"^(&?\(?)([A-Za-z_]\w*)")
_PATH = re.compile(r"^&?[A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*|\[[^\]]*\])*$")


def c_wrapper_ops(model: FileModel, function: Function, call: CallSite) -> list[tuple[kfacts.LockOp, str]]:
    """(op, key) of each lock a global function of another .c file leaves taken or released in
    its caller (the call index's c_wrappers: a subsystem's foo_lock() takes its mutex foo_mutex,
    foo_unlock() drops it). A lock named by a parameter is the call's argument; one named by a file-scope
    object of the wrapper's file keeps the wrapper's spelling. Readers and RTNL are left out
    (section wrappers are judged by their own need)."""
    if call.name in model.functions:
        return []
    found = model.context.c_wrapper(call.name)
    if found is None:
        return []
    params, effect = found
    ops = []
    for spelling, argument in effect:
        op = kfacts.lock_op(spelling)
        if op is None or op.is_reader or op.kind == "rtnl" or op.key == "global":
            continue
        match = _ROOT.match(argument)
        if match is None:
            continue
        if match.group(2) in params:
            index = params.index(match.group(2))
            if index >= len(call.args) or not _PATH.match(call.args[index]):
                continue
            argument = match.group(1).replace("(", "") + call.args[index].lstrip("&") + argument[match.end():]
        key = locks.lock_key(model, None if match.group(2) not in params else function, call, op,
                             [argument] * (op.argument + 1))
        if key is not None:
            ops.append((op, key))
    return ops


def function_info(model: FileModel, function: Function, helpers: dict[str, P.Need],
                   lines: list[bytes]) -> FunctionInfo:
    owned_locks: set = set()
    released: set = set()
    relevant = False
    reads = False
    for call in function.calls:
        lock = lock_op(model, function, call)
        if lock:
            (released if lock[0].action == "release" else owned_locks).add(lock[1])
        need = need_of(call, helpers)
        if need is not None or call.name == P.ACCESS:
            relevant = True
        reads = reads or (need is not None and bool((need.strict | need.weak) & P.READERS))
    candidates = _candidates(model, function, lookups(model, helpers))
    iterators = _iterator_sites(model, function, helpers)
    relevant = relevant or bool(iterators)
    reads = reads or bool(iterators)
    augmented = function
    if candidates or iterators:
        augmented = copy.copy(function)
        augmented.calls = function.calls + iterators + \
            (_use_sites(model, function, candidates) if candidates else [])
        augmented.calls.sort(key=lambda c: (c.end, -c.start))
        augmented._index()
        relevant = True
    precondition, requires_reader = _stated_precondition(model, function, lines, reads)
    first_section = min((c.start for c in function.calls if _opens_or_closes(c)), default=function.node.end_byte)
    return FunctionInfo(augmented, frozenset(owned_locks), frozenset(owned_locks - released),
                        precondition, requires_reader, relevant, first_section, model)


def _opens_or_closes(call: CallSite) -> bool:
    """An explicit read-side section call: rcu_read_lock*(), rcu_read_unlock*(), guard(rcu)()."""
    if P.SECTIONS.get(call.name, ("", 0))[0] in P.EXPLICIT_FAMILIES:
        return True
    guard = locks.guard_call(call)
    return guard is not None and guard[0].kind in P.EXPLICIT_FAMILIES


# In `helpers`: a function of another file named by the [rcu.helpers] convention whose body the
# call index read opening its own section (the name says it uses RCU inside, not that its caller
# must hold a section): it needs nothing.
NO_NEED = P.Need(frozenset(), frozenset(), None, "", False)


def need_of(call: CallSite, helpers: dict[str, P.Need]) -> P.Need | None:
    """What the call needs at its site, None when it needs nothing. `helpers`: functions known
    to need a section on entry (stated in this file, or read by the call index elsewhere)."""
    need = P.DEREFERENCES.get(call.name) or helpers.get(call.name)
    if need is NO_NEED:
        return None
    if need is not None:
        return need
    if P.named_helper(call.name):
        return P.NAMED_NEED
    return None


def callee_needs(model: FileModel) -> dict[str, P.Need]:
    """The functions of other files and headers this file calls that need a read-side section on
    entry (the call index's summaries): what a call of each needs. Any reader keeps what the
    callee reads alive and RTNL is the update side of most netdev data: a call with neither is
    reported (no lockdep-flavour warnings from afar). A mutex held at the call counts only when
    the read is in the caller's own directory: a driver's lock guards its own data, not its
    subsystem's (a wireless driver's mutex is nothing to mac80211's station table). The body the
    index read comes before the [rcu.helpers] naming convention, used only where it has none."""
    found = {}
    called = sorted(({call.name for function in model.functions.values() for call in function.calls}
                     | _loop_heads(model)) - set(model.functions) - set(P.DEREFERENCES) - set(P.SECTIONS))
    here = os.path.dirname(os.path.normpath(model.path))
    for name in called:
        summary = model.context.need(name)
        if summary is None:
            if P.named_helper(name) and model.context.opens_section(name):
                found[name] = NO_NEED
            continue
        primitive, path, line, via = summary
        read = P.DEREFERENCES.get(primitive, P.HELPER_NEED)
        through = f"through {via}(), " if via else ""
        directory = os.path.dirname(path)
        own_data = here == directory or here.endswith(os.sep + directory)
        # RTNL, the update side of most netdev data, keeps what the callee reads alive; lockdep
        # accepts it only for the reads that name it (rcu_dereference_rtnl()): under RTNL alone a
        # plain read or walk splats (PROVE_RCU, PROVE_RCU_LIST), a warning
        rtnl_named = primitive in kfacts.rtnl_satisfied_reads()
        found[name] = P.Need(read.strict | read.weak | ({"rtnl"} if not own_data and rtnl_named else set()),
                             frozenset({"rtnl"}) if not own_data and not rtnl_named else frozenset(),
                             None, read.section, False, own_data,
                             f" ({through}{primitive}() at {path}:{line})")
    return found


# A call standing first on its line, where an iterator macro's head stands (the pre-pass makes it
# a loop, so it is no call of the model).
_LINE_HEAD = re.compile(rb"^[ \t]+([A-Za-z_]\w*)[ \t]*\(", re.M)


def _loop_heads(model: FileModel) -> set[str]:
    """The names standing as loop heads in the file's functions (`foo_for_each(pos, head) {`)."""
    return {name.decode() for name in _LINE_HEAD.findall(model.source)} - _KEYWORDS


_KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "do", "case", "else"})


def opens_section(function: Function) -> bool:
    """The function takes an explicit read-side section itself (rcu_read_lock*(), srcu_read_lock(),
    guard(rcu)) and releases it: a name of the [rcu.helpers] convention then says it uses RCU
    inside, not that its callers must hold a section."""
    opened = [call for call in function.calls if _opens_or_closes(call) or
              P.SECTIONS.get(call.name, ("", 0))[0] == "srcu"]
    return any(P.SECTIONS.get(c.name, ("", 1))[1] > 0 for c in opened) and \
        any(P.SECTIONS.get(c.name, ("", 0))[1] < 0 or locks.guard_call(c) for c in opened) and \
        section_effect(function) == 0


def section_effect(function: Function) -> int:
    """+1 when calling the function leaves its caller in a section, -1 when it ends one, else 0."""
    if ("__acquires", "RCU") in function.annotations:
        return 1
    if ("__releases", "RCU") in function.annotations:
        return -1
    names = {call.name for call in function.calls}
    return int("rcu_read_lock" in names and "rcu_read_unlock" not in names)


_FIELD_OF_LOCAL = re.compile(r"&?\(?([A-Za-z_]\w*)\.[A-Za-z_][\w.]*\)?")


def stack_private(model: FileModel, function: Function, call: CallSite) -> bool:
    """The pointer read is a field of a struct variable of the function's own stack (`cbss.ies`
    of a `struct cfg80211_bss cbss;`, not static, no pointer in the path) whose address is not
    taken before the read, nor in a loop around it: no other context can reach the object yet,
    so nothing can change or free what it points to (a KUnit test filling a stack object)."""
    if not call.args or call.name not in P.DEREFERENCES and call.name != P.ACCESS:
        return False
    match = _FIELD_OF_LOCAL.fullmatch(call.args[0])
    if match is None:
        return False
    name = match.group(1)
    if not _stack_aggregate(model, function.body, name):
        return False
    taken = re.compile(r"&\s*\(?\s*" + re.escape(name) + r"\b")
    before = model.source[function.body.start_byte:call.start].decode("latin-1")
    if taken.search(before) or not _set_to_new_memory(before, call.args[0].lstrip("&")):
        return False
    node = call.node.parent
    while node is not None and node != function.body:
        if node.type in flow.LOOPS and taken.search(model.text(node)):
            return False
        node = node.parent
    return True


def _set_to_new_memory(before: str, field: str) -> bool:
    """The last setting of `field` in the text `before` a read sets it to memory just allocated
    (`rcu_assign_pointer(cbss.ies, kunit_kzalloc(...))`)."""
    facts = kfacts.table()["rcu"]["private"]
    path = re.escape(field).replace(r"\.", r"\s*\.\s*")
    setters = "|".join(map(re.escape, facts["setters"]))
    settings = list(re.finditer(r"\b(?:" + setters + r")\s*\(\s*" + path + r"\s*,|(?<![\w.>])" + path +
                                r"\s*=(?!=)", before))
    if not settings:
        return False
    value = re.match(r"\s*(?:\([^()]*\)\s*)?([A-Za-z_]\w*)\s*\(", before[settings[-1].end():])
    return value is not None and re.match(facts["allocators"], value.group(1)) is not None


def _stack_aggregate(model: FileModel, body: tree_sitter.Node, name: str) -> bool:
    """`name` is declared in `body` as a struct or union variable (not a pointer, not an
    array, not static) and nowhere else in it."""
    found = []
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type == "declaration":
            for declarator in node.children_by_field_name("declarator"):
                inner = declarator.child_by_field_name("declarator") \
                    if declarator.type == "init_declarator" else declarator
                if inner is not None and inner.type == "identifier" and model.text(inner) == name:
                    found.append(node)
                elif inner is not None and model.text(inner).lstrip("*").split("[")[0].strip() == name:
                    return False   # a pointer or an array of that name
        stack.extend(node.named_children)
    if len(found) != 1:
        return False
    kind = found[0].child_by_field_name("type")
    static = any(c.type == "storage_class_specifier" and model.text(c) == "static"
                 for c in found[0].children)
    return kind is not None and kind.type in ("struct_specifier", "union_specifier") and not static
