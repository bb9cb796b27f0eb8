"""rcu-deref-unprotected: an rcu_dereference*() (or a call needing a read-side section) reached,
on some path, without the section, lock or RTNL it needs; nor a caller or context providing it.

Another flavour's section (rcu_read_lock_bh() for rcu_dereference(), NAPI for rcu_dereference())
keeps the object alive but splats under PROVE_RCU: reported as a warning. Dereferencing the
result of rcu_access_pointer() is reported outside any read-side section.
"""

from __future__ import annotations

import re
from typing import Iterable

import tree_sitter

from patchbench.checks import callindex, cparse, engine, kfacts
from patchbench.checks.finding import Finding
from patchbench.checks.model import FileModel
from patchbench.checks.rules import rcu_analysis as A
from patchbench.checks.rules import rcu_primitives as P
from patchbench.checks.rules import rcu_removed

ID = "rcu-deref-unprotected"
SEVERITY = "error"
MESSAGE = "rcu_dereference*() used outside the read-side section, lock or RTNL it needs"

_RANK = {"ok": 0, "weak": 1, "rtnl": 1, "missing": 2}
_UNKNOWN_ENTRY = ("; what {function}() holds on entry is not established (no caller or registration "
                  "with a known calling context, or only callers read from other files)")

MENTIONS = A.MENTIONS
reaches = callindex.calls_a_need


def check(model: FileModel) -> Iterable[Finding]:
    module = engine.rule(ID)
    analysis = A.analyse(model)
    dereferenced = set()
    if P.ACCESS.encode() in model.source:   # the query only matches its calls: skip the tree walk
        dereferenced = set(cparse.captures(cparse.rule_query(ID), model.tree.root_node).get("call", []))
    reported = set()
    for site in analysis.sites:
        call, name = site.call, site.function.function.name
        if call.name != A.USE and _private(model, site):
            continue
        if call.name == A.USE:
            if call.args[1] == "deref" and any(("a", call.args[0]) in s and not _kept(s, site, analysis)
                                               for s in site.states):
                yield engine.finding(module, model, call.node, name,
                                     f"'{call.args[0]}' holds rcu_access_pointer()'s value and is "
                                     "dereferenced outside a read-side section")
            continue
        if call.name == P.ACCESS:
            if call.node in dereferenced and site.states and \
                    not all(_kept(s, site, analysis) for s in site.states):
                yield engine.finding(module, model, call.node, name,
                                     "rcu_access_pointer() result dereferenced outside a read-side "
                                     "section")
            continue
        if not site.states:
            continue
        verdicts = {s: A.verdict(analysis, site, s) for s in site.states}
        worst = max(verdicts.values(), key=_RANK.get)
        if worst == "ok":
            continue
        # the ways of known entry decide the verdict when one of them lacks something; those of
        # unknown entry (callers elsewhere) only speak when every known way is protected
        sure = [v for s, v in verdicts.items()
                if not (A.UNKNOWN in s and (site.need.reason or site.function.holds(A.UNKNOWN, call.start)))]
        if sure and max(sure, key=_RANK.get) != "ok":
            worst = max(sure, key=_RANK.get)
            verdicts = {s: v for s, v in verdicts.items() if v == worst or A.UNKNOWN not in s}
        # A function's own first section says its callers hold none (FunctionInfo.holds): a guess
        # enough for its own reads, not for a callee's need read from afar (site.need.reason).
        uncertain = all(A.UNKNOWN in s and (site.need.reason or site.function.holds(A.UNKNOWN, call.start))
                        for s, v in verdicts.items() if v != "ok")
        if uncertain and not callindex.reports_unknown():
            continue   # what the unknown callers hold may be just what is needed (lint of a tree)
        if uncertain and site.need.update_only:
            # rcu_dereference_protected(p, lockdep_is_held(&l)), rtnl_dereference(): where no
            # caller is known, the condition is the function's own statement of what its callers
            # hold, as a lockdep_assert_held() would be (a callback handed to an iterator that
            # calls it under the lock: ctnetlink's expect_iter_name())
            continue
        if worst == "missing" and uncertain:
            worst = "unknown"
        reported.add(call.start)
        yield engine.finding(module, model, call.node, name, _message(site, worst),
                             "warning" if worst in ("weak", "rtnl", "unknown") else None)
    # `check`: what a read-side section the patch removed covered, judged as lockdep does
    for call, name, message, severity in rcu_removed.findings(analysis, reported):
        yield engine.finding(module, model, call.node, name, message, severity)


_FIELD_OF_LOCAL = re.compile(r"&?\(?([A-Za-z_]\w*)\.[A-Za-z_][\w.]*\)?")
_LOOPS = ("for_statement", "while_statement", "do_statement")


def _private(model: FileModel, site: A.Site) -> bool:
    """The pointer read is a field of a struct variable of the function's own stack (`cbss.ies`
    of a `struct cfg80211_bss cbss;`, not static, no pointer in the path) whose address is not
    taken before the read, nor in a loop around it: no other context can reach the object yet,
    so nothing can change or free what it points to (a KUnit test filling a stack object)."""
    call = site.call
    if not call.args or call.name not in P.DEREFERENCES and call.name != P.ACCESS:
        return False
    match = _FIELD_OF_LOCAL.fullmatch(call.args[0])
    if match is None:
        return False
    name = match.group(1)
    function = site.function.function
    if not _stack_aggregate(model, function.body, name):
        return False
    taken = re.compile(r"&\s*\(?\s*" + re.escape(name) + r"\b")
    before = model.source[function.body.start_byte:call.start].decode("latin-1")
    if taken.search(before) or not _set_to_new_memory(before, call.args[0].lstrip("&")):
        return False
    node = call.node.parent
    while node is not None and node != function.body:
        if node.type in _LOOPS and taken.search(model.text(node)):
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


def _reader(state: frozenset, site: A.Site) -> bool:
    families, _ = A.effective(state, site.function, site.call.start)
    return bool(families & P.READERS)


def _kept(state: frozenset, site: A.Site, analysis: A.Analysis) -> bool:
    """rcu_access_pointer()'s value may be dereferenced here: inside a read-side section, or on
    the update side (RTNL or a mutex held: the writer, who frees the object, is excluded)."""
    return _reader(state, site) or \
        A.update_side_held(state, site.function, site.call.start, analysis.mutexes)


def _message(site: A.Site, worst: str) -> str:
    call, need = site.call, site.need
    if call.name not in P.DEREFERENCES:
        said = f"{call.name}() needs an RCU read-side section and is called outside one{need.reason}"
        return said + (_UNKNOWN_ENTRY.format(function=site.function.function.name) if worst == "unknown" else "")
    what = f"{call.name}()"
    if worst == "rtnl":
        return (f"{what} under RTNL without {need.section} (lockdep splat): RTNL is the "
                "update side, use rtnl_dereference() or rcu_dereference_rtnl()")
    if worst == "weak":
        return f"{what} without {need.section}: only another RCU flavour protects it (lockdep splat)"
    if need.condition_arg is not None and not need.strict:
        said = f"{what} without the lock its condition names ({site.call.args[need.condition_arg]})"
    else:
        said = f"{what} outside {need.section}"
    return said + (_UNKNOWN_ENTRY.format(function=site.function.function.name) if worst == "unknown" else "")
