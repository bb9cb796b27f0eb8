"""What the on-disk caches share: git blob ids of texts, and retiring the directories of other
versions of the code that fills them (the findings cache and the call index are both kept per
fingerprint of their code, and nothing reads an old fingerprint's directory again)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from pathlib import Path


def blob_id(source: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(source) + source).hexdigest()


STALE_DAYS = 14
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")


def retire_other_versions(current: Path) -> None:
    """Note `current` (a cache directory named by a fingerprint of the code that fills it) as used
    now, and remove its siblings of other fingerprints that no run has used for STALE_DAYS: every
    change of the checker or of the index's scan starts a new directory (a call index costs gigabytes)
    and nothing reads the old ones again. One still used by another installed version is marked by
    each of its runs and stays. Failures are ignored: another process may be removing it too."""
    try:
        os.utime(current)
    except OSError:
        pass   # not created yet: its first entry creates it
    try:
        siblings = [entry for entry in current.parent.iterdir()
                    if entry.name != current.name and _FINGERPRINT.fullmatch(entry.name) and entry.is_dir()]
    except OSError:
        return
    for sibling in siblings:
        if unused(sibling):
            shutil.rmtree(sibling, ignore_errors=True)


def unused(path: Path) -> bool:
    """No run has marked `path` used (its mtime) for STALE_DAYS; False when it cannot be read
    (another process removed it first)."""
    try:
        return path.stat().st_mtime < time.time() - STALE_DAYS * 86400
    except OSError:
        return False
