"""Netdev tx queue stop/wake/start sites of one file, each with an abstract queue key.

Two sites name "the same queue" when their keys match (`QueueKey.matches`). A key is what the
index expression says about the queue, independent of the variable names of each function:

- `const`:   a literal index, `netif_stop_queue(dev)` being queue 0;
- `xmit`:    the queue the stack handed to ndo_start_xmit (`skb_get_queue_mapping(skb)`,
             `skb->queue_mapping`, `skb_get_tx_queue()`);
- `field`:   an index field of a per-queue struct (`ring->queue_index`, `queue->id`), named by
             the field and, where known, the struct type that owns it;
- `derived`: an index computed by a helper (`vq2txq(vq)`) or a txq pointer kept in a struct;
- `unknown`: anything else (parameters, loop counters, arithmetic); it matches every key, so an
             expression we cannot read never produces a finding.

Keys live in a space: a net_device's tx queues, or an ieee80211_hw's (mac80211 numbers its queues
per hardware queue: `ieee80211_stop_queue(hw, 2)` and `netif_stop_subqueue(dev, 2)` are unrelated).
A header function around a spelling (a driver's `foo_stop_queue(dev, prio)` that stops `prio`, or queue
0 when QoS is off) gives one site per queue it may name, its parameters read at the call (callindex.queue_wrappers).
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from functools import cached_property

import tree_sitter

from patchbench.checks.callindex import integer_defines, local_includes
from patchbench.checks.engine import parse as cparse
from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.engine.context import TreeContext
from patchbench.checks.engine.model import CallSite, FileModel, Function

# Spelling -> (action, scope, how the queue is named, argument position): the kernel facts table.
#   action: stop | wake | start;  scope: one | all | detach (teardown of every queue)
#   named by: "dev" (queue 0 of the device), "index" (argument is an index), "txq" (a txq pointer)
SPELLINGS: dict[str, tuple[str, str, str, int]] = {
    name: tuple(entry) for name, entry in kfacts.table()["queue"]["spellings"].items()}
# Stops that re-check and restart by themselves (include/net/netdev_queues.h).
SELF_CHECKING_STOPS = kfacts.names("queue", "self_checking_stops")
_XMIT_INDEX_CALLS = kfacts.names("queue", "xmit_index_calls")
_XMIT_TXQ_CALLS = kfacts.names("queue", "xmit_txq_calls")
_TXQ_LOOKUPS = kfacts.names("queue", "txq_lookups")
_MULTIQUEUE_CALLS = kfacts.names("queue", "multiqueue_calls")
_TX_QUEUE_COUNT: dict[str, int] = kfacts.table()["queue"]["tx_queue_count_argument"]
# Spellings whose queues are an ieee80211_hw's, numbered per hardware queue.
_HW_SPELLINGS = kfacts.names("queue", "hw_queue_spellings")


STOP_UNMATCHED = "queue-stop-unmatched"
WRONG_QUEUE = "queue-wake-wrong-queue"


@dataclass(frozen=True)
class QueueKey:
    kind: str              # const | xmit | field | derived | unknown
    name: str = ""         # the constant, field or helper name
    owner: str = ""        # struct type (access path) owning the field, when known
    space: str = "netdev"  # netdev | hw (an ieee80211_hw's queues)

    def matches(self, other: "QueueKey", multiqueue: bool) -> bool:
        if self.space != other.space:
            return False
        if "unknown" in (self.kind, other.kind) or self == other:
            return True
        if self.kind == "const" or other.kind == "const":
            # queue 0 and "the skb's queue" are the same queue only on a single-queue device
            return not multiqueue and (self.kind != "const" or other.kind != "const")
        if self.kind == other.kind == "field":
            return self.name == other.name
        return True

    def describe(self) -> str:
        if self.kind == "const":
            return f"queue {self.name}"
        if self.kind == "xmit":
            return "the transmit path's queue (skb queue mapping)"
        if self.kind == "field":
            return f"queue {self.owner}.{self.name}" if self.owner else f"queue ->{self.name}"
        if self.kind == "derived":
            return f"queue {self.name}"
        return "an unresolved queue"


UNKNOWN = QueueKey("unknown")
# `j++`, `j--`, `++j`, `j += n`, `j -= n`: a variable that walks over values.
_STEPPED = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\+\+|--|[-+*/]=)|(?:\+\+|--)\s*([A-Za-z_]\w*)")


@dataclass(eq=False)
class QueueSite:
    action: str            # stop | wake | start
    scope: str             # one | all | detach
    spelling: str          # the kernel's spelling
    key: QueueKey
    function: Function
    call: CallSite
    via: str = ""          # the header wrapper called here, when the spelling is inside it

    @property
    def line(self) -> int:
        return self.call.line

    @property
    def written(self) -> str:
        """What the code calls: the spelling, or the wrapper around it."""
        return self.via or self.spelling

    def describe(self) -> str:
        """The queue, and the wrapper's spelling naming it: `queue 0 (ieee80211_stop_queue() in foo_stop_queue())`."""
        return self.key.describe() + (f" ({self.spelling}() in {self.via}())" if self.via else "")


@dataclass
class QueueSites:
    sites: list[QueueSite]
    multiqueue: bool
    copied: frozenset[frozenset[str]] = frozenset()   # index fields the file assigns one from the other
    single: bool = False   # every net_device the file allocates has one tx queue (single_tx_queue)


@dataclass(frozen=True)
class Verdict:
    """What a queue rule reports at a site: its rule's message `kind` with the template's `args`,
    the stop it is about when the site is not that stop, and what decided it, in words."""
    rule: str
    site: QueueSite
    kind: str
    args: dict
    severity: str = "error"
    stop: QueueSite | None = None
    because: tuple[str, ...] = ()
    related: tuple[str, int] | None = None   # (label, line) of the related place, when not the stop's


def same_queue(stop: QueueSite, wake: QueueSite, found: QueueSites) -> bool:
    if stop.key.space != wake.key.space:
        return False
    if stop.scope == "all" or wake.scope == "all":
        return True
    if found.single and stop.key.space == "netdev":
        return True   # a device with one tx queue: every index names queue 0
    if stop.key.kind == wake.key.kind == "field" and frozenset((stop.key.name, wake.key.name)) in found.copied:
        return True   # `ring->queue_index = q->tqp_index`: two fields holding one index
    return stop.key.matches(wake.key, found.multiqueue)


# `ring->queue_index = q->tqp_index;`: a field assigned another struct's field, unchanged
_FIELD_COPY = re.compile(rb"(?:->|\.)(\w+)\s*=\s*[A-Za-z_][\w>.-]*(?:->|\.)(\w+)\s*;")


def _copied_fields(source: bytes) -> frozenset[frozenset[str]]:
    return frozenset(frozenset((a.decode(), b.decode())) for a, b in _FIELD_COPY.findall(source) if a != b)


def tree_wrappers(context: TreeContext) -> dict[str, list]:
    """The header wrappers of tx queue spellings in the tree (TreeContext.queue_wrappers)."""
    return {name: found for name, found in context.queue_wrappers().items() if name not in SPELLINGS}


def collect(model: FileModel) -> QueueSites:
    """Every stop/wake/start call inside a function of the file, with its queue key; a call of a
    header wrapper gives a site for each spelling inside it."""
    sites = []
    readers: dict[str, KeyReader] = {}
    around = {name: found for name, found in tree_wrappers(model.context).items() if name not in model.functions}
    for function in model.functions.values():
        for call in function.calls:
            if call.name not in SPELLINGS and call.name not in around:
                continue
            args = [a for a in call.node.child_by_field_name("arguments").named_children if a.type != "comment"]
            reader = readers.setdefault(function.name, KeyReader(model, function))
            if call.name in SPELLINGS:
                action, scope, named_by, position = SPELLINGS[call.name]
                key = _site_key(reader, named_by, args[position] if position < len(args) else None,
                                _space(call.name))
                sites.append(QueueSite(action, scope, call.name, key, function, call))
                continue
            params, inner = around[call.name]
            for spelling, argument in inner:
                action, scope, named_by, _ = SPELLINGS[spelling]
                key = _wrapped_key(reader, named_by, argument, params, args, _space(spelling))
                site = QueueSite(action, scope, spelling, key, function, call, via=call.name)
                if not any(s.call is call and s.key == key and s.action == action for s in sites):
                    sites.append(site)
    sites.sort(key=lambda site: site.call.start)
    multiqueue = any(s.key.kind not in ("const", "unknown") for s in sites if s.scope == "one") or any(
        c.name in _MULTIQUEUE_CALLS for f in model.functions.values() for c in f.calls)
    return QueueSites(sites, multiqueue, _copied_fields(model.source), single_tx_queue(model))


def single_tx_queue(model: FileModel) -> bool:
    """Whether the file allocates its net_devices, each with one tx queue: by a single-queue
    spelling, or a count that is 1 as written or as a plain integer macro of the file or of a
    local header it includes (`[queue] tx_queue_count_argument`). False when it allocates none
    (the count is elsewhere) or a count it cannot read."""
    counts = [(call, _TX_QUEUE_COUNT[call.name]) for function in model.functions.values()
              for call in function.calls if call.name in _TX_QUEUE_COUNT]
    if not counts:
        return False
    known: dict[str, int] | None = None
    for call, position in counts:
        if position < 0:
            continue
        args = [a for a in call.node.child_by_field_name("arguments").named_children if a.type != "comment"]
        if position >= len(args):
            return False
        written = model.text(args[position]).strip("() \t")
        if written.isdigit():
            value = int(written)
        else:
            if known is None:
                known = model.context.header_integers(model.path, local_includes(model.source))
                known.update(integer_defines(model.source, blanked=False))
            value = known.get(written, 0)
        if value != 1:
            return False
    return True


def _space(spelling: str) -> str:
    return "hw" if spelling in _HW_SPELLINGS else "netdev"


def _site_key(reader: "KeyReader", named_by: str, arg: tree_sitter.Node | None, space: str) -> QueueKey:
    if named_by == "dev":
        key = QueueKey("const", "0")
    elif arg is None:
        key = UNKNOWN
    else:
        key = reader.index(arg) if named_by == "index" else reader.txq(arg)
    return QueueKey(key.kind, key.name, key.owner, space)


_NUMBER = re.compile(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]*")


def _wrapped_key(reader: "KeyReader", named_by: str, argument: str, params: list[str],
                 args: list[tree_sitter.Node], space: str) -> QueueKey:
    """The key of a spelling inside a wrapper: its queue argument is a literal, or one of the
    wrapper's parameters (read from the call's argument); anything else is unknown."""
    if named_by == "dev":
        return _site_key(reader, named_by, None, space)
    argument = argument.strip()
    if _NUMBER.fullmatch(argument) and named_by == "index":
        return QueueKey("const", str(int(argument.rstrip("uUlL"), 0)), "", space)
    if argument in params and params.index(argument) < len(args):
        return _site_key(reader, named_by, args[params.index(argument)], space)
    return QueueKey("unknown", space=space)


class KeyReader:
    """Reads queue keys from expressions of one function, following its single-assignment locals."""

    def __init__(self, model: FileModel, function: Function):
        self.model = model
        self.function = function

    def index(self, node: tree_sitter.Node, depth: int = 0) -> QueueKey:
        """The key of a queue index expression."""
        node = _strip(node)
        if node.type == "number_literal":
            text = self.model.text(node).rstrip("uUlL")
            try:
                return QueueKey("const", str(int(text, 0)))
            except ValueError:
                return UNKNOWN
        if node.type == "call_expression":
            callee = self.model.text(node.child_by_field_name("function"))
            if callee in _XMIT_INDEX_CALLS:
                return QueueKey("xmit")
            return QueueKey("derived", f"{callee}()")
        if node.type == "field_expression":
            field = self.model.text(node.child_by_field_name("field"))
            if field == "queue_mapping":
                return QueueKey("xmit")
            return QueueKey("field", field, self._owner(node))
        if node.type == "identifier":
            return self._through_local(self.model.text(node), depth, self.index)
        return UNKNOWN

    def txq(self, node: tree_sitter.Node, depth: int = 0) -> QueueKey:
        """The key of a `struct netdev_queue *` expression."""
        node = _strip(node)
        if node.type == "call_expression":
            callee = self.model.text(node.child_by_field_name("function"))
            args = [a for a in node.child_by_field_name("arguments").named_children
                    if a.type != "comment"]
            if callee in _TXQ_LOOKUPS and len(args) == 2:
                return self.index(args[1], depth)
            if callee in _XMIT_TXQ_CALLS:
                return QueueKey("xmit")
            return UNKNOWN
        if node.type == "field_expression":
            # a txq pointer kept in a per-queue struct: per-queue, its index not visible here
            owner = self._owner(node)
            field = self.model.text(node.child_by_field_name("field"))
            return QueueKey("derived", f"{owner}.{field}" if owner else field)
        if node.type == "identifier":
            return self._through_local(self.model.text(node), depth, self.txq)
        return UNKNOWN

    def _through_local(self, name: str, depth: int, read) -> QueueKey:
        """Follow a local whose every assignment in the function gives the same key. A local that
        is also stepped (`j++`, `i += 2`: a loop counter) names every queue it goes through."""
        values = self.values.get(name)
        if not values or depth >= 4 or name in self.stepped:
            return UNKNOWN
        keys = {read(value, depth + 1) for value in values}
        return keys.pop() if len(keys) == 1 else UNKNOWN

    @cached_property
    def stepped(self) -> set[str]:
        """Locals the function increments, decrements or updates in place."""
        text = self.model.text(self.function.body)
        return {match.group(1) or match.group(2) for match in _STEPPED.finditer(text)}

    @cached_property
    def values(self) -> dict[str, list[tree_sitter.Node]]:
        found: dict[str, list[tree_sitter.Node]] = {}
        for match in cparse.matches(cparse.rule_query("queue-locals"), self.function.body):
            found.setdefault(self.model.text(match["local"][0]), []).append(match["value"][0])
        return found

    def _owner(self, node: tree_sitter.Node) -> str:
        """The access path owning a field: `tx_ring->queue_index`, `struct foo_ring *tx_ring` -> foo_ring."""
        base = self.model.canonical(self.function,
                                    self.model.text(node.child_by_field_name("argument")))
        return base if base[:1].isalpha() or base[:1] == "_" else ""


def _strip(node: tree_sitter.Node) -> tree_sitter.Node:
    while node.type in ("parenthesized_expression", "cast_expression"):
        inner = node.child_by_field_name("value") or (node.named_children[-1] if node.named_children else None)
        if inner is None:
            return node
        node = inner
    return node
