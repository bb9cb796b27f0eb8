"""kdoc: kernel-doc warnings a patch adds to the C files it touches.

The base tree's scripts/kernel-doc (perl up to 6.x; a link to a python script on newer trees, which
imports its library from the tree) runs with `-none` (and `-Wall` where the script has it) on each
touched .c/.h file as it was before the patch and as it is after. A warning is new when no warning
before has the same kind, file and text (line numbers dropped). Every version of a file is written
once, under its blob id, and all of them go to one kernel-doc run.
"""

from __future__ import annotations

import hashlib
import re

from patchbench.checks.engine.finding import Finding
from patchbench.tree.git import Git
from patchbench.errors import BadInput
from patchbench.patchchecks.context import PatchContext, run_tool

ID = "kdoc"
MESSAGE = "kernel-doc -none -Wall warnings new in the files a patch touches"
SCRIPT = "scripts/kernel-doc"
NEEDS = (SCRIPT,)
READS = ("scripts/kernel-doc", "scripts/kernel-doc.py", "scripts/lib/kdoc", "tools/lib/python")
C_SUFFIXES = (".c", ".h")

_WARNING = re.compile(r"^(?:(?P<kind1>warning|error|Warning|Error): )?(?P<file>[^\s:]+):(?P<line>\d+):? "
                      r"(?:(?P<kind2>warning|error): )?(?P<text>.*)$")


def parse(output: str) -> list[tuple[str, str, int, str]]:
    """(kind, file as given, line, text) of each kernel-doc warning; both scripts' styles."""
    found = []
    for raw in output.splitlines():
        match = _WARNING.match(raw.strip())
        if match and (match["kind1"] or match["kind2"]):
            found.append(((match["kind1"] or match["kind2"]).lower(), match["file"], int(match["line"]),
                          match["text"].strip()))
    return found


def _options(context: PatchContext) -> list[str]:
    script = context.tree.files(*READS) / SCRIPT
    return ["-none", *(["-Wall"] if b"Wall" in script.resolve().read_bytes() else [])]


def run(context: PatchContext) -> list[Finding]:
    touched = [(patch, path) for patch in context.applied.applied for path in patch.files
               if path.endswith(C_SUFFIXES)]
    if not touched:
        return []
    command = [*context.tree.command(SCRIPT), *_options(context)]
    work = context.scratch / "kdoc"
    names: dict[tuple[str, str], str] = {}     # (rev, path) -> name given to kernel-doc
    with Git(context.git_dir).blobs() as blobs:
        for patch, path in touched:
            for rev in (patch.parent, patch.commit):
                data = blobs.read(f"{rev}:{path}")
                if data is None:
                    continue
                name = f"{hashlib.sha1(data).hexdigest()[:16]}/{path}"
                if not (work / name).exists():
                    (work / name).parent.mkdir(parents=True, exist_ok=True)
                    (work / name).write_bytes(data)
                names[(rev, path)] = name
    proc = run_tool([*command, *sorted(set(names.values()))], SCRIPT, cwd=work, ok_codes=None)
    if "Traceback (most recent call last)" in proc.stderr or re.search(r"^Can't locate .* in @INC", proc.stderr, re.M):
        raise BadInput(f"{SCRIPT} failed: {proc.stderr.strip().splitlines()[-1]}")
    warnings: dict[str, list[tuple[str, int, str]]] = {}
    # the python kernel-doc of 7.2 prints each warning twice (with -none -Wall): each is kept once
    for kind, name, line, text in dict.fromkeys(parse(proc.stderr + "\n" + proc.stdout)):
        warnings.setdefault(name, []).append((kind, line, text))
    found = []
    for patch, path in touched:
        before = {(kind, text) for kind, _, text in warnings.get(names.get((patch.parent, path), ""), [])}
        for kind, line, text in warnings.get(names.get((patch.commit, path), ""), []):
            if (kind, text) not in before:
                found.append(Finding(rule=ID, severity="warning" if kind == "warning" else "error", file=path,
                                     line=line, function="", message=text, patch=patch.index))
    return found
