"""The rules, found in patchbench/checks/rules/, and what a rule builds its findings with.

A rule is a module there (found by name at run time, as pytest finds plugins: nothing below the
rules imports them) that defines

    ID = "lock-imbalance"                 # the rule id
    SEVERITY = "error"                    # "error" | "warning" | "note"
    MESSAGE = "a lock taken here is not released on some return path"   # what it checks, one line
    MESSAGES = {"held": "{lock} taken in {function}() is still held at this return", ...}
    def check(model: FileModel) -> Iterable[Finding]: ...
    MENTIONS = (b"spin_lock", b"mutex_lock")   # optional: see below

and keeps its tree-sitter queries in queries/<ID>.scm (load with `cparse.rule_query(ID)`).
A rule's MENTIONS are byte strings of which every file it can report on contains one (the callee
names its analysis starts from): most kernel files contain none of any rule's, and those are never
parsed. Plain substrings, not a regex: a failing regex alternation costs more than the search saves.
A rule may refine its words with `mentioned(source) -> bool`, asked only of the files they
match (RCU's "rcu" also occurs inside "circuit" and "circular").
A rule whose reach depends on the rest of the tree may also define `reaches(source, context) -> bool`:
the file calls something the rule judges though it mentions none of its words (a callee elsewhere
needing an RCU read-side section).
MENTIONS may be a function of the file's TreeContext returning them, for names the tree defines
(header wrappers read from its call index).
`finding(...)` below builds a Finding for it: one of its MESSAGES by name, and that template's
arguments (a finding is data: its identity is the rule, function, message name and arguments,
never the rendered text, so a template can be reworded freely).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

import tree_sitter

from patchbench.checks.engine import parse as cparse
from patchbench.checks.engine.finding import Finding, Place, render
from patchbench.checks.engine.model import FileModel
from patchbench.errors import CheckFailed

RULES_PACKAGE = "patchbench.checks.rules"


@lru_cache(maxsize=None)
def rules() -> tuple[ModuleType, ...]:
    """Every rule module, in id order. Raises CheckFailed when the queries are missing (an install
    without its data would otherwise find nothing and pass)."""
    if not any(cparse.QUERIES_DIR.glob("*.scm")):
        raise CheckFailed(f"the checker's queries are missing: no *.scm in {cparse.QUERIES_DIR}")
    found = []
    package = importlib.import_module(RULES_PACKAGE)
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{RULES_PACKAGE}.{info.name}")
        if hasattr(module, "ID") and hasattr(module, "check"):
            found.append(module)
    return tuple(sorted(found, key=lambda m: m.ID))


def default_rule_ids(lint: bool = False) -> list[str]:
    """The ids of the rules run unless asked for by name: all but those whose module says
    `DEFAULT = False` (a rule whose measured precision is not yet what a default needs) and, for
    `lint` (existing code, no series), those whose module says `LINT = False` (a rule precise on
    the change a patch makes but not on code that has already been reviewed)."""
    return [module.ID for module in rules() if getattr(module, "DEFAULT", True)
            and (not lint or getattr(module, "LINT", True))]


def preload() -> None:
    """Import the rules and compile every query now, so that forked workers inherit them instead
    of each paying for it (a worker is replaced after workers.TASKS_PER_WORKER files)."""
    rules()
    for path in cparse.QUERIES_DIR.glob("*.scm"):
        cparse.rule_query(path.stem)


def rule(rule_id: str) -> ModuleType:
    for module in rules():
        if module.ID == rule_id:
            return module
    raise KeyError(rule_id)


def finding(rule_module: ModuleType, model: FileModel, node: tree_sitter.Node | int, function: str,
            kind: str, severity: str | None = None, /, related: Place | None = None,
            also: tuple[int, ...] = (), because: tuple[str, ...] = (), **args: object) -> Finding:
    """A Finding of rule_module at node (or a 1-based line) in function: its message `kind` (a
    key of the rule's MESSAGES) with the template's `args`; `related`: the place the message
    relates it to; `also`: other lines of the same defect; `because`: what decided it, in words."""
    line = node if isinstance(node, int) else node.start_point[0] + 1
    named = tuple(sorted((name, str(value)) for name, value in args.items()))
    return Finding(rule=rule_module.ID, severity=severity or rule_module.SEVERITY, file=model.path,
                   line=line, function=function, message=render(rule_module.MESSAGES[kind], named, also),
                   kind=kind, args=named, related=related if related is None or related.line != line else None,
                   also=also, because=because)


def mentions(source: bytes, words: tuple[bytes, ...] | None) -> bool:
    """source contains one of words (None: no filter)."""
    return words is None or any((part is None or part in source) and any(word in source for word in group)
                                for part, group in _grouped(words))


# Parts many words share (spin_lock, rtnl_lock, ...; netif_stop_queue, netif_txq_maybe_stop, ...): a
# text without one contains none of the words that have it, and they are not searched one by one
# (of the 4837 files of 7.2's drivers/net + net that no rule applies to, 3387 have no "lock").
_SHARED_PARTS = (b"lock", b"_stop")


@lru_cache(maxsize=64)
def _grouped(words: tuple[bytes, ...]) -> tuple[tuple[bytes | None, tuple[bytes, ...]], ...]:
    """words grouped by the first shared part they contain (None: no part), in their order."""
    groups: dict[bytes | None, list[bytes]] = {}
    for word in words:
        part = next((part for part in _SHARED_PARTS if part in word), None)
        groups.setdefault(part, []).append(word)
    return tuple((part, tuple(group)) for part, group in groups.items())
