"""What stage 3 hands to the later stages: the commits made from a series, or where it stopped."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class AppliedPatch:
    index: int
    commit: str                    # sha of the commit made from this patch
    parent: str                    # sha it was applied on (base or previous patch)
    files: list[str] = field(default_factory=list)   # paths the patch touched (after rename)
    subject: str = ""
    three_way: bool = False        # applied only with a 3-way merge on the patch's preimage blobs


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
    warnings: list[str] = field(default_factory=list)   # e.g. base-commit not found, missing prerequisite
    missing_prerequisites: list[str] = field(default_factory=list)   # prerequisite-patch-id values not in base

    def to_json(self) -> dict:
        failed = None
        if self.failed is not None:
            failed = {"index": self.failed.index, "file": self.failed.file, "hunk": self.failed.hunk,
                      "reason": self.failed.reason}
        return {
            "base": self.base, "base_reason": self.base_reason,
            "applied": [{"index": p.index, "commit": p.commit, "subject": p.subject, "files": p.files,
                         "three_way": p.three_way} for p in self.applied],
            "failed": failed, "head": self.head, "ref": self.ref,
            "warnings": self.warnings, "missing_prerequisites": self.missing_prerequisites,
        }
