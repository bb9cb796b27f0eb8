"""What a commit range changed that a build or a boot must follow: the Kconfig symbols it added and
the C functions it added or changed, read from git (no checkout needed)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from patchbench.dispatch.workspace import git
from patchbench.tree.git import Git

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,(?P<count>\d+))? @@", re.M)
_ADDED_SYMBOL = re.compile(r"^\+\s*(?:menu)?config\s+(?P<name>\w+)\s*$", re.M)
KCONFIG_NAME = re.compile(r"(^|/)Kconfig[^/]*$")
BUILD_RULES_NAME = re.compile(r"(^|/)(Makefile|Kbuild)$")


def is_kconfig(path: str) -> bool:
    return bool(KCONFIG_NAME.search(path))


def is_build_rules(path: str) -> bool:
    return bool(BUILD_RULES_NAME.search(path))


def added_symbols(repo: Path, old: str, new: str) -> list[str]:
    """CONFIG_ symbols defined by a Kconfig file in `new` and not in `old` (renames count as added)."""
    kconfigs = [p for p in git(repo, "diff", "--name-only", "--no-renames", old, new).splitlines() if is_kconfig(p)]
    if not kconfigs:
        return []
    diff = git(repo, "diff", "--no-ext-diff", "--no-color", "--no-renames", "-U0", old, new, "--", *kconfigs)
    removed = set(re.findall(r"^-\s*(?:menu)?config\s+(\w+)\s*$", diff, re.M))
    return sorted({f"CONFIG_{m['name']}" for m in _ADDED_SYMBOL.finditer(diff)} - {f"CONFIG_{r}" for r in removed})


@dataclass(frozen=True)
class ChangedFunction:
    file: str
    name: str


def changed_functions(repo: Path, old: str, new: str, paths: list[str]) -> list[ChangedFunction]:
    """The functions of `new` whose definition holds a line the diff old..new added or changed, or
    borders a line it removed; in file then line order."""
    from patchbench.checks.engine.model import FileModel   # the parser's imports cost; only boots need it

    found: list[ChangedFunction] = []
    for path in sorted(p for p in paths if p.endswith(".c")):
        diff = git(repo, "diff", "--no-ext-diff", "--no-color", "-U0", old, new, "--", path)
        lines = sorted({line for m in _HUNK.finditer(diff) for line in _new_lines(m)})
        if not lines:
            continue
        code, text, _ = Git.at(repo).run("show", f"{new}:{path}", check=False)
        if code != 0:   # the file was deleted: nothing of it can run
            continue
        source = text.encode()
        model = FileModel.build(path, source)
        names: list[str] = []
        for line in lines:
            function = model.function_at(line)
            if function is not None and function.name not in names:
                names.append(function.name)
        found += [ChangedFunction(path, name) for name in names]
    return found


def _new_lines(hunk: re.Match) -> range:
    """Lines of the new file a hunk touches; a pure removal touches the line after it."""
    start, count = int(hunk["start"]), int(hunk["count"] or 1)
    return range(start, start + count) if count else range(start, start + 1)
