"""`patchbench b4-check`: b4's per-patch check command (`prep-perpatch-check-cmd`, `am-perpatch-check-cmd`).

b4 pipes one patch mail to it, from the top of the work tree, and reads its output the way it
reads `checkpatch.pl --terse`: every stdout line is a finding, a failure when it contains
`ERROR:`, a warning otherwise; every stderr line is a failure; no output at all is a pass.
So findings that block (git config patchbench.presend.block) print as `file:line: ERROR: rule:
message`, the others as WARNING (CHECK for notes), as do those that the patches before this
one may resolve when HEAD does not hold them (b4 pipes the patch alone); our own failure to check
prints one stdout line without `ERROR:` (a warning), or one stderr line under
patchbench.presend.strict.
There is no progress line: b4 would count it as a failure.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from patchbench.errors import BadInput

_SEVERITY = re.compile(r"^(.*?:\d+): (error|warning|note): ")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("b4-check", help="b4's per-patch check command (one patch mail on stdin)",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", metavar="DIR", default=".", help="the kernel git repository (default: .)")
    parser.set_defaults(func=run)


def b4_line(terse_line: str, blocks) -> str:
    """A terse report line labelled as b4 must see it: ERROR when it blocks, else WARNING (CHECK for
    a note, as checkpatch says), whatever the finding's own severity (its rule id is on the line)."""
    def label(match: re.Match) -> str:
        said = "ERROR" if blocks(match[2]) else "CHECK" if match[2] == "note" else "WARNING"
        return f"{match[1]}: {said}: "
    return _SEVERITY.sub(label, terse_line, count=1)


def _never(severity: str) -> bool:
    return False


def run(args) -> int:
    from patchbench import presend

    repo = Path(args.repo)
    try:
        settings = presend.read_settings(repo)
        verdict = presend.check_outgoing(repo, presend.load_outgoing("-"), settings)
    except (presend.NotChecked, BadInput) as exc:
        if presend.strict_configured(repo):
            print(f"patchbench: error: {exc}", file=sys.stderr)
            return 2
        print(f"patchbench: not checked: {exc}")
        return 0
    for line, may_block in verdict.terse_lines():
        print(b4_line(line, settings.blocks if may_block else _never))
    return 1 if verdict.refused else 0
