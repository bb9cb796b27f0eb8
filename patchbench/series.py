"""Stage 2: group decoded mails into patch series, pick a version, collect trailers and base info.

Contract (other stages rely on these fields; extend freely):
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class FileChange:
    path: str                      # path after the patch (before it, for a deletion)
    old_path: str | None = None    # set for renames and copies
    status: str = "modified"       # added | deleted | modified | renamed | copied | mode | binary
    added: int = 0
    removed: int = 0


@dataclass
class Patch:
    index: int                     # n of n/N (1 for an unnumbered single patch)
    subject: str                   # subject without the [PATCH ...] prefix
    message_id: str
    author: str                    # "Name <mail>"
    date: datetime | None
    body: str                      # commit message (no trailers cut off; everything above ---)
    diff: str                      # the patch text from the first diff header to the end
    trailers: list[str] = field(default_factory=list)   # own + collected from replies, de-duplicated
    files: list[FileChange] = field(default_factory=list)


@dataclass
class Cover:
    subject: str
    message_id: str
    body: str


@dataclass
class Series:
    version: int
    total: int
    tree: str | None               # "net", "net-next" or None, from the subject prefix
    subject_prefix: str            # e.g. "PATCH net-next"
    cover: Cover | None
    patches: list[Patch]
    missing: list[int] = field(default_factory=list)
    base_commit: str | None = None
    prerequisite_patch_ids: list[str] = field(default_factory=list)
    change_id: str | None = None
    other_versions: list[int] = field(default_factory=list)
