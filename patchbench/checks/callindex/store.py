"""Where the call index keeps its scans (by git blob id) and indexes (by the digest of a tree), per
fingerprint of the scan's code and the facts it reads; scans kept in memory, the least recently used
dropped first.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.callindex.scan import SCAN_VERSION


def fingerprint() -> str:
    """Of the scan (SCAN_VERSION) and the parts of the facts table a scan reads (locks, guards, registration
    calls and fields, asserts, RCU reads): a changed scan never reads stale entries, while a new calling
    context (applied when a way in is asked for) keeps them."""
    digest = hashlib.sha1(f"scan {SCAN_VERSION}".encode())
    table = kfacts.table()
    read = {"lock": table["lock"], "guard": table["guard"], "registration": table["registration"],
            "asserts": table["rcu"]["asserts"], "deref": table["rcu"]["deref"],
            "readers": table["rcu"]["readers"], "helpers": table["rcu"]["helpers"],
            "queue": table["queue"]["spellings"]}
    digest.update(json.dumps(read, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """$PATCHBENCH_INDEX_CACHE, default ~/.cache/patchbench/callindex: apart from the facts
    cache ($PATCHBENCH_CACHE), which runs often point at a fresh directory, since an index of
    blob ids never goes stale and costs a minute to build."""
    root = os.environ.get("PATCHBENCH_INDEX_CACHE") or Path.home() / ".cache" / "patchbench" / "callindex"
    return Path(root) / fingerprint()


# Scans (and their calls by callee) kept per process, the least recently used dropped first. Lint of
# 7.2's drivers/net + net reads 3421 scans; emptied at 512 the cache read 5631, with 512 kept in
# this order 4870, 1024 4326, 2048 3536 (but a worker's peak grew from 154 to 233 MB; 1024: 202 MB).
SCANS_KEPT = 1024


def _recently_used(kept: dict, number: int):
    """kept[number], now the most recently used (dicts keep insertion order), or None."""
    found = kept.pop(number, None)
    if found is not None:
        kept[number] = found
    return found


def _remember(kept: dict, number: int, value):
    if len(kept) >= SCANS_KEPT:
        del kept[next(iter(kept))]
    kept[number] = value
    return value


def _scan_path(directory: Path, blob: str) -> Path:
    return directory / "scans" / blob[:2] / f"{blob}.json"


def _load_scan(directory: Path, blob: str) -> dict | None:
    try:
        return json.loads(_scan_path(directory, blob).read_bytes())
    except (OSError, ValueError):
        return None


def _store_scan(directory: Path, blob: str, found: dict) -> None:
    target = _scan_path(directory, blob)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(found, separators=(",", ":")))
        partial.replace(target)
    except OSError:
        pass   # a read-only cache only costs time
