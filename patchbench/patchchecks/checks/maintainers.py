"""maintainers: each patch reaches the people and lists the base tree's MAINTAINERS names for it.

The base tree's scripts/get_maintainer.pl runs on each patch (`--no-git --no-git-fallback`: from
MAINTAINERS only, not from history, so the answer does not depend on how deep the clone is). Each
maintainer (M:, whatever the section's status) and each list of a named section that the patch
mail did not address is a warning; when none of them was addressed, one error names them all. Addressed means
the mail's To: and Cc:, and the patch's own Cc: trailers (git send-email adds those), compared
after the base's .mailmap. LKML, the list of THE REST, is not asked for.
A file the patch adds must fall in a MAINTAINERS section other than THE REST.
"""

from __future__ import annotations

import re
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext, message_finding, run_tool
from patchbench.tree import AppliedPatch

ID = "maintainers"
MESSAGE = "the maintainers and lists get_maintainer.pl names for a patch are in its To/Cc"
SCRIPT = "scripts/get_maintainer.pl"
NEEDS = (SCRIPT, "MAINTAINERS")
READS = ("MAINTAINERS", ".mailmap", ".get_maintainer.conf")
OPTIONS = ("--no-git", "--no-git-fallback")
MAINTAINER_ROLES = ("maintainer", "supporter", "odd fixer")   # an M: line, by the section's S: status

_PATTERN = re.compile(r"^([FX]:\s*)(\S[^\n]*?)[ \t]*$", re.M)
_LINE = re.compile(r"^(?P<who>.*?)\s+\((?P<role>[^()]*)\)$")
_ADDRESS = re.compile(r"<([^<>]+@[^<>]+)>|(\S+@\S+)")


def parse(output: str) -> list[tuple[str, str, str, str]]:
    """(who as printed, address, role, section) of each get_maintainer.pl output line."""
    entries = []
    for line in output.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        address = _ADDRESS.search(match["who"])
        if address:
            role, _, section = match["role"].partition(":")
            entries.append((match["who"], (address[1] or address[2]).lower(), role, section))
    return entries


def _plain(value: str) -> bool:
    return not value.endswith("/") and not any(c in value for c in ".*?")


def directory_patterns(maintainers: str, directories: set[str]) -> str:
    """MAINTAINERS with a `/` after each F:/X: pattern that names a directory of the tree.

    get_maintainer.pl adds that slash itself when the pattern is a directory on disk (`-d`, tested
    after turning `.` into `\\.`, so only names without `.*?` qualify); the scratch tree has no
    directories below the top level, and making the 5,000 of a kernel costs seconds to create and
    to remove, so the slash is written here instead: the same patterns, the same answers."""
    def slash(match: re.Match) -> str:
        value = match[2].strip()
        if value in directories and _plain(value):
            return f"{match[1]}{value}/"
        return match[0]
    return _PATTERN.sub(slash, maintainers)


def _maintainers_file(context: PatchContext) -> Path:
    root = context.tree.files(SCRIPT, *READS)
    text = (root / "MAINTAINERS").read_text(errors="surrogateescape")
    candidates = sorted({m[2].strip() for m in _PATTERN.finditer(text) if _plain(m[2].strip())})
    listed = context.tree.git("--literal-pathspecs", "ls-tree", "-d", "-z", "--name-only", context.applied.base,
                              "--", *candidates) if candidates else ""
    out = context.scratch / "MAINTAINERS.dirs"
    out.write_text(directory_patterns(text, set(listed.split("\0"))), errors="surrogateescape")
    return out


def _get_maintainer(context: PatchContext, maintainers: Path, *args: str) -> list[tuple[str, str, str, str]]:
    proc = run_tool([*context.tree.command(SCRIPT), *OPTIONS, "--mpath", str(maintainers), *args], SCRIPT,
                    cwd=context.tree.root)
    return parse(proc.stdout)


def _addressed(context: PatchContext, patch: AppliedPatch) -> set[str]:
    mail = context.mail(patch)
    people = [f"<{address}>" for address in mail.recipients]
    people += [t.split(":", 1)[1].strip() for t in context.trailers(patch) if t.lower().startswith("cc:")]
    return {address for _, address in context.canonical(people).values() if address}


def _check_patch(context: PatchContext, maintainers: Path, patch: AppliedPatch) -> list[Finding]:
    entries = _get_maintainer(context, maintainers, str(context.patch_file(patch)))
    wanted = [(who, address, role, section) for who, address, role, section in entries
              if section and section != "THE REST" and ("list" in role or role in MAINTAINER_ROLES)]
    addressed = _addressed(context, patch)
    canonical = context.canonical([who for who, *_ in wanted])
    missing = [(who, address, role, section) for who, address, role, section in wanted
               if address not in addressed and canonical[who][1] not in addressed]
    if wanted and len(missing) == len(wanted):   # one error says it all
        sections = ", ".join(dict.fromkeys(section for *_, section in wanted))
        addresses = ", ".join(dict.fromkeys(address for _, address, *_ in wanted))
        return [message_finding(ID, "error", f"no maintainer and no list of {sections} is in To/Cc "
                                             f"(get_maintainer.pl names {addresses})", patch.index)]
    return [message_finding(ID, "warning", f"{who} ({role}:{section}) is not in To/Cc", patch.index)
            for who, _, role, section in missing]


def _new_files(context: PatchContext, maintainers: Path, patch: AppliedPatch) -> list[Finding]:
    return [Finding(rule=ID, severity="warning", file=change.path, line=0, function="",
                    message="new file in no MAINTAINERS section (only THE REST)", patch=patch.index)
            for change in context.mail(patch).files
            if change.status == "added" and not _covered(context, maintainers, change.path)]


def _covered(context: PatchContext, maintainers: Path, path: str) -> bool:
    """get_maintainer.pl -f needs the file: an empty stand-in is made for it (then removed)."""
    stand_in = context.tree.root / path
    made = [d for d in reversed(stand_in.parents) if not d.exists()]
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    stand_in.touch()
    try:
        entries = _get_maintainer(context, maintainers, "-f", path)
        return any(section and section != "THE REST" for *_, section in entries)
    finally:
        stand_in.unlink()
        for directory in reversed(made):
            directory.rmdir()


def run(context: PatchContext) -> list[Finding]:
    maintainers = _maintainers_file(context)
    patches = [p for p in context.applied.applied if context.mail(p) is not None]
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = [f for found in pool.map(lambda p: _check_patch(context, maintainers, p), patches) for f in found]
    # one at a time: each puts a stand-in file into the shared tree
    return found + [f for patch in patches for f in _new_files(context, maintainers, patch)]
