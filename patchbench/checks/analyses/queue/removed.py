"""Wakes and guards a patch took away (check mode: `FileModel.previous` holds the parent's text).

Three changes are judged on what the patch did, not on the code alone (the same code linted,
never having had the wake, is left to the other queue checks, which would be noisy there):

- **a completion that now releases tx space and leaves without a wake.** A completion-side
  function (Sides: consumer, not xmit) from which the patch took a wake away (fewer calls that
  wake a queue, themselves or through an in-file function, outside `#if` blocks), where in the
  parent every path out of it that released tx space (freed a transmitted buffer, `[queue]
  frees_tx`; updated the count of work in flight, `[queue] in_flight_updates`; or called an
  in-file function that does) also woke a queue, and after the patch some such path does not,
  with no wake between its release and its exit (a wake inside `#if` aside). That path (a
  transfer that failed and freed its context, a configuration whose `#if` leaves the remaining
  wake out) releases the slot the stopped queue waits for and never wakes it: the queue stays
  stopped until the tx watchdog. A path that skipped a wake by its test (a wake made conditional
  on room) decided there was nothing to wake; a path on which the queue was tested running
  (`netif_queue_stopped()` false) needs no wake. A parent that already left some releasing path
  unwoken is not judged: the patch did not create that path.
- **a wake turned into a start.** A function not only on the transmit path (whose own re-check
  may start: its qdisc is running) where the patch writes a start of a queue in place of a wake
  of it (fewer wakes, more starts than the parent), in a file whose transmit path stops the same
  queue: `netif_start_queue()` clears the stopped bit without `__netif_schedule()`, so packets
  the qdisc queued while the queue was stopped stay there until something else transmits. Not
  in a function only `.ndo_open` reaches (open runs before the stack activates the qdisc:
  nothing is queued to strand), nor a start re-checking the function's own stop after a full
  barrier (the stopping path, as the kernel's netif_txq_try_stop() starts), nor a start after a
  wake of the same queue the function still makes (`netif_device_attach()` on resume).
- **a stop left without its barrier and re-check.** A transmit-path stop in a function the patch
  changed, where the parent made a self-checking stop (`netif_txq_maybe_stop()`) or followed a
  stop with a full barrier and then a start or wake (the re-check of ring space), and the patch's
  text has neither. Without them a completion on another CPU that freed the ring between the
  transmit path's space test and its stop sees a running queue and does not wake it: the queue
  stays stopped until the tx watchdog. Not when the stop is made under a lock the completion's
  wake (or its ring update) also holds (ordering.shares_lock). A warning, as the other ordering
  checks are: the window is small.
"""

from __future__ import annotations

from collections import Counter

from patchbench.checks.analyses import calling
from patchbench.checks.engine import flow
from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.engine.model import CallSite, FileModel, Function
from patchbench.checks.engine import summaries
from patchbench.checks.analyses.queue.ordering import BARRIER, QueueFacts, barrier_functions, shares_lock
from patchbench.checks.analyses.queue.sides import FREES_TX, STOPPED_TESTS, Sides
from patchbench.checks.analyses.queue.sites import (SELF_CHECKING_STOPS, STOP_UNMATCHED, UNKNOWN, QueueSite,
                                                     QueueSites, Verdict, collect, same_queue)

_IN_FLIGHT_UPDATES = kfacts.names("queue", "in_flight_updates")
_CONDITIONALS = ("preproc_if", "preproc_ifdef", "preproc_elif", "preproc_elifdef", "preproc_else")


def _parent(model: FileModel) -> FileModel | None:
    """The model of the file in the patch's parent (None in lint, for a new file or no change)."""
    if model.previous is None or model.previous == model.source:
        return None
    return model.memo("queue.parent", lambda: FileModel.build(model.path, model.previous, model.context))


def patch_verdicts(model: FileModel, found: QueueSites, sides: Sides, stops: list[QueueSite]) -> list[Verdict]:
    """What the patch did to the wakes of a file whose transmit path stops a queue."""
    parent = _parent(model)
    if parent is None or not stops:
        return []
    was = _parent_sites(parent)
    verdicts = []
    for name, function in sorted(model.functions.items()):
        old = parent.functions.get(name)
        # the transmit path's own re-check may start rather than wake: its qdisc is running
        if old is None or sides.sides[name] == {"xmit"} or parent.text(old.node) == model.text(function.node):
            continue
        woke, wakes = _actions(was, old, "wake"), _actions(found, function, "wake")
        started = [s for s in found.sites if s.function is function and s.action == "start"]
        if sum(woke.values()) > sum(wakes.values()) and len(started) > sum(_actions(was, old, "start").values()):
            lost = min(spelling for spelling in woke if woke[spelling] > wakes[spelling])
            start = started[-1]
            stopper = next((stop for stop in stops if same_queue(stop, start, found)), None)
            # .ndo_open runs before the stack activates the qdisc: nothing is queued to strand
            # a wake of the queue left before the start (netif_device_attach() on resume) rescheduled it
            woken_first = any(s.function is function and s.action == "wake" and s.call.end <= start.call.start
                              and same_queue(s, start, found) for s in found.sites)
            if stopper is not None and not woken_first and not _rechecks(model, found, start) \
                    and not calling.only_reached_from(model, name, {"ndo_open"}):
                verdicts.append(_turned_start(start, lost, stopper))
        elif "consumer" in sides.sides[name]:
            verdicts.extend(_unwoken_release(model, parent, function, old, was, found))
    return verdicts


def _parent_sites(parent: FileModel) -> QueueSites:
    return parent.memo("queue.sites", lambda: collect(parent))


def guard_removed(model: FileModel, stop: QueueSite, wakes: list[QueueSite], results: dict[str, summaries.Summary],
                  facts: QueueFacts, sides: Sides) -> Verdict | None:
    """The stop's function guarded its stops against the lost wake-up in the parent and no longer does."""
    parent = _parent(model)
    if parent is None or stop.spelling in SELF_CHECKING_STOPS:
        return None
    old = parent.functions.get(stop.function.name)
    if old is None or parent.text(old.node) == model.text(stop.function.node):
        return None
    if not _guarded(_parent_sites(parent), old, barrier_functions(parent)) \
            or _guarded(facts.found, stop.function, barrier_functions(model)):
        return None
    if shares_lock(stop, wakes, results, facts, sides):
        return None
    return Verdict(STOP_UNMATCHED, stop, "guard-removed", {"stop": stop.written}, "warning",
                   because=(f"in the patch's parent {stop.function.name}() made a self-checking stop or "
                            f"re-checked after a full barrier",))


def _guarded(found: QueueSites, function: Function, barriers: set[str]) -> bool:
    """Some stop of the function re-checks by itself, or is followed by a full barrier and then a
    start or wake (textual order)."""
    sites = [s for s in found.sites if s.function is function]
    if any(s.spelling in SELF_CHECKING_STOPS for s in sites):
        return True
    fences = [c.start for c in function.calls if BARRIER.match(c.name) or c.name in barriers]
    return any(stop.call.end <= fence < restart.call.start for stop in sites if stop.action == "stop"
               for restart in sites if restart.action in ("start", "wake") for fence in fences)


def _rechecks(model: FileModel, found: QueueSites, start: QueueSite) -> bool:
    """The start re-checks a stop of the same queue its function made before a full barrier (as
    netif_txq_try_stop() does): the stopping path itself, not a restart of a stalled queue."""
    fences = [c.start for c in start.function.calls if BARRIER.match(c.name) or c.name in barrier_functions(model)]
    return any(stop.function is start.function and stop.action == "stop" and same_queue(stop, start, found)
               and any(stop.call.end <= fence < start.call.start for fence in fences) for stop in found.sites)


def _actions(found: QueueSites, function: Function, action: str) -> Counter:
    return Counter(s.spelling for s in found.sites if s.function is function and s.action == action)


def _turned_start(start: QueueSite, wake: str, stop: QueueSite) -> Verdict:
    return Verdict(STOP_UNMATCHED, start, "wake-turned-start",
                   {"start": start.written, "wake": wake, "queue": start.describe(), "stopper": stop.function.name},
                   stop=stop,
                   because=(f"the patch's parent called {wake}() in {start.function.name}(); {stop.function.name}() "
                            f"stops the queue on the transmit path",))


def _unwoken_release(model: FileModel, parent: FileModel, function: Function, old: Function,
                     was: QueueSites, found: QueueSites) -> list[Verdict]:
    wakes_now = _unconditional_wakes(model, function, found)
    if len(_unconditional_wakes(parent, old, was)) <= len(wakes_now):
        return []   # the patch took no wake away, nor put one under #if
    before = _release_exits(parent, old, was)
    if before is None or any(not woken for _, woken, _ in before):
        return []   # nothing released, or a releasing path already left unwoken in the parent
    # a path that passed a wake its test skipped decided there was no room to report: only a path
    # with no wake between its release and its exit (but one that some configurations leave out)
    # was left without a decision
    unwoken = sorted(release for release, woken, leaving in _release_exits(model, function, found) or []
                     if not woken and not any(release < call.start < leaving for call in wakes_now))
    if not unwoken:
        return []
    call = next(c for c in function.calls if c.start == unwoken[0])
    woke = [s for s in was.sites if s.function is old and s.action == "wake"]
    site = QueueSite("release", "one", call.name, woke[0].key if woke else UNKNOWN, function, call)
    return [Verdict(STOP_UNMATCHED, site, "release-unwoken", {"release": call.name, "function": function.name},
                    because=(f"in the patch's parent every path out of {function.name}() that released tx "
                             f"space also woke a queue",))]


def _waking(model: FileModel, found: QueueSites) -> tuple[set[CallSite], set[str]]:
    """The wake calls of the file, and its functions that wake a queue (themselves or through callees)."""
    wakes = {s.call for s in found.sites if s.action == "wake"}
    return wakes, model.with_callers({s.function.name for s in found.sites if s.action == "wake"})


def _unconditional_wakes(model: FileModel, function: Function, found: QueueSites) -> list[CallSite]:
    """The calls of the function that wake a queue (themselves or through an in-file function),
    outside `#if` blocks."""
    wakes, waking = _waking(model, found)
    return [c for c in function.calls if (c in wakes or c.name in waking) and not _configured(c.node, function)]


def _configured(node, function: Function) -> bool:
    """The node is inside an `#if`/`#ifdef` block of the function: some configurations leave it out."""
    while node is not None and node != function.body:
        if node.type in _CONDITIONALS:
            return True
        node = node.parent
    return False


def _release_exits(model: FileModel, function: Function, found: QueueSites) -> list[tuple[int, bool, int]] | None:
    """(offset of the last release, whether a wake ran, offset of the exit) of each exit path of
    the function that released tx space; None when no path releases any."""
    releasing = model.with_callers(name for name, f in model.functions.items() if any(map(_releases, f.calls)))
    result = flow.walk(function, _Releases(*_waking(model, found), releasing))
    exits = sorted({(fact[1], ("woken",) in state, node.start_byte) for node, state in result.returns
                    for fact in state if fact[0] == "released"})
    return exits or None


def _releases(call: CallSite) -> bool:
    return bool(FREES_TX.match(call.name)) or call.name in _IN_FLIGHT_UPDATES


class _Releases(flow.Transfer):
    """("released", offset of the last release) and ("woken",) on each path."""

    def __init__(self, wakes: set[CallSite], waking: set[str], releasing: set[str]):
        self.wakes = wakes
        self.waking = waking
        self.releasing = releasing

    def call(self, state, call: CallSite):
        if _releases(call) or call.name in self.releasing:
            state = frozenset(f for f in state if f[0] != "released") | {("released", call.start)}
        if call in self.wakes or call.name in self.waking:
            state = state | {("woken",)}
        return state

    def assume(self, state, call: CallSite, truth: bool):
        # a queue tested running needs no wake on that path
        return state | {("woken",)} if call.name in STOPPED_TESTS and not truth else state
