"""pylint: pylint reports a patch adds to the Python files it touches, as netdev's CI runs it.

Runs pylint with its default checks less the refactoring hints (netdev counts errors, warnings and
conventions, not refactoring) on each touched `.py` before and after the patch, from a copy of the
file's directory so that its own imports (`from lib.py import ...`) resolve, and with no
configuration file but the options in netdev.toml (a pylintrc of the user's is not read); see
patchbench/patchchecks/linters.py for how "new" is judged. Fatal and error messages are errors,
warnings warnings, conventions notes; the message starts with pylint's id (`W0611: ...`).
"""

from __future__ import annotations

import json

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext
from patchbench.patchchecks.linters import Linter, LintWarning, new_warnings

ID = "pylint"
MESSAGE = "pylint reports new in the Python files a patch touches"
NEEDS = ()


_SEVERITY = {"fatal": "error", "error": "error", "warning": "warning", "convention": "note"}


def parse(output: str) -> list[LintWarning]:
    return [LintWarning(r["line"], r["message-id"], r["message"], _SEVERITY.get(r["type"], "warning"))
            for r in json.loads(output or "[]")]


# pylint's exit status is a bit mask of the kinds of message it gave (1 fatal .. 16 convention);
# 32 is its usage error, which is a failure of the run.
LINTER = Linter(ID, "pylint", ("--output-format=json",), parse, ok_codes=tuple(range(32)), reads_directory=True)


def run(context: PatchContext) -> list[Finding]:
    return new_warnings(context, LINTER)
