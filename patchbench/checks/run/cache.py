"""Findings of one file's text, cached on disk by git blob id: trees are never kept.

The key is the git blob id of the content (what `git hash-object` prints, computed here, so a blob
read from a commit and the same file in a work tree share it), the path (a few rules read it) and a
fingerprint of the checker's own code and queries, so a changed rule never reads stale facts.
The cache lives in $PATCHBENCH_CACHE/facts (default ~/.cache/patchbench/facts), one directory per
fingerprint; those of other fingerprints unused for STALE_DAYS are removed (retire_other_versions).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache, partial
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from patchbench.checks.run import checkfile
from patchbench.checks.engine import parse as cparse
from patchbench.checks.engine import registry
from patchbench.checks.engine import blob_store
from patchbench.checks.engine import pool
from patchbench.checks.engine.context import ALONE, TreeContext
from patchbench.checks.engine.finding import Finding

Task = TypeVar("Task")


@lru_cache(maxsize=1)
def checker_fingerprint() -> str:
    digest = hashlib.sha1()
    package = Path(__file__).resolve().parents[1]   # all of patchbench/checks
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.toml"), *cparse.QUERIES_DIR.glob("*.scm")]):
        digest.update(path.name.encode() if path.parent == cparse.QUERIES_DIR else str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    root = os.environ.get("PATCHBENCH_CACHE") or Path.home() / ".cache" / "patchbench"
    directory = Path(root) / "facts" / checker_fingerprint()
    _retire_once(directory)
    return directory


@lru_cache(maxsize=None)
def _retire_once(directory: Path) -> None:
    blob_store.retire_other_versions(directory)


def findings_for(path: str, source: bytes, context: TreeContext = ALONE, use_cache: bool = True,
                 previous: bytes | None = None, rule_ids: frozenset[str] | None = None) -> list[Finding]:
    """The default rules' (or rule_ids') findings on `source` (the text of `path`), from the cache
    when it has them; `context`: what the rest of the tree says (its call index; part of the key);
    `previous`: the text in the patch's parent, when a patch is checked (part of the key)."""
    if not use_cache:
        return checkfile.check_source(path, source, rule_ids, previous=previous, context=context)
    chosen = checkfile.applicable(source, rule_ids, context=context)
    if not chosen:   # most files of a tree: no rule can report there, so nothing to hash or keep
        return []
    # every input a verdict reads is in the key: the text, its path, the tree's index (callers,
    # sibling files, header wrappers: all read through it) and the mode, and the parent's text
    before = "" if previous is None else f"\0{blob_store.blob_id(previous)}"
    selected = "" if rule_ids is None else "\0" + ",".join(sorted(rule_ids))
    key = hashlib.sha1(f"{blob_store.blob_id(source)}\0{path}\0{context.digest}{before}{selected}".encode()).hexdigest()
    entry = cache_dir() / key[:2] / f"{key}.json"
    try:
        return [Finding.from_dict({**row, "file": path}) for row in json.loads(entry.read_text())]
    except (OSError, ValueError):
        pass
    found = checkfile.check_rules(path, source, chosen, previous, context)
    rows = [f.to_dict() for f in found]
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        partial = entry.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(rows))
        partial.replace(entry)   # atomic: concurrent workers never read half a file
    except OSError:
        pass   # a read-only cache only costs time
    return found


def parallel(work: Callable[[Task], list[Finding]], tasks: Iterable[Task], jobs: int,
             sizes: list[int] | None = None) -> list[list[Finding]]:
    """pool.parallel() with the rules imported and their queries compiled first, so that forked
    workers inherit them instead of each paying for it."""
    tasks = list(tasks)
    if jobs > 1 and len(tasks) > 1:
        registry.preload()
    return pool.parallel(work, tasks, jobs, sizes)


def _findings_of(context: TreeContext, rule_ids: frozenset[str] | None, item: tuple) -> list[Finding]:
    path, source, *previous = item
    return findings_for(path, source, context, previous=previous[0] if previous else None, rule_ids=rule_ids)


def findings_of_many(items: list[tuple], jobs: int, context: TreeContext = ALONE,
                     rule_ids: frozenset[str] | None = None) -> list[list[Finding]]:
    """findings_for(path, source[, previous]) of each item in `context`, on up to `jobs` processes
    (forked: each inherits the context)."""
    return parallel(partial(_findings_of, context, rule_ids), items, jobs, [len(item[1]) for item in items])
