"""The kernel facts table (facts.toml), read once, in the shapes the analyses ask for.

Every name of a kernel function, macro, ops field or registration call the checker knows is in
the table; this module only indexes it. See the table's comments for what each section means.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).with_name("facts.toml")
ACTIONS = ("acquire", "release", "try", "try_fail", "assert")
# Kinds that are RCU readers or implicitly held states rather than named locks.
READER_KINDS = frozenset({"rcu", "rcu_bh", "rcu_sched", "trace", "srcu", "bh", "preempt", "irq"})


@lru_cache(maxsize=1)
def table() -> dict:
    with TABLE.open("rb") as handle:
        return tomllib.load(handle)


@dataclass(frozen=True)
class LockOp:
    action: str            # acquire | release | try | try_fail | assert
    kind: str              # the lock's kind (see the table)
    key: str               # path | object | global
    argument: int = 0      # the argument naming the lock
    atomic: bool = False   # holding it disables preemption
    implies: str = ""      # implicit reader held with it: bh | irq | preempt | ""
    field: str = ""        # an object lock that is the object's mutex of this field (wiphy->mtx)

    @property
    def is_reader(self) -> bool:
        """An RCU reader or an implicitly held state (local_bh_disable), not a named lock."""
        return self.kind in READER_KINDS

    @property
    def sleeps(self) -> bool:
        """A sleeping lock (mutex, rwsem, RTNL, instance locks): the update side of RCU data."""
        return not self.atomic and not self.is_reader and self.kind != "any"


@lru_cache(maxsize=1)
def lock_ops() -> dict[str, LockOp]:
    """Spelling -> its LockOp, for every lock, reader and assert of the table."""
    ops: dict[str, LockOp] = {}
    for family in table()["lock"].values():
        for action in ACTIONS:
            for name in family.get(action, ()):
                ops[name] = LockOp(action, family["kind"], family["key"], family.get("argument", 0),
                                   family.get("atomic", False), family.get("implies", ""),
                                   family.get("field", ""))
    return ops


def lock_op(name: str) -> LockOp | None:
    return lock_ops().get(name)


@lru_cache(maxsize=1)
def _statement_ops() -> dict[str, LockOp]:
    return {name: LockOp(action, "context", "path")
            for action in ("acquire", "release") for name in table()["lock_statements"][action]}


def statement_op(name: str) -> LockOp | None:
    """The op of a sparse context statement (`__acquire(&l)`): the code says it now holds the
    lock (or no longer does); a path-keyed lock of no kind of its own."""
    return _statement_ops().get(name)


GUARD = re.compile(r"^(scoped_)?guard\((\w+)\)$")


def guard_op(call_name: str) -> tuple[str, LockOp] | None:
    """("guard", op) for `guard(class)`: the acquiring spelling's op, or a path-keyed lock of an
    unlisted class (a subsystem's own DEFINE_GUARD). None when call_name is no guard."""
    match = GUARD.match(call_name)
    if match is None:
        return None
    spelling = table()["guard"].get(match.group(2))
    op = lock_op(spelling) if spelling else None
    if op is None:
        op = LockOp("acquire", "guard", "path")
    return match.group(2), op


def names(*path: str) -> frozenset[str]:
    """The list at table()[path[0]][path[1]]..., as a set of names."""
    node = table()
    for part in path:
        node = node[part]
    return frozenset(node)


def words(name: str) -> tuple[str, ...]:
    """An identifier's words: `__netvsc_send_pkt` -> ("netvsc", "send", "pkt")."""
    return tuple(word for word in name.lower().split("_") if word)


@dataclass(frozen=True)
class NameConvention:
    """A name convention the facts table keeps (with why): identifiers holding one of its
    entries as whole words, an entry of several words ("start_tx") as consecutive ones."""
    entries: tuple[tuple[str, ...], ...]
    why: str

    def matches(self, name: str) -> bool:
        found = words(name)
        return any(found[i:i + len(entry)] == entry
                   for entry in self.entries for i in range(len(found) - len(entry) + 1))


@lru_cache(maxsize=None)
def name_convention(*path: str) -> NameConvention:
    """The entry at table()[path[0]]...: `words` and `why` (both required)."""
    node = table()
    for part in path:
        node = node[part]
    return NameConvention(tuple(words(entry) for entry in node["words"]), node["why"])


# -- RCU ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Need:
    """What a dereference primitive needs at its call site."""
    strict: frozenset          # families that satisfy it under lockdep
    weak: frozenset            # families that keep the object alive but splat under lockdep
    condition_arg: int | None  # index of a lockdep condition argument (_check, _protected)
    section: str               # how messages name the missing protection
    tracked: bool              # the result is only valid inside the section (escape tracking)
    update_side: bool = False  # RTNL or a sleeping lock known held is accepted instead
    reason: str = ""           # why a call needs it, when not evident (a callee's read elsewhere)
    named: bool = False        # known only by the callee's name ([rcu.helpers]), its body unread

    @property
    def update_only(self) -> bool:
        """An update-side primitive (_protected, rtnl_dereference): no reader satisfies it."""
        return not self.tracked and not (self.strict & readers()) and not self.weak


def readers() -> frozenset[str]:
    return names("rcu", "readers")


@lru_cache(maxsize=1)
def dereferences() -> dict[str, Need]:
    found = {}
    every = readers()
    for name, entry in table()["rcu"]["deref"].items():
        strict = frozenset(entry["strict"])
        if "any-reader" in strict:
            strict = every
        weak = frozenset(entry["weak"]) if "weak" in entry else every - strict
        found[name] = Need(strict, weak, entry.get("condition"),
                           entry.get("section", "an rcu_read_lock() section"), entry.get("tracked", True),
                           entry.get("update_side", False))
    return found


@lru_cache(maxsize=1)
def pointer_loads() -> frozenset[str]:
    """The dereference primitives whose value is their first argument's pointer (rcu_dereference*,
    rtnl_dereference, *_protected, srcu_dereference*): not the list accessors and iterators
    (update_side), and not rcu_access_pointer() (a value to compare, never a load to dereference)."""
    return frozenset(name for name, need in dereferences().items() if not need.update_side)


@lru_cache(maxsize=1)
def read_side_loads() -> frozenset[str]:
    """The pointer loads a reader satisfies (not update_only: rcu_dereference_protected(),
    rtnl_dereference()): their value may race with an update that stores NULL."""
    return frozenset(name for name in pointer_loads() if not dereferences()[name].update_only)


@lru_cache(maxsize=1)
def racing_loads() -> frozenset[str]:
    """The read-side loads that name no update-side alternative (no lockdep condition argument,
    not an _rtnl form): rcu_dereference(), _bh, _sched, srcu_dereference(). A _check(p, cond) or
    _rtnl read may run under the update-side lock, serialised with what it reads."""
    return frozenset(name for name in read_side_loads() if dereferences()[name].condition_arg is None
                     and "rtnl" not in dereferences()[name].strict)


@lru_cache(maxsize=1)
def null_belief() -> tuple[frozenset[str], int, frozenset[str]]:
    """([rcu].assign spellings, the index of their value argument, the calls passing on the truth
    of their argument or testing it for NULL): see [rcu.nullness]."""
    entry = table()["rcu"]["nullness"]
    return names("rcu", "assign"), entry["value"], frozenset(entry["tests"])


@lru_cache(maxsize=1)
def helper_need() -> Need:
    """What a call of a function that needs its caller's section needs (one stating it, or named
    so: dev_get_by_index_rcu): any reader, or RTNL, the update side of most netdev RCU data."""
    return Need(readers() | {"rtnl"}, frozenset(), None, "an RCU read-side section", True, True)


@lru_cache(maxsize=1)
def reference_call() -> re.Pattern:
    return re.compile(table()["rcu"]["reference"]["pattern"])


@lru_cache(maxsize=1)
def sections() -> dict[str, tuple[str, int]]:
    """Calls that open or close a reader (or RTNL) section: name -> (family, +1 | -1 | 0 for a
    try that takes it only when it returns nonzero)."""
    delta = {"acquire": 1, "release": -1, "try": 0, "try_fail": 1}
    return {name: (op.kind, delta[op.action]) for name, op in lock_ops().items()
            if (op.is_reader or op.kind == "rtnl") and op.action in delta}


# -- calling contexts --------------------------------------------------------------------------

@dataclass(frozen=True)
class Context:
    """What holds on entry to a function the kernel reaches through a registration."""
    kind: str
    readers: frozenset         # reader families held
    locks: frozenset           # lock kinds held ("rtnl", "tx", "netif_tx")
    process: bool              # may sleep, nothing implicit held


@lru_cache(maxsize=1)
def registration_calls() -> dict[str, tuple[int, str]]:
    return {name: (entry[0], entry[1]) for name, entry in table()["registration"]["calls"].items()}


def registered_by(name: str, args: list[str]) -> list[tuple[str, str]]:
    """(argument text, registration kind) of each function the registration call `name(args)`
    hands to the kernel: its [registration.calls] argument, the further ones of
    [registration.more_calls], and a kind changed by a flag in another argument
    ([registration.flagged]: rtnl_register()'s doit with RTNL_FLAG_DOIT_UNLOCKED runs without
    RTNL)."""
    base = registration_calls().get(name)
    if base is None:
        return []
    registration = table()["registration"]
    found = []
    flagged = registration.get("flagged", {}).get(name)
    for index, kind in [base] + [tuple(more) for more in registration.get("more_calls", {}).get(name, ())]:
        if index >= len(args):
            continue
        if flagged and kind == flagged[2] and flagged[0] < len(args) and \
                re.search(r"\b" + re.escape(flagged[1]) + r"\b", args[flagged[0]]):
            kind = flagged[3]
        found.append((args[index], kind))
    return found


@lru_cache(maxsize=1)
def rtnl_satisfied_reads() -> frozenset[str]:
    """The read primitives RTNL satisfies as well as a reader (rcu_dereference_rtnl())."""
    return frozenset(name for name, need in dereferences().items() if "rtnl" in need.strict and need.strict - {"rtnl"})


@lru_cache(maxsize=1)
def registration_objects() -> dict[str, tuple[int, ...]]:
    """Registration call -> the argument indexes of the objects it binds its functions to."""
    return {name: tuple(indexes) for name, indexes in table()["registration"]["objects"].items()}


@lru_cache(maxsize=1)
def waits() -> dict[str, tuple[tuple[int, ...], frozenset[str]]]:
    """Waiter -> (argument indexes of the objects it waits on, the registration kinds it waits for)."""
    return {name: (tuple(entry[0]), frozenset(entry[1])) for name, entry in table()["waits"]["calls"].items()}


def registration_fields() -> dict[str, str]:
    return table()["registration"]["fields"]


@lru_cache(maxsize=None)
def context(kind: str) -> Context | None:
    """The context a registration kind runs in; None when the table does not know it."""
    entry = table()["context"].get(kind)
    if entry is None or kind in ("fields", "structs", "follows", "selected"):
        return None
    return Context(kind, frozenset(entry.get("readers", ())), frozenset(entry.get("locks", ())),
                   entry.get("process", False))


def context_of(kind: str, struct: str = "") -> Context | None:
    """The context of a function registered as `kind` (a registration-call kind, or an ops field
    `.kind = fn` in an initialiser of `struct` when known)."""
    contexts = table()["context"]
    if struct and f"{struct}.{kind}" in contexts["fields"]:
        return context(contexts["fields"][f"{struct}.{kind}"])
    if struct and struct in contexts["structs"]:
        return context(contexts["structs"][struct])
    named = context(kind)
    if named is not None:
        return named
    field = contexts["fields"].get(kind)
    return context(field) if field else None


def selected(kind: str, struct: str) -> tuple[str, dict[str, str]] | None:
    """(field, {value: context kind}) when another field of the same initialiser selects the
    context of `struct.kind` (nfnetlink's `.type = NFNL_CB_RCU` for its `.call`), else None."""
    entry = table()["context"].get("selected", {}).get(f"{struct}.{kind}")
    return (entry[0], entry[1]) if entry else None


def follows(kind: str, struct: str) -> str | None:
    """The field of the same initialiser whose exit state `struct.kind` runs in (seq_file's
    show runs inside start's section), or None."""
    return table()["context"]["follows"].get(f"{struct}.{kind}")


# -- generic netlink ---------------------------------------------------------------------------

def genl_doit(kind: str, struct: str) -> bool:
    """Whether `.kind = fn` in an initialiser of `struct` is a generic netlink op's doit."""
    return f"{struct}.{kind}" in table()["genl"]["doits"]


def genl_families() -> frozenset[tuple[str, str]]:
    """(family struct, field) of the fields naming a family's array of ops."""
    return frozenset(tuple(entry.split(".", 1)) for entry in table()["genl"]["families"])


def genl_held(pre_doit: str, flags: str) -> list[tuple[LockOp, str]]:
    """(op of the spelling, object path) of each lock `pre_doit` leaves held for an op whose
    internal flags read `flags` ([genl.pre_doit])."""
    held = []
    for entry in table()["genl"].get("pre_doit", {}).get(pre_doit, ()):
        if "when" in entry and not re.search(entry["when"], flags):
            continue
        if "unless" in entry and re.search(entry["unless"], flags):
            continue
        op = lock_op(entry["lock"])
        if op is not None:
            held.append((op, entry.get("object", "")))
    return held


def object_lock_field(key: str) -> str | None:
    """"<object>.<field>" for the key "<kind>:<object>" of an object lock that is the mutex in
    that field of the object (devl:devlink is devlink.lock), else None."""
    kind, _, obj = key.partition(":")
    if not obj:
        return None
    for family in table()["lock"].values():
        if family["kind"] == kind and family.get("field"):
            return f"{obj}.{family['field']}"
    return None
