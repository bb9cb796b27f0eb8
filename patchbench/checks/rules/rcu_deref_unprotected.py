"""rcu-deref-unprotected: an rcu_dereference*() (or a call needing a read-side section) reached,
on some path, without the section, lock or RTNL it needs; nor a caller or context providing it.

Another flavour's section (rcu_read_lock_bh() for rcu_dereference(), NAPI for rcu_dereference())
keeps the object alive but splats under PROVE_RCU: reported as a warning. Dereferencing the
result of rcu_access_pointer() is reported outside any read-side section.
"""

from __future__ import annotations

from typing import Iterable

from patchbench.checks.engine import parse as cparse
from patchbench.checks.engine import registry
from patchbench.checks.analyses import calling
from patchbench.checks.engine.context import TreeContext
from patchbench.checks.engine.finding import Finding
from patchbench.checks.engine.model import FileModel
from patchbench.checks.analyses.rcu import analysis as A
from patchbench.checks.analyses.rcu import functions as F
from patchbench.checks.analyses.rcu import primitives as P
from patchbench.checks.analyses.rcu import removed as rcu_removed

ID = "rcu-deref-unprotected"
SEVERITY = "error"
MESSAGE = "rcu_dereference*() used outside the read-side section, lock or RTNL it needs"

_UNKNOWN_ENTRY = ("; what {function}() holds on entry is not established (no caller or registration "
                  "with a known calling context, or only callers read from other files)")
_BY_NAME = " (its body unread: its name follows the kernel's *_rcu convention for a callee of a section)"
MESSAGES = {
    "access-alias": "'{variable}' holds rcu_access_pointer()'s value and is dereferenced outside a "
                    "read-side section",
    "access": "rcu_access_pointer() result dereferenced outside a read-side section",
    "callee-needs": "{call}() needs an RCU read-side section and is called outside one{reason}",
    "callee-needs-unknown-entry": "{call}() needs an RCU read-side section and is called outside "
                                  "one{reason}" + _UNKNOWN_ENTRY,
    # a callee whose body the checker did not read, known only by the [rcu.helpers] convention
    "callee-needs-by-name": "{call}() needs an RCU read-side section and is called outside one" + _BY_NAME,
    "callee-needs-by-name-unknown-entry": "{call}() needs an RCU read-side section and is called outside "
                                          "one" + _BY_NAME + _UNKNOWN_ENTRY,
    "callee-under-rtnl": "{call}() needs an RCU read-side section and is called under RTNL only{reason}: "
                         "RTNL keeps what it reads alive, but lockdep reports the read (PROVE_RCU)",
    "under-rtnl": "{call}() under RTNL without {section} (lockdep splat): RTNL is the update side, "
                  "use rtnl_dereference() or rcu_dereference_rtnl()",
    "other-flavour": "{call}() without {section}: only another RCU flavour protects it (lockdep splat)",
    "condition-lock": "{call}() without the lock its condition names ({condition})",
    "condition-lock-unknown-entry": "{call}() without the lock its condition names ({condition})" + _UNKNOWN_ENTRY,
    "outside": "{call}() outside {section}",
    "outside-unknown-entry": "{call}() outside {section}" + _UNKNOWN_ENTRY,
    **rcu_removed.MESSAGES,
}

_RANK = {"ok": 0, "weak": 1, "rtnl": 1, "missing": 2}

MENTIONS = A.MENTIONS
mentioned = A.mentioned


def reaches(source: bytes, context: TreeContext) -> bool:
    return context.calls_a_need(source)


def check(model: FileModel) -> Iterable[Finding]:
    found = list(_check(model))
    if model.context.reports_unknown():
        return found
    return _by_function(model, found)


def _by_function(model: FileModel, found: list[Finding]) -> list[Finding]:
    """`lint` of a tree: one finding per function and severity, at its first line, naming the
    others (each read the function makes outside the section it lacks on the same ways in: the
    fix is one section). `check` keeps one per read: it shows only the reads a patch adds."""
    module = registry.rule(ID)
    groups: dict[tuple, list[Finding]] = {}
    for finding in found:
        groups.setdefault((finding.function, finding.severity), []).append(finding)
    merged = []
    for group in groups.values():
        group.sort(key=lambda f: f.line)
        first = group[0]
        also = tuple(sorted({f.line for f in group[1:]} - {first.line}))
        if not also:
            merged.append(first)
            continue
        merged.append(registry.finding(module, model, first.line, first.function, first.kind, first.severity,
                                       also=also, because=first.because, **dict(first.args)))
    return sorted(merged, key=lambda f: f.line)


def _check(model: FileModel) -> Iterable[Finding]:
    module = registry.rule(ID)
    analysis = A.analyse(model)
    dereferenced = set()
    if P.ACCESS.encode() in model.source:   # the query only matches its calls: skip the tree walk
        dereferenced = set(cparse.captures(cparse.rule_query(ID), model.tree.root_node).get("call", []))
    reported = set()
    for site in analysis.sites:
        call, name = site.call, site.function.function.name
        if call.name != A.USE and F.stack_private(model, site.function.function, call):
            continue
        if call.name == A.USE:
            if call.args[1] == "deref" and any(("a", call.args[0]) in s and not _kept(s, site, analysis)
                                               for s in site.states):
                yield registry.finding(module, model, call.node, name, "access-alias",
                                       because=calling.explain(model, name), variable=call.args[0])
            continue
        if call.name == P.ACCESS:
            if call.node in dereferenced and site.states and \
                    not all(_kept(s, site, analysis) for s in site.states):
                yield registry.finding(module, model, call.node, name, "access", because=calling.explain(model, name))
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
        if uncertain and not model.context.reports_unknown():
            continue   # what the unknown callers hold may be just what is needed (lint of a tree)
        if uncertain and site.need.update_only:
            # rcu_dereference_protected(p, lockdep_is_held(&l)), rtnl_dereference(): where no
            # caller is known, the condition is the function's own statement of what its callers
            # hold, as a lockdep_assert_held() would be (a callback handed to a table iterator
            # that calls it under the table's lock)
            continue
        if worst == "missing" and uncertain:
            worst = "unknown"
        reported.add(call.start)
        kind, args = _message(site, worst)
        lacking = A.lacking_way(analysis, site)
        yield registry.finding(module, model, call.node, name, kind,
                               "warning" if worst in ("weak", "rtnl", "unknown") else None,
                               because=((lacking,) if lacking else ()) + calling.explain(model, name), **args)
    # `check`: what a read-side section the patch removed covered, judged as lockdep does
    for call, name, severity, kind, args in rcu_removed.findings(analysis, reported):
        yield registry.finding(module, model, call.node, name, kind, severity,
                               because=calling.explain(model, name), **args)


def _reader(state: frozenset, site: A.Site) -> bool:
    families, _ = A.effective(state, site.function, site.call.start)
    return bool(families & P.READERS)


def _kept(state: frozenset, site: A.Site, analysis: A.Analysis) -> bool:
    """rcu_access_pointer()'s value may be dereferenced here: inside a read-side section, or on
    the update side (RTNL or a mutex held: the writer, who frees the object, is excluded)."""
    return _reader(state, site) or \
        A.update_side_held(state, site.function, site.call.start, analysis.mutexes)


def _message(site: A.Site, worst: str) -> tuple[str, dict[str, str]]:
    """The message's name and arguments for a site judged `worst`."""
    call, need = site.call, site.need
    unknown = "-unknown-entry" if worst == "unknown" else ""
    entry = {"function": site.function.function.name} if unknown else {}
    if call.name not in P.DEREFERENCES:
        if worst == "weak":
            return "callee-under-rtnl", {"call": call.name, "reason": need.reason}
        named = "-by-name" if need.named else ""
        return "callee-needs" + named + unknown, {"call": call.name, "reason": need.reason, **entry}
    if worst == "rtnl":
        return "under-rtnl", {"call": call.name, "section": need.section}
    if worst == "weak":
        return "other-flavour", {"call": call.name, "section": need.section}
    if need.condition_arg is not None and not need.strict:
        return "condition-lock" + unknown, {"call": call.name, "condition": call.args[need.condition_arg], **entry}
    return "outside" + unknown, {"call": call.name, "section": need.section, **entry}
