"""What the RCU rules know about kernel primitives, as the RCU analysis asks for it (no rule here:
no ID, no check). The names come from the kernel facts table (patchbench/checks/kernel/facts.toml,
read by kfacts); this module only derives the views the analysis uses: the helper naming
convention ([rcu.helpers]) and how a comment states a precondition in prose ([rcu.prose]), both
read as words.

Families of facts a program point can hold:
- readers: "rcu" (rcu_read_lock), "rcu_bh", "rcu_sched" (the explicit flavours), "trace"
  (rcu_read_lock_trace, valid for nothing below), "srcu", and the implicit readers "bh"
  (local_bh_disable, spin_lock_bh, softirq), "irq" (irqs off, hardirq), "preempt"
  (preempt_disable), "spin" (a spinning lock held: preemption off);
- "rtnl", and ("lock", key) for a named lock.

Since the 5.0 flavour consolidation every reader family keeps an RCU-protected object alive, but
lockdep (PROVE_RCU) only accepts the flavour a primitive names: that difference is reported as a
"lockdep splat" warning rather than an error.
"""

from __future__ import annotations

import dataclasses
import re

from patchbench.checks.kernel import facts as kfacts

Need = kfacts.Need
# Families that keep RCU-protected memory alive (memory safety, used by rcu-pointer-escapes);
# "any" is some reader on every way in, not the same one (a callee of an rcu_read_lock() caller
# and of a local_bh_disable() one).
READERS = kfacts.readers()
# Readers that keep a value read inside a section valid: not a held spinlock (not a reader
# under PREEMPT_RT, and reviewers ask for the rcu_read_unlock() to stay after the last use).
KEEPS_ALIVE = READERS - {"spin"}
# The sections a tracked value must be read in: the function's own explicit read-side sections.
READ_SECTIONS = kfacts.names("rcu", "read_sections")
DEREFERENCES = kfacts.dereferences()
ACCESS = kfacts.table()["rcu"]["access"]
HELPER_NEED = kfacts.helper_need()
# What a call of a function of another file whose body the call index does not summarise needs
# when its name follows the convention (named_helper): HELPER_NEED, saying so in its message.
NAMED_NEED = dataclasses.replace(HELPER_NEED, named=True)
# Calls that open and close sections: name -> (family, +1 open / -1 close / 0 try).
SECTIONS = kfacts.sections()
# The explicit read-side flavours.
EXPLICIT_FAMILIES = frozenset({"rcu", "rcu_bh", "rcu_sched", "trace"})


_HELPERS = kfacts.table()["rcu"]["helpers"]


def words(name: str) -> list[str]:
    """The words of an identifier: split on "_", leading underscores ignored."""
    return [word for word in name.split("_") if word]


def helper_word() -> str:
    """The last word of every name named_helper() accepts ([rcu.helpers] last_word)."""
    return _HELPERS["last_word"]


def named_helper(name: str) -> bool:
    """`name` follows the kernel's convention for a function its callers call inside a read-side
    section ([rcu.helpers]: dev_get_by_index_rcu): its last word is "rcu", and it is neither the
    RCU or list API itself nor a call_rcu() callback or list mutator by its words."""
    parts = words(name)
    if len(parts) < 2 or parts[-1] != _HELPERS["last_word"] or not name.isidentifier():
        return False
    return parts[-2] not in _HELPERS["not_before_last"] and \
        not any(parts[:len(first)] == first for first in _HELPERS["not_first_words"])


# Preconditions stated in prose ([rcu.prose]; asserts and annotations come first).
_PROSE = kfacts.table()["rcu"]["prose"]
_CLAUSE = re.compile(r"[.;:()]|\n\s*\n")
_SENTENCE = re.compile(r"\.(?:\s|$)|\n\s*\n")


def _prose_words(text: str) -> list[tuple[str, list[str]]]:
    """(word, the words of its identifier after it, or None past its first) of a text, lower
    case: "rcu_read_lock" gives (rcu, [read, lock]), (read, None), (lock, None)."""
    found = []
    for identifier in re.findall(r"[A-Za-z0-9_]+", text.lower()):
        parts = words(identifier)
        found.extend((word, parts[1:] if index == 0 else None) for index, word in enumerate(parts))
    return found


def _clause_states(clause: str, holder: str) -> bool:
    said = _prose_words(clause)
    spoken = [word for word, _ in said]
    gap, named = _PROSE["gap"], _PROSE["holders"][holder]
    for at, (word, rest) in enumerate(said):
        # the holder is a word of its own ("RCU read-side") or begins one of its identifiers
        # ("rcu_read_lock", not "rcu_dereference" nor "call_rcu")
        if word != holder or rest is None or rest and rest[0] not in named["continues"] or \
                not rest and spoken[at + 1:at + 2] and spoken[at + 1] in named["not_after"]:
            continue
        before = [i for i in range(max(0, at - gap), at) if spoken[i] in _PROSE["contract"]]
        if before:
            start = before[0]
        elif any(w in _PROSE["after"] for w in spoken[at + 1:at + 1 + gap]):
            start = at
        else:
            continue
        if not any(w in _PROSE["negation"] for w in spoken[max(0, start - 4):at]):
            return True
    return False


def states(text: str, holder: str) -> bool:
    """A comment states that callers hold `holder` ("rcu": a read-side section, "rtnl"), as
    [rcu.prose] reads prose; never a negated statement ("May not be called with RCU read lock")."""
    if holder not in text.lower():
        return False
    return any(_clause_states(clause, holder) for clause in _CLAUSE.split(text.replace("()", "")))


def names_alternative(text: str, holder: str) -> bool:
    """A sentence of the comment states the precondition and names an alternative ("Called with
    the table's mutex or RCU read lock"): callers hold one of them, not necessarily `holder`."""
    return any(states(sentence, holder) and
               any(word in _PROSE["alternative"] for word, _ in _prose_words(sentence.replace("()", "")))
               for sentence in _SENTENCE.split(text))


RCU_ASSERTS = kfacts.names("rcu", "asserts", "reader")
RTNL_ASSERTS = kfacts.names("rcu", "asserts", "rtnl") | frozenset(
    name for name, op in kfacts.lock_ops().items() if op.action == "assert" and op.kind == "rtnl")
LOCK_ASSERTS = frozenset(name for name, op in kfacts.lock_ops().items()
                         if op.action == "assert" and op.key != "global")
# Calls that take a reference on (or through) their argument: the pointer may outlive the section.
REFERENCE = kfacts.reference_call()
# Calls that read a pointer's value without dereferencing it.
NOT_A_USE = kfacts.names("rcu", "reference", "not_a_use")
CONTAINER = kfacts.names("rcu", "reference", "container")
