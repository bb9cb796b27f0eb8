"""The lost wake-up guard of a matched stop (RULES.md (c) 3 and 4), as warnings.

- A stop issued after the work was handed to the completer (urb submitted, ring produced, host
  notified) must be followed by a re-check that restarts the queue, or share a lock with the
  completion side; otherwise a completion in between is missed. Unless the stop is decided by a
  count of work in flight that every waking completion updates (USB CAN drivers: stop with all tx
  URBs submitted, wake in each URB's completion): the stop then happens with that many
  completions to come, and each of them wakes again (only a driver with a single buffer in
  flight, which needs no count, loses the wake-up). Or unless the wake is in a callback that
  re-arms itself to run periodically (an interrupt URB's completion polling the device): it tests
  again at its next run. Or unless the stop is followed by handing work or a kick to the
  completion side (a virtual pair: stop, then schedule the peer's NAPI): the completion runs after the stop.
- A driver following pattern (ii) (stop, full barrier, re-check; completion: publish the index,
  full barrier, test stopped, wake) needs the barrier on both sides.

With many buffers in flight the windows rarely matter, hence warnings.
"""

from __future__ import annotations

import re

from patchbench.checks.engine import flow
from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.engine import summaries
from patchbench.checks.engine.model import CallSite, FileModel, Function
from patchbench.checks.analyses.queue.sides import STOPPED_TESTS, Sides
from patchbench.checks.analyses.queue.sites import SELF_CHECKING_STOPS, STOP_UNMATCHED, QueueSite, QueueSites, Verdict, same_queue

# Calls that hand transmitted work to the side that completes it; barriers (kernel facts table).
PUBLISH = re.compile(kfacts.table()["queue"]["publish"])
_KICK = re.compile(kfacts.table()["queue"]["kick"])
BARRIER = re.compile(kfacts.table()["queue"]["full_barrier"])
_PARTIAL_BARRIERS = kfacts.names("queue", "partial_barrier")
_STORES = kfacts.names("queue", "stores")
_IN_FLIGHT_READ = re.compile(r"\b(?:" + "|".join(sorted(kfacts.names("queue", "in_flight_reads"))) +
                             r")\s*\(\s*&?\s*([\w.>\[\]-]+)\s*\)")
_IN_FLIGHT_UPDATES = kfacts.names("queue", "in_flight_updates")
_PERIODIC = kfacts.table()["queue"]["periodic"]
# The transmit lock ndo_start_xmit runs under; completions that take it are serialised with xmit.
TX_LOCK = "netdev_queue._xmit_lock"


def _lock_action(call: CallSite) -> str | None:
    """"take" / "try" / "drop" for a spinlock or mutex call with a lock argument; "tx_take" /
    "tx_try" / "tx_drop" for the transmit queue locks; None otherwise."""
    op = kfacts.lock_op(call.name)
    if op is None:
        return None
    action = {"acquire": "take", "try_fail": "take", "try": "try", "release": "drop"}.get(op.action)
    if action is None:
        return None
    if op.kind in ("tx", "netif_tx"):
        return "tx_" + action
    if op.kind in ("spin", "mutex") and call.args:
        return action
    return None


class QueueFacts(flow.Transfer):
    """Locks held, work published, and the stops not yet undone by a start/wake, on each path."""

    def __init__(self, model: FileModel, found: QueueSites, stops: list[QueueSite], publishers: set[str]):
        self.model = model
        self.found = found
        self.publishers = publishers
        self.kickers = _closure(model, lambda f: any(_KICK.match(c.name) for c in f.calls)) | publishers
        # a call of a wrapper is a site per queue it may name
        self.stops: dict[CallSite, list[QueueSite]] = {}
        for stop in stops:
            self.stops.setdefault(stop.call, []).append(stop)
        self.restarts: dict[CallSite, list[QueueSite]] = {}
        for site in found.sites:
            if site.action in ("start", "wake"):
                self.restarts.setdefault(site.call, []).append(site)

    def call(self, state, call: CallSite):
        action = _lock_action(call)
        if action == "take":
            return state | {("lock", self.lock_key(call))}
        if action == "drop":
            return state - {("lock", self.lock_key(call))}
        if action == "tx_take":
            return state | {("lock", TX_LOCK)}
        if action == "tx_drop":
            return state - {("lock", TX_LOCK)}
        if PUBLISH.match(call.name) or call.name in self.publishers:
            return state | {("published", call.name)}
        if call in self.stops:
            return state | {("stopped", call.start)}
        restarts = self.restarts.get(call)
        if restarts is not None:
            return frozenset(f for f in state if f[0] != "stopped" or not any(
                same_queue(stop, restart, self.found) for stop in self.stops_at(f[1]) for restart in restarts))
        return state

    def assume(self, state, call: CallSite, truth: bool):
        action = _lock_action(call) if truth else None
        if action == "try":
            return state | {("lock", self.lock_key(call))}
        if action == "tx_try":
            return state | {("lock", TX_LOCK)}
        return state

    def stops_at(self, offset: int) -> list[QueueSite]:
        return next(stops for call, stops in self.stops.items() if call.start == offset)

    def handed_after(self, stop: QueueSite, result: flow.FlowResult) -> bool:
        """Some path from the stop hands work to, or schedules, the completion side."""
        return any(call.start > stop.call.start and (PUBLISH.match(call.name) or _KICK.match(call.name)
                                                     or call.name in self.kickers)
                   and any(("stopped", stop.call.start) in state for state in states)
                   for call, states in result.at_call.items())

    def rechecks(self, stop: QueueSite, result: flow.FlowResult) -> list[CallSite]:
        """Starts or wakes of one queue that some path from the stop reaches in the same function."""
        return [call for call, states in result.at_call.items()
                if call.start > stop.call.start and any(site.scope == "one" for site in self.restarts.get(call, ()))
                and any(("stopped", stop.call.start) in state for state in states)]

    def lock_key(self, call: CallSite) -> str:
        # by the lock's field name: `&queue->tx_lock` in xmit and in the completion are one lock
        # even where the two functions reach the queue through differently typed variables
        key = self.model.canonical(self.model.functions.get(call.function), call.args[0])
        return key.rsplit(".", 1)[-1]


def lost_wakeup(stop: QueueSite, wakes: list[QueueSite], results: dict[str, summaries.Summary],
                 facts: QueueFacts, sides: Sides) -> Verdict | None:
    """A stop after publishing to the completer, with no re-check and no lock shared with the wake."""
    if stop.spelling in SELF_CHECKING_STOPS:
        return None
    result = results[stop.function.name].result
    states = result.states_at(stop.call)
    published = sorted({fact[1] for state in states for fact in state if fact[0] == "published"})
    if not published or facts.rechecks(stop, result) or facts.handed_after(stop, result):
        return None
    if shares_lock(stop, wakes, results, facts, sides):
        return None
    if _counted(facts.model, stop, wakes) or any(_periodic(facts.model, wake.function) for wake in wakes):
        return None
    return Verdict(STOP_UNMATCHED, stop, "lost-wakeup", {"stop": stop.written, "publisher": published[0]},
                   "warning")


def shares_lock(stop: QueueSite, wakes: list[QueueSite], results: dict[str, summaries.Summary],
                facts: QueueFacts, sides: Sides) -> bool:
    """The stop is made under a lock (the transmit lock included) that a wake of its queue, or the
    completion side's ring update, also holds: the two cannot interleave."""
    held = {fact[1] for fact in results[stop.function.name].result.held_at(stop.call) if fact[0] == "lock"} | {TX_LOCK}
    return any(held & _locks_at(results, w) for w in wakes) or bool(held & _consumer_locks(facts, sides))


def _counted(model: FileModel, stop: QueueSite, wakes: list[QueueSite]) -> bool:
    """The stop is taken under a test of a count of work in flight (`atomic_read(&dev->active_tx_urbs)
    >= MAX`) that a function waking the queue updates (`atomic_dec(&dev->active_tx_urbs)`)."""
    counted = {_last_field(match) for condition in _guards(model, stop.call.node)
               for match in _IN_FLIGHT_READ.findall(condition)}
    return any(call.name in _IN_FLIGHT_UPDATES and call.args and _last_field(call.args[0]) in counted
               for wake in wakes for call in wake.function.calls)


def _periodic(model: FileModel, function: Function) -> bool:
    """The function is a callback that re-arms itself (queue.periodic of the facts table)."""
    rearms = {rearm for registration, (position, rearm) in _PERIODIC.items()
              for other in model.functions.values() for call in other.calls
              if call.name == registration and len(call.args) > position
              and call.args[position].lstrip("&") == function.name}
    return any(call.name in rearms for call in function.calls)


def _guards(model: FileModel, node) -> list[str]:
    """The conditions of the `if` statements whose then-branch holds node."""
    found = []
    while node.parent is not None and node.type != "function_definition":
        parent = node.parent
        if parent.type == "if_statement" and parent.child_by_field_name("consequence") == node:
            found.append(model.text(parent.child_by_field_name("condition")))
        node = parent
    return found


def _last_field(expression: str) -> str:
    return re.split(r"->|\.", expression.lstrip("&( "))[-1].strip(" )")


def unordered(model: FileModel, stop: QueueSite, wakes: list[QueueSite],
              results: dict[str, summaries.Summary], barriers: set[str], facts: QueueFacts) -> list[Verdict]:
    """A driver following pattern (ii) of RULES.md (stop, full barrier, re-check; completion:
    publish the index, full barrier, test stopped, wake) needs the barrier on both sides. A side
    missing it while the other has it is reported; drivers with neither (old ISA and USB drivers
    that rely on their interrupt structure) are left alone."""
    if stop.spelling in SELF_CHECKING_STOPS:
        return []
    rechecks = facts.rechecks(stop, results[stop.function.name].result)
    if not rechecks:
        return []
    first = min(call.start for call in rechecks)
    # a read or write barrier right between stop and re-check shows the ordering was thought
    # about (jme, mlx4): not flagged, though only a full barrier orders the two
    stop_full = _barrier_before(stop.function, first, barriers)
    stop_fenced = stop_full or any(c.name in _PARTIAL_BARRIERS and stop.call.end <= c.start < first
                                   for c in stop.function.calls)
    tested = {}
    for wake in wakes:
        tests = [c for c in wake.function.calls if c.name in STOPPED_TESTS and c.start < wake.call.start]
        if tests and not _locks_at(results, wake):
            tested[wake] = _ordered_before(model, wake.function, tests[-1].start, barriers), tests[-1]
    verdicts = []
    if not stop_fenced and any(fenced for fenced, _ in tested.values()):
        verdicts.append(Verdict(STOP_UNMATCHED, stop, "recheck-no-barrier", {"stop": stop.written}, "warning"))
    if stop_full:
        verdicts.extend(Verdict(STOP_UNMATCHED, wake, "wake-test-no-barrier",
                                {"test": test.name, "wake": wake.written, "stopper": stop.function.name},
                                "warning", stop=stop)
                        for wake, (fenced, test) in tested.items() if not fenced)
    return verdicts


def _barrier_before(function: Function, offset: int, barriers: set[str]) -> bool:
    return any(c.start < offset and (BARRIER.match(c.name) or c.name in barriers) for c in function.calls)


def _fenced_before(function: Function, offset: int, barriers: set[str]) -> bool | None:
    """Whether the last full barrier before `offset` in the function orders what the function
    stored before it: True when no store to shared memory (a field assigned or updated, a
    `[queue] stores` call) lies between that barrier and offset, False when one does (the store,
    a ring index published after the barrier, may pass the test at offset), None when the
    function has no barrier before offset."""
    fences = [c for c in function.calls
              if c.end <= offset and (BARRIER.match(c.name) or c.name in barriers)]
    if not fences:
        return None
    after = max(c.end for c in fences)
    if any(c.name in _STORES and after <= c.start < offset for c in function.calls):
        return False
    return not any(after <= node.start_byte < offset and _is_field(node.child_by_field_name(
        "left" if node.type == "assignment_expression" else "argument"))
        for node in function.shapes.get("assignment", []) + function.shapes.get("update", []))


def _is_field(node) -> bool:
    while node is not None and node.type in ("subscript_expression", "parenthesized_expression"):
        node = node.child_by_field_name("argument") or node.named_child(0)
    return node is not None and node.type == "field_expression"


def _ordered_before(model: FileModel, function: Function, offset: int, barriers: set[str],
                    depth: int = 0) -> bool:
    """A full barrier runs before offset in the function, with no store between them, or before
    every in-file call of it (a wake helper called right after its caller's smp_mb())."""
    fenced = _fenced_before(function, offset, barriers)
    if fenced is not None:
        return fenced
    sites = model.callers.get(function.name, [])
    if depth >= 2 or not sites or model.has_unknown_callers(function.name):
        return False
    return all(site.function in model.functions and _ordered_before(
        model, model.functions[site.function], site.start, barriers, depth + 1) for site in sites)


def barrier_functions(model: FileModel) -> set[str]:
    """In-file functions that (transitively) execute a full barrier."""
    return _closure(model, lambda f: any(BARRIER.match(c.name) for c in f.calls))


def _locks_at(results: dict[str, summaries.Summary], wake: QueueSite) -> set[str]:
    summary = results.get(wake.function.name)
    if summary is None:
        return set()
    return {fact[1] for fact in summary.result.held_at(wake.call) if fact[0] == "lock"}


def _consumer_locks(facts: QueueFacts, sides: Sides) -> set[str]:
    """Locks taken on the consumer side (not by its own transmitters, such as XDP_TX): the
    completion updates the ring under them before any later wake decision, so a stop under the
    same lock cannot miss it (usbnet: txq.lock in xmit and in the urb completion)."""
    return {facts.lock_key(call) for function in facts.model.functions.values()
            if "consumer" in sides.sides[function.name] and function.name not in facts.publishers
            for call in function.calls if _lock_action(call) in ("take", "try")}


def publishers(model: FileModel) -> set[str]:
    """In-file functions that (transitively) publish work to the completer."""
    return _closure(model, lambda f: any(PUBLISH.match(c.name) for c in f.calls))


def _closure(model: FileModel, direct) -> set[str]:
    """Functions for which direct(function) holds, and the in-file functions that call them."""
    return model.with_callers(name for name, f in model.functions.items() if direct(f))
