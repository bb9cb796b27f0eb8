"""Run the rules on one file: the rules that apply, suppression comments, findings in a stable order.

Findings on a line carrying, or below a comment block carrying,
`/* patchbench: allow(<rule>) <reason> */` are dropped here, not in the rules.
A rule that raises fails the run (CheckFailed naming the rule and the file: exit 2): a file whose
verdict is unknown must never pass as a file without findings.
"""

from __future__ import annotations

import re
from types import ModuleType

from patchbench.checks.engine import registry
from patchbench.checks.engine.context import ALONE, TreeContext
from patchbench.checks.engine.finding import Finding
from patchbench.checks.engine.model import FileModel
from patchbench.errors import CheckFailed

_ALLOW = re.compile(rb"patchbench:\s*allow\(([^)]*)\)")


def applicable(source: bytes, rule_ids: set[str] | None = None, context: TreeContext = ALONE) -> list[ModuleType]:
    """The rules (of rule_ids; default: the default rules) that can report on this text: those whose
    MENTIONS it matches. Rules sharing an analysis share their words: each list is searched for once."""
    found: dict[object, bool] = {}   # by word list, and by refinement
    chosen = []
    wanted = set(registry.default_rule_ids()) if rule_ids is None else rule_ids
    for module in registry.rules():
        if module.ID not in wanted:
            continue
        words = _mentions_of(module, context)
        if words not in found:
            found[words] = registry.mentions(source, words)
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
    try:
        return _check(model, chosen)
    finally:
        model.release()


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
