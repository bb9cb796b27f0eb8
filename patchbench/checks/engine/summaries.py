"""Interprocedural summaries: a fixpoint of `flow.walk` over the file's call graph.

    results = summaries.solve(model, names, make_transfer, precondition, inherit)

- `names`: the functions a rule cares about, including those whose summaries give calls an effect
  (e.g. every function that takes a lock); their in-file callers are added (transitively), since
  what a caller holds decides a callee's entry state and a callee's summary changes the caller.
- `make_transfer(results)` returns the rule's Transfer; it may read `results[callee]` (the callee's
  current `Summary`) to give calls of in-file functions their effect, e.g. `Summary.always_exits_with`
  for "exits holding X" or `Summary.takes_and_releases` for "takes and releases X around its body".
  Callees are walked before callers (bottom-up), the whole is repeated until nothing changes.
- `precondition(function)`: facts true on entry whatever the callers do (`__must_hold`, comments).
- `inherit(facts)`: what a caller's facts at one call site give the callee (default: all of them),
  applied per call site before the sites are intersected, so it may also restate facts in a form
  that all sites share; None when callers pass nothing (each function starts from its precondition).
- `report`: the functions whose summaries the rule reads (default: all it was given). Without
  inheritance a caller changes nothing its callees see, so only these and the functions of the
  call graph they call are walked; with it, also the callers of each of those whose entry comes
  from its callers (a function with unknown callers starts from its precondition whoever calls
  it), and so on: each walk depends only on its entry and its callees' summaries, so the others
  cannot change what these get. The others are left out of the result.

A function's entry is `precondition(f) | (facts held at EVERY in-file call site)`; a function with
unknown callers (address taken, registered as a callback, or not static) gets only its precondition.
A cycle of calls (recursion, direct or mutual) is solved from above: its functions first assume
what every call into the cycle from outside holds (and what the entry of a member other files
call gives), and lose what a call inside the cycle does not pass on; starting from nothing
instead, the cycle's calls would pass nothing around and the entry from outside would be lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable

from patchbench.checks.engine import flow
from patchbench.checks.engine.model import FileModel, Function

# Each round passes callers' facts one call further down and callees' summaries one call up, so a
# lock taken five calls above a function needs five rounds; rounds stop as soon as nothing changes,
# and this cap only guards against summaries that never settle (recursion that flips an exit).
ROUNDS = 32


@dataclass
class Summary:
    function: Function
    entry: frozenset               # facts assumed on entry
    result: flow.FlowResult        # the walk from that entry

    @cached_property
    def exits(self) -> frozenset:
        """The distinct states at the returns (a summary is never walked again: a new one is made)."""
        return frozenset(self.result.exit_states())

    def always_exits_with(self) -> frozenset:
        """Facts held at every return that were not held on entry ("exits holding X")."""
        return flow.intersection(self.exits) - self.entry

    def sometimes_exits_with(self) -> frozenset:
        return frozenset().union(*self.exits) - self.entry if self.exits else frozenset()

    def releases(self) -> frozenset:
        """Entry facts gone at every return ("releases X that its caller took")."""
        return self.entry - frozenset().union(*self.exits) if self.exits else frozenset()

    def takes_and_releases(self, fact) -> bool:
        """The fact is gained somewhere inside the body and is gone again at every return."""
        gained = any(fact in state for states in self.result.at_call.values() for state in states)
        return gained and fact not in self.entry and not any(fact in s for s in self.exits)


def _depended_on(model: FileModel, roots: set[str], wanted: set[str], inherited: bool) -> set[str]:
    """roots (those in wanted) and, transitively, what their walks depend on: the functions of
    wanted they call (summaries) and, when callers' facts pass into callees (`inherited`), the
    callers of a function whose entry comes from them (every caller known: see _entry)."""
    found = roots & wanted
    pending = list(found)
    while pending:
        name = pending.pop()
        joined = set(_callees(model, name, wanted))
        if inherited and not model.has_unknown_callers(name):
            joined |= {call.function for call in model.callers.get(name, []) if call.function in wanted}
        for other in joined - found:
            found.add(other)
            pending.append(other)
    return found


def _cycles(callees: dict[str, set[str]]) -> dict[str, frozenset[str]]:
    """Each function that is part of a cycle of calls -> the functions of that cycle (the strongly
    connected components of the call graph with more than one member, or a function calling itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: dict[str, frozenset[str]] = {}
    for root in sorted(callees):
        if root in index:
            continue
        work = [(root, iter(sorted(callees[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            name, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(callees[child]))))
                elif child in on_stack:
                    low[name] = min(low[name], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[name])
            if low[name] == index[name]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == name:
                        break
                if len(members) > 1 or name in callees[name]:
                    found.update({member: frozenset(members) for member in members})
    return found


def bottom_up(model: FileModel, wanted: set[str]) -> list[str]:
    """Callees before callers (depth-first post-order; cycles are cut anywhere)."""
    order: list[str] = []
    seen: set[str] = set()
    for root in sorted(wanted):
        stack = [(root, iter(_callees(model, root, wanted)))]
        seen.add(root)
        while stack:
            name, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                order.append(name)
            elif child not in seen:
                seen.add(child)
                stack.append((child, iter(_callees(model, child, wanted))))
    return order


def _callees(model: FileModel, name: str, wanted: set[str]) -> list[str]:
    return sorted({c.name for c in model.functions[name].calls if c.name in wanted and c.name != name})


def solve(model: FileModel, names: Iterable[str],
          make_transfer: Callable[[dict[str, Summary]], flow.Transfer],
          precondition: Callable[[Function], frozenset] = lambda function: frozenset(),
          inherit: Callable[[frozenset], frozenset] | None = lambda facts: facts,
          report: Iterable[str] | None = None) -> dict[str, Summary]:
    order = bottom_up(model, model.with_callers(names))   # callees first
    if report is not None:
        needed = _depended_on(model, set(report), set(order), inherited=inherit is not None)
        order = [name for name in order if name in needed]   # same relative order: same walks
    callees = {name: set(_callees(model, name, set(order))) for name in order}
    cycles = _cycles(callees) if inherit is not None else {}
    entered_with: dict[frozenset[str], frozenset] = {}   # cycle -> what calls from outside gave it
    entries = {name: precondition(model.functions[name]) for name in order}
    results: dict[str, Summary] = {}
    transfer = make_transfer(results)
    walked: dict[str, int] = {}      # name -> step of its last walk
    changed: dict[str, int] = {}     # name -> step at which its exits last changed
    step = 0
    for _ in range(ROUNDS):
        for name in order:
            if name in walked and not any(changed.get(c, -1) > walked[name] for c in callees[name]):
                continue
            step += 1
            function = model.functions[name]
            previous = results.get(name)
            results[name] = Summary(function, entries[name], flow.walk(function, transfer, entries[name]))
            walked[name] = step
            if previous is None or previous.exits != results[name].exits:
                changed[name] = step
        if inherit is not None:
            assumed = _assume_from_outside(model, results, cycles, entered_with, precondition, inherit)
            for name in order:
                facts = assumed[name] if name in assumed else _entry(model, results, name, precondition, inherit)
                if facts != entries[name]:
                    entries[name] = facts
                    walked.pop(name)   # walk it again from its new entry
        if all(name in walked and not any(changed.get(c, -1) > walked[name] for c in callees[name])
               for name in order):
            break
    return results


def _assume_from_outside(model: FileModel, results: dict[str, Summary], cycles: dict[str, frozenset[str]],
                         entered_with: dict[frozenset[str], frozenset],
                         precondition: Callable[[Function], frozenset],
                         inherit: Callable[[frozenset], frozenset]) -> dict[str, frozenset]:
    """The entries of the members of each cycle whose calls from outside now give something other
    than they gave before: each member assumes all of it (then _entry takes away, round by round,
    what a call inside the cycle does not pass on)."""
    assumed: dict[str, frozenset] = {}
    for cycle in sorted(set(cycles.values()), key=sorted):
        given = []
        for member in sorted(cycle):
            if model.has_unknown_callers(member):
                given.append(precondition(model.functions[member]))
                continue
            for call in model.callers.get(member, []):
                if call.function in cycle:
                    continue
                if call.function not in results:
                    break
                if results[call.function].result.states_at(call):
                    given.append(inherit(results[call.function].result.held_at(call)))
            else:
                continue
            break     # a caller not walked yet: decide next round
        else:
            outside = flow.intersection(given)
            if entered_with.get(cycle) != outside:
                entered_with[cycle] = outside
                assumed.update({member: precondition(model.functions[member]) | outside for member in cycle
                                if not model.has_unknown_callers(member)})
    return assumed


def _entry(model: FileModel, results: dict[str, Summary], name: str,
           precondition: Callable[[Function], frozenset], inherit: Callable[[frozenset], frozenset]) -> frozenset:
    """precondition, plus what every in-file call site holds when all callers are known."""
    facts = precondition(model.functions[name])
    sites = model.callers.get(name, [])
    if not sites or model.has_unknown_callers(name) or any(c.function not in results for c in sites):
        return facts
    held = [inherit(results[c.function].result.held_at(c)) for c in sites if results[c.function].result.states_at(c)]
    return facts | flow.intersection(held) if held else facts
