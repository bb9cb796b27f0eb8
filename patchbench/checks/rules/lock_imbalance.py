"""lock-imbalance: a lock taken in a function is still held at one of its returns.

Accepted, not findings: a lock held at returns of a function meant to return it held (a lock
wrapper: `__acquires`, a name like foo_lock(), a comment "returns with ... held"; when held at
EVERY return, also a seq_file `.start` or a function with in-file callers, which release it); a lock held only on the returns that report success (`return true`, a pointer) and not on
those that report failure (`return false/NULL/-EINVAL`): the trylock shape; locks released here
that the caller took; `guard()` locks, which the compiler releases.
"""

from __future__ import annotations

import re
from typing import Iterable

from patchbench.checks import cparse, engine, locks, summaries
from patchbench.checks.finding import Finding
from patchbench.checks.model import FileModel, Function

ID = "lock-imbalance"
SEVERITY = "error"
MESSAGE = "a lock taken in the function is not released on some return path"

# Names of functions meant to return with a lock held: foo_lock(), foo_lock_irqsave(), foo_trylock(), ...
_WRAPPER_NAME = re.compile(r"(^|_)(try)?lock(_bh|_irq\w*|_nested|_shared|_exclusive|_all)?$"
                           r"|lock_sock$|_(acquire|get|begin|start|enter|hold)$", re.IGNORECASE)
_WRAPPER_REGISTRATIONS = {"start", "seq_start"}
# "Returns with the lock held", "leaves rtnl locked": the function comment says it is meant.
_DOCUMENTED = re.compile(r"\b(returns?|exits?|leaves?|left)\b[^.]{0,60}\b(held|locked)\b", re.IGNORECASE)
_FAILURE = re.compile(r"^(NULL|false|0|ERR_PTR\(.*\)|-E\w+|-\d+|-?\w*err\w*|ret)$")


def check(model: FileModel) -> Iterable[Finding]:
    found = cparse.captures(cparse.rule_query(ID), model.tree.root_node)
    takers = {model.function_at(node.start_point[0] + 1) for node in found.get("call", [])}
    names = {f.name for f in takers if f is not None}
    if not names:
        return []
    results = summaries.solve(model, names | locks.lock_functions(model),
                              lambda s: locks.LockTransfer(model, s),
                              precondition=lambda f: _precondition(model, f), inherit=None)
    findings = []
    for name in sorted(names):
        findings.extend(_check_function(model, results[name]))
    return findings


def _precondition(model: FileModel, function: Function) -> frozenset:
    keys = locks.annotated_keys(model, function, "__must_hold", "__releases")
    return frozenset({("held", k) for k in keys} | {("caller", k) for k in keys})


def _check_function(model: FileModel, summary: summaries.Summary) -> list[Finding]:
    function = summary.function
    exits = summary.result.returns
    leaked = {fact[1] for _, state in exits for fact in state
              if fact[0] == "held" and ("caller", fact[1]) not in state and ("scoped", fact[1]) not in state}
    findings = []
    for key in sorted(leaked):
        holding = [(node, state) for node, state in exits if ("held", key) in state]
        releasing = [(node, state) for node, state in exits if ("held", key) not in state]
        if _intended(model, function, key, holding, releasing):
            continue
        node = min((n for n, _ in holding), key=lambda n: n.start_byte)
        spelled = _spelling(model, function, key)
        findings.append(engine.finding(
            engine.rule(ID), model, node, function.name,
            f"{spelled} taken in {function.name}() is still held at this return"
            + (" (released on other paths)" if releasing else "")))
    return findings


def _intended(model: FileModel, function: Function, key: str, holding, releasing) -> bool:
    acquires = locks.annotated_keys(model, function, "__acquires")
    if key in acquires or _WRAPPER_NAME.search(function.name) or _DOCUMENTED.search(function.comment):
        return True
    if not releasing:
        return bool(model.registrations.get(function.name, set()) & _WRAPPER_REGISTRATIONS
                    or model.callers.get(function.name))
    held_values = {_returned(model, node) for node, _ in holding}
    free_values = {_returned(model, node) for node, _ in releasing}
    return (all(v is not None and not _FAILURE.match(v) for v in held_values)
            and all(v is not None and _FAILURE.match(v) for v in free_values))


def _returned(model: FileModel, node) -> str | None:
    if node.type != "return_statement" or node.named_child_count == 0:
        return None
    return cparse.node_text(model.source, node.named_children[0]).strip()


def _spelling(model: FileModel, function: Function, key: str) -> str:
    """How the source names the lock: the argument text of its first acquisition."""
    transfer = locks.LockTransfer(model)
    for call in function.calls:
        found = transfer.op(call)
        if found and found[1] == key:
            return f"{call.name}({', '.join(call.args)})"
    return key
