"""Calling contexts: how the kernel enters a function, for every analysis family.

A function is entered
- through its registrations: an initialiser field (`.ndo_start_xmit = foo` in a
  `struct net_device_ops`) or a registration call (`netif_napi_add(dev, napi, foo)`), in its own
  file or anywhere in the tree (the call index); the kernel facts table gives each registration
  its calling context (what is held when the kernel calls it: readers, locks, process context),
  possibly chosen by another field of the same initialiser (`selected`) or following the exit of
  a sibling field (`follows`);
- by its callers in the file, whose state at the call each family's own walk computes;
- by its callers elsewhere in the tree (the call index: TreeContext.entries);
- and it may state what it needs itself (lockdep asserts, annotations), which the families read.

This module answers the first, for every family (the RCU entry states, the tx queue sides, the
lock hand-off protocols, the ptr_ring serialised contexts), and says each way in words that a
finding can quote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from patchbench.checks.engine.model import FileModel
from patchbench.checks.kernel import facts as kfacts


@dataclass(frozen=True)
class Registration:
    """One registration of a function: how the kernel reaches it, and what holds then."""
    kind: str                        # the field or registration call's kind ("ndo_start_xmit", "napi_poll")
    struct: str                      # the ops struct of the initialiser ("" for a call, or when unknown)
    context: kfacts.Context | None   # the facts table's calling context; None: the table does not know it
    elsewhere: bool = False          # registered in another file of the tree (the call index)
    follows: str | None = None       # the sibling field whose exit state it runs in (seq_file show)

    def describe(self) -> str:
        """`registered as .ndo_start_xmit of struct net_device_ops (xmit)`, for messages."""
        where = f"of struct {self.struct} " if self.struct else ""
        said = f"registered as .{self.kind} {where}" if self.struct else f"registered as {self.kind} "
        said += "in another file " if self.elsewhere else ""
        return said + (f"({self.context.kind})" if self.context else "(a context the facts table does not know)")


def registrations(model: FileModel, name: str, tree: bool = True) -> list[Registration]:
    """The registrations of function `name`: those of its file, in kind order, then (with `tree`)
    those elsewhere in the tree that the call index knows."""
    found = []
    kinds = set(model.registrations.get(name, ()))
    function = model.functions.get(name)
    # an rx_handler is registered with netdev_rx_handler_register() anywhere; its return type says it
    if function is not None and model.text(function.node)[:80].startswith(("rx_handler_result_t",
                                                                         "static rx_handler_result_t")):
        kinds.add("rx_handler")
    for kind in sorted(kinds):
        struct = model.ops_structs.get((name, kind), "")
        context = kfacts.context_of(kind, struct)
        chooser = kfacts.selected(kind, struct)
        if chooser is not None:   # another field of the initialiser says which context
            choice = chooser[1].get(model.sibling(name, kind, chooser[0]) or "")
            context = kfacts.context(choice) if choice else None
        first = kfacts.follows(kind, struct)
        found.append(Registration(kind, struct, context, False,
                                  model.sibling(name, kind, first) if first else None))
    if tree:
        found.extend(Registration(kind, struct, kfacts.context_of(kind, struct), True)
                     for kind, struct in sorted(set(model.context.registrations(name, outside=model.path))))
    return found


def registered_kinds(model: FileModel, name: str, tree: bool = True) -> set[str]:
    """The kinds `name` is registered as (see registrations)."""
    return {registration.kind for registration in registrations(model, name, tree)}


def registered_ways(model: FileModel, name: str) -> list[Registration]:
    """How the kernel reaches `name`: its registrations in its own file, which say all there is
    when there are any; otherwise those elsewhere in the tree, unless the function is static (a
    same-named function of another file is another function)."""
    here = registrations(model, name, tree=False)
    function = model.functions.get(name)
    if here or (function is not None and function.is_static and not model.path.endswith(".h")):
        return here
    return [way for way in registrations(model, name) if way.elsewhere]


def listed(way: Registration, entries: frozenset[str] | set[str]) -> bool:
    """The registration is one of a facts table list: a registration kind ("napi_poll") or a
    "<struct>.<field>" entry (any struct of that field when the registration names none)."""
    if way.kind in entries:
        return True
    if way.struct:
        return f"{way.struct}.{way.kind}" in entries
    return any(entry.endswith(f".{way.kind}") for entry in entries)


def only_reached_from(model: FileModel, name: str, entries: frozenset[str] | set[str]) -> bool:
    """Every way into `name` is a registration listed in `entries`, directly or through callers
    that are themselves only reached that way: in-file callers (a helper of a NAPI poll) and, for
    a global function only called, the callers the call index knows in other files (an exported
    registration helper every caller of which is a driver's probe)."""
    return _only_reached_from(model, name, entries, set())


def _only_reached_from(model: FileModel, current: str, entries: frozenset[str] | set[str], seen: set[str]) -> bool:
    if current in seen:
        return True   # a cycle adds no new way in
    seen.add(current)
    ways = registered_ways(model, current)
    if ways:
        return all(listed(way, entries) for way in ways)
    callers = model.callers.get(current, [])
    if model.has_unknown_callers(current):
        if not _only_called(model, current):
            return False
        elsewhere = model.context.entered_only_from(
            model.path, current, lambda kind, struct: listed(Registration(kind, struct, None), entries))
        if elsewhere is False or (elsewhere is None and not callers):
            return False
    elif not callers:
        return False
    return all(call.function and _only_reached_from(model, call.function, entries, seen) for call in callers)


def _only_called(model: FileModel, name: str) -> bool:
    """A global function of a .c file whose address the file does not take or register: its
    ways in are its calls, here and in the files the call index knows."""
    function = model.functions.get(name)
    return function is not None and not function.is_static and not model.path.endswith(".h") and \
        (name not in model.address_taken or _only_exported(model, name)) and name not in model.registrations


def _only_exported(model: FileModel, name: str) -> bool:
    """Every use of the name other than a call is its EXPORT_SYMBOL*(): an export lets modules
    call it, and the call index knows those calls (a mention in a comment counts as a use)."""
    word = re.escape(name.encode())
    uses = len(re.findall(rb"\b" + word + rb"\b(?!\s*\()", model.source))
    return uses == len(re.findall(rb"\bEXPORT_SYMBOL\w*\s*\(\s*" + word + rb"\s*\)", model.source))


SHOWN = 3   # ways of one sort named in an explanation; the rest are counted


def explain(model: FileModel, name: str) -> tuple[str, ...]:
    """The ways into function `name`, in words, for a finding's explanation: its registrations,
    its callers in the file and the files of the tree that call it."""
    said = [f"way in: {registration.describe()}" for registration in registrations(model, name)]
    callers = model.callers.get(name, [])
    said += [f"way in: called from {call.function}() at line {call.line}" for call in callers[:SHOWN]]
    if len(callers) > SHOWN:
        said.append(f"way in: {len(callers) - SHOWN} more calls in this file")
    elsewhere = model.context.calling_files(model.path, name)
    said += [f"way in: called from {path}" for path in elsewhere[:SHOWN]]
    if len(elsewhere) > SHOWN:
        said.append(f"way in: called from {len(elsewhere) - SHOWN} more files of the tree")
    if not said:
        said.append("no way in is known: no caller or registration" +
                    (" in the tree" if model.context.index is not None else " in this file (no tree index)"))
    return tuple(said)
