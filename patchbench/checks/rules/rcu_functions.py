"""What the RCU analysis reads from each function before walking it (no rule ID here).

`function_info()` gives a `FunctionInfo`: the families and locks the function takes itself, its
stated precondition (comments, annotations, lockdep asserts, an `_rcu` name), its pointer locals,
and a copy of the function whose call list also holds pseudo call sites named USE for each use of
a pointer local that may hold an RCU-protected value (p->f, *p, p[i], f(p)), so that the walker
reports the state reaching each use like it does for calls.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

from patchbench.checks import cparse
from patchbench.checks.model import CallSite, FileModel, Function, squeeze
from patchbench.checks.rules import rcu_primitives as P

USE = "<use>"    # name of the pseudo call sites that stand for uses of pointer locals
ESCAPES = "rcu-pointer-escapes"        # queries/<id>.scm
WORD = re.compile(r"[A-Za-z_]\w*")
_RCU_VALUE = re.compile(r"rcu_dereference|srcu_dereference|rcu_access_pointer|_rcu\s*\(")


@dataclass
class FunctionInfo:
    function: Function             # with the pseudo use sites added to its calls
    owned: frozenset               # families it takes itself
    owned_locks: frozenset         # lock keys it takes itself
    taken_locks: frozenset         # lock keys it takes and never releases (a lock wrapper)
    sections_from: int             # start byte of its first own reader section call (opener or closer)
    opens: bool                    # that first call opens a section (no unbalanced unlock before it)
    precondition: frozenset        # entry facts it states itself
    requires_reader: bool          # stated RCU precondition: callers must provide a section
    relevant: bool                 # holds a site the rules judge
    model: FileModel = field(repr=False, compare=False)
    # locals a reference was taken through inside a section on some path: not tracked on any
    # (`if (ops && try_module_get(ops->owner)) found = true;` then `if (found) ops->...`)
    referenced: set = field(default_factory=set)

    @property
    def pointers(self) -> frozenset:
        """Pointer locals and parameters (asked only of the functions walked)."""
        return pointer_locals(self.model, self.function)

    def holds(self, fact: tuple, at: int) -> bool:
        """Whether a held fact counts at byte `at`: an assumed one does not when the function
        takes that family itself (its callers then hold none), except before the function's
        first section when that opens one (a receive path nesting a section of its own)."""
        if fact[0] == "r":
            if fact[3] != "assumed" or fact[1] not in self.owned:
                return True
            return fact[1] in P.ASSUMABLE and self.opens and at < self.sections_from
        if fact[0] == "lock":
            return fact[2] != "assumed" or fact[1] not in self.owned_locks
        return False


def entry_facts(families, origin: str) -> frozenset:
    return frozenset(("r", family, 1, origin) for family in families)


# -- per-function facts ------------------------------------------------------------------------

def pointer_locals(model: FileModel, function: Function) -> frozenset:
    return model.memo(f"rcu.pointers:{function.name}", lambda: _pointer_locals(model, function))


def _pointer_locals(model: FileModel, function: Function) -> frozenset:
    names = set()
    for node in cparse.captures(cparse.rule_query(ESCAPES), function.node).get("pointer", []):
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


def _candidates(model: FileModel, function: Function) -> frozenset:
    """Pointer locals that may receive an RCU-protected value (directly or through another)."""
    text = model.text(function.body)
    if not _RCU_VALUE.search(text):
        return frozenset()
    pointers = pointer_locals(model, function)
    assigned = re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^;]*);", text)
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for target, value in assigned:
            if target in pointers and target not in found and (
                    _RCU_VALUE.search(value) or any(w in found for w in WORD.findall(value))):
                found.add(target)
                changed = True
    return frozenset(found)


def _stated_precondition(model: FileModel, function: Function,
                         lines: list[bytes]) -> tuple[frozenset, bool]:
    """Entry facts the function states itself, and whether it requires a reader of its callers."""
    facts: set = set()
    above = b"\n".join(lines[max(0, function.start_line - 6):function.start_line - 1]).decode(
        "utf-8", "replace")
    reader = bool(function.name.endswith("_rcu")
                  or P.PRECONDITION_COMMENT.search(function.comment or "")
                  or P.PRECONDITION_COMMENT.search(function.body_comment or "")
                  or ("/*" in above or "//" in above) and P.PRECONDITION_COMMENT.search(above))
    for name, argument in function.annotations:
        if argument == "RCU" and name in ("__must_hold", "__releases"):
            reader = True
        elif name == "__must_hold":
            facts.add(("lock", model.canonical(function, argument), "entry"))
    for call in function.calls:
        if call.name in P.RCU_ASSERTS:
            reader = True
        elif call.name in P.RTNL_ASSERTS:
            facts.add(("r", "rtnl", 1, "entry"))
        elif call.name in P.LOCK_ASSERTS and call.args:
            facts.add(("lock", model.canonical(function, call.args[0]), "entry"))
    if reader:
        facts |= entry_facts(P.READERS - {"spin"}, "entry")
    texts = (function.comment or "", function.body_comment or "", above if "/*" in above else "")
    if any(P.RTNL_COMMENT.search(text) for text in texts):
        facts.add(("r", "rtnl", 1, "entry"))
    return frozenset(facts), reader


def lock_op(call: CallSite):
    match = P.LOCK_CALL.match(call.name)
    if not match or not call.args:
        return None
    return match.group("kind"), match.group("op"), match.group("suffix") or ""


def function_info(model: FileModel, function: Function, helpers: set[str],
                   lines: list[bytes]) -> FunctionInfo:
    owned: set = set()
    owned_locks: set = set()
    released: set = set()
    relevant = opens = False
    reader_calls: list[tuple[int, str, int]] = []
    seen: set[str] = set()
    sections_from = function.node.end_byte
    for call in function.calls:
        section = P.SECTIONS.get(call.name)
        if call.name in P.EXPLICIT_SECTIONS or call.name == "guard(rcu)":
            family, delta = P.SECTIONS.get(call.name, ("rcu", 1))
            reader_calls.append((call.start, family, delta))
        elif section and section[0] in ("rtnl", "srcu") and section[0] not in seen:
            seen.add(section[0])
            if section[1] >= 0:   # first dropped (rtnl_unlock(); request_module(); rtnl_lock();)
                owned.add(section[0])   # is the caller's lock: not owned
        lock = lock_op(call)
        if lock:
            (released if lock[1] == "unlock" else owned_locks).add(model.canonical(function, call.args[0]))
        if need_of(call, helpers) is not None or call.name == P.ACCESS:
            relevant = True
    for family in {family for _, family, _ in reader_calls}:
        calls = sorted(c for c in reader_calls if c[1] == family)
        opened = sum(delta > 0 for _, _, delta in calls)
        # First dropped, then retaken as often (rcu_read_unlock(); mutex_lock(); ...; rcu_read_lock();):
        # the caller's section, not this function's. Fewer retakes: a deleted rcu_read_lock().
        if calls[0][2] < 0 and opened >= len(calls) - opened:
            continue
        owned |= P.OWNS[family]
        if calls[0][0] < sections_from:
            sections_from, opens = calls[0][0], calls[0][2] > 0
    candidates = _candidates(model, function)
    augmented = function
    if candidates:
        augmented = copy.copy(function)
        augmented.calls = function.calls + _use_sites(model, function, candidates)
        augmented.calls.sort(key=lambda c: (c.end, -c.start))
        augmented._index()
        relevant = True
    precondition, requires_reader = _stated_precondition(model, function, lines)
    return FunctionInfo(augmented, frozenset(owned), frozenset(owned_locks),
                        frozenset(owned_locks - released), sections_from, opens,
                        precondition, requires_reader, relevant, model)


def need_of(call: CallSite, helpers: set[str]) -> P.Need | None:
    """What the call needs at its site, None when it needs nothing."""
    need = P.DEREFERENCES.get(call.name)
    if need is not None:
        return need
    if call.name in helpers or (P.RCU_HELPER.search(call.name) and not P.NOT_HELPER.match(call.name)
                                and WORD.fullmatch(call.name)):
        return P.HELPER_NEED
    return None


def section_effect(function: Function) -> int:
    """+1 when calling the function leaves its caller in a section, -1 when it ends one, else 0."""
    if ("__acquires", "RCU") in function.annotations:
        return 1
    if ("__releases", "RCU") in function.annotations:
        return -1
    names = {call.name for call in function.calls}
    return int("rcu_read_lock" in names and "rcu_read_unlock" not in names)
