"""What the checker reports: one small class, its identity independent of line numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass


# A finding that stands for several places of one defect (a value used at several lines after its
# section ended) names the others in its message: "... (also at lines 12, 14); ...". Its identity
# leaves them out; `repeats` counts them (patches.new_findings: a patch adding one is reported).
ALSO = re.compile(r" \(also at lines? \d+(?:, \d+)*\)")


@dataclass
class Finding:
    rule: str                      # rule id from DESIGN.md, e.g. "rcu-deref-unprotected"
    severity: str                  # "error" | "warning" | "note"
    file: str                      # path relative to the tree root
    line: int
    function: str
    message: str
    patch: int | None = None       # index of the patch that introduced it (series checks only)

    def identity(self) -> tuple[str, str, str, str]:
        """Rule, file, function and message with numbers blanked and the other places left out:
        stable when lines shift."""
        return (self.rule, self.file, self.function, re.sub(r"\d+", "N", ALSO.sub("", self.message)))

    @property
    def repeats(self) -> int:
        """How many other places of the same defect the message names."""
        match = ALSO.search(self.message)
        return len(re.findall(r"\d+", match.group())) if match else 0
