"""Stage 4b: the per-patch checks netdev maintainers rely on (what NIPA runs on every patch), as findings.

A check is a module in patchchecks/checks/ (found automatically, like the rules of patchbench.checks)
that defines

    ID = "checkpatch"                          # its id in --checks and in each Finding.rule
    MESSAGE = "the tree's scripts/checkpatch.pl on each patch"   # what it checks, one line
    NEEDS = ("scripts/checkpatch.pl",)         # paths of the base tree it cannot run without
    def run(context: PatchContext) -> list[Finding]: ...

and reports only what a patch makes new. A check that builds the kernel or its tools (minutes, not
seconds) also says `GROUP = "builds"`: it runs only when named, or with `builds`, never by default. When the base tree lacks a path of NEEDS the check is
skipped with that reason, not failed; a check may also raise `Skip` (say, perl is not installed).
A tree script that crashes is an error of the run (exit 2), never a silent pass. Findings not about
a file (a sign-off, a Fixes: tag) have file "" and line 0; findings about the series as a whole are
reported on its first patch.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType

from patchbench.checks.engine.finding import Finding
from patchbench.checks.run.series import SeriesCheck
from patchbench.errors import BadInput
from patchbench.patchchecks import checks as checks_package
from patchbench.patchchecks.context import Options, PatchContext, Skip, open_context

__all__ = ["CheckRun", "Options", "PatchContext", "Skip", "add_findings", "check_series", "checks", "run_checks",
           "select"]

RULES_GROUP = "rules"      # --checks name of every tree-sitter rule of patchbench.checks
NETDEV_GROUP = "netdev"    # --checks name of every check of this package that does not build
BUILDS_GROUP = "builds"    # --checks name of the checks that build (GROUP = "builds"); opt-in


@dataclass
class CheckRun:
    """One check's outcome: its findings, or why it was skipped, and the seconds it took."""
    id: str
    status: str                    # "ran" | "skipped"
    seconds: float
    reason: str = ""
    findings: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"id": self.id, "status": self.status, "seconds": round(self.seconds, 3),
                "reason": self.reason, "findings": len(self.findings)}


@lru_cache(maxsize=None)
def checks() -> tuple[ModuleType, ...]:
    """Every check module, in id order."""
    found = [importlib.import_module(f"{checks_package.__name__}.{info.name}")
             for info in pkgutil.iter_modules(checks_package.__path__)]
    return tuple(sorted((m for m in found if hasattr(m, "ID") and hasattr(m, "run")), key=lambda m: m.ID))


def select(spec: str, rule_ids: list[str], default_rule_ids: list[str] | None = None) -> tuple[set[str], list[str]]:
    """The static rule ids and the check ids named by a --checks value.

    `spec` is a comma-separated list of rule ids, check ids, `rules` (every rule of
    `default_rule_ids`, default: all), `netdev` (every check here that does not build), `builds`
    (those that do) and `all` (rules and netdev). A rule outside the defaults runs when named."""
    defaults = rule_ids if default_rule_ids is None else default_rule_ids
    names = [part.strip() for part in spec.split(",") if part.strip()]
    if names and all(name == RULES_GROUP or name in rule_ids for name in names):
        # rules only: the checks' modules (a tenth of a second to import) are not needed
        return {name for name in names if name != RULES_GROUP} | (set(defaults) if RULES_GROUP in names else set()), []
    check_ids = [module.ID for module in checks()]
    groups = {module.ID: getattr(module, "GROUP", NETDEV_GROUP) for module in checks()}
    rules: set[str] = set()
    chosen: list[str] = []
    for name in names:
        if name in ("all", RULES_GROUP):
            rules.update(defaults)
        if name in ("all", NETDEV_GROUP, BUILDS_GROUP):
            group = BUILDS_GROUP if name == BUILDS_GROUP else NETDEV_GROUP
            chosen.extend(c for c in check_ids if groups[c] == group)
        if name in rule_ids:
            rules.add(name)
        elif name in check_ids:
            chosen.append(name)
        elif name not in ("all", RULES_GROUP, NETDEV_GROUP, BUILDS_GROUP):
            known = ", ".join(["all", RULES_GROUP, NETDEV_GROUP, BUILDS_GROUP, *rule_ids, *check_ids])
            raise BadInput(f"--checks: unknown check {name!r} (known: {known})")
    if not rules and not chosen:
        raise BadInput("--checks: no check named")
    return rules, list(dict.fromkeys(c for c in check_ids if c in chosen))


def _run_one(module: ModuleType, context: PatchContext) -> CheckRun:
    start = time.monotonic()
    missing = [path for path in getattr(module, "NEEDS", ()) if not context.tree.exists(path)]
    if missing:
        return CheckRun(module.ID, "skipped", time.monotonic() - start,
                        f"the base tree has no {', '.join(missing)}")
    try:
        found = module.run(context)
    except Skip as skip:
        return CheckRun(module.ID, "skipped", time.monotonic() - start, str(skip))
    return CheckRun(module.ID, "ran", time.monotonic() - start, findings=list(found))


def run_checks(context: PatchContext, check_ids: list[str]) -> list[CheckRun]:
    """Run the named checks side by side (they mostly wait on the tree's perl and python scripts)."""
    modules = [m for m in checks() if m.ID in check_ids]
    if not modules:
        return []
    with ThreadPoolExecutor(max_workers=len(modules)) as pool:
        return list(pool.map(lambda module: _run_one(module, context), modules))


def check_series(series, applied, check_ids: list[str], options: Options) -> list[CheckRun]:
    """Run the named checks on an applied series; the scratch files are gone when this returns."""
    if not check_ids:
        return []
    context, scratch = open_context(series, applied, options)
    with scratch:
        return run_checks(context, check_ids)


def add_findings(checked: SeriesCheck, runs: list[CheckRun]) -> None:
    """Put each check's findings with the patch they belong to in `checked` (the report's shape)."""
    by_index = {patch.index: patch for patch in checked.patches}
    for run in runs:
        for finding in run.findings:
            if finding.patch in by_index:
                by_index[finding.patch].new.append(finding)
