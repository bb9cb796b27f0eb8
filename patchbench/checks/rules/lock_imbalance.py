"""lock-imbalance: a lock taken in a function is still held at one of its returns, or released on a
path that does not hold it. The analysis, and what it accepts, is patchbench.checks.lock_balance."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.analyses import lock_balance
from patchbench.checks.engine import registry
from patchbench.checks.engine.finding import Finding
from patchbench.checks.engine.model import FileModel

ID = "lock-imbalance"
SEVERITY = "error"
MESSAGE = "a lock taken in the function is not released on some return path"
MESSAGES = {
    "held": "{lock} taken in {function}() is still held at this return",
    "held-released-elsewhere": "{lock} taken in {function}() is still held at this return (released on "
                               "other paths)",
    "other-flavour": "{lock} in {function}() is released by an unlock of another flavour: {disabled} stay "
                     "disabled at this return",
    "taken-twice": "{call}({args}) takes a lock {function}() already holds on this path: it deadlocks",
    "callee-takes-held": "{callee}() takes the lock {function}() holds since {lock}: it deadlocks",
    "callee-takes-entry-lock": "{callee}() takes {lock}, which every way into {function}() holds: it deadlocks",
    "waits-for-holder": "{call}() waits for {awaited}() to finish, which takes {lock} that {function}() "
                        "holds here: it deadlocks",
    "waits-for-holder-atomic": "{call}() may sleep, and {function}() holds {lock} here, which {awaited}(), "
                               "the function it waits for, takes too: a sleep in atomic context, and a "
                               "deadlock where {awaited}() runs on another CPU",
    "waits-for-itself": "{call}() in {function}() waits for {function}() itself to finish (it holds "
                        "{lock}): it never returns",
    "released-unheld": "{call}({args}) releases a lock {function}() takes, on a path where it was not "
                       "taken (or was released already)",
}

# Searched for first: the spellings most files that have one use (a file is searched until one is found).
_COMMON = ("spin_lock", "mutex_lock", "read_lock", "rtnl_lock")


def _mentions() -> tuple[bytes, ...]:
    """The acquiring spellings, without those containing another (spin_lock covers spin_lock_bh):
    a file without one has no taker to walk, unless it calls a wrapper (`reaches`)."""
    spellings = {name for name, op in kfacts.lock_ops().items() if op.action in ("acquire", "try", "try_fail")}
    spellings |= {"guard"}
    kept = [name for name in spellings if not any(other != name and other in name for other in spellings)]
    return tuple(name.encode() for name in sorted(kept, key=lambda name: (name not in _COMMON, len(name), name)))


MENTIONS = _mentions()
_IDENTIFIER = re.compile(rb"[A-Za-z_]\w*")


def reaches(source: bytes, context) -> bool:
    """A file without a lock spelling may still take a lock through a wrapper of the tree (a
    header's `#define hci_dev_lock(d) mutex_lock(&d->lock)`, a subsystem's foo_lock()), or call
    a function taking RTNL from one every way into which holds it (a registration's, or callers'
    in other files): the latter judged by `check` only, which walks the few files a patch
    touches whatever they mention."""
    if context.reports_unknown():
        return True
    wrappers = _wrapper_words(context.taking_wrappers())
    return bool(wrappers) and not wrappers.isdisjoint(_IDENTIFIER.findall(source))


@lru_cache(maxsize=4)
def _wrapper_words(names: tuple[str, ...]) -> frozenset[bytes]:
    return frozenset(name.encode() for name in names)


def check(model: FileModel) -> Iterable[Finding]:
    return lock_balance.findings(model, registry.rule(ID))
