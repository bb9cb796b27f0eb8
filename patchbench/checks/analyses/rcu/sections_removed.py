"""Read-side sections a patch removed: the functions that had more explicit read-side sections
in the patch's parent (`FileModel.previous`) than they have now, and the lines of the new text the
removed sections covered (the parent's lines from its first open to its last close, mapped by a
line diff of the function). What those lines need is judged in rcu_removed.

A patch that keeps the section but takes a read out of it does the same to that read (and one that
removes the section judges such a read it wrote outside the lines it covered too): where the
parent read a `[rcu.removal]` call (or its checked form, `dev_net_rcu()` for `dev_net()`) inside
its sections more often than the patch does, the reads of it the patch wrote outside them are
what the section no longer covers (`struct net *net = dev_net(dev);` hoisted to the declarations,
above the rcu_read_lock() that used to cover `net = dev_net_rcu(dev)`).
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass

from patchbench.checks.engine.model import CallSite, FileModel, Function
from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.analyses.rcu import primitives as P


@dataclass(frozen=True)
class Removed:
    families: frozenset     # explicit reader families the patch took away
    lines: frozenset        # lines of the new text the removed sections covered
    opener: str             # a removed opening call, for messages ("rcu_read_lock")
    moved: bool = False     # the sections stay: the reads on `lines` were taken out of them


# [rcu.removal] calls by their own name and by their checked forms' (dev_net_rcu -> dev_net)
_UNCHECKED = {name: name for name in kfacts.table()["rcu"].get("removal", {})} | \
    {checked: name for name, entry in kfacts.table()["rcu"].get("removal", {}).items()
     for checked in entry.get("checked", ())}


def _opens(function: Function) -> dict[str, list[CallSite]]:
    """Explicit read-side opens of the function by family (calls and guards)."""
    found: dict[str, list[CallSite]] = {}
    for call in function.calls:
        section = P.SECTIONS.get(call.name)
        if section is not None and section[1] > 0 and section[0] in P.READ_SECTIONS:
            found.setdefault(section[0], []).append(call)
            continue
        guard = kfacts.guard_op(call.name)
        if guard is not None and guard[1].is_reader and guard[1].kind in P.READ_SECTIONS:
            found.setdefault(guard[1].kind, []).append(call)
    return found


def _span(function: Function, family: str, opens: list[CallSite]) -> range:
    """Lines from the family's first open to its last close (or the function's end)."""
    first = min(call.line for call in opens)
    ends = [call.line for call in function.calls
            if P.SECTIONS.get(call.name) == (family, -1) and call.line >= first]
    if any(kfacts.guard_op(call.name) for call in opens) or not ends:
        ends.append(function.end_line)
    return range(first, max(ends) + 1)


def removed_sections(model: FileModel) -> dict[str, Removed]:
    """Function name -> what the patch removed, for the functions that lost a section."""
    if model.previous is None:
        return {}
    return model.memo("rcu.removed", lambda: _removed(model))


def _removed(model: FileModel) -> dict[str, Removed]:
    if model.previous == model.source:
        return {}
    old_model = FileModel.build(model.path, model.previous)
    found = {}
    old_lines = model.previous.split(b"\n")
    new_lines = model.source.split(b"\n")
    for name, function in sorted(model.functions.items()):
        old = old_model.functions.get(name)
        if old is None:
            continue
        before, now = _opens(old), _opens(function)
        lost = sorted(family for family, calls in before.items() if len(calls) > len(now.get(family, [])))
        if not lost:
            moved = _moved_out(old_lines, old, before, new_lines, function, now)
            if moved:
                found[name] = Removed(frozenset(before), frozenset(moved), min(before.items())[1][0].name, True)
            continue
        covered_old = set()
        for family in lost:
            covered_old.update(_span(old, family, before[family]))
        # and the reads the patch wrote elsewhere for those it took out with the section (the
        # parent's `net = dev_net_rcu(dev)` inside it, hoisted to `struct net *net = dev_net(dev);`)
        covered = _map(old_lines, old, new_lines, function, covered_old) | \
            _moved_out(old_lines, old, before, new_lines, function, now)
        if covered:
            opener = before[lost[0]][0].name
            found[name] = Removed(frozenset(lost), frozenset(covered), opener)
    return found


def _map(old_lines: list[bytes], old: Function, new_lines: list[bytes], new: Function,
         covered_old: set[int]) -> set[int]:
    """Lines of `new` whose counterpart in `old` (same text, or a replaced block) was covered."""
    covered = set()
    for tag, i1, i2, j1, j2 in _line_diff(old_lines, old, new_lines, new):
        if tag == "equal":
            covered.update(new.start_line + j1 + k for k in range(j2 - j1)
                           if old.start_line + i1 + k in covered_old)
        elif tag == "replace" and any(old.start_line + i in covered_old for i in range(i1, i2)):
            covered.update(new.start_line + j for j in range(j1, j2))
    return covered


def _covered(function: Function, opens: dict[str, list[CallSite]]) -> set[int]:
    return {line for family, calls in opens.items() for line in _span(function, family, calls)}


def _moved_out(old_lines: list[bytes], old: Function, before: dict[str, list[CallSite]],
               new_lines: list[bytes], new: Function, now: dict[str, list[CallSite]]) -> set[int]:
    """Lines the patch wrote with an unchecked read (by its plain name) outside the function's
    sections, where the parent read it inside them more often than the patch does."""
    if not before:
        return set()
    inside_old, inside_new = _covered(old, before), _covered(new, now)

    def inside(function: Function, covered: set[int]) -> Counter:
        return Counter(_UNCHECKED[c.name] for c in function.calls if c.name in _UNCHECKED and c.line in covered)

    fewer = {name for name, count in inside(old, inside_old).items() if count > inside(new, inside_new)[name]}
    written = _written(old_lines, old, new_lines, new)
    return {c.line for c in new.calls if _UNCHECKED.get(c.name) in fewer and c.line not in inside_new
            and c.line in written}


def _written(old_lines: list[bytes], old: Function, new_lines: list[bytes], new: Function) -> set[int]:
    """Lines of `new` the patch wrote (no same line in `old` at that place of the line diff)."""
    return {new.start_line + j for tag, _, _, j1, j2 in _line_diff(old_lines, old, new_lines, new)
            if tag != "equal" for j in range(j1, j2)}


def _line_diff(old_lines: list[bytes], old: Function, new_lines: list[bytes], new: Function) -> list[tuple]:
    """The opcodes of a line diff of the function's text in the parent and now (indentation ignored)."""
    a = [line.strip() for line in old_lines[old.start_line - 1:old.end_line]]
    b = [line.strip() for line in new_lines[new.start_line - 1:new.end_line]]
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
