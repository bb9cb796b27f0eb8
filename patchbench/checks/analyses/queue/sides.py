"""Which side of a netdev tx queue each function of a file runs on.

Roots are functions the file does not call itself (registered callbacks, non-static functions,
address-taken ones). Each root is one of

- `xmit`:     ndo_start_xmit, mac80211's .tx, or a function taking an skb that only other files
              of the driver call, named as a transmit helper (the facts table's one kept name
              convention here, queue.names.xmit_helper);
- `consumer`: a path that frees ring space: NAPI poll, tx interrupt, tasklet, urb completion,
              virtqueue/vmbus callbacks, the reader side of a virtual device (read, recvmsg), a tty
              line discipline's wakeup; and deferred work, timers or ops of no known side that free
              transmitted buffers or test for a stopped queue without quiescing the device;
- `other`:    everything that quiesces the device (napi_disable, netif_tx_disable, ...: close,
              reset, recovery), configuration and power management ops, and registered callbacks
              that do no completion work.

A root of unknown purpose counts as a consumer unless it quiesces the device itself, brings it up
or is handed to phylib as a link handler: a wake there may well free the queue, and the rules
prefer silence to a guess. A function's sides are those of the
roots that reach it through the file's call graph.
"""

from __future__ import annotations

import re
from functools import cached_property

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.analyses import calling
from patchbench.checks.engine.model import CallSite, FileModel, Function

# Registration kinds (kernel facts table: napi_poll, irq, urb_complete, ...), struct fields and
# `struct.field`s that are consumers, and the ops structs no field of which is.
CONSUMER_KINDS = kfacts.names("registration", "queue_sides", "consumer")
OTHER_STRUCTS = kfacts.names("registration", "queue_sides", "other_structs")
FREES_TX = re.compile(kfacts.table()["queue"]["frees_tx"])
# Fields (`ndo_start_xmit`) or struct type and field (`ieee80211_ops.tx`) registering a transmit.
XMIT_FIELDS = kfacts.names("registration", "queue_sides", "xmit")
XMIT_HELPER = kfacts.name_convention("queue", "names", "xmit_helper")
QUIESCE = kfacts.names("queue", "quiesce")
BRING_UP = kfacts.names("queue", "bring_up")
STOPPED_TESTS = kfacts.names("queue", "stopped_tests")
_LINK_HANDLERS = kfacts.table()["queue"]["link_handlers"]


_DEFERRED_INIT = kfacts.names("queue", "deferred_init")
_DEFERRED_KICK = kfacts.table()["queue"]["deferred_kick"]


def _field(expr: str) -> str:
    """`&sl->tx_work`, `&adapter->watchdog_task.work` -> the last field name."""
    return expr.lstrip("&").replace("->", ".").rsplit(".", 1)[-1]


class Sides:
    """xmit / consumer / other sides of every function of a file."""

    def __init__(self, model: FileModel):
        self.model = model

    @cached_property
    def callees(self) -> dict[str, set[str]]:
        return {name: {c.name for c in f.calls if c.name in self.model.functions and c.name != name}
                for name, f in self.model.functions.items()}

    def root_side(self, name: str) -> str | None:
        """The side of a root, or None when the function is only reached by in-file calls."""
        registered = calling.registrations(self.model, name, tree=False)
        kinds = {way.kind for way in registered}
        qualified = {f"{way.struct}.{way.kind}" for way in registered}
        if (kinds | qualified) & XMIT_FIELDS:
            return "xmit"
        if (kinds | qualified) & CONSUMER_KINDS:
            return "consumer"
        if any(way.struct in OTHER_STRUCTS for way in registered):
            return "other"
        if kinds:
            # deferred work, timers, ops of no known side: a consumer when it completes transmits
            return "consumer" if self.completes(name) else "other"
        if not self.model.has_unknown_callers(name) and name in self.model.callers:
            return None
        if XMIT_HELPER.matches(name) and self._takes_skb(self.model.functions[name]):
            return "xmit"
        if name in self.link_handlers or self.quiesces_here(self.model.functions[name]) \
                or self.brings_up(name):
            return "other"
        return "consumer"  # purpose unknown: do not rely on it being a reset path

    @cached_property
    def link_handlers(self) -> set[str]:
        """Functions handed to phylib as link-change handlers: they run as the link goes up or
        down, not as transmitted buffers complete."""
        return {call.args[position].lstrip("&") for function in self.model.functions.values()
                for call in function.calls
                if (position := _LINK_HANDLERS.get(call.name)) is not None and position < len(call.args)}

    @cached_property
    def sides(self) -> dict[str, set[str]]:
        """Function name -> the sides of the roots that reach it. Deferred work scheduled from
        the consumer side (tty write_wakeup -> tx work) runs on the consumer side too."""
        roots = {name: self.root_side(name) for name in self.model.functions}
        reached = self._reach(roots)
        handed = {fn for fn, kicked_by in self.deferred_kicks.items()
                  if roots.get(fn) == "other" and not self.quiesces(fn)
                  and any("consumer" in reached.get(k, ()) for k in kicked_by)}
        if handed:
            reached = self._reach({**roots, **{fn: "consumer" for fn in handed}})
        return reached

    def _reach(self, roots: dict[str, str | None]) -> dict[str, set[str]]:
        reached: dict[str, set[str]] = {name: set() for name in self.model.functions}
        for name, side in roots.items():
            if side is None:
                continue
            stack = [name]
            while stack:
                current = stack.pop()
                if side in reached[current]:
                    continue
                reached[current].add(side)
                stack.extend(self.callees[current])
        return reached

    @cached_property
    def deferred_kicks(self) -> dict[str, set[str]]:
        """Deferred function -> the functions that schedule it, matched by the work/timer field
        (`INIT_WORK(&sl->tx_work, slcan_transmit)` ... `schedule_work(&sl->tx_work)`)."""
        handlers: dict[str, str] = {}
        kicks: dict[str, set[str]] = {}
        for function in self.model.functions.values():
            for call in function.calls:
                if call.name in _DEFERRED_INIT and len(call.args) > 1:
                    handlers[_field(call.args[0])] = call.args[1].lstrip("&")
                position = _DEFERRED_KICK.get(call.name)
                if position is not None and position < len(call.args):
                    kicks.setdefault(_field(call.args[position]), set()).add(function.name)
        return {fn: kicks.get(work, set()) for work, fn in handlers.items() if fn in self.model.functions}

    @property
    def kick_calls(self) -> frozenset[str]:
        """The calls that schedule deferred work."""
        return frozenset(_DEFERRED_KICK)

    def reach_from(self, names: set[str]) -> set[str]:
        """names and the in-file functions they call, transitively."""
        seen, stack = set(), list(names)
        while stack:
            current = stack.pop()
            if current not in seen and current in self.callees:
                seen.add(current)
                stack.extend(self.callees[current])
        return seen

    def frees_tx(self, name: str) -> bool:
        """The function, or one it calls in this file, frees transmitted buffers (not on an error
        path leaving it: open freeing what it allocated)."""
        return self._calls_somewhere(name, _frees_here)

    def tests_stopped(self, name: str) -> bool:
        """The function, or one it calls in this file, tests whether a queue is stopped."""
        return self._calls_somewhere(name, _tests_stopped_here)

    def _calls_somewhere(self, name: str, here) -> bool:
        """here(function): what the function itself does."""
        seen, stack = set(), [name]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            if here(self.model.functions[current]):
                return True
            stack.extend(self.callees[current])
        return False

    def restarts_queue(self, function: Function, at: int) -> bool:
        """A start (or wake) at that offset restarts a queue as a completion does, not bringing
        the device up: the function neither quiesces nor brings up the device itself, and before
        that point tests whether the queue is stopped or frees transmitted buffers: itself, or
        through its in-file callees when a registered completion (NAPI poll, tx interrupt, ...)
        reaches it (exported bring-up code frees the old ring through helpers shared with close)."""
        if "consumer" not in self.sides[function.name] or any(c.name in QUIESCE or c.name in BRING_UP
                                                              for c in function.calls):
            return False
        before = [c for c in function.calls if c.start < at and not leaves(c, function)]
        if any(c.name in STOPPED_TESTS or FREES_TX.match(c.name) for c in before):
            return True
        return function.name in self._registered_consumers and any(
            self.frees_tx(c.name) for c in before if c.name in self.callees[function.name])

    @cached_property
    def _registered_consumers(self) -> set[str]:
        return self.reach_from({name for name in self.model.functions
                                if self._is_registered(name) and self.root_side(name) == "consumer"})

    def completes(self, name: str) -> bool:
        """The function frees transmitted buffers or tests whether a queue is stopped: itself, or
        through its in-file callees when none of them quiesces the device (reset work frees the
        whole ring in the close path it shares)."""
        function = self.model.functions[name]
        if _tests_stopped_here(function) or _frees_here(function):
            return True
        return (self.frees_tx(name) or self.tests_stopped(name)) and not self.quiesces(name)

    def quiesces(self, name: str) -> bool:
        """The function, or one it calls in this file, quiesces the device or its queues."""
        return name in self._quiescing

    def brings_up(self, name: str) -> bool:
        """The function, or one it calls in this file, brings the device up (enables NAPI,
        requests its interrupt)."""
        return self._calls_somewhere(name, lambda f: any(c.name in BRING_UP for c in f.calls))

    @staticmethod
    def quiesces_here(function: Function) -> bool:
        """The function itself quiesces the device or its queues."""
        return any(c.name in QUIESCE for c in function.calls)

    @staticmethod
    def resets_before(function: Function, at: int) -> bool:
        """On its way to that offset the function quiesces the device or brings it up: what
        follows restarts a device it reset (a tx timeout's recovery), it does not complete tx."""
        return any((c.name in QUIESCE or c.name in BRING_UP) and c.start < at and not leaves(c, function)
                   for c in function.calls)

    @cached_property
    def _quiescing(self) -> set[str]:
        found = {name for name, f in self.model.functions.items() if any(c.name in QUIESCE for c in f.calls)}
        grown = True
        while grown:
            more = {name for name, callees in self.callees.items() if name not in found and callees & found}
            found |= more
            grown = bool(more)
        return found

    def has_consumer_root(self) -> bool:
        return any(self.root_side(name) == "consumer" and self._is_registered(name)
                   for name in self.model.functions)

    def _is_registered(self, name: str) -> bool:
        return bool(self.model.registrations.get(name))

    def _takes_skb(self, function: Function) -> bool:
        header = self.model.source[function.node.start_byte:function.body.start_byte]
        return b"sk_buff" in header or b"netdev_tx_t" in header


def _frees_here(function: Function) -> bool:
    return any(FREES_TX.match(c.name) and not leaves(c, function) for c in function.calls)


def _tests_stopped_here(function: Function) -> bool:
    return any(c.name in STOPPED_TESTS for c in function.calls)


def leaves(call: CallSite, function: Function) -> bool:
    """The call is in a block of the function that returns or jumps away (an error path: open
    freeing what it allocated before it fails)."""
    block = call.node.parent
    while block is not None and block.start_byte > function.body.start_byte:
        if block.type == "compound_statement" and any(
                child.type in ("return_statement", "goto_statement") for child in block.named_children):
            return True
        block = block.parent
    return False
