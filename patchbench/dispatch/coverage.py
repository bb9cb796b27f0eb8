"""Runtime coverage of a series: which functions it added or changed ran in the guest, and how often.

The guest's function profiler (tracefs) counts calls of the listed functions; the console carries
the names ftrace accepted (the rest are inlined, notrace or gone once booted) and the counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from patchbench.dispatch import changes
from patchbench.dispatch.console import clean_line
from patchbench.dispatch.workspace import git

FUNCTIONS_FILE = "patchbench/functions"   # in the guest: one function name a line
TRACED, PROFILE, END = "PATCHBENCH-COVERAGE-TRACED", "PATCHBENCH-COVERAGE-PROFILE", "PATCHBENCH-COVERAGE-END"


@dataclass
class FunctionCoverage:
    function: str
    file: str
    patches: list[int] = field(default_factory=list)   # the patches that added or changed it
    calls: int | None = None       # None: not counted (see status)
    status: str = "unknown"        # "ran" | "did not run" | "not traceable" | "unknown" (no counts came back)

    def describe(self) -> str:
        if self.status == "ran":
            return f"{self.function}: ran {self.calls:,} time{'s' if self.calls != 1 else ''}"
        if self.status == "not traceable":
            return f"{self.function}: not traceable (inlined, notrace or init code)"
        return f"{self.function}: {self.status}"


def series_functions(repo: Path, patches: tuple[tuple[int, str, str], ...]) -> list[FunctionCoverage]:
    """Every function a patch of the series added or changed, with the patches that did, in order."""
    found: dict[tuple[str, str], FunctionCoverage] = {}
    for index, parent, commit in patches:
        paths = git(repo, "diff", "--name-only", "--no-renames", parent, commit).splitlines()
        for changed in changes.changed_functions(repo, parent, commit, paths):
            entry = found.setdefault((changed.file, changed.name), FunctionCoverage(changed.name, changed.file))
            entry.patches.append(index)
    return list(found.values())


def _function(name: str) -> str:
    # "tun_ring_consume.isra.0 [tun]" -> tun_ring_consume: clones and modules are the same function
    return name.split()[0].split(".", 1)[0]


def read(console: str, functions: list[FunctionCoverage]) -> None:
    """Fill in calls and status from the guest's coverage lines (unknown when it never printed them)."""
    section, traced, counts = None, set(), {}
    for raw in console.splitlines():
        line = clean_line(raw).strip()
        if line in (TRACED, PROFILE, END):
            section = line
            continue
        if section == TRACED and line:
            traced.add(_function(line))
        elif section == PROFILE:
            words = line.split()
            if len(words) >= 2 and words[1].isdigit():
                name = _function(words[0])
                counts[name] = counts.get(name, 0) + int(words[1])
    if section != END:
        return
    for entry in functions:
        if entry.function not in traced:
            entry.status = "not traceable"
        else:
            entry.calls = counts.get(entry.function, 0)
            entry.status = "ran" if entry.calls else "did not run"


def summary(functions: list[FunctionCoverage]) -> str:
    counted = [f for f in functions if f.status in ("ran", "did not run")]
    if not functions:
        return "the series changed no C function"
    if not counted and all(f.status == "unknown" for f in functions):
        return "not collected: the guest stopped before printing the call counts"
    ran = sum(f.status == "ran" for f in functions)
    return f"{ran} of {len(functions)} changed function{'s' if len(functions) != 1 else ''} ran"


def coverage_json(functions: list[FunctionCoverage]) -> dict:
    """Per function, per patch (the functions each patch added or changed) and in total."""
    patches = sorted({p for f in functions for p in f.patches})
    return {"summary": summary(functions),
            "functions": [{"function": f.function, "file": f.file, "patches": f.patches, "status": f.status,
                           "calls": f.calls} for f in functions],
            "per_patch": [{"patch": p, "summary": summary([f for f in functions if p in f.patches]),
                           "functions": [f.function for f in functions if p in f.patches]} for p in patches]}
