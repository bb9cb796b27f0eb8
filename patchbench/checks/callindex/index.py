"""The merged index of one tree: an SQLite file asked per name (defs, callers, registrations,
wrappers, RCU needs), and the ways into a function from the rest of the tree.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.engine.context import Way
from patchbench.checks.callindex.scan import _CALL, _SECTION_BITS, _WORDS_ONLY, _context_families, _families
from patchbench.checks.callindex.store import _load_scan, _recently_used, _remember


UNKNOWN_WAY = frozenset({("unknown", "way")})


UNKNOWN = ("unknown",)


DEPTH = 2    # callers of callers consulted for a caller's own entry


FANOUT = 32  # files consulted for a caller's own entry (the first, by path): a meet needs few


HOPS = 3     # files away the callers of a global function are followed for entered_only_from


@dataclass
class CallIndex:
    """The merged index of one tree, an SQLite file asked per name (nothing loaded up front):
    which files define and call each name, registrations, header lock wrappers. What each call
    holds is read from the calling file's scan (stored by blob id) when a way in is asked for."""
    digest: str                                           # of every (path, blob id)
    directory: Path                                       # where the scans and the database are
    _entries: dict = field(default_factory=dict, repr=False)
    _scans: dict = field(default_factory=dict, repr=False)
    _sites: dict = field(default_factory=dict, repr=False)   # number -> (its scan, callee -> sites)
    _needing: dict = field(default_factory=dict, repr=False)   # with the RTNL-satisfied reads or not -> names
    _connection: tuple = field(default=(), repr=False)    # (pid, sqlite3.Connection)
    # answers already given: the rules ask about the same names for every function of a file
    _answers: dict = field(default_factory=dict, repr=False)
    _wrappers: dict | None = field(default=None, repr=False)
    _acquires: dict | None = field(default=None, repr=False)
    # _lock_effect's answers by (lookup, name): asked of every call of every function walked
    _effects: dict = field(default_factory=dict, repr=False)
    _calls_a_need: tuple = field(default=(), repr=False)   # (source, answer) of the last file asked

    def _query(self, sql: str, *args) -> list[tuple]:
        key = (sql, args)
        found = self._answers.get(key)
        if found is None:
            if not self._connection or self._connection[0] != os.getpid():   # not across a fork
                # immutable: an index is written once, under its digest, and put in place by a
                # rename; SQLite then takes no file locks and looks for no journal at each query
                database = f"file:{self.directory / (self.digest + '.sqlite')}?mode=ro&immutable=1"
                self._connection = (os.getpid(), sqlite3.connect(database, uri=True, check_same_thread=False))
            if len(self._answers) > 100_000:
                self._answers.clear()
            found = self._answers[key] = tuple(self._connection[1].execute(sql, args).fetchall())
        return list(found)

    def defs(self, name: str) -> list[tuple[int, bool, int]]:
        """(file, global, stated bits) of each definition of `name`."""
        return [(f, bool(g), s) for f, g, s in
                self._query("SELECT file, global, stated FROM defs WHERE name = ? ORDER BY file", name)]

    def callers(self, name: str) -> list[int]:
        return [f for (f,) in self._query("SELECT file FROM callers WHERE name = ? ORDER BY file", name)]

    def regs(self, name: str) -> list[tuple[int, str, str]]:
        return self._query("SELECT file, kind, struct FROM regs WHERE name = ? ORDER BY file, kind, struct", name)

    def effect_of(self, name: str) -> list | None:
        """[params, [[lock spelling, argument text], ...]] of the lock calls a global function of
        a .c file leaves unbalanced (see _net_effect), when every such definition says the same."""
        found = []
        for number, is_global, _ in self.defs(name):
            if not is_global:
                continue
            path = self._query("SELECT path FROM files WHERE number = ?", number)
            if not path or not path[0][0].endswith(".c"):
                continue
            definition = self.scan_of(number)["defs"].get(name, [])
            found.append(definition[2] if len(definition) > 2 else None)
        return found[0] if found and all(f == found[0] for f in found) else None

    def acquires_of(self, name: str) -> list | None:
        """[params, [[lock spelling, argument text], ...]] of the locks every global definition of
        `name` (a function of a .c file or a header) takes for itself on every path (scan's
        "acquires"), when they all say the same; None otherwise (an `#ifdef` stub taking nothing)."""
        if self._acquires is None:   # asked of every call made under a lock: read once
            self._acquires = dict(self._query("SELECT name, effect FROM acquires"))
        found = self._acquires.get(name)
        return json.loads(found) if found else None

    def wrapper_of(self, name: str) -> list | None:
        if self._wrappers is None:   # a few hundred rows, asked of every call in every file: read once
            self._wrappers = dict(self._query("SELECT name, effect FROM wrappers"))
        found = self._wrappers.get(name)
        return json.loads(found) if found else None

    def c_wrapper_of(self, name: str) -> list | None:
        """[params, effect] of the global function `name` of a .c file that leaves locks taken
        or released in its caller (a subsystem's foo_lock()), None for others (or when definitions differ)."""
        found = self._query("SELECT effect FROM c_wrappers WHERE name = ?", name)
        return json.loads(found[0][0]) if found else None

    def guard_of(self, name: str) -> list | None:
        found = self._query("SELECT effect FROM guards WHERE name = ?", name)
        return json.loads(found[0][0]) if found else None

    @cached_property
    def taking_wrappers(self) -> tuple[str, ...]:
        """The header wrappers (functions and macros) and global .c-file wrappers that leave a
        lock taken in their caller (hci_dev_lock(), a subsystem's foo_lock()), sorted."""
        names = set()
        for table in ("wrappers", "c_wrappers"):
            for name, effect in self._query(f"SELECT name, effect FROM {table}"):
                if any((op := kfacts.lock_op(spelling)) is not None and op.action != "release"
                       for spelling, _ in json.loads(effect)[1]):
                    names.add(name)
        return tuple(sorted(names))

    @cached_property
    def queue_wrappers(self) -> dict[str, list]:
        """Header function -> [params, [[tx queue spelling, queue argument text], ...]]."""
        return {name: json.loads(effect) for name, effect in
                self._query("SELECT name, effect FROM queue_wrappers ORDER BY name")}

    def fields_of(self, key: str) -> list[tuple[int, list[str], list[str], int]]:
        """(file, functions storing NULL in it, functions testing a load of it (one per load),
        untested dereferences of a load) of each file that says something of the RCU field `key`
        ("type.member"), by file (scan.field_reads)."""
        return [(number, json.loads(nulls), json.loads(tested), unchecked) for number, nulls, tested, unchecked in
                self._query("SELECT file, nulls, tested, unchecked FROM fields WHERE key = ? ORDER BY file", key)]

    @cached_property
    def accessors(self) -> dict[str, str]:
        """Function -> the RCU field key it merely returns a load of (every definition agreeing)."""
        return dict(self._query("SELECT name, key FROM accessors ORDER BY name"))

    def blob(self, number: int) -> str:
        found = self._query("SELECT blob FROM files WHERE number = ?", number)
        return found[0][0] if found else ""

    def scan_of(self, number: int) -> dict:
        found = _recently_used(self._scans, number)
        if found is None:
            found = _remember(self._scans, number, _load_scan(self.directory, self.blob(number)) or
                              {"defs": {}, "calls": {}, "regs": [], "includes": []})
        return found

    def sites(self, name: str, number: int) -> list[tuple[str, int]]:
        """(caller, bits) of each call of `name` in file `number`."""
        scan = self.scan_of(number)
        by_callee = _recently_used(self._sites, number)
        if by_callee is None or by_callee[0] is not scan:   # the file's calls, by callee, once
            table: dict[str, list] = {}
            for caller, called in sorted(scan["calls"].items()):
                for callee, bits in called:
                    table.setdefault(callee, []).append((caller, bits))
            by_callee = _remember(self._sites, number, (scan, table))
        return list(by_callee[1].get(name, ()))

    def calls_a_need(self, source: bytes, rtnl_satisfied: bool = True) -> bool:
        """Whether a file's text calls a function that needs an RCU read-side section on entry: a
        file that mentions no RCU at all may still call one. Without `rtnl_satisfied`, needs RTNL
        also satisfies (rcu_dereference_rtnl(): judged by `check` only) do not count."""
        if self._calls_a_need and self._calls_a_need[:2] == (source, rtnl_satisfied):   # asked again
            return self._calls_a_need[2]
        # its words first, calls only if one is named: most files name none, and splitting the text
        # into words costs a quarter of finding its calls
        needing = self.needing(rtnl_satisfied)
        answer = not needing.isdisjoint(source.translate(_WORDS_ONLY).split()) and \
            not needing.isdisjoint(_CALL.findall(source))
        self._calls_a_need = (source, rtnl_satisfied, answer)
        return answer

    def needing(self, rtnl_satisfied: bool = True) -> frozenset[bytes]:
        """The names of every function that needs an RCU read-side section on entry (without
        `rtnl_satisfied`: leaving out those whose read RTNL also satisfies)."""
        if rtnl_satisfied not in self._needing:
            left_out = [] if rtnl_satisfied else sorted(kfacts.rtnl_satisfied_reads())
            where = f" WHERE primitive NOT IN ({', '.join('?' * len(left_out))})" if left_out else ""
            self._needing[rtnl_satisfied] = frozenset(
                name.encode("latin-1") for (name,) in self._query("SELECT DISTINCT name FROM needs" + where, *left_out))
        return self._needing[rtnl_satisfied]

    def need_of(self, name: str) -> tuple[str, str, int, str] | None:
        """(primitive, path of the read, its line, callee it is reached through or "") when every
        global definition of `name` needs an RCU read-side section on entry (see _needs)."""
        rows = self._query("SELECT file, primitive, origin, line, via FROM needs WHERE name = ? "
                           "ORDER BY file", name)
        definitions = [f for f, is_global, _ in self.defs(name) if is_global]
        needing = [row for row in rows if row[0] in definitions]
        if not definitions or len({row[0] for row in needing}) < len(set(definitions)):
            return None
        _, primitive, origin, line, via = needing[0]
        path = self._query("SELECT path FROM files WHERE number = ?", origin)
        return primitive, path[0][0] if path else "", line, via

    def callees_of(self, name: str) -> frozenset[str] | None:
        """The names the global definitions of `name` call (all of them together), None when it
        has no global definition."""
        definitions = [number for number, is_global, _ in self.defs(name) if is_global]
        if not definitions:
            return None
        return frozenset(callee for number in definitions
                         for callee, _ in self.scan_of(number)["calls"].get(name, []))

    def opens_section(self, name: str) -> bool:
        """Every global definition of `name` opens an explicit read-side section of its own: a
        call in its body, or in that of a static function of its file it calls with nothing held,
        is made with an rcu_read_lock*() or srcu_read_lock() section held (sunrpc_cache_lookup_rcu()
        -> sunrpc_cache_find_rcu(), which takes rcu_read_lock())."""
        definitions = [number for number, is_global, _ in self.defs(name) if is_global]
        if not definitions:
            return False
        for number in definitions:
            calls = self.scan_of(number)["calls"]
            own = calls.get(name, [])
            if any(bits & _SECTION_BITS for _, bits in own):
                continue
            if not any(any(bits & _SECTION_BITS for _, bits in calls.get(callee, []))
                       for callee, held in own if held == 0 and self.is_local(callee, number)):
                return False
        return True

    def path(self, number: int) -> str:
        found = self._query("SELECT path FROM files WHERE number = ?", number)
        return found[0][0] if found else ""

    def number(self, path: str) -> int:
        found = self._query("SELECT number FROM files WHERE path = ?", path)
        return found[0][0] if found else -1

    def siblings(self, path: str) -> list[int]:
        """The other .c files of `path`'s directory (not of its subdirectories), in path order."""
        directory = os.path.dirname(path)
        prefix = f"{directory}/" if directory else ""
        return [number for number, other in
                self._query("SELECT number, path FROM files WHERE path LIKE ? ESCAPE '!' ORDER BY path",
                            prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%.c")
                if other != path and "/" not in other[len(prefix):]]

    def is_local(self, name: str, number: int) -> bool:
        """`name` is a static function of file `number` (a .c file): its calls there are its own."""
        return any(f == number and not is_global for f, is_global, _ in self.defs(name))

    def ways(self, path: str, name: str, depth: int = 0) -> list[Way]:
        """The ways into the global function `name` from files other than `path`."""
        here = self.number(path)
        ways = [self.registered(kind, struct) for number, kind, struct in self.regs(name)
                if number != here]
        numbers = [n for n in self.callers(name) if n != here and not self.is_local(name, n)]
        if depth and len(numbers) > FANOUT:   # a caller's own callers: enough of them to meet
            numbers = numbers[:FANOUT]
        for number in numbers:
            for caller, bits in self.sites(name, number):
                held, known = self.entry(number, caller, depth + 1)
                ways.append(Way(_families(bits) | held, known))
        return ways

    def entered_only_from(self, path: str, name: str, listed: Callable[[str, str], bool]) -> bool | None:
        """Whether every call of the global function `name` from files other than `path` is made by
        a function the kernel enters only through registrations `listed` accepts (kind, struct),
        directly or through its own callers in any file, at most HOPS files away; None when no
        other file calls it. A function registered anywhere is entered as registered (as
        calling.registered_ways has it); one with neither a registration nor a caller, or
        further away, is not known to be."""
        here = self.number(path)
        calls = [(number, caller) for number in self.callers(name)
                 if number != here and not self.is_local(name, number)
                 for caller, _ in self.sites(name, number)]
        if not calls:
            return None
        seen: set[tuple[int, str]] = set()
        return all(self._entered_only(number, caller, listed, 1, seen) for number, caller in calls)

    def _entered_only(self, number: int, name: str, listed: Callable[[str, str], bool], hops: int,
                      seen: set[tuple[int, str]]) -> bool:
        if (number, name) in seen:
            return True   # a cycle adds no way in (and a False seen before already decided)
        seen.add((number, name))
        is_global = not self.is_local(name, number)
        registered = [(kind, struct) for n, kind, struct in self.regs(name) if is_global or n == number]
        if registered:
            return all(listed(kind, struct) for kind, struct in registered)
        calls = [(n, caller, hops + (n != number)) for n in ([number] if not is_global else self.callers(name))
                 if n == number or not self.is_local(name, n) for caller, _ in self.sites(name, n)]
        return bool(calls) and all(further <= HOPS and self._entered_only(n, caller, listed, further, seen)
                                   for n, caller, further in calls)

    @staticmethod
    def registered(kind: str, struct: str) -> Way:
        context = kfacts.context_of(kind, struct)
        return Way(_context_families(context)) if context else Way(frozenset(), "unknown")

    def entry(self, number: int, name: str, depth: int) -> tuple[frozenset, str]:
        """(families, known) held on entry to `name` of file `number`, from what it states and
        its ways in (DEPTH files away; further, or with no way in, it is unknown: "caller").

        A function of this process's answers only, never of the order they were asked in (a lint
        asks them file after file): they are kept by (file, name, depth), as a caller DEPTH files
        away is cut short where one asked first-hand is not; and static functions of a file that
        reach each other (recursion) are solved together: the most that all their ways in, from
        outside the cycle and along it, hold in common (the greatest fixpoint), instead of from a
        stand-in for the one asked first, which made the answers depend on which that was."""
        key = (number, name, depth)
        if key not in self._entries:
            self._solve(key)
        return self._entries[key]

    def _parts(self, key: tuple[int, str, int]) -> tuple[int, list[Way], list[tuple[tuple, int]]]:
        """(stated bits, ways in known without this file's cycles, [(caller's key, bits held at
        the call)] for the static callers of the same file at the same depth)."""
        number, name, depth = key
        found = [(is_global, stated) for n, is_global, stated in self.defs(name) if n == number]
        is_global, stated = found[0] if found else (True, 0)
        if depth >= DEPTH:
            return stated, [], []
        if is_global:   # its callers' entries are one depth further: never a cycle with this one
            return stated, self.ways("", name, depth), []
        # a static function: only its own file reaches it (no hop counted)
        ways = [self.registered(kind, struct) for n, kind, struct in self.regs(name) if n == number]
        return stated, ways, [((number, caller, depth), bits) for caller, bits in self.sites(name, number)]

    def _solve(self, root: tuple[int, str, int]) -> None:
        """Settle the entries `root` reaches through static callers of its file, a strongly
        connected group at a time (Tarjan), callers' groups first."""
        order: dict[tuple, int] = {}
        low: dict[tuple, int] = {}
        stack: list[tuple] = []
        waiting: set[tuple] = set()   # on the stack
        parts: dict[tuple, tuple] = {}

        def visit(key: tuple) -> None:
            order[key] = low[key] = len(order)
            stack.append(key)
            waiting.add(key)
            parts[key] = self._parts(key)
            for caller, _ in parts[key][2]:
                if caller in self._entries:
                    continue
                if caller not in order:
                    visit(caller)
                    low[key] = min(low[key], low[caller])
                elif caller in waiting:
                    low[key] = min(low[key], order[caller])
            if low[key] == order[key]:
                at = len(stack) - 1 - stack[::-1].index(key)
                group = stack[at:]
                del stack[at:]
                waiting.difference_update(group)
                self._settle(group, parts)

        visit(root)

    def _settle(self, group: list[tuple], parts: dict[tuple, tuple]) -> None:
        """The entries of one group, from the top down (None: not yet limited by any way in)
        until nothing changes: the answer does not depend on the order they are visited in."""
        values: dict[tuple, tuple | None] = {key: None for key in group}
        if len(group) == 1 and all(caller != group[0] for caller, _ in parts[group[0]][2]):
            values[group[0]] = self._value(parts[group[0]], values)   # no cycle: once is enough
            changed = False
        else:
            changed = True
        while changed:
            changed = False
            for key in group:
                value = self._value(parts[key], values)
                if value != values[key]:
                    values[key] = value
                    changed = True
        for key in group:   # reached only from within the cycle: no way in
            stated = parts[key][0]
            self._entries[key] = values[key] or (_families(stated), "yes" if stated else "caller")

    def _value(self, part: tuple, values: dict) -> tuple[frozenset, str] | None:
        stated, ways, callers = part
        ways = list(ways)
        limited = True
        for caller, bits in callers:
            held = values[caller] if caller in values else self._entries[caller]
            if held is None:   # a caller of the cycle not limited yet: adds nothing
                limited = False
                continue
            ways.append(Way(_families(bits) | held[0], held[1]))
        known_ways = [w for w in ways if w.known != "unknown"]
        if known_ways:
            held = frozenset.intersection(*(w.families for w in known_ways))
            known = "yes" if all(w.known == "yes" for w in known_ways) else "caller"
        elif not limited:
            return None
        else:
            held, known = frozenset(), "caller"
        return held | _families(stated), "yes" if stated else known
