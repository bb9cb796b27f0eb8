"""Building the index of a tree: from a work tree's files or a git revision, each file's scan
reused by blob id, on a process pool.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable

from patchbench.checks.engine import blob_store
from patchbench.checks.engine import pool
from patchbench.tree.git import BlobReader, Git, GitFailed
from patchbench.checks.callindex.index import CallIndex
from patchbench.checks.callindex.scan import scan
from patchbench.checks.callindex.store import _load_scan, _store_scan, cache_dir


SUFFIXES = (".c", ".h")


# Userspace, documentation and build tooling: nothing there calls the kernel's functions.
SKIPPED_DIRS = ("tools/", "Documentation/", "scripts/", "samples/", "usr/", "LICENSES/")


NEED_DEPTH = 1   # calls between a function and the RCU read that makes it need a section on entry


def indexed(path: str) -> bool:
    return path.endswith(SUFFIXES) and not path.startswith(SKIPPED_DIRS)


def tree_root(paths: Iterable[str]) -> Path | None:
    """The kernel tree holding the first of paths (the directory with Kbuild and MAINTAINERS)."""
    for name in paths:
        current = Path(name).resolve()
        for directory in (current, *current.parents):
            if (directory / "Kbuild").is_file() and (directory / "MAINTAINERS").is_file():
                return directory
        return None
    return None


# One `git cat-file` per worker process: a process's resource, not an input (closed after a build).
_READER: list[BlobReader] = []


def _read(source: tuple[str, Path], path: str, blob: str) -> bytes:
    """A blob's bytes from `source`: ("files", root) or ("git", git dir)."""
    kind, where = source
    if kind == "files":
        return (where / path).read_bytes()
    if not _READER or _READER[-1].process.poll() is not None:   # one cat-file per worker process
        _READER.append(Git(where).blobs())
    data = _READER[-1].read(blob)
    if data is None:
        raise OSError(f"git cat-file: no blob {blob} ({path})")
    return data


def _scan_blob(source: tuple[str, Path], item: tuple[str, str, Path]) -> dict:
    """Scan one blob, store the scan by blob id, return what the merged index keeps of it."""
    path, blob, directory = item
    found = _load_scan(directory, blob)
    if found is None:
        found = scan(_read(source, path, blob))
        _store_scan(directory, blob, found)
    return {"defs": found["defs"], "regs": found["regs"], "reads": found["reads"], "queue": found["queue"],
            "guards": found["guards"], "fields": found["fields"], "accessors": found["accessors"],
            "acquires": found["acquires"], "called": sorted({c for called in found["calls"].values() for c, _ in called})}


def _build(blobs: list[tuple[str, str]], source: tuple[str, Path], jobs: int) -> CallIndex:
    """The index of (path, blob id) pairs read from `source`; scans of blobs seen before (in
    any tree) are read back from their store."""
    blobs = sorted(blobs)
    digest = hashlib.sha1("\n".join(f"{p} {b}" for p, b in blobs).encode()).hexdigest()
    directory = cache_dir()
    stored = directory / f"{digest}.sqlite"
    if stored.is_file():
        return _in_use(digest, directory)
    try:
        summaries = pool.parallel(functools.partial(_scan_blob, source),
                                  [(path, blob, directory) for path, blob in blobs], jobs)
    finally:
        while _READER:
            _READER.pop().close()
    directory.mkdir(parents=True, exist_ok=True)
    partial = stored.with_suffix(f".{os.getpid()}.tmp")
    partial.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(partial)) as database:
        _fill(database, blobs, summaries, directory)
        database.commit()
    partial.replace(stored)
    return _in_use(digest, directory)


def _in_use(digest: str, directory: Path) -> CallIndex:
    """The stored index `digest`, noted as used now, as is its scan fingerprint's directory. What
    no run has used for STALE_DAYS goes: other fingerprints' directories, other trees' indexes
    (one per base checked or tree linted, 130-160 MB for a kernel) and partial ones a killed build
    left behind. The scans stay (shared by blob id; a new base rescans only its changed files)."""
    blob_store.retire_other_versions(directory)
    stored = directory / f"{digest}.sqlite"
    try:
        os.utime(stored)
        entries = list(directory.iterdir())
    except OSError:
        entries = []   # a read-only cache: nothing is noted or removed
    for notes in NOTES:   # the notes of trees and checkouts no run has looked up for as long
        try:
            entries.extend((directory / notes).iterdir())
        except OSError:
            continue
    for entry in entries:
        if entry != stored and (entry.suffix in (".sqlite", ".tmp") or entry.parent.name in NOTES) and \
                blob_store.unused(entry):
            try:
                entry.unlink()
            except OSError:
                pass   # another run removed it first, or the cache is not ours to change
    return CallIndex(digest, directory)


NOTES = ("trees", "checkouts")   # where the digest of a git tree's and of a checkout's index is noted


def _fill(database: sqlite3.Connection, blobs: list[tuple[str, str]], summaries: list[dict],
          directory: Path) -> None:
    database.executescript("""
        CREATE TABLE files (number INTEGER PRIMARY KEY, path TEXT, blob TEXT);
        CREATE TABLE defs (name TEXT, file INTEGER, global INTEGER, stated INTEGER);
        CREATE TABLE callers (name TEXT, file INTEGER);
        CREATE TABLE regs (name TEXT, file INTEGER, kind TEXT, struct TEXT);
        CREATE TABLE wrappers (name TEXT PRIMARY KEY, effect TEXT);
        CREATE TABLE needs (name TEXT, file INTEGER, primitive TEXT, origin INTEGER, line INTEGER,
                            via TEXT);
        CREATE TABLE queue_wrappers (name TEXT PRIMARY KEY, effect TEXT);
        CREATE TABLE c_wrappers (name TEXT PRIMARY KEY, effect TEXT);
        CREATE TABLE guards (name TEXT PRIMARY KEY, effect TEXT);
        CREATE TABLE fields (key TEXT, file INTEGER, nulls TEXT, tested TEXT, unchecked INTEGER);
        CREATE TABLE accessors (name TEXT PRIMARY KEY, key TEXT);
        CREATE TABLE acquires (name TEXT PRIMARY KEY, effect TEXT);
    """)
    database.executemany("INSERT INTO needs VALUES (?, ?, ?, ?, ?, ?)",
                         _needs(blobs, summaries, directory))
    database.executemany("INSERT INTO files VALUES (?, ?, ?)",
                         ((number, path, blob) for number, (path, blob) in enumerate(blobs)))
    defined: set[str] = set()
    wrappers: dict[str, str] = {}
    # global lock wrappers of .c files (foo_lock() around mutex_lock(&foo_mutex)): name -> effect,
    # None when two global definitions differ
    c_wrappers: dict[str, str | None] = {}
    queue_wrappers: dict[str, str] = {}
    # guard classes (DEFINE_GUARD): name -> [spelling, arguments], None when two definitions differ
    guards: dict[str, str | None] = {}
    # functions that merely return a load of an RCU field: name -> its key, None when two differ
    accessors: dict[str, str | None] = {}
    # the locks a global function takes for itself and releases: name -> effect, None where two
    # global definitions differ (one of them an #ifdef stub taking nothing: "null")
    acquires: dict[str, str | None] = {}
    for number, ((path, _), found) in enumerate(zip(blobs, summaries)):
        database.executemany("INSERT INTO fields VALUES (?, ?, ?, ?, ?)",
                             ((key, number, json.dumps(nulls), json.dumps(tested), unchecked)
                              for key, (nulls, tested, unchecked) in found["fields"].items()))
        for name, key in found["accessors"].items():
            accessors[name] = key if accessors.get(name, key) == key else None
        for name, effect in found["guards"].items():
            effect = json.dumps(effect)
            guards[name] = effect if guards.get(name, effect) == effect else None
        header = path.endswith(".h")
        if header:
            for name, effect in found["queue"].items():
                queue_wrappers.setdefault(name, json.dumps(effect))
        rows = []
        for name, (is_global, stated, *wrapper) in found["defs"].items():
            rows.append((name, number, int(is_global or header), stated))
            if is_global or header:
                effect = json.dumps(found["acquires"].get(name))
                acquires[name] = effect if acquires.get(name, effect) == effect else None
            if header and wrapper:
                wrappers.setdefault(name, json.dumps(wrapper[0]))
            elif is_global and not header:
                effect = json.dumps(wrapper[0]) if wrapper else None
                c_wrappers[name] = effect if c_wrappers.get(name, effect) == effect else None
        defined.update(name for name, *_ in rows)
        database.executemany("INSERT INTO defs VALUES (?, ?, ?, ?)", rows)
        database.executemany("INSERT INTO regs VALUES (?, ?, ?, ?)",
                             ((function, number, kind, struct) for function, kind, struct in found["regs"]))
    # calls of names never defined (macros, functions of unindexed files) lead nowhere
    for number, found in enumerate(summaries):
        database.executemany("INSERT INTO callers VALUES (?, ?)",
                             ((name, number) for name in found["called"] if name in defined))
    database.executemany("INSERT INTO wrappers VALUES (?, ?)", sorted(wrappers.items()))
    database.executemany("INSERT INTO queue_wrappers VALUES (?, ?)", sorted(queue_wrappers.items()))
    database.executemany("INSERT INTO guards VALUES (?, ?)",
                         sorted((name, effect) for name, effect in guards.items() if effect))
    database.executemany("INSERT INTO accessors VALUES (?, ?)",
                         sorted((name, key) for name, key in accessors.items() if key))
    database.executemany("INSERT INTO acquires VALUES (?, ?)",
                         sorted((name, effect) for name, effect in acquires.items() if effect and effect != "null"))
    database.executemany("INSERT INTO c_wrappers VALUES (?, ?)",
                         sorted((name, effect) for name, effect in c_wrappers.items() if effect))
    database.executescript("""
        CREATE INDEX defs_name ON defs (name);
        CREATE INDEX callers_name ON callers (name);
        CREATE INDEX regs_name ON regs (name);
        CREATE INDEX files_path ON files (path);
        CREATE INDEX needs_name ON needs (name);
        CREATE INDEX fields_key ON fields (key);
    """)


def _needs(blobs: list[tuple[str, str]], summaries: list[dict], directory: Path) -> list[tuple]:
    """(name, file, primitive, file of the read, its line, callee it is reached through or "") of
    every function that needs an RCU read-side section on entry: it reads with nothing of its own
    held (the scan's "reads"), or calls such a function with nothing held (no reader, RTNL or named
    lock), up to NEED_DEPTH calls away. A global name passes its need on only when every global
    definition of it needs one (an #ifdef stub that reads nothing does not). A call through an ops
    field (`dev->netdev_ops->ndo_fill_forward_path(...)`) calls whichever function is registered
    in it: it passes on the need of any of them, for a field registered in initialisers of one
    struct type only and named like no function (ndo_*, not .open or .show)."""
    definitions: dict[str, list[tuple[int, bool]]] = {}
    callers: dict[str, list[int]] = {}
    registered: dict[str, set] = {}   # field -> {(file, function), ...}; "" when not an ops field
    for number, ((path, _), found) in enumerate(zip(blobs, summaries)):
        for name, (is_global, *_) in found["defs"].items():
            definitions.setdefault(name, []).append((number, bool(is_global) or path.endswith(".h")))
        for name in found["called"]:
            callers.setdefault(name, []).append(number)
    structs: dict[str, set] = {}
    for number, found in enumerate(summaries):
        for function, field, struct in found["regs"]:
            structs.setdefault(field, set()).add(struct)
            registered.setdefault(field, set()).add((number, function))
    fields_of: dict[str, list[tuple[str, int]]] = {}   # function -> [(ops field, registering file)]
    for field in sorted(registered):
        if field not in definitions and len(structs[field]) == 1 and "" not in structs[field]:
            for number, function in sorted(registered[field]):
                fields_of.setdefault(function, []).append((field, number))
    needs = {(number, name): (primitive, number, line, "")
             for number, found in enumerate(summaries) for name, (primitive, line) in found["reads"].items()}
    frontier = sorted(needs)
    scans: dict[int, dict] = {}
    passed: set[str] = set()   # ops fields whose need is passed on already
    for _ in range(NEED_DEPTH):
        found_now: dict[tuple[int, str], tuple] = {}
        for number, name in frontier:
            is_global = (number, True) in definitions[name]
            ways = []   # (the word its callers call, their files)
            if not is_global:
                ways.append((name, [number]))
            elif all((n, name) in needs for n, g in definitions[name] if g):
                own = {n for n, g in definitions[name] if not g}   # their calls are of their own static
                ways.append((name, [n for n in callers.get(name, ()) if n not in own]))
            for field, registering in fields_of.get(name, ()):
                if field not in passed and (is_global or registering == number):
                    passed.add(field)
                    ways.append((field, callers.get(field, [])))
            primitive, origin, line, _ = needs[(number, name)]
            for word, files in ways:
                for caller_file in files:
                    if caller_file not in scans:
                        scans[caller_file] = _load_scan(directory, blobs[caller_file][1]) or {"calls": {}}
                    for caller, called in scans[caller_file]["calls"].items():
                        key = (caller_file, caller)
                        if key not in needs and key not in found_now and [word, 0] in called:
                            found_now[key] = (primitive, origin, line, word)
        needs.update(found_now)
        frontier = sorted(found_now)
    return sorted((name, number, *need) for (number, name), need in needs.items())


def from_files(root: Path, jobs: int, meanwhile: Callable[[], None] = lambda: None) -> CallIndex:
    """The index of the C files and headers of a kernel work tree; `meanwhile` is called (in this
    thread) while git stats and lists the tree."""
    checkout = _checkout(root, meanwhile)
    if checkout is None:
        return _build(_walked_blobs(root), ("files", root), jobs)
    note, changed, listed = checkout
    if note is not None and not changed:
        known = _noted(note, root)
        if known is not None:
            return known
    blobs, hashed = _checkout_blobs(root, changed, listed)
    index = _build(blobs, ("files", root), jobs)
    if note is not None and not changed:   # the symlinks' targets are hashed again on each use
        found = dict(blobs)
        _note(note, index.digest, {path: found.get(path, UNREADABLE) for path in hashed})
    return index


def _walked_blobs(root: Path) -> list[tuple[str, str]]:
    """(path, blob id) of every indexed file under root, each read and hashed."""
    blobs = []
    for directory, subdirectories, files in os.walk(root):
        relative = os.path.relpath(directory, root)
        relative = "" if relative == "." else relative + "/"
        subdirectories[:] = sorted(d for d in subdirectories
                                   if not d.startswith(".") and indexed(f"{relative}{d}/x.c"))
        for name in files:
            if indexed(relative + name):
                try:
                    blobs.append((relative + name, blob_store.blob_id((root / relative / name).read_bytes())))
                except OSError:
                    continue
    return blobs


def _checkout(root: Path, meanwhile: Callable[[], None]) -> tuple[Path | None, list[str], str] | None:
    """When root is the top of a git checkout: (where the digest of its index is noted for this
    state of git's index file, None if it cannot be told; the indexed paths whose content git's
    index does not give: changed, unmerged and untracked; `git ls-files --stage` of the indexed
    paths). None when root is no checkout's top (or git cannot say). meanwhile() is called at most once."""
    git = Git.at(root)
    try:
        code, out, _ = git.run("rev-parse", "--show-toplevel", "--git-path", "index", check=False)
        lines = out.splitlines()
        if code != 0 or len(lines) != 2 or Path(lines[0]).resolve() != root.resolve():
            meanwhile()
            return None
        # git keeps only what indexed() would (a third of a kernel's 95 000 paths are neither .c
        # nor .h); the threads only wait on git (nothing imported or forked there but git itself)
        def listing(*command: str) -> str:
            return git.run(*command, "-z", "--", *_PATHSPEC, env=_GLOBBING)[1]

        with ThreadPoolExecutor(max_workers=3) as threads:
            changed = threads.submit(listing, "diff-files", "--name-only")
            untracked = threads.submit(listing, "ls-files", "--others")
            staged = threads.submit(listing, "ls-files", "--stage")
            meanwhile()
            listed = staged.result()
            others = changed.result().split("\0") + untracked.result().split("\0")
    except (OSError, GitFailed):   # no git installed, a repository git refuses: read every file
        return None
    return _checkout_note(root, root / lines[1]), sorted({path for path in others if _walked(path)}), listed


def _checkout_note(root: Path, git_index: Path) -> Path | None:
    """Where the index digest of root is noted while git's index file is this one (its stat data)
    and no file differs from it: reading and hashing its 50 000 entries costs a fifth of a
    second, which a `lint` of a few files would otherwise pay every time."""
    try:
        state = git_index.stat()
    except OSError:
        return None
    key = hashlib.sha1(f"{root.resolve()}\0{state.st_ino} {state.st_size} {state.st_mtime_ns} {state.st_ctime_ns}"
                       f"\0{SUFFIXES} {SKIPPED_DIRS}".encode()).hexdigest()
    return cache_dir() / NOTES[1] / key


def _checkout_blobs(root: Path, changed: list[str], listed: str) -> tuple[list[tuple[str, str]], set[str]]:
    """What _walked_blobs(root) gives, from git's index: a file its stat data shows unchanged has
    the blob id recorded there (reading and hashing a whole tree costs about 1.5 CPU-s, this a
    fifth of it); `changed` files and symlinks (git records the link, the walk reads its target)
    are hashed as the walk does. Also the paths hashed."""
    staged, hashed = _staged(listed)
    hashed.update(changed)
    for path in hashed:
        staged.pop(path, None)
        try:
            staged[path] = blob_store.blob_id((root / path).read_bytes())
        except OSError:
            continue   # deleted, or a directory (a symlink to one, a submodule)
    return list(staged.items()), hashed


def _staged(listed: str) -> tuple[dict[str, str], set[str]]:
    """From `git ls-files --stage -z`: path -> blob id of the regular files _walked() keeps, and
    the kept paths git's blob id is not the file's content for."""
    staged: dict[str, str] = {}
    hashed: set[str] = set()
    for mode, blob, stage, path in _STAGED_ENTRY.findall(listed):   # one regex pass: a kernel lists 50 000
        if not _walked(path):
            continue
        if mode in ("100644", "100755") and stage == "0":
            staged[path] = blob
        else:
            hashed.add(path)   # a symlink, a conflict, a submodule
    return staged, hashed


_STAGED_ENTRY = re.compile(r"(\d+) ([0-9a-f]+) (\d+)\t([^\0]*)\0")


# indexed() as git pathspecs ("*" matches "/" too); _walked() still decides
_PATHSPEC = (*(f"*{suffix}" for suffix in SUFFIXES), *(f":(exclude){top}" for top in SKIPPED_DIRS))


_GLOBBING = {"GIT_LITERAL_PATHSPECS": "0"}   # the runner's default is literal


def _walked(path: str) -> bool:
    """_walked_blobs lists path: indexed, and under no directory named .*"""
    directory = path.rpartition("/")[0]
    return indexed(path) and not directory.startswith(".") and "/." not in directory


def from_git(git_dir: Path, rev: str, jobs: int) -> CallIndex:
    """The index of the C files and headers of `rev` in a repository (blobs read from git).

    The digest of a git tree seen before is looked up by its tree id (one rev-parse instead of
    listing and hashing 80 000 paths: most of opening the index for a `check`)."""
    git = Git(git_dir)
    tree = git.out("rev-parse", "--verify", "--end-of-options", rev + "^{tree}")
    note = _tree_digest_path(tree)
    known = _noted(note)
    if known is not None:
        return known
    blobs = []
    for line in git.out("ls-tree", "-r", "--full-tree", tree).splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob" and indexed(path):
            blobs.append((path, parts[2]))
    index = _build(blobs, ("git", git_dir), jobs)
    _note(note, index.digest)
    return index


UNREADABLE = "-"   # the blob id noted for a path that could not be read


def _noted(note: Path, root: Path | None = None) -> CallIndex | None:
    """The index whose digest `note` holds, when it is still stored and the files of root noted
    with it (those git's index cannot vouch for) still hash the same."""
    try:
        digest, *hashed = note.read_text().splitlines()
    except OSError:
        return None
    for line in hashed:
        blob, _, path = line.partition(" ")
        try:
            now = blob_store.blob_id((root / path).read_bytes())
        except OSError:
            now = UNREADABLE
        if now != blob:
            return None
    directory = note.parent.parent
    if not (directory / f"{digest}.sqlite").is_file():
        return None
    with contextlib.suppress(OSError):
        os.utime(note)   # used now: kept as long as it is looked up (_in_use)
    return _in_use(digest, directory)


def _note(note: Path, digest: str, hashed: dict[str, str] | None = None) -> None:
    """Note `digest`, and the blob id of each file of `hashed` it holds for (path -> blob id)."""
    lines = [digest, *(f"{blob} {path}" for path, blob in sorted((hashed or {}).items()))]
    try:
        note.parent.mkdir(parents=True, exist_ok=True)
        partial = note.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text("\n".join(lines) + "\n")
        partial.replace(note)
    except OSError:
        pass   # a read-only cache only costs time


def _tree_digest_path(tree: str) -> Path:
    """Where the digest of git tree `tree`'s index is noted; the key includes what indexed()
    keeps, so a change of that never reads a stale digest."""
    key = hashlib.sha1(f"{tree} {SUFFIXES} {SKIPPED_DIRS}".encode()).hexdigest()
    return cache_dir() / NOTES[0] / key
