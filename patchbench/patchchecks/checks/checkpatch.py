"""checkpatch: the base tree's scripts/checkpatch.pl on each patch, one finding per report.

Each commit made from the series is written as `git format-patch -M` does and all are given to one
checkpatch.pl run with the options netdev's CI gives it ([checkpatch] of netdev.toml: `--strict
--codespell --max-line-length=80` and the types it ignores), with GIT_DIR set to the repository so
that its commit-id checks see the tree. `--codespell` reads the dictionary of Debian's codespell
package; without it the check is skipped, not run with fewer options than netdev's. checkpatch already judges only what a patch
adds, so every report is new. ERROR is an error, WARNING a warning, CHECK a note; the message
starts with checkpatch's type (`OPEN_BRACE: ...`), which is what `--ignore` takes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext, Skip, netdev_facts, run_tool

ID = "checkpatch"
MESSAGE = "the tree's scripts/checkpatch.pl on each patch"
SCRIPT = "scripts/checkpatch.pl"
NEEDS = (SCRIPT,)
# what checkpatch.pl reads beside itself, and what it runs (the obsolete-file test)
READS = ("scripts/spelling.txt", "scripts/const_structs.checkpatch", "scripts/get_maintainer.pl",
         "MAINTAINERS", ".mailmap")

SEVERITIES = {"ERROR": "error", "WARNING": "warning", "CHECK": "note"}
_REPORT = re.compile(r"^(ERROR|WARNING|CHECK):([A-Z0-9_]+): (.*)$")
_WHERE = re.compile(r"^#\d+: FILE: (.+):(\d+):$")
# where Debian's codespell package (and an older layout) put the dictionary checkpatch.pl reads
CODESPELL_DICTIONARIES = ("/usr/share/codespell/dictionary.txt",
                          "/usr/lib/python3/dist-packages/codespell_lib/data/dictionary.txt")


def parse(output: str) -> list[tuple[str, str, str, str, int]]:
    """(level, type, message, file, line) of each report in checkpatch.pl's output for one patch."""
    reports = []
    lines = output.splitlines()
    for i, line in enumerate(lines):
        match = _REPORT.match(line)
        if not match:
            continue
        where = _WHERE.match(lines[i + 1]) if i + 1 < len(lines) else None
        reports.append((match[1], match[2], match[3], where[1] if where else "", int(where[2]) if where else 0))
    return reports


def split_by_file(output: str, names: list[str]) -> dict[str, str]:
    """checkpatch.pl given several files heads each one's reports with its name between dashes."""
    parts: dict[str, list[str]] = {}
    current = None
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line in names and i > 0 and set(lines[i - 1]) == {"-"} and len(lines[i - 1]) == len(line):
            current = line
            parts[current] = []
        elif current is not None:
            parts[current].append(line)
    if len(names) == 1:
        return {names[0]: output}
    return {name: "\n".join(text) for name, text in parts.items()}


def codespell_dictionary() -> str:
    found = next((path for path in CODESPELL_DICTIONARIES if Path(path).is_file()), None)
    if found is None:
        raise Skip("codespell's dictionary is not installed (Debian package codespell), which netdev's "
                   "checkpatch --codespell reads")
    return found


def command_options(strict: bool) -> list[str]:
    """netdev's options (--strict is among them; --checkpatch-strict adds it where a table has not)."""
    facts = netdev_facts()["checkpatch"]
    options = ["--show-types", "--color=never", *facts["options"], *(["--strict"] if strict else [])]
    if "--codespell" in options:
        options.append(f"--codespellfile={codespell_dictionary()}")
    if facts["ignore"]:
        options.append(f"--ignore={','.join(facts['ignore'])}")
    return list(dict.fromkeys(options))


def run(context: PatchContext) -> list[Finding]:
    patches = context.applied.applied
    if not patches:
        return []
    root = context.tree.files(SCRIPT, *READS)
    command = context.tree.command(SCRIPT)
    files = {str(context.patch_file(p)): p for p in patches}
    env = {**os.environ, "GIT_DIR": str(context.git_dir)}
    # exit 1 means "reported something"; anything else is the script failing
    proc = run_tool([*command, "--root", str(root), *command_options(context.options.checkpatch_strict), *files],
                    "scripts/checkpatch.pl", cwd=context.scratch, env=env, ok_codes=(0, 1))
    found = []
    for name, text in split_by_file(proc.stdout, list(files)).items():
        for level, kind, message, path, line in parse(text):
            found.append(Finding(rule=ID, severity=SEVERITIES[level], file=path, line=line, function="",
                                 message=f"{kind}: {message}", patch=files[name].index))
    return found
