"""rcu-pointer-escapes: a pointer read inside a read-side section this function opened (by
rcu_dereference*(), srcu_dereference() or list_*_or_null_rcu(), or an alias, an address inside it,
or a pointer loaded straight from it: `dev = rcu_dereference(q->owner)->dev`) is dereferenced or
passed on after the function's own last reader was released, with no reference taken inside the
section, no mutex or RTNL (the update side) held across, and no reader left at the use on some way
in (a caller's section, or BH or preemption off in the calling context, keeps the object alive)."""

from __future__ import annotations

from typing import Iterable

from patchbench.checks.analyses import calling
from patchbench.checks.engine import registry
from patchbench.checks.engine.finding import Finding, Place
from patchbench.checks.engine.model import CallSite, FileModel, Function
from patchbench.checks.analyses.rcu import analysis as A
from patchbench.checks.analyses.rcu import primitives as P

ID = "rcu-pointer-escapes"
SEVERITY = "error"
MESSAGE = "a pointer obtained by rcu_dereference*() is used after its read-side section ended"
# Run by `check` (a patch that moves a use past the unlock, or the unlock above a use), and by
# `lint` only when named (--rules): in existing code a use after the function's own explicit unlock
# is nearly always deliberate, kept alive by something the code does not show (a reference the
# object's owner holds, an object no other context can reach yet, a caller's reader). Of the 13
# whole-tree findings it gave on 6.1 and 7.2, none was true under docs/truth.md (docs/rules.md).
LINT = False

MESSAGES = {
    "deref": "'{variable}' (from {primitive}() inside the read-side section) is dereferenced after the "
             "section ended{also}; use it before the unlock or take a reference inside",
    "pass": "'{variable}' (from {primitive}() inside the read-side section) is passed to a call after "
            "the section ended{also}; use it before the unlock or take a reference inside",
}

MENTIONS = A.MENTIONS
mentioned = A.mentioned


def check(model: FileModel) -> Iterable[Finding]:
    module = registry.rule(ID)
    # one finding per value escaping: its first use after the section, naming the others (the
    # fix is one: move the unlock or take a reference), keyed by the function, the local and
    # the reads it holds the value of
    first: dict[tuple, tuple] = {}
    lines: dict[tuple, list[int]] = {}
    uncertain: dict[tuple, bool] = {}   # every late use was reached only by ways of unknown entry
    for site in A.analyse(model).sites:
        call = site.call
        if call.name != A.USE:
            continue
        var, how = call.args
        # states of ways whose entry is unknown (callers read from other files) count only when
        # no way of known entry reaches the use
        known = [s for s in site.states if A.UNKNOWN not in s]
        states = known or site.states
        # a way on which some reader still holds at the use (a caller's section, BH or preemption
        # off in the calling context) keeps the object alive under consolidated RCU: not a path
        # that goes wrong (docs/truth.md), whatever the function's own section meant
        stale = {f for s in states if not A.kept_alive(s)
                 for f in s if f[0] == "t" and f[1] == var and f[4] == "stale"}
        if not stale:
            continue
        key = (site.function.function.name, var, tuple(sorted({(f[2], f[3], f[5]) for f in stale})))
        line = call.node.start_point[0] + 1
        if key not in first:
            first[key] = (call, min(f[2] for f in stale), how)
            lines[key] = [line]
            uncertain[key] = not known
        else:
            uncertain[key] = uncertain[key] and not known
            if line not in lines[key]:
                lines[key].append(line)
    for key, (call, primitive, how) in first.items():
        # no way of known entry reaches a late use: what the unknown callers hold (a section, BH
        # off) may be just what keeps it alive; `check` warns of a new one, `lint` of a tree keeps
        # quiet, as for rcu-deref-unprotected
        if uncertain[key] and not model.context.reports_unknown():
            continue
        ended = _section_end(model.functions[key[0]], call)
        yield registry.finding(module, model, call.node, key[0], how, "warning" if uncertain[key] else None,
                             related=Place("read-side section ended", ended.line) if ended else None,
                             also=tuple(sorted(lines[key][1:])),
                             because=(f"'{key[1]}' comes from {primitive}() in a section {key[0]}() opened itself",
                                      "no reference taken inside the section, no update-side lock held across "
                                      "it, and a way in reaches the use with no reader left (no caller's "
                                      "section, BH and preemption on)",
                                      *calling.explain(model, key[0])),
                             variable=key[1], primitive=primitive)


def _section_end(function: Function, use: CallSite) -> CallSite | None:
    """The last release of a read-side section in the function before the use."""
    released = [c for c in function.calls if P.SECTIONS.get(c.name, ("rtnl", 0))[0] != "rtnl"
                and P.SECTIONS[c.name][1] < 0 and c.end <= use.start]
    return released[-1] if released else None
