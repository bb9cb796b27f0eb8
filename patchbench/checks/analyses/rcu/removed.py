"""Read-side sections a patch removed (a module of helpers for rcu-deref-unprotected: no rule ID).

`patchbench check` shows the rules each file beside its text in the patch's parent
(`FileModel.previous`). A function that had more explicit read-side sections there
(`rcu_read_lock*()`, `srcu_read_lock()`, `guard(rcu)()`, ...) than it has now lost one: the patch
took away the protection its author (or a later fix) put around that code. What the removed
section covered (the parent's lines from its first open to its last close, mapped onto the
patch's lines by a line diff of the function) is then judged on what the kernel's lockdep checks,
not on what the lint of existing code tolerates:

- a dereference primitive needs its own flavour (`rcu_dereference()` under `rcu_read_lock()`, not
  under `local_bh_disable()`); an RCU list walk without a lockdep condition needs a reader of any
  flavour or a non-preemptible section (CONFIG_PROVE_RCU_LIST's `rcu_read_lock_any_held()`),
  not RTNL or a mutex;
- a callee another file defines that reads under its caller's section (the call index's
  `needs`) needs the flavour its read names; an in-file callee needs what its own body reads
  without a section of its own (summarised here, callees of callees included);
- a helper named `*_rcu`, or a call the facts table lists in `[rcu.removal]` (reads that check
  nothing, such as `dev_net()`, and running a BPF program), needs a reader of any flavour;
- an entry state that is not established does not stand in for the removed section.

Code that always read so is never judged this way: only a patch that removes the section is.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.engine.context import TreeContext
from patchbench.checks.engine.model import CallSite, Function
from patchbench.checks.analyses.rcu import functions as F
from patchbench.checks.analyses.rcu import primitives as P
from patchbench.checks.analyses.rcu import analysis as rcu_analysis
from patchbench.checks.analyses.rcu.sections_removed import removed_sections

# Readers a removed section's code may be judged against: every reader family.
ANY_READER = P.READERS
# Calls judged only where a patch removed the section around them (kernel facts table).
REMOVAL = {name: entry for name, entry in kfacts.table()["rcu"].get("removal", {}).items()}
# In-file call depth of the summaries.
DEPTH = 4


# rcu-deref-unprotected's messages for what a removed section covered, and for a read taken out of one
_GONE = {"removed-section": "{call}() needs {what}{inner}: this patch removes the {opener}() section that "
                            "covered it",
         "moved-out-of-section": "{call}() needs {what}{inner}: this patch moves it out of the {opener}() "
                                 "section that covered it"}
MESSAGES = {kind + suffix: said + more for kind, said in _GONE.items() for suffix, more in (
    ("", ""),
    ("-splat", "; what is held here instead (another RCU flavour, or the update-side lock) keeps the object "
               "alive but is a lockdep splat"),
    ("-unknown-entry", "; what {function}() holds on entry is not established"))}


# -- what a call needs, judged as lockdep does -------------------------------------------------

@dataclass(frozen=True)
class Want:
    """What one call needs: families that satisfy it, whether the update side (a sleeping lock)
    keeps it alive (then its absence of a reader is a lockdep splat, not a use after free), and
    how messages say it."""
    families: frozenset
    update_side_alive: bool
    what: str


def want_of(call: CallSite, helpers: dict, requires_reader: set[str], context: TreeContext,
            removal: bool = True) -> Want | None:
    """What `call` needs when a removed section covered it (None: nothing), without in-file
    callee summaries (see Judge); `removal`: the [rcu.removal] calls too (not in a callee's
    summary: a callee that calls dev_net() outside a section has always done so)."""
    name = call.name
    if helpers.get(name) is F.NO_NEED:
        return None
    need = P.DEREFERENCES.get(name)
    if need is not None:
        if need.condition_arg is None and not need.strict:
            return None
        return Want(need.strict, need.update_side or "rtnl" in need.strict, need.section)
    if name in helpers and helpers[name].reason:      # a read in another file (the call index)
        summary = context.need(name)
        read = P.DEREFERENCES.get(summary[0]) if summary else None
        families = read.strict if read is not None else ANY_READER
        return Want(families, True, read.section if read is not None else "an RCU read-side section")
    if name in requires_reader or name in helpers or P.named_helper(name):
        return Want(ANY_READER, True, "an RCU read-side section")
    entry = REMOVAL.get(name) if removal else None
    if entry is not None:
        families = ANY_READER | frozenset(entry.get("also", ()))
        return Want(frozenset(families), True, "an RCU read-side section")
    return None


# -- judging what a removed section covered ----------------------------------------------------

def _own(state: frozenset) -> frozenset:
    """The facts a function holds by itself: its callers' and its context's dropped."""
    return frozenset(f for f in state if not (f[0] == "r" and f[3] in ("entry", "context"))
                     and not (f[0] == "lock" and f[2] in ("entry", "context")) and f[0] != "unknown")


def _alternative(function: Function) -> bool:
    """The comment stating the function's reader precondition names an alternative ("Called
    with the table's mutex or RCU read lock"): callers hold one of them, not necessarily a reader."""
    return any(P.names_alternative(text, "rcu") for text in (function.comment or "", function.body_comment or ""))


class Judge:
    """Wants of calls (in-file callees summarised) and verdicts, over one file's analysis."""

    def __init__(self, analysis):
        self.A = rcu_analysis
        self.analysis = analysis
        self.requires_reader = {name for name, info in analysis.infos.items() if info.requires_reader}
        self.summaries: dict[str, list[tuple[Want, CallSite]]] = {}
        self.entries: dict[str, tuple[frozenset, bool]] = {}

    def entry(self, name: str, depth: int = 0) -> tuple[frozenset, bool]:
        """(facts held on every way into `name`, whether some way is of unknown state): its
        stated precondition, and what each registration context, caller elsewhere (the call
        index) and in-file caller (what it holds itself at the call, plus its own such entry)
        provides. Unlike the analysis' entry, a way of unknown state is not left out: it
        provides nothing, for a removed section is not made up for by what might be held."""
        if name in self.entries:
            return self.entries[name]
        self.entries[name] = (frozenset(), True)      # a cycle, or too deep: nothing known
        A, analysis = self.A, self.analysis
        model, info = analysis.model, analysis.infos[name]
        ways = list(A.ways_in(model, model.functions[name]))
        unknown = not ways and not model.callers.get(name)
        for call in model.callers.get(name, []):
            result = analysis.results.get(call.function)
            states = result.states_at(call) if result is not None else set()
            if not states or depth >= DEPTH:
                ways.append(A.UNKNOWN_WAY)
                continue
            above, above_unknown = self.entry(call.function, depth + 1)
            unknown |= above_unknown
            caller = analysis.infos[call.function]
            ways.extend(A.inherited(_own(state), caller, call.start) | above for state in states)
        common = None
        for way in ways:
            unknown |= A.UNKNOWN in way or way == A.UNKNOWN_WAY
            held = {f[:2] for f in way if f[0] in ("r", "lock")}
            common = held if common is None else common & held
        facts = frozenset(("r", f[1], 1, "entry") if f[0] == "r" else ("lock", f[1], "entry")
                          for f in sorted(common or ()))
        stated = frozenset(f for f in info.precondition if f[0] in ("r", "lock"))
        if _alternative(model.functions[name]):
            stated = frozenset(f for f in stated if f[0] != "r" or f[1] == "rtnl")
        self.entries[name] = (facts | stated, unknown)
        return self.entries[name]

    def wants(self, call: CallSite, depth: int = 0) -> list[tuple[Want, CallSite | None]]:
        """What the call needs: its own want, or (an in-file callee) what the callee reads
        without a section of its own, with the inner call that needs it."""
        want = want_of(call, self.analysis.helpers, self.requires_reader, self.analysis.model.context,
                       removal=depth == 0)
        if want is not None:
            return [(want, None)]
        if call.name in self.analysis.infos and call.name != call.function and \
                call.name not in self.analysis.section_effects and depth < DEPTH:
            return list(self.summary(call.name, depth + 1))
        return []

    def summary(self, name: str, depth: int) -> list[tuple[Want, CallSite]]:
        if name in self.summaries:
            return self.summaries[name]
        self.summaries[name] = []          # a recursive call needs nothing more
        info = self.analysis.infos[name]
        result = self.analysis.results.get(name)
        found: dict[Want, CallSite] = {}
        if result is not None:
            for call in info.function.calls:
                if call.name == F.USE:
                    continue
                for want, inner in self.wants(call, depth):
                    if want not in found and any(self.verdict(_own(s), want, call, info) != "ok"
                                                 for s in result.states_at(call)):
                        found[want] = inner or call
        self.summaries[name] = sorted(found.items(), key=lambda item: (item[1].start, item[0].what))
        return self.summaries[name]

    def verdict(self, state: frozenset, want: Want, call: CallSite, info) -> str:
        """ok | splat (another flavour, or the update-side lock: lockdep's complaint, the object
        kept alive) | unknown (nothing held, and the entry is not established) | missing."""
        A, analysis = self.A, self.analysis
        families, locks = A.effective(state, info, call.start)
        need = P.DEREFERENCES.get(call.name)
        if need is not None and need.condition_arg is not None and need.condition_arg < len(call.args) and \
                A.condition_satisfied(analysis, info, call, need.condition_arg, families, locks):
            return "ok"
        if families & want.families:
            return "ok"
        if families & P.KEEPS_ALIVE or (want.update_side_alive and
                                        A.update_side_held(state, info, call.start, analysis.mutexes)):
            return "splat"
        return "missing"


_RANK = {"ok": 0, "splat": 1, "unknown": 2, "missing": 3}


def findings(analysis, reported: set[int]) -> list[tuple[CallSite, str, str | None, str, dict[str, str]]]:
    """(call, function, severity or None for the rule's, message name, its arguments; see
    MESSAGES) for each call a section this patch removed covered that now lacks what it needs;
    calls in `reported` (starts) are skipped."""
    removed = removed_sections(analysis.model)
    if not removed:
        return []
    judge = Judge(analysis)
    out = []
    for name, gone in sorted(removed.items()):
        info, result = analysis.infos.get(name), analysis.results.get(name)
        if info is None or result is None:
            continue
        for call in info.function.calls:
            if call.name == F.USE or call.line not in gone.lines or call.start in reported:
                continue
            worst, said = "ok", None
            entry, unknown = judge.entry(name)
            for want, inner in judge.wants(call):
                for state in result.states_at(call):
                    verdict = judge.verdict(_own(state) | entry, want, call, info)
                    if verdict == "missing" and unknown:
                        verdict = "unknown"
                    if _RANK[verdict] > _RANK[worst]:
                        worst, said = verdict, (want, inner)
            if worst == "ok":
                continue
            want, inner = said
            where = f" (for {inner.name}() at line {inner.line})" if inner is not None else ""
            kind = ("moved-out-of-section" if gone.moved else "removed-section") + \
                {"splat": "-splat", "unknown": "-unknown-entry"}.get(worst, "")
            out.append((call, name, None if worst == "missing" else "warning", kind,
                        {"call": call.name, "what": want.what, "inner": where, "opener": gone.opener,
                         "function": name}))
    return out
