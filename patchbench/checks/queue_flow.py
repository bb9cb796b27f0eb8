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
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from patchbench.checks import callindex, engine, kfacts, summaries
from patchbench.checks.finding import Finding
from patchbench.checks.model import FileModel, Function
from patchbench.checks.queue_context import BRING_UP, QUIESCE, Sides, leaves
from patchbench.checks.queue_ordering import (QueueFacts, barrier_functions, lost_wakeup, publishers,
                                                    unordered)
from patchbench.checks.queue_sites import (SPELLINGS, STOP_UNMATCHED, WRONG_QUEUE, QueueSite, QueueSites,
                                                 Verdict, collect, same_queue, tree_wrappers)

# The flow-control stop spellings.
_STOPS = frozenset(name for name, (action, scope, _, _) in SPELLINGS.items()
                   if action == "stop" and scope in ("one", "all"))
_WAKES = frozenset(name for name, (action, *_) in SPELLINGS.items() if action == "wake")
_PAUSES = frozenset(name for name, (action, *_) in SPELLINGS.items() if action == "stop")
_RING_PRODUCE = kfacts.names("ptr_ring", "produce")


def _and_wrappers(names: frozenset[str]) -> frozenset[str]:
    """names, and the header wrappers of the index in use around a spelling among them."""
    return names | {name for name, (_, inner) in tree_wrappers().items()
                    if any(spelling in names for spelling, _ in inner)}


def stop_words() -> tuple[bytes, ...]:
    """The flow-control stops and the wrappers around them: a file without one is never parsed
    for these rules."""
    return _stop_words(callindex.current_digest())


@lru_cache(maxsize=4)
def _stop_words(index_digest: str) -> tuple[bytes, ...]:
    return tuple(sorted(name.encode() for name in _and_wrappers(_STOPS)))


def findings(rule_id: str, model: FileModel) -> Iterator[Finding]:
    """The findings of one of the two queue rules."""
    module = engine.rule(rule_id)
    for verdict in analyse(model):
        if verdict.rule == rule_id:
            yield engine.finding(module, model, verdict.site.line, verdict.site.function.name,
                                 verdict.message, verdict.severity)


def analyse(model: FileModel) -> list[Verdict]:
    cached = _CACHE.get("last")
    if cached is not None and cached[0] is model:
        return cached[1]
    verdicts = _analyse(model)
    _CACHE["last"] = (model, verdicts)
    return verdicts


_CACHE: dict[str, tuple[FileModel, list[Verdict]]] = {}


def _analyse(model: FileModel) -> list[Verdict]:
    if not engine.mentions(model.source, stop_words()):
        return []  # most files never stop a queue: skip the query
    found = collect(model)
    sides = Sides(model)
    stops = [s for s in found.sites if s.action == "stop" and s.scope in ("one", "all")
             and ("xmit" in sides.sides[s.function.name] or _produces(s.function))
             and not sides.quiesces_here(s.function)]
    if not stops:
        return []
    consumer = [s for s in found.sites if "consumer" in sides.sides[s.function.name]
                and not _reprieve(s, stops, found) and not sides.resets_before(s.function, s.call.start)]
    wakes = [s for s in consumer if s.action == "wake"]
    if not wakes and not sides.has_consumer_root():
        return []  # the completion side lives in another file of the driver
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
            verdicts.append(Verdict(STOP_UNMATCHED, start, _start_message(start, stopped[0])))
    for stop in stops:
        same = [w for w in wakes if same_queue(stop, w, found)]
        if same:
            lost = lost_wakeup(stop, same, results, facts, sides)
            verdicts.extend([lost] if lost else unordered(model, stop, same, results, barriers, facts))
            continue
        if any(same_queue(stop, start, found) for start in starts):
            continue  # reported at the start that should have been a wake
        if any(same_queue(stop, wake, found) for wake in _scheduled_wakes(stop, found, sides, results)):
            continue  # the work it schedules after the stop restarts the queue (fjes' stall poller)
        others = [w for w in wakes if w.scope == "one"]
        if others:
            verdicts.extend(Verdict(WRONG_QUEUE, wake, _wrong_queue_message(wake, stop)) for wake in others)
        elif not woken_in_sibling_file(model.path, model.source):
            verdicts.append(Verdict(STOP_UNMATCHED, stop, _unmatched_message(stop, found, sides)))
    # with several completion wakes (one per kind of completion), one that reclaims tx buffers but wakes
    # a fixed queue nothing stops; field names are not compared here (hns3 reaches one index
    # through two fields), and link-up wakes of queue 0 are left alone (ehea)
    stopped_ones = stops + [s for s in found.sites if s.action == "stop" and s.scope == "one"
                            and s.key.kind != "unknown"]
    for wake in wakes:
        if wake.scope == "one" and wake.key.kind == "const" and stops \
                and sides.restarts_queue(wake.function, wake.call.start) \
                and not any(same_queue(s, wake, found) for s in stopped_ones):
            verdicts.append(Verdict(WRONG_QUEUE, wake, _wrong_queue_message(wake, stops[0])))
    unique = {(v.rule, v.site.function.name, v.message): v for v in verdicts}
    return list(unique.values())


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


_INCLUDE = re.compile(rb'^#\s*include\s+"([^"]+)"', re.M)
_CALLED = re.compile(rb"\b([A-Za-z_]\w*)\s*\(")


def woken_in_sibling_file(path: str, source: bytes) -> bool:
    """Another C file of the driver directory, sharing a local header with this one, wakes queues:
    the completion side may live there (44 of 396 stopping files in 6.1 have no wake of their own)."""
    here = Path(path)
    wakes = {name.encode() for name in _and_wrappers(_WAKES)}
    try:
        headers = set(_INCLUDE.findall(source))
        siblings = [p for p in here.parent.glob("*.c") if p != here] if headers else []
        return any(headers & set(_INCLUDE.findall(text)) and wakes & set(_CALLED.findall(text))
                   and _wakes_outside_recovery(text) for text in (p.read_bytes() for p in siblings))
    except OSError:
        return False  # only this file is known (a patch's blob): judge it alone


def _wakes_outside_recovery(text: bytes) -> bool:
    """Some function of the text wakes a queue and neither quiesces the device (close, reset,
    timeout), nor brings it up (open, resume), nor stops a queue itself first: a candidate
    completion side."""
    wakes, pauses = _and_wrappers(_WAKES), _and_wrappers(_PAUSES) | QUIESCE | BRING_UP
    return any(callees & wakes and not callees & pauses
               for callees in ({callee for callee, _ in called}
                               for called in callindex.scan(text)["calls"].values()))


def _start_message(start: QueueSite, stop: QueueSite) -> str:
    return (f"{start.written}() on the completion side restarts {start.describe()} that "
            f"{stop.function.name}() stops, but a start does not reschedule the qdisc: packets "
            "queued meanwhile stay stuck until the next transmit; use a wake")


def _unmatched_message(stop: QueueSite, found: QueueSites, sides: Sides) -> str:
    # the message is part of the finding's identity across patches: it names the stop, never the
    # other functions of the file, which a later unrelated patch may change
    head = (f"{stop.written}() stops {stop.describe()} on the transmit path, but no "
            "completion-side path (NAPI poll, tx interrupt, consumer/reader) wakes it")
    if any(s.action == "wake" and s.scope in ("one", "all") and same_queue(stop, s, found)
           and "xmit" not in sides.sides[s.function.name] for s in found.sites):
        return head + "; its wakes are only in open, reset or deferred paths, which do not run as tx space frees"
    return head


def _wrong_queue_message(wake: QueueSite, stop: QueueSite) -> str:
    return (f"{wake.written}() on the completion side wakes {wake.describe()}, but "
            f"{stop.function.name}() stops {stop.describe()}; the stopped queue is never woken")
