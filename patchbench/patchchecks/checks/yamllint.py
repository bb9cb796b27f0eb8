"""yamllint: yamllint reports a patch adds to the YAML files it touches (netlink specs are YAML).

Runs `yamllint -d default` on each touched `.yaml`/`.yml` before and after the patch; see
patchbench/patchchecks/linters.py for how "new" is judged. The severity is yamllint's; the message
starts with the rule (`key-duplicates: ...`).
"""

from __future__ import annotations

import re

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext
from patchbench.patchchecks.linters import Linter, LintWarning, new_warnings

ID = "yamllint"
MESSAGE = "yamllint reports new in the YAML files a patch touches"
NEEDS = ()

_REPORT = re.compile(r"^[^:]+:(?P<line>\d+):\d+: \[(?P<level>error|warning)\] (?P<text>.*?)(?: \((?P<rule>[\w-]+)\))?$")


def parse(output: str) -> list[LintWarning]:
    return [LintWarning(int(m["line"]), m["rule"] or "syntax", m["text"], m["level"])
            for m in map(_REPORT.match, output.splitlines()) if m]


LINTER = Linter(ID, "yamllint", ("-f", "parsable"), parse)


def run(context: PatchContext) -> list[Finding]:
    return new_warnings(context, LINTER)
