"""Findings of one file's text, cached on disk by git blob id: trees are never kept.

The key is the git blob id of the content (what `git hash-object` prints, computed here, so a blob
read from a commit and the same file in a work tree share it), the path (a few rules read it) and a
fingerprint of the checker's own code and queries, so a changed rule never reads stale facts.
The cache lives in $PATCHBENCH_CACHE/facts (default ~/.cache/patchbench/facts), one directory per
fingerprint; those of other fingerprints unused for STALE_DAYS are removed (retire_other_versions).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import shutil
import time
from contextlib import contextmanager
from functools import lru_cache, partial
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

from patchbench.checks import cparse, engine, workers
from patchbench.checks.context import ALONE, TreeContext
from patchbench.checks.finding import Finding

Task = TypeVar("Task")


def blob_id(source: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(source) + source).hexdigest()


@lru_cache(maxsize=1)
def checker_fingerprint() -> str:
    digest = hashlib.sha1()
    package = Path(__file__).resolve().parent
    for path in sorted([*package.rglob("*.py"), *package.glob("*.toml"), *cparse.QUERIES_DIR.glob("*.scm")]):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    root = os.environ.get("PATCHBENCH_CACHE") or Path.home() / ".cache" / "patchbench"
    directory = Path(root) / "facts" / checker_fingerprint()
    _retire_once(directory)
    return directory


@lru_cache(maxsize=None)
def _retire_once(directory: Path) -> None:
    retire_other_versions(directory)


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


def findings_for(path: str, source: bytes, context: TreeContext = ALONE, use_cache: bool = True,
                 previous: bytes | None = None) -> list[Finding]:
    """All rules' findings on `source` (the text of `path`), from the cache when it has them;
    `context`: what the rest of the tree says (its call index; part of the key); `previous`: the
    text in the patch's parent, when a patch is checked (part of the key)."""
    if not use_cache:
        return engine.check_source(path, source, previous=previous, context=context)
    chosen = engine.applicable(source, context=context)
    if not chosen:   # most files of a tree: no rule can report there, so nothing to hash or keep
        return []
    # every input a verdict reads is in the key: the text, its path, the tree's index (callers,
    # sibling files, header wrappers: all read through it) and the mode, and the parent's text
    before = "" if previous is None else f"\0{blob_id(previous)}"
    key = hashlib.sha1(f"{blob_id(source)}\0{path}\0{context.digest}{before}".encode()).hexdigest()
    entry = cache_dir() / key[:2] / f"{key}.json"
    try:
        return [Finding.from_dict({**row, "file": path}) for row in json.loads(entry.read_text())]
    except (OSError, ValueError):
        pass
    found = engine.check_rules(path, source, chosen, previous, context)
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
    """work(task) for every task on `jobs` worker processes (results in order; with `sizes`, the
    largest tasks first); in-process for one job or task.

    Workers return findings only, so each holds one file's tree at a time."""
    tasks = list(tasks)
    with _rare_collections():
        if jobs <= 1 or len(tasks) <= 1:
            return [work(task) for task in tasks]
        engine.preload()
        return workers.run_all(work, tasks, jobs, sizes)


@contextmanager
def _rare_collections() -> Iterator[None]:
    """The analyses allocate millions of short-lived frozensets and tuples, few of them in cycles:
    at Python's default threshold (700 allocations) the young generation is collected so often
    that it costs a fifth of lint's CPU. Reference counting still frees them; cycles wait longer.
    Forked workers inherit the setting."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _findings_of(context: TreeContext, item: tuple) -> list[Finding]:
    path, source, *previous = item
    return findings_for(path, source, context, previous=previous[0] if previous else None)


def findings_of_many(items: list[tuple], jobs: int, context: TreeContext = ALONE) -> list[list[Finding]]:
    """findings_for(path, source[, previous]) of each item in `context`, on up to `jobs` processes
    (forked: each inherits the context)."""
    return parallel(partial(_findings_of, context), items, jobs, [len(item[1]) for item in items])
