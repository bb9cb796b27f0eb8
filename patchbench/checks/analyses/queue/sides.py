"""Which side of a netdev tx queue each function of a file runs on.

Roots are functions the file does not call itself (registered callbacks, non-static functions,
address-taken ones). Each root is one of

- `xmit`:     ndo_start_xmit, mac80211's .tx, or a transmit helper called from another file of
              the driver (a function taking an skb named *_xmit, *_start_tx, *_send, *_tx);
- `consumer`: a path that frees ring space: NAPI poll, tx interrupt, tasklet, urb completion,
              virtqueue/vmbus callbacks, the reader side of a virtual device (read, recvmsg);
- `other`:    open/close, tx timeout, reset and recovery work, suspend/resume, probe, config.

A root of unknown purpose counts as a consumer: a wake there may well free the queue, and the
rules prefer silence to a guess. A function's sides are those of the roots that reach it through
the file's call graph.
"""

from __future__ import annotations

import re
from functools import cached_property

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.engine.model import FileModel, Function

# Registration kinds (kernel facts table: napi_poll, irq, urb_complete, ...) and struct fields
# that are consumers.
CONSUMER_KINDS = kfacts.names("registration", "queue_sides", "consumer")
# Deferred work and timers are consumers only when they free transmitted buffers themselves.
DEFERRED_KINDS = kfacts.names("registration", "queue_sides", "deferred")
FREES_TX = re.compile(kfacts.table()["queue"]["frees_tx"])
# Fields (`ndo_start_xmit`) or struct type and field (`ieee80211_ops.tx`) registering a transmit.
XMIT_FIELDS = kfacts.names("registration", "queue_sides", "xmit")
_XMIT_NAME = re.compile(r"(xmit|start_tx|hard_start|(^|_)send(_pkt)?$|(^|_)tx$)")
_CONSUMER_NAME = re.compile(
    r"(poll|clean|complet|_done|reclaim|tx_int|tx_irq|_isr|interrupt|_irq$|_gc$|recv|receive|read|"
    r"consume|wakeup)")
OTHER_NAME = re.compile(
    r"(reset|restart|reinit|recover|timeout|watchdog|(^|_)up$|(^|_)down$|open|close|(^|_)stop$|"
    r"suspend|resume|freeze|thaw|probe|remove|init|setup|config|mtu|(^|_)set_|link|carrier|"
    r"_task$|hang|error|detach|attach|enable|disable|ethtool|ioctl|change|shutdown|teardown|"
    r"uninit|free|destroy|release|fail)")
# A stop in a function named like this is teardown or error handling even when xmit reaches it.
TEARDOWN_NAME = re.compile(r"(reset|restart|reinit|recover|timeout|watchdog|fail|error|(^|_)err$|hang|"
                           r"suspend|close|(^|_)down$|shutdown|teardown|uninit|detach)")
# A wake in a function named like this recovers a hung or reset device (a tx timeout handler
# run from deferred work): it does not run as tx space frees, even when work that does reaches it.
RECOVERY_NAME = re.compile(r"(reset|reinit|recover|timeout|watchdog|hang)")
STOPPED_TESTS = kfacts.names("queue", "stopped_tests")
# Generic callback names: a consumer unless the name also says what else it is (link handler).
_CALLBACK_NAME = re.compile(r"(handler|_cb$|callback)")
_OTHER_FIELD = re.compile(r"^(ndo_|get_|set_|suspend|resume|freeze|thaw|poweroff|restore|probe|"
                          r"remove|shutdown|open|release|close|stop|init|exit|reset|timeout|"
                          r"runtime_|prepare)")


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
        kinds = self.model.registrations.get(name, set())
        if kinds & XMIT_FIELDS or any(f"{self.model.ops_structs.get((name, kind))}.{kind}" in XMIT_FIELDS
                                      for kind in kinds):
            return "xmit"
        if kinds & CONSUMER_KINDS or any(_CONSUMER_NAME.search(k) or _CALLBACK_NAME.search(k)
                                         for k in kinds - DEFERRED_KINDS if not _OTHER_FIELD.search(k)):
            return "consumer"
        if kinds & DEFERRED_KINDS:
            # deferred work completes tx when it frees buffers or waits for a stopped queue to drain
            if _CONSUMER_NAME.search(name) or (not OTHER_NAME.search(name) and (
                    self.frees_tx(name) or self.tests_stopped(name))):
                return "consumer"
            return "other"
        if kinds:
            return "other"
        if not self.model.has_unknown_callers(name) and name in self.model.callers:
            return None
        function = self.model.functions[name]
        if _XMIT_NAME.search(name) and self._takes_skb(function):
            return "xmit"
        if _CONSUMER_NAME.search(name):
            return "consumer"
        if OTHER_NAME.search(name):
            return "other"
        return "consumer"  # purpose unknown: do not rely on it being a reset path

    @cached_property
    def sides(self) -> dict[str, set[str]]:
        """Function name -> the sides of the roots that reach it. Deferred work scheduled from
        the consumer side (tty write_wakeup -> tx work) runs on the consumer side too."""
        roots = {name: self.root_side(name) for name in self.model.functions}
        reached = self._reach(roots)
        handed = {fn for fn, kicked_by in self.deferred_kicks.items()
                  if roots.get(fn) == "other" and not OTHER_NAME.search(fn)
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
        """The function, or one it calls in this file, frees transmitted buffers."""
        return self._calls_somewhere(name, FREES_TX)

    def tests_stopped(self, name: str) -> bool:
        """The function, or one it calls in this file, tests whether a queue is stopped."""
        return self._calls_somewhere(name, STOPPED_TESTS.__contains__)

    def _calls_somewhere(self, name: str, pattern) -> bool:
        """pattern: a compiled regex, or a predicate of callee names."""
        matches = pattern.match if isinstance(pattern, re.Pattern) else pattern
        seen, stack = set(), [name]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            if any(matches(c.name) for c in self.model.functions[current].calls):
                return True
            stack.extend(self.callees[current])
        return False

    def restarts_queue(self, function: Function) -> bool:
        """A start here restarts a queue as a completion does (not bringing the device up): the
        function tests whether the queue is stopped or frees transmitted buffers."""
        if OTHER_NAME.search(function.name):
            return False
        return any(c.name in STOPPED_TESTS for c in function.calls) or self.frees_tx(function.name)

    def has_consumer_root(self) -> bool:
        return any(self.root_side(name) == "consumer" and self._is_registered(name)
                   for name in self.model.functions)

    def _is_registered(self, name: str) -> bool:
        return bool(self.model.registrations.get(name))

    def _takes_skb(self, function: Function) -> bool:
        header = self.model.source[function.node.start_byte:function.body.start_byte]
        return b"sk_buff" in header or b"netdev_tx_t" in header
