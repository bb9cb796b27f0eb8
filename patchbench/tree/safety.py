"""Refuse a series whose paths could escape the tree, before a single object is written.

A path is refused when it leaves the tree (absolute, `..`, empty or `.` components), goes through a
`.git` directory (also the case-folded and dot/space-padded spellings other file systems treat as
`.git`), or has a leading directory that is a symlink: in the base tree or made by an earlier patch
of the same series (the classic "add a symlink, then write through it" attack).
"""

from __future__ import annotations

from typing import Iterable

from patchbench.errors import BadInput
from patchbench.tree.diffscan import FileDiff

SYMLINK_MODE = "120000"


def _lexical_problem(path: str) -> str | None:
    if path.startswith("/"):
        return "is absolute and leaves the tree"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "leaves the tree"
    if any(part.rstrip(". ").lower() == ".git" for part in parts):
        return "goes through .git/"
    return None


def _leading_dirs(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts))]


def paths_to_query(patches: Iterable[list[FileDiff]]) -> set[str]:
    """Every path named by the series plus every leading directory of one: what the base must tell."""
    wanted: set[str] = set()
    for files in patches:
        for diff in files:
            for path in diff.paths():
                wanted.add(path)
                wanted.update(_leading_dirs(path))
    return wanted


def check_lexical(patches: list[tuple[int, list[FileDiff]]]) -> None:
    """Raise BadInput naming the patch and path when a path leaves the tree or goes through .git/."""
    for index, files in patches:
        for diff in files:
            for path in diff.paths():
                problem = _lexical_problem(path)
                if problem:
                    raise BadInput(f"patch {index}: refusing {path!r}: the path {problem}; nothing was written")


def check_symlinks(patches: list[tuple[int, list[FileDiff]]], base_links: set[str]) -> None:
    """Raise BadInput when a path would be written through a symlink of the base or of an earlier patch.

    `patches` is (index, files) in application order; `base_links` the symlinks of the base tree
    among `paths_to_query(...)`.
    """
    links = set(base_links)
    for index, files in patches:
        for diff in files:
            for path in diff.paths():
                through = next((d for d in _leading_dirs(path) if d in links), None)
                if through:
                    raise BadInput(f"patch {index}: refusing {path!r}: it would write through the symlink "
                                   f"{through!r}; nothing was written")
            was_link = diff.old_path in links
            if diff.new_path is None:
                links.discard(diff.old_path)
            elif diff.new_mode == SYMLINK_MODE or (diff.new_mode is None and was_link):
                links.add(diff.new_path)
            else:
                links.discard(diff.new_path)
