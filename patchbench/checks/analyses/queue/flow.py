"""Match every flow-control stop of a tx queue with the wake that must follow it.

Shared by the rules queue-stop-unmatched and queue-wake-wrong-queue (RULES.md section (c)):

1. A flow-control stop is a stop reached from the transmit path, or made by a function that fills
   a ring others drain (a virtual device's rx_handler queueing for its readers). A stop in a
   function that quiesces the device itself (napi_disable, netif_tx_disable: close, reset) is
   teardown and needs no completion wake; so is a stop that xmit undoes on every path out of its
   function (it only serialises the transmit).
2. It needs a wake of the same queue on the consumer side (queue_context.Sides); a wake that its
   function reaches after quiescing the device, bringing it up or stopping the queue itself
   (a reset's restart), or in the transmit path's own re-check, does not count. A start on the
   consumer side is reported where it is (it clears the stop without rescheduling the qdisc). A
   consumer-side wake naming a queue that nothing stops is reported as the wrong queue.
3. A matched stop must guard against the lost wake-up (queue_ordering, warnings).
4. In `check`, what the patch did to the wakes and to the stop's guard (queue_removed): a
   completion path left releasing tx space without its wake, a wake turned into a start, a stop
   left without its barrier and re-check.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterator

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.analyses import calling
from patchbench.checks.engine import registry
from patchbench.checks.engine import summaries
from patchbench.checks.callindex import local_includes
from patchbench.checks.engine.context import TreeContext
from patchbench.checks.engine.finding import Finding, Place
from patchbench.checks.engine.model import FileModel, Function
from patchbench.checks.analyses.queue import removed
from patchbench.checks.analyses.queue.sides import BRING_UP, QUIESCE, Sides, leaves
from patchbench.checks.analyses.queue.ordering import QueueFacts, barrier_functions, lost_wakeup, publishers, unordered
from patchbench.checks.analyses.queue.sites import SPELLINGS, STOP_UNMATCHED, WRONG_QUEUE, QueueSite, QueueSites, Verdict, collect, same_queue, tree_wrappers

# The flow-control stop spellings.
_STOPS = frozenset(name for name, (action, scope, _, _) in SPELLINGS.items()
                   if action == "stop" and scope in ("one", "all"))
_WAKES = frozenset(name for name, (action, *_) in SPELLINGS.items() if action == "wake")
_PAUSES = frozenset(name for name, (action, *_) in SPELLINGS.items() if action == "stop")
_RESTARTS = frozenset(name for name, (action, *_) in SPELLINGS.items() if action in ("start", "wake"))
# calls followed into other files from .ndo_open looking for the start of the queue its close stopped
OPEN_DEPTH = 3
_RING_PRODUCE = kfacts.names("ptr_ring", "produce")


def _and_wrappers(names: frozenset[str], context: TreeContext) -> frozenset[str]:
    """names, and the header wrappers of the tree around a spelling among them."""
    return names | {name for name, (_, inner) in tree_wrappers(context).items()
                    if any(spelling in names for spelling, _ in inner)}


def stop_words(context: TreeContext) -> tuple[bytes, ...]:
    """The flow-control stops and the wrappers around them: a file without one is never parsed
    for these rules."""
    return _stop_words(context)


@lru_cache(maxsize=4)
def _stop_words(context: TreeContext) -> tuple[bytes, ...]:
    return tuple(sorted(name.encode() for name in _and_wrappers(_STOPS, context)))


def findings(rule_id: str, model: FileModel) -> Iterator[Finding]:
    """The findings of one of the two queue rules."""
    module = registry.rule(rule_id)
    for verdict in analyse(model):
        if verdict.rule == rule_id:
            stop = verdict.stop
            related = Place(*verdict.related) if verdict.related else \
                Place("queue stopped", stop.line) if stop is not None else None
            yield registry.finding(module, model, verdict.site.line, verdict.site.function.name,
                                 verdict.kind, verdict.severity,
                                 related,
                                 because=verdict.because + calling.explain(model, verdict.site.function.name),
                                 **verdict.args)


def analyse(model: FileModel) -> list[Verdict]:
    """The verdicts of model's queue stops, shared by both queue rules (kept with the model)."""
    return model.memo("queue.flow", lambda: _analyse(model))


def _analyse(model: FileModel) -> list[Verdict]:
    if not registry.mentions(model.source, stop_words(model.context)):
        return []  # most files never stop a queue: skip the query
    found = collect(model)
    sides = Sides(model)
    stops = [s for s in found.sites if s.action == "stop" and s.scope in ("one", "all")
             and ("xmit" in sides.sides[s.function.name] or _produces(s.function))
             and not sides.quiesces_here(s.function)]
    # what a patch did to the wakes (check mode), and stops at close that open never undoes
    judged = removed.patch_verdicts(model, found, sides, stops) + _closed_for_good(model, found, sides)
    if not stops:
        return judged
    consumer = [s for s in found.sites if "consumer" in sides.sides[s.function.name]
                and not _reprieve(s, stops, found) and not sides.resets_before(s.function, s.call.start)]
    wakes = [s for s in consumer if s.action == "wake"]
    if not wakes and not sides.has_consumer_root():
        return judged  # the completion side lives in another file of the driver
    names = {s.function.name for s in stops} | {w.function.name for w in wakes}
    facts = QueueFacts(model, found, stops, publishers(model))
    results = summaries.solve(model, names, lambda _: facts)
    barriers = barrier_functions(model)
    # a stop undone by a start on every path out of its function only serialises the xmit
    stops = [s for s in stops if any(("stopped", s.call.start) in state
                                     for state in results[s.function.name].exits)]
    starts = [s for s in consumer if s.action == "start" and s.scope == "one"
              and "xmit" not in sides.sides[s.function.name]
              and sides.restarts_queue(s.function, s.call.start)
              and not any(w.function is s.function and same_queue(s, w, found) for w in wakes)]
    verdicts = []
    for start in starts:
        stopped = [stop for stop in stops if same_queue(stop, start, found)]
        if stopped:
            verdicts.append(_start_verdict(start, stopped[0]))
    for stop in stops:
        same = [w for w in wakes if same_queue(stop, w, found)]
        if same:
            lost = lost_wakeup(stop, same, results, facts, sides) or \
                removed.guard_removed(model, stop, same, results, facts, sides)
            verdicts.extend([lost] if lost else unordered(model, stop, same, results, barriers, facts))
            continue
        if any(same_queue(stop, start, found) for start in starts):
            continue  # reported at the start that should have been a wake
        if any(same_queue(stop, wake, found) for wake in _scheduled_wakes(stop, found, sides, results)):
            continue  # the work it schedules after the stop restarts the queue (fjes' stall poller)
        others = [w for w in wakes if w.scope == "one"]
        if others:
            verdicts.extend(_wrong_queue_verdict(wake, stop) for wake in others)
        elif not woken_in_sibling_file(model):
            verdicts.append(_unmatched_verdict(model, stop, found, sides, stops))
    # with several completion wakes (one per kind of completion), one that reclaims tx buffers but wakes
    # a fixed queue nothing stops; field names are not compared here (hns3 reaches one index
    # through two fields), and link-up wakes of queue 0 are left alone (ehea)
    stopped_ones = stops + [s for s in found.sites if s.action == "stop" and s.scope == "one"
                            and s.key.kind != "unknown"]
    for wake in wakes:
        if wake.scope == "one" and wake.key.kind == "const" and stops \
                and sides.restarts_queue(wake.function, wake.call.start) \
                and not any(same_queue(s, wake, found) for s in stopped_ones):
            verdicts.append(_wrong_queue_verdict(wake, stops[0]))
    # a start the patch wrote for a wake, and that a completion reaches, is said once
    reported = {v.site.call for v in verdicts if v.kind == "start-not-wake"}
    judged = [v for v in judged if v.kind != "wake-turned-start" or v.site.call not in reported]
    unique = {(v.rule, v.site.function.name, v.kind, tuple(sorted(v.args.items()))): v for v in verdicts + judged}
    return list(unique.values())


def _closed_for_good(model: FileModel, found: QueueSites, sides: Sides) -> list[Verdict]:
    """Stops made when the device is closed (in functions only reached from .ndo_stop) that
    nothing undoes when it is opened again: no start or wake of a netdev queue in what .ndo_open
    reaches, nor anywhere else in the file outside the completion side (a link-up callback,
    resume, a watchdog), in a sibling file of the driver sharing its header, nor in what its
    .ndo_open calls in other files (OPEN_DEPTH calls down, through the call index). The core never restarts a queue a driver stopped: after `ip link set down`
    and `up` the queue stays stopped and nothing is transmitted again."""
    opens = sorted(name for name, kinds in model.registrations.items()
                   if "ndo_open" in kinds and name in model.functions)
    if not opens:
        return []
    # only the functions holding a queue site are asked how they are reached
    closers = {name for name in {s.function.name for s in found.sites}
               if calling.only_reached_from(model, name, {"ndo_stop"})}
    closing = [s for s in found.sites if s.action == "stop" and s.scope in ("one", "all")
               and s.key.space == "netdev" and s.function.name in closers]
    if not closing:
        return []
    # a completion's wake (after a stopped test or freeing tx buffers: Sides.restarts_queue) runs
    # only for packets sent, which a stopped queue never sends: it does not count, unless open
    # itself reaches it
    reached = sides.reach_from(set(opens))
    if any(s.action in ("start", "wake") and s.key.space == "netdev" and s.function.name not in closers
           and (s.function.name in reached or not sides.restarts_queue(s.function, s.call.start))
           for s in found.sites):
        return []
    restarts = _and_wrappers(_RESTARTS, model.context)
    if any(callee in restarts for scan in _header_siblings(model)
           for called in scan["calls"].values() for callee, _ in called):
        return []
    outside = sorted({call.name for name in reached if name in model.functions
                      for call in model.functions[name].calls if call.name not in model.functions})
    if model.context.calls_reach(outside, restarts, OPEN_DEPTH):
        return []
    # reported on the stop, as every unmatched stop is, with .ndo_open as the related place
    opener = model.functions[opens[0]]
    return [Verdict(STOP_UNMATCHED, stop, "closed-never-reopened",
                    {"stop": stop.written, "queue": "every tx queue" if stop.scope == "all" else stop.describe(),
                     "opener": opens[0]},
                    because=(f"{opens[0]}() is .ndo_open: neither it nor what it calls in this file or "
                             f"(through the call index) {OPEN_DEPTH} calls into the tree starts or wakes a "
                             f"queue, nor does any other function of the file or of its sibling files",),
                    related=(".ndo_open, which never restarts it", opener.start_line))
            for stop in closing]


def _scheduled_wakes(stop: QueueSite, found: QueueSites, sides: Sides,
                     results: dict[str, summaries.Summary]) -> list[QueueSite]:
    """Wakes in the deferred work (and its in-file callees) that the stop's function schedules on
    a path from the stop: that work runs after the stop and is its completion side."""
    at_call = results[stop.function.name].result.at_call
    scheduled = {handler for handler, kickers in sides.deferred_kicks.items()
                 if stop.function.name in kickers and any(
                     call.start > stop.call.start and call.name in sides.kick_calls
                     and any(("stopped", stop.call.start) in state for state in states)
                     for call, states in at_call.items())}
    reached = sides.reach_from(scheduled)
    return [site for site in found.sites if site.action == "wake" and site.function.name in reached]


def _produces(function: Function) -> bool:
    """The function fills a ring someone else drains (an rx_handler queueing for a virtual device's readers)."""
    return any(c.name in _RING_PRODUCE for c in function.calls)


def _reprieve(site: QueueSite, stops: list[QueueSite], found: QueueSites) -> bool:
    """A wake or start after a stop of the same queue in the same function, on its way there:
    the transmit path's own re-check, a recovery that stops the queue, cleans the ring and
    restarts it, or a pause around a reconfiguration; none replaces the completion-side wake."""
    paused = [s for s in found.sites if s.action == "stop" and not leaves(s.call, s.function)]
    return site.action != "stop" and any(
        stop.function is site.function and stop.call.end <= site.call.start
        and same_queue(stop, site, found) for stop in stops + paused)


def woken_in_sibling_file(model: FileModel) -> bool:
    """Another C file of the driver directory, sharing a local header with this one, wakes queues
    outside recovery and bring-up: the completion side may live there (44 of 396 stopping files in
    6.1 have no wake of their own). Asked of the tree's call index; alone, a file is judged alone."""
    wakes = _and_wrappers(_WAKES, model.context)
    pauses = _and_wrappers(_PAUSES, model.context) | QUIESCE | BRING_UP
    return any(_wakes_outside_recovery(scan, wakes, pauses) for scan in _header_siblings(model))


def _header_siblings(model: FileModel) -> list[dict]:
    """The scans of the other C files of the driver directory that include one of this file's
    local headers (the same driver, split over files); [] without an index or a local header."""
    headers = set(local_includes(model.source))
    if not headers:
        return []
    return [scan for scan in model.context.siblings(model.path) if headers & set(scan.get("includes", ()))]


def _wakes_outside_recovery(scan: dict, wakes: frozenset[str], pauses: frozenset[str]) -> bool:
    """Some function of a scanned file wakes a queue and neither quiesces the device (close, reset,
    timeout), nor brings it up (open, resume), nor stops a queue itself first: a candidate
    completion side."""
    return any(callees & wakes and not callees & pauses
               for callees in ({callee for callee, _ in called} for called in scan["calls"].values()))


def _start_verdict(start: QueueSite, stop: QueueSite) -> Verdict:
    return Verdict(STOP_UNMATCHED, start, "start-not-wake",
                   {"start": start.written, "queue": start.describe(), "stopper": stop.function.name}, stop=stop,
                   because=(f"{start.function.name}() runs on the completion side and no wake of the queue "
                            f"follows the start there",))


def _unmatched_verdict(model: FileModel, stop: QueueSite, found: QueueSites, sides: Sides,
                       stops: list[QueueSite]) -> Verdict:
    # the arguments are the finding's identity across patches: they name the stop, never the
    # other functions of the file, which a later unrelated patch may change
    elsewhere = any(s.action == "wake" and s.scope in ("one", "all") and same_queue(stop, s, found)
                    and "xmit" not in sides.sides[s.function.name] for s in found.sites)
    return Verdict(STOP_UNMATCHED, stop, "unmatched-wakes-elsewhere" if elsewhere else "unmatched",
                   {"stop": stop.written, "queue": stop.describe()},
                   because=_unmatched_because(model, stop, found, sides, stops))


def _unmatched_because(model: FileModel, stop: QueueSite, found: QueueSites, sides: Sides,
                       stops: list[QueueSite]) -> tuple[str, ...]:
    """Why no wake matched: the stop's side, the completion side the file has, each wake of the
    same queue and why it does not count, and what the tree says of the driver's other files."""
    said = [f"{stop.function.name}() runs on the transmit side"
            if "xmit" in sides.sides[stop.function.name]
            else f"{stop.function.name}() fills a ring that others drain"]
    completing = sorted(name for name, side in sides.sides.items() if "consumer" in side)
    said.append("completion side in this file: " + (", ".join(f"{name}()" for name in completing[:calling.SHOWN])
                                                    + (f" and {len(completing) - calling.SHOWN} more"
                                                       if len(completing) > calling.SHOWN else "")
                                                    if completing else "none"))
    for wake in found.sites:
        if wake.action != "wake" or not same_queue(stop, wake, found):
            continue
        name = wake.function.name
        if "xmit" in sides.sides[name]:
            why = "on the transmit side"
        elif "consumer" not in sides.sides[name]:
            why = "not on the completion side (open, reset or deferred work)"
        elif _reprieve(wake, stops, found):
            why = "after a stop of the same queue in its own function (a re-check or a restart)"
        else:
            why = "after its function quiesces the device"
        said.append(f"wake at line {wake.line} in {name}() does not count: {why}")
    said.append("no other file of the driver sharing a local header wakes a queue outside recovery"
                if model.context.index is not None else "judged alone: no tree index for the driver's other files")
    return tuple(said)


def _wrong_queue_verdict(wake: QueueSite, stop: QueueSite) -> Verdict:
    return Verdict(WRONG_QUEUE, wake, "wrong-queue",
                   {"wake": wake.written, "queue": wake.describe(), "stopper": stop.function.name,
                    "stopped": stop.describe()}, stop=stop)
