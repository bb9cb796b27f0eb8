"""What the rest of the tree says about the file being checked, passed in with it.

The call index (patchbench.checks.callindex) is built from the whole tree; a TreeContext carries it
with the root the checked paths are relative to and the mode (lint of a tree, or `check` of a
series), and answers the analyses' questions about the tree. Without an index (ALONE) a file is
judged alone. No analysis reads the tree any other way: not the working directory, not a global.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from patchbench.checks.kernel import facts as kfacts


@dataclass
class Way:
    """One way into a function: the reader families (and "rtnl") held there, and whether what
    holds is only partly known ("caller": the caller's own entry is unknown) or not at all
    ("unknown": a registration whose context the facts table does not know)."""
    families: frozenset
    known: str = "yes"       # yes | caller | unknown



@dataclass(frozen=True)
class FieldBelief:
    """What the other files of the tree say of one RCU-protected field (TreeContext.field_beliefs):
    (function, path) of each NULL store and of each load tested for NULL, and how many loads are
    dereferenced untested."""
    nulls: tuple[tuple[str, str], ...] = ()
    tested: tuple[tuple[str, str], ...] = ()
    unchecked: int = 0

    @property
    def tested_count(self) -> int:
        return len(self.tested)


@dataclass(frozen=True, eq=False)
class TreeContext:
    """What the rest of the tree says about the file being checked: the call index of its tree
    (None: the file is judged alone), the root its paths are relative to (None: already relative
    to the tree), and whether findings are compared with a parent's (`series`: patchbench check,
    where only new ones are shown, so a dereference in a function of unknown entry is reported).
    Passed with every file checked (FileModel.context): no verdict reads a module global."""
    index: Any = None   # callindex.CallIndex
    root: Path | None = None
    series: bool = False

    @property
    def digest(self) -> str:
        """The index's digest ("" for none) and the mode: part of every findings cache key."""
        if self.index is None:
            return ""
        return self.index.digest + (":series" if self.series else "")

    def reports_unknown(self) -> bool:
        """Whether what a function of unknown entry needs is reported: by `check` (only new findings
        are shown: a new dereference there) and where no index is known; not by `lint` of a tree,
        whose existing code the index could not place."""
        return self.index is None or self.series

    def _lock_effect(self, lookup, name: str) -> tuple | None:
        """The pair `lookup` (the name of a CallIndex method) finds for `name` (a wrapper's parameter names and
        lock calls, a guard class's lock spelling and arguments), or None (also without an index)."""
        index = self.index
        if index is None:
            return None
        key = (lookup, name)
        if key not in index._effects:   # the answers are read only, never changed by the callers
            found = getattr(index, lookup)(name)
            index._effects[key] = (found[0], found[1]) if found else None
        return index._effects[key]

    def wrapper(self, name: str) -> tuple[list[str], list[list[str]]] | None:
        """(parameter names, [[lock spelling, argument text], ...]) of a header function that leaves
        those locks taken (or released) in its caller (a subsystem's foo_chan_lock()), or None."""
        return self._lock_effect("wrapper_of", name)

    def effect(self, name: str) -> tuple[list[str], list[list[str]]] | None:
        """(parameter names, [[lock spelling, argument text], ...]) of a global function of another
        .c file that leaves those locks taken or released on some of its paths (a function that
        unlocks the socket it is given when it fails), or None; None without an index."""
        return self._lock_effect("effect_of", name)

    def acquires(self, name: str) -> tuple[list[str], list[list[str]]] | None:
        """(parameter names, [[lock spelling, argument text], ...]) of the locks a function of
        another file (or a header) takes for itself on every path and releases again
        (CallIndex.acquires_of), or None; None without an index."""
        return self._lock_effect("acquires_of", name)

    def c_wrapper(self, name: str) -> tuple[list[str], list[list[str]]] | None:
        """(parameter names, [[lock spelling, argument text], ...]) of a global function of a .c file
        that leaves those locks taken (or released) in its caller, or None. Kept apart from
        wrapper() (headers), which the lock rules use."""
        return self._lock_effect("c_wrapper_of", name)

    def guard_class(self, name: str) -> tuple[str, list[str]] | None:
        """(lock spelling, argument texts with the guarded object as "_T") of a guard class a header
        or .c file of the tree defines with DEFINE_GUARD / DEFINE_LOCK_GUARD_1 (see guard_classes),
        when its definitions agree; None otherwise or without an index."""
        return self._lock_effect("guard_of", name)

    def registrations(self, name: str, outside: str | None = None) -> list[tuple[str, str]]:
        """(field, struct) of each registration of `name` anywhere in the tree (`.next = foo` in a
        `struct seq_operations` initialiser), or in files other than `outside`; [] without an index."""
        if self.index is None:
            return []
        here = self.index.number(self.relative(outside)) if outside is not None else None
        return [(kind, struct) for number, kind, struct in self.index.regs(name) if number != here]

    def need(self, name: str) -> tuple[str, str, int, str] | None:
        """What the index knows `name` (defined in another file or a header) to need on entry:
        see CallIndex.need_of; None without an index. A read RTNL also satisfies
        (rcu_dereference_rtnl()) is a need for `check` only: in `lint` of a tree its one finding
        was false (a header inline's branch the caller never takes, nexthop_num_path() under
        `fi->nh`), and 6.1 is at the cap (docs/rules.md, "The call index")."""
        found = self.index.need_of(name) if self.index is not None else None
        if found is not None and not self.reports_unknown() and found[0] in kfacts.rtnl_satisfied_reads():
            return None
        return found

    def callees(self, name: str) -> frozenset[str] | None:
        """What `name`, defined in another file, calls (CallIndex.callees_of); None without an index."""
        return self.index.callees_of(name) if self.index is not None else None

    def opens_section(self, name: str) -> bool:
        """Whether `name`, defined in another file, opens a read-side section of its own (see
        CallIndex.opens_section); False without an index."""
        return self.index is not None and self.index.opens_section(name)

    def calls_a_need(self, source: bytes) -> bool:
        """Whether a file's text calls a function the index knows to need an RCU read-side
        section on entry (as `need` answers); False without an index."""
        return self.index is not None and self.index.calls_a_need(source, self.reports_unknown())

    def field_beliefs(self, path: str, key: str) -> FieldBelief:
        """What the other files of `path`'s directory say of the RCU field `key` ("type.member"):
        its NULL stores, its tested loads and its untested dereferences (CallIndex.fields_of);
        nothing without an index. The code owning a field keeps its lifetime rules: a core
        struct's field (a net_device's) is read by every driver, each with rules of its own."""
        if self.index is None:
            return FieldBelief()
        relative = self.relative(path)
        here, directory = self.index.number(relative), os.path.dirname(relative)
        nulls, tested, unchecked = [], [], 0
        for number, stores, testers, untested in self.index.fields_of(key):
            where = self.index.path(number)
            if number == here or os.path.dirname(where) != directory:
                continue
            nulls += [(name, where) for name in stores]
            tested += [(name, where) for name in testers]
            unchecked += untested
        return FieldBelief(tuple(nulls), tuple(tested), unchecked)

    def accessor(self, name: str) -> str | None:
        """The RCU field key ("type.member") the function `name` of another file or a header
        merely returns a load of, or None (also without an index)."""
        return self.index.accessors.get(name) if self.index is not None else None

    def taking_wrappers(self) -> tuple[str, ...]:
        """The tree's wrappers leaving a lock taken in their caller (CallIndex.taking_wrappers);
        () without an index."""
        return self.index.taking_wrappers if self.index is not None else ()

    def queue_wrappers(self) -> dict[str, list]:
        """Header functions (static inline foo_stop_queue()) around tx queue spellings:
        name -> [parameter names, [[spelling, queue argument text], ...]]; {} without an index."""
        return self.index.queue_wrappers if self.index is not None else {}

    def relative(self, path: str) -> str:
        """`path` relative to the tree root, as the index names files."""
        if self.root is None:
            return path
        return os.path.relpath(os.path.abspath(path), self.root)

    def entries(self, path: str, name: str) -> list[Way]:
        """The ways into the global function `name` defined in `path`, from the rest of the tree;
        [Way(unknown)] when there is none, or no index is in use."""
        if self.index is None:
            return [Way(frozenset(), "unknown")]
        return self.index.ways(self.relative(path), name) or [Way(frozenset(), "none")]

    def entered_only_from(self, path: str, name: str, listed: Callable[[str, str], bool]) -> bool | None:
        """Whether the other files of the tree call the global function `name` of `path` only from
        functions entered through registrations `listed` accepts (CallIndex.entered_only_from):
        None when none calls it, and without an index."""
        if self.index is None:
            return None
        return self.index.entered_only_from(self.relative(path), name, listed)

    def calling_files(self, path: str, name: str) -> list[str]:
        """The other files of the tree that call `name`, in path order; [] without an index."""
        if self.index is None:
            return []
        here = self.index.number(self.relative(path))
        return sorted(self.index.path(number) for number in self.index.callers(name) if number != here)

    def header_integers(self, path: str, headers: list[str]) -> dict[str, int]:
        """The macros defined as plain integers in `headers`, local headers of `path` named as its
        quoted includes name them (relative to its directory), as the index scanned them; the
        first header defining a name gives its value; {} without an index."""
        if self.index is None:
            return {}
        directory = os.path.dirname(self.relative(path))
        found: dict[str, int] = {}
        for header in headers:
            number = self.index.number(os.path.normpath(os.path.join(directory, header)))
            if number >= 0:
                for name, value in self.index.scan_of(number).get("integers", {}).items():
                    found.setdefault(name, value)
        return found

    def calls_reach(self, names: list[str], targets: frozenset[str], depth: int) -> bool:
        """Whether a function of `names` defined in another file or a header calls one of
        `targets`, itself or through the functions it calls there, at most `depth` calls down (the
        index's scans, read lexically); False without an index."""
        if self.index is None:
            return False
        seen: set[str] = set()
        frontier = sorted(set(names))
        for _ in range(depth):
            found: set[str] = set()
            for name in frontier:
                seen.add(name)
                for number, _, _ in self.index.defs(name):
                    called = {callee for callee, _ in self.index.scan_of(number)["calls"].get(name, [])}
                    if called & targets:
                        return True
                    found |= called
            frontier = sorted(found - seen)
        return False

    def siblings(self, path: str) -> list[dict]:
        """The scans of the other .c files of `path`'s directory, in path order; [] without an
        index (the file is judged alone)."""
        if self.index is None:
            return []
        return [self.index.scan_of(number) for number in self.index.siblings(self.relative(path))]


ALONE = TreeContext()   # a file judged without its tree
