"""ruff: ruff reports a patch adds to the Python files it touches.

Runs `ruff check --isolated` (ruff's default rules, whatever configuration the user's machine has)
on each touched `.py` before and after the patch; see patchbench/patchchecks/linters.py for how
"new" is judged. The severity is ruff's own; the message starts with the rule code (`F401: ...`).
"""

from __future__ import annotations

import json

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext
from patchbench.patchchecks.linters import Linter, LintWarning, new_warnings

ID = "ruff"
MESSAGE = "ruff reports new in the Python files a patch touches"
NEEDS = ()


def parse(output: str) -> list[LintWarning]:
    return [LintWarning(r["location"]["row"], r["code"] or "invalid-syntax", r["message"],
                        "error" if r.get("severity", "warning") == "error" else "warning")
            for r in json.loads(output or "[]")]


LINTER = Linter(ID, "ruff", ("--output-format", "json"), parse)


def run(context: PatchContext) -> list[Finding]:
    return new_warnings(context, LINTER)
