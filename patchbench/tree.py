"""Stage 3: apply a Series to a kernel git tree in isolation, one commit per patch.

Contract (other stages rely on these fields; extend freely):
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class AppliedPatch:
    index: int
    commit: str                    # sha of the commit made from this patch
    parent: str                    # sha it was applied on (base or previous patch)
    files: list[str] = field(default_factory=list)   # paths the patch touched (after rename)


@dataclass
class ApplyFailure:
    index: int
    file: str | None
    hunk: str | None               # e.g. "@@ -2180,7 +2180,9 @@"
    reason: str


@dataclass
class ApplyResult:
    repo: Path                     # the user's repository (objects live there; never its checkout)
    base: str                      # sha
    base_reason: str               # e.g. "base-commit: from the cover letter"
    applied: list[AppliedPatch]
    failed: ApplyFailure | None
    head: str                      # sha of the last applied commit (== base when nothing applied)
    ref: str | None = None         # refs/patchbench/... kept for inspection
