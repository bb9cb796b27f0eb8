"""Match every flow-control stop of a tx queue with the wake that must follow it.

Shared by the rules queue-stop-unmatched and queue-wake-wrong-queue (RULES.md section (c)):

1. A flow-control stop is a stop reached from the transmit path (stops in close, timeout, reset,
   suspend or completion code are teardown and need no completion wake).
2. It needs a wake of the same queue on the consumer side (queue_context.Sides); a wake only in
   reset/open paths, a wake in the transmit path's own re-check, or a start (which does not
   reschedule the qdisc) do not count. When the consumer side wakes only other queues, the wake
   is reported as naming the wrong queue.
3. A stop issued after the work was handed to the completer (urb submitted, ring produced, host
   notified) must be followed by a re-check that restarts the queue, or share a lock with the
   completion's wake; otherwise the completion can run in between and the wake-up is lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from patchbench.checks import flow, summaries
from patchbench.checks.model import CallSite, FileModel
from patchbench.checks.rules.queue_context import Sides
from patchbench.checks.rules.queue_sites import SELF_CHECKING_STOPS, QueueSite, QueueSites, collect

STOP_UNMATCHED = "queue-stop-unmatched"
WRONG_QUEUE = "queue-wake-wrong-queue"

# Calls that hand transmitted work to the side that completes it.
PUBLISH = re.compile(r"^(usb_submit_urb|__ptr_ring_produce|ptr_ring_produce\w*|skb_array_produce\w*|"
                     r"virtqueue_kick|virtqueue_notify|vmbus_sendpacket\w*|notify_remote_via_irq)$")
_LOCK = re.compile(r"^(spin_lock|spin_lock_bh|spin_lock_irq|spin_lock_irqsave|raw_spin_lock\w*|"
                   r"mutex_lock\w*)$")
_TRYLOCK = re.compile(r"^(spin_trylock\w*|raw_spin_trylock\w*|mutex_trylock)$")
_UNLOCK = re.compile(r"^(spin_unlock\w*|raw_spin_unlock\w*|mutex_unlock)$")
# The transmit lock ndo_start_xmit runs under; completions that take it are serialised with xmit.
_TX_LOCK = re.compile(r"^(__netif_tx_lock\w*|netif_tx_lock\w*)$")
_TX_UNLOCK = re.compile(r"^(__netif_tx_unlock\w*|netif_tx_unlock\w*)$")
TX_LOCK = "netdev_queue._xmit_lock"
_STOPPED_TEST = re.compile(r"^(netif_queue_stopped|netif_tx_queue_stopped|__netif_subqueue_stopped|"
                           r"netif_subqueue_stopped|netif_xmit_stopped)$")


@dataclass(frozen=True)
class Verdict:
    rule: str
    site: QueueSite
    message: str


class _QueueFacts(flow.Transfer):
    """Locks held, whether work was published, and which stops are still pending on each path."""

    def __init__(self, model: FileModel, publishers: set[str], stop_calls: set[CallSite]):
        self.model = model
        self.publishers = publishers
        self.stop_calls = stop_calls

    def call(self, state, call: CallSite):
        if _LOCK.match(call.name) and call.args:
            return state | {("lock", self.lock_key(call))}
        if _UNLOCK.match(call.name) and call.args:
            return state - {("lock", self.lock_key(call))}
        if _TX_LOCK.match(call.name):
            return state | {("lock", TX_LOCK)}
        if _TX_UNLOCK.match(call.name):
            return state - {("lock", TX_LOCK)}
        if PUBLISH.match(call.name) or call.name in self.publishers:
            return state | {("published", call.name)}
        if call in self.stop_calls:
            return state | {("stopped", call.start)}
        return state

    def assume(self, state, call: CallSite, truth: bool):
        if truth and _TRYLOCK.match(call.name) and call.args:
            return state | {("lock", self.lock_key(call))}
        if truth and call.name.startswith("__netif_tx_trylock"):
            return state | {("lock", TX_LOCK)}
        return state

    def lock_key(self, call: CallSite) -> str:
        # by the lock's field name: `&queue->tx_lock` in xmit and in the completion are one lock
        # even where the two functions reach the queue through differently typed variables
        key = self.model.canonical(self.model.functions.get(call.function), call.args[0])
        return key.rsplit(".", 1)[-1]


def analyse(model: FileModel) -> list[Verdict]:
    cached = _CACHE.get("last")
    if cached is not None and cached[0] is model:
        return cached[1]
    verdicts = _analyse(model)
    _CACHE["last"] = (model, verdicts)
    return verdicts


_CACHE: dict[str, tuple[FileModel, list[Verdict]]] = {}


def _analyse(model: FileModel) -> list[Verdict]:
    found = collect(model)
    sides = Sides(model)
    stops = [s for s in found.sites if s.action == "stop" and s.scope in ("one", "all")
             and "xmit" in sides.sides[s.function.name]]
    if not stops:
        return []
    consumer = [s for s in found.sites if "consumer" in sides.sides[s.function.name]
                and not _reprieve(s, stops, found)]
    wakes = [s for s in consumer if s.action == "wake"]
    if not wakes and not sides.has_consumer_root():
        return []  # the completion side lives in another file of the driver
    starts = [s for s in consumer if s.action == "start" and s.scope == "one"
              and "xmit" not in sides.sides[s.function.name] and _completes_tx(s, sides)]
    verdicts = []
    matched = []
    for start in starts:
        stopped = [stop for stop in stops if _same_queue(stop, start, found)]
        if stopped:
            verdicts.append(Verdict(STOP_UNMATCHED, start, _start_message(start, stopped[0])))
    for stop in stops:
        same = [w for w in wakes if _same_queue(stop, w, found)]
        if same:
            matched.append((stop, same))
            continue
        if any(_same_queue(stop, start, found) for start in starts):
            continue  # reported at the start that should have been a wake
        others = [w for w in wakes if w.scope == "one"]
        if others:
            verdicts.extend(Verdict(WRONG_QUEUE, wake, _wrong_queue_message(wake, stop)) for wake in others)
            continue
        verdicts.append(Verdict(STOP_UNMATCHED, stop, _unmatched_message(stop, found, sides)))
    verdicts.extend(_lost_wakeups(model, found, matched))
    unique = {(v.rule, v.site.function.name, v.message): v for v in verdicts}
    return list(unique.values())


def _same_queue(stop: QueueSite, wake: QueueSite, found: QueueSites) -> bool:
    if stop.scope == "all" or wake.scope == "all":
        return True
    return stop.key.matches(wake.key, found.multiqueue)


def _reprieve(site: QueueSite, stops: list[QueueSite], found: QueueSites) -> bool:
    """A wake or start after a stop of the same queue in the same function: the transmit path's
    own re-check, which does not replace the completion-side wake."""
    return site.action != "stop" and any(
        stop.function is site.function and stop.call.end <= site.call.start
        and _same_queue(stop, site, found) for stop in stops)


def _completes_tx(site: QueueSite, sides: Sides) -> bool:
    """The function tests whether the queue is stopped, or frees transmitted buffers: it is
    restarting the queue as a completion (not bringing the link up)."""
    return any(_STOPPED_TEST.match(c.name) for c in site.function.calls) or \
        sides.frees_tx(site.function.name)


def _start_message(start: QueueSite, stop: QueueSite) -> str:
    return (f"{start.spelling}() on the completion side restarts {start.key.describe()} that "
            f"{stop.function.name}() stops, but a start does not reschedule the qdisc: packets "
            "queued meanwhile stay stuck until the next transmit; use a wake")


def _unmatched_message(stop: QueueSite, found: QueueSites, sides: Sides) -> str:
    head = (f"{stop.spelling}() stops {stop.key.describe()} on the transmit path, but no "
            "completion-side path (NAPI poll, tx interrupt, consumer/reader) wakes it")
    same = [s for s in found.sites if s.scope in ("one", "all") and s.action in ("wake", "start")
            and s is not stop and _same_queue(stop, s, found)]
    elsewhere = sorted({f"{s.function.name}()" for s in same if s.action == "wake"
                        and "xmit" not in sides.sides[s.function.name]})
    if elsewhere:
        return head + f"; it is only woken in {', '.join(elsewhere)}, which do not run as tx space frees"
    return head


def _wrong_queue_message(wake: QueueSite, stop: QueueSite) -> str:
    return (f"{wake.spelling}() on the completion side wakes {wake.key.describe()}, but "
            f"{stop.function.name}() stops {stop.key.describe()}; the stopped queue is never woken")


def _lost_wakeups(model: FileModel, found: QueueSites, matched: list) -> list[Verdict]:
    """Stops after publishing to the completer, with no re-check and no lock shared with the wake."""
    candidates = [(stop, wakes) for stop, wakes in matched if stop.spelling not in SELF_CHECKING_STOPS]
    if not candidates:
        return []
    publishers = _publishers(model)
    stop_calls = {stop.call for stop, _ in candidates}
    names = {stop.function.name for stop, _ in candidates} | {
        w.function.name for _, wakes in candidates for w in wakes}
    results = summaries.solve(model, names, lambda _: _QueueFacts(model, publishers, stop_calls))
    rechecked = _rechecked(found, results)
    verdicts = []
    for stop, wakes in candidates:
        result = results[stop.function.name].result
        states = result.states_at(stop.call)
        published = sorted({fact[1] for state in states for fact in state if fact[0] == "published"})
        if not published or stop.call.start in rechecked:
            continue
        held = {fact[1] for fact in result.held_at(stop.call) if fact[0] == "lock"} | {TX_LOCK}
        if any(held & _locks_at(results, w) for w in wakes):
            continue
        verdicts.append(Verdict(STOP_UNMATCHED, stop, (
            f"{stop.spelling}() runs after {published[0]}() has handed work to the completion side, "
            "with no re-check of the ring after the stop and no lock shared with the wake: a "
            "completion in between sees a running queue and the wake-up is lost")))
    return verdicts


def _rechecked(found: QueueSites, results: dict[str, summaries.Summary]) -> set[int]:
    """Stops (by call offset) followed on some path by a start or wake of the same queue."""
    done = set()
    for site in found.sites:
        summary = results.get(site.function.name)
        if site.action == "stop" or summary is None:
            continue
        for state in summary.result.states_at(site.call):
            for fact in state:
                if fact[0] != "stopped":
                    continue
                stop = next(s for s in found.sites if s.call.start == fact[1])
                if _same_queue(stop, site, found):
                    done.add(fact[1])
    return done


def _locks_at(results: dict[str, summaries.Summary], wake: QueueSite) -> set[str]:
    summary = results.get(wake.function.name)
    if summary is None:
        return set()
    return {fact[1] for fact in summary.result.held_at(wake.call) if fact[0] == "lock"}


def _publishers(model: FileModel) -> set[str]:
    """In-file functions that (transitively) publish work to the completer."""
    direct = {name for name, f in model.functions.items() if any(PUBLISH.match(c.name) for c in f.calls)}
    publishers = set(direct)
    changed = True
    while changed:
        changed = False
        for name, function in model.functions.items():
            if name not in publishers and any(c.name in publishers for c in function.calls):
                publishers.add(name)
                changed = True
    return publishers
