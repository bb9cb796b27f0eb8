"""Linters on the scripts a patch touches (shellcheck, ruff, pylint, yamllint), judged by identity.

Each touched file whose path matches the linter's `files` in netdev.toml is linted as it was before
the patch and as it is after, with netdev's options. A warning after the patch is new when the file
before it had fewer warnings of the same code and message (line numbers are not compared, so code
that only moved is not new); a file the patch adds has nothing before it. Each commit's files are
written under a directory of their own, and a file is linted from its own directory, as netdev runs
the linters in a checkout; for shellcheck (-x follows `source lib.sh`) the whole directory of the
script is written, so that what it sources is there, as in the tree.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext, Skip, Tree, netdev_facts, run_tool


@dataclass(frozen=True)
class LintWarning:
    """One report of a linter about one file; (code, message) is its identity."""
    line: int
    code: str
    message: str
    severity: str                  # error | warning | note


@dataclass(frozen=True)
class Linter:
    id: str                        # the check id, and the key of [linters.<id>] in netdev.toml
    program: str
    output_options: tuple[str, ...]   # the machine-readable format `parse` reads
    parse: Callable[[str], list[LintWarning]]
    ok_codes: tuple[int, ...] = (0, 1)   # exit codes meaning "ran" (1: it found something)
    reads_directory: bool = False   # the file's whole directory must be there (sourced files)


def find_program(name: str) -> str:
    """`name` on PATH, else beside this Python (a tool installed into patchbench's virtualenv)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        raise Skip(f"{name} is not installed")
    return found


def new_warnings(context: PatchContext, linter: Linter) -> list[Finding]:
    facts = netdev_facts()["linters"][linter.id]
    wanted = re.compile(facts["files"])
    touched = [(patch, path) for patch in context.applied.applied for path in patch.files if wanted.search(path)]
    if not touched:
        return []
    command = [find_program(linter.program), *facts["options"], *linter.output_options]
    work = context.scratch / linter.id
    trees: dict[str, Tree] = {}                  # commit -> its files, written on demand
    linted: dict[tuple[str, str], list[LintWarning]] = {}

    def lint(rev: str, path: str) -> list[LintWarning] | None:
        """The warnings of `path` at commit `rev`; None when it has no such file."""
        if (rev, path) not in linted:
            tree = trees.setdefault(rev, Tree(context.git_dir, rev, work / rev))
            if not tree.exists(path):
                return None
            out = tree.files(posixpath.dirname(path) if linter.reads_directory else path) / path
            proc = run_tool([*command, out.name], linter.program, cwd=out.parent, ok_codes=linter.ok_codes)
            linted[(rev, path)] = linter.parse(proc.stdout)
        return linted[(rev, path)]

    found = []
    for patch, path in touched:
        after = lint(patch.commit, path)
        if after is None:
            continue   # the patch deletes it
        old = Counter((w.code, w.message) for w in lint(patch.parent, path) or [])
        for warning in after:
            key = (warning.code, warning.message)
            if old[key] > 0:
                old[key] -= 1
                continue
            found.append(Finding(rule=linter.id, severity=warning.severity, file=path, line=warning.line,
                                 function="", message=f"{warning.code}: {warning.message}", patch=patch.index))
    return found
