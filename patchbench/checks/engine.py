"""Run the rules on one file: discovery, suppression comments, findings in a stable order.

A rule is a module in patchbench/checks/rules/ (found automatically) that defines

    ID = "lock-imbalance"                 # the rule id from DESIGN.md
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
A rule whose reach depends on the rest of the tree may also define `reaches(source) -> bool`: the
file calls something the rule judges though it mentions none of its words (a callee elsewhere
needing an RCU read-side section).
MENTIONS may be a function of the file's TreeContext returning them, for names the tree defines
(header wrappers read from its call index); `reaches` is given the context too.
`finding(...)` below builds a Finding for it: one of its MESSAGES by name, and that template's
arguments (a finding is data: its identity is the rule, function, message name and arguments,
never the rendered text, so a template can be reworded freely). Findings on a line carrying, or below a comment
block carrying, `/* patchbench: allow(<rule>) <reason> */` are dropped here, not in the rules.
A rule that raises fails the run (CheckFailed naming the rule and the file: exit 2): a file whose
verdict is unknown must never pass as a file without findings.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import lru_cache
from types import ModuleType

import tree_sitter

from patchbench.checks import cparse
from patchbench.checks import rules as rules_package
from patchbench.checks.context import ALONE, TreeContext
from patchbench.checks.finding import Finding, Place, render
from patchbench.checks.model import FileModel
from patchbench.errors import CheckFailed

_ALLOW = re.compile(rb"patchbench:\s*allow\(([^)]*)\)")


@lru_cache(maxsize=None)
def rules() -> tuple[ModuleType, ...]:
    """Every rule module, in id order. Raises CheckFailed when the queries are missing (an install
    without its data would otherwise find nothing and pass)."""
    if not any(cparse.QUERIES_DIR.glob("*.scm")):
        raise CheckFailed(f"the checker's queries are missing: no *.scm in {cparse.QUERIES_DIR}")
    found = []
    for info in pkgutil.iter_modules(rules_package.__path__):
        module = importlib.import_module(f"{rules_package.__name__}.{info.name}")
        if hasattr(module, "ID") and hasattr(module, "check"):
            found.append(module)
    return tuple(sorted(found, key=lambda m: m.ID))


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
            also: tuple[int, ...] = (), **args: object) -> Finding:
    """A Finding of rule_module at node (or a 1-based line) in function: its message `kind` (a
    key of the rule's MESSAGES) with the template's `args`; `related`: the place the message
    relates it to; `also`: other lines of the same defect."""
    line = node if isinstance(node, int) else node.start_point[0] + 1
    named = tuple(sorted((name, str(value)) for name, value in args.items()))
    return Finding(rule=rule_module.ID, severity=severity or rule_module.SEVERITY, file=model.path,
                   line=line, function=function, message=render(rule_module.MESSAGES[kind], named, also),
                   kind=kind, args=named, related=related if related is None or related.line != line else None,
                   also=also)


def applicable(source: bytes, rule_ids: set[str] | None = None, context: TreeContext = ALONE) -> list[ModuleType]:
    """The rules (of rule_ids) that can report on this text: those whose MENTIONS it matches.
    Rules sharing an analysis share their words: each list is searched for once."""
    found: dict[object, bool] = {}   # by word list, and by refinement
    chosen = []
    for module in rules():
        if rule_ids is not None and module.ID not in rule_ids:
            continue
        words = _mentions_of(module, context)
        if words not in found:
            found[words] = mentions(source, words)
        mentioned = found[words]
        refine = getattr(module, "mentioned", None)
        if mentioned and refine is not None:
            if refine not in found:
                found[refine] = refine(source)
            mentioned = found[refine]
        if mentioned or (hasattr(module, "reaches") and module.reaches(source, context)):
            chosen.append(module)
    return chosen


def _mentions_of(module: ModuleType, context: TreeContext) -> tuple[bytes, ...] | None:
    words = getattr(module, "MENTIONS", None)
    return words(context) if callable(words) else words


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


def check_model(model: FileModel, rule_ids: set[str] | None = None) -> list[Finding]:
    return _check(model, applicable(model.source, rule_ids, model.context))


def _check(model: FileModel, chosen: list[ModuleType]) -> list[Finding]:
    found: list[Finding] = []
    for module in chosen:
        try:
            found.extend(module.check(model))
        except Exception as exc:
            raise CheckFailed(f"rule {module.ID} raised on {model.path}: {type(exc).__name__}: {exc}") from exc
    lines = model.source.split(b"\n")
    kept = {(f.rule, f.line, f.function, f.kind, f.args, f.message): f for f in found
            if not suppressed(lines, f.line, f.rule)}
    return sorted(kept.values(), key=lambda f: (f.line, f.rule, f.message))


def check_source(path: str, source: bytes, rule_ids: set[str] | None = None,
                 previous: bytes | None = None, context: TreeContext = ALONE) -> list[Finding]:
    """All findings of the rules (or of rule_ids) on one C file's text; `previous`: its text in
    the patch's parent, when a patch is checked (FileModel.previous); `context`: what the rest of
    its tree says (its call index), ALONE to judge the file alone."""
    return check_rules(path, source, applicable(source, rule_ids, context), previous, context)


def check_rules(path: str, source: bytes, chosen: list[ModuleType], previous: bytes | None = None,
                context: TreeContext = ALONE) -> list[Finding]:
    """check_source() with the rules already chosen (`applicable`)."""
    if not chosen:
        return []   # no rule can report here: skip parsing
    try:
        model = FileModel.build(path, source, context)
    except Exception as exc:
        raise CheckFailed(f"parsing {path} failed: {type(exc).__name__}: {exc}") from exc
    model.previous = previous
    return _check(model, chosen)


def suppressed(lines: list[bytes], line: int, rule_id: str) -> bool:
    """An allow() for rule_id on the line, or in the comment block directly above it."""
    index = line - 1
    if 0 <= index < len(lines) and _allows(lines[index], rule_id):
        return True
    index -= 1
    while index >= 0:
        text = lines[index].strip()
        if _allows(text, rule_id):
            return True
        if not (text.startswith((b"/*", b"*", b"//")) or text.endswith(b"*/")):
            return False
        index -= 1
    return False


def _allows(text: bytes, rule_id: str) -> bool:
    return any(rule_id.encode() in [r.strip() for r in match.group(1).split(b",")]
               for match in _ALLOW.finditer(text))
