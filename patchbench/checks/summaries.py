"""Interprocedural summaries: a fixpoint of `flow.walk` over the file's call graph.

    results = summaries.solve(model, names, make_transfer, precondition, inherit)

- `names`: the functions a rule cares about; their in-file callers are added (transitively), since
  what a caller holds decides a callee's entry state, and the in-file callees of all of these,
  whose summaries give calls their effect.
- `make_transfer(results)` returns the rule's Transfer; it may read `results[callee]` (the callee's
  current `Summary`) to give calls of in-file functions their effect, e.g. `Summary.always_exits_with`
  for "exits holding X" or `Summary.takes_and_releases` for "takes and releases X around its body".
  Callees are walked before callers (bottom-up), the whole is repeated until nothing changes.
- `precondition(function)`: facts true on entry whatever the callers do (`__must_hold`, comments).
- `inherit(facts)`: the part of a caller's facts that passes into a callee (default: all).

A function's entry is `precondition(f) | (facts held at EVERY in-file call site)`; a function with
unknown callers (address taken, registered as a callback, or not static) gets only its precondition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from patchbench.checks import flow
from patchbench.checks.model import FileModel, Function

ROUNDS = 4


@dataclass
class Summary:
    function: Function
    entry: frozenset               # facts assumed on entry
    result: flow.FlowResult        # the walk from that entry

    @property
    def exits(self) -> set:
        return self.result.exit_states()

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


def _with_callers_and_callees(model: FileModel, names: Iterable[str]) -> list[str]:
    """names, their in-file callers (transitively), and every in-file callee of those."""
    wanted = {n for n in names if n in model.functions}
    pending = list(wanted)
    while pending:
        for call in model.callers.get(pending.pop(), []):
            if call.function and call.function not in wanted:
                wanted.add(call.function)
                pending.append(call.function)
    pending = list(wanted)
    while pending:
        for call in model.functions[pending.pop()].calls:
            if call.name in model.functions and call.name not in wanted:
                wanted.add(call.name)
                pending.append(call.name)
    return _bottom_up(model, wanted)


def _bottom_up(model: FileModel, wanted: set[str]) -> list[str]:
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
          inherit: Callable[[frozenset], frozenset] = lambda facts: facts) -> dict[str, Summary]:
    order = _with_callers_and_callees(model, names)
    entries = {name: precondition(model.functions[name]) for name in order}
    results: dict[str, Summary] = {}
    transfer = make_transfer(results)
    for _ in range(ROUNDS):
        previous_exits = {name: s.exits for name, s in results.items()}
        for name in order:
            function = model.functions[name]
            results[name] = Summary(function, entries[name], flow.walk(function, transfer, entries[name]))
        new_entries = {}
        for name in order:
            function = model.functions[name]
            facts = precondition(function)
            sites = [c for c in model.callers.get(name, []) if c.function in results]
            if sites and not model.has_unknown_callers(name) and \
                    len(sites) == len(model.callers.get(name, [])):
                held = [results[c.function].result.held_at(c) for c in sites
                        if results[c.function].result.states_at(c)]
                if held:
                    facts = facts | inherit(flow.intersection(held))
            new_entries[name] = facts
        stable = new_entries == entries and previous_exits == {n: s.exits for n, s in results.items()}
        entries = new_entries
        if stable:
            break
    return results
