"""What the checker reports: one small class, its identity independent of line numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass


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
        """Rule, file, function and message with numbers blanked: stable when lines shift."""
        return (self.rule, self.file, self.function, re.sub(r"\d+", "N", self.message))
