"""shellcheck: shellcheck reports a patch adds to the shell scripts it touches.

Runs with netdev's options ([linters.shellcheck] of netdev.toml: `-x`, and the two codes that test
case functions confuse left out) on each touched `.sh` before and after the patch; see
patchbench/patchchecks/linters.py for how "new" is judged. error is an error, warning a warning,
info and style a note; the message starts with the code (`SC2086: ...`).
"""

from __future__ import annotations

import json

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext
from patchbench.patchchecks.linters import Linter, LintWarning, new_warnings

ID = "shellcheck"
MESSAGE = "shellcheck reports new in the shell scripts a patch touches"
NEEDS = ()
SEVERITIES = {"error": "error", "warning": "warning", "info": "note", "style": "note"}


def parse(output: str) -> list[LintWarning]:
    return [LintWarning(c["line"], f"SC{c['code']}", c["message"], SEVERITIES.get(c["level"], "warning"))
            for c in json.loads(output or '{"comments": []}')["comments"]]


LINTER = Linter(ID, "shellcheck", ("-f", "json1"), parse, reads_directory=True)


def run(context: PatchContext) -> list[Finding]:
    return new_warnings(context, LINTER)
