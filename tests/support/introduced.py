"""Real bugs as their authors wrote them: the change a fix's Fixes: tag names, replayed as patch 1.

A case (tests/support/realbugs.py) undoes an upstream fix. Its "as introduced" twin in
fixtures/realbugs/introduced.toml goes one step further back: on the tree with the fix undone it
also undoes the commit that introduced the bug (`undo`: edits per file, a file that commit created
left out), and mails a two-patch series on that base:

    patch 1  the introducing commit, as its author posted it (the bug arrives with its feature)
    patch 2  the upstream fix

Faithfulness is checked, not assumed: patch 1's removed and added lines must have the digest of the
introducing commit's diff as mailed (`intro_digest`, realbugs.change_digest), so a twin cannot
replay a different or partial change. As for the fix digests, no kernel code is stored: only the
digest, and the few short lines the introducing commit removed that an undo must restore.

`python -m tests.support.introduced FILE` checks a file of such twins on the trees at hand:
whether each undo applies and its patch 1 matches its digest (printing the diff when not).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.support import realbugs
from tests.support.git_series import commit_files, format_patch, git

INTRODUCED = realbugs.ROOT / "fixtures" / "realbugs" / "introduced.toml"


@dataclass(frozen=True)
class Introduced:
    case: realbugs.Case          # the fix case whose bug this commit introduced
    commit: str
    subject: str
    seen: str
    intro_digest: str
    undo: tuple[realbugs.Edit, ...]
    note: str | None = None      # where the replay differs from the mail other than in content

    @property
    def id(self) -> str:
        return self.case.id

    @property
    def files(self) -> list[str]:
        """Every file patch 1 touches: the undo's and the fix's, sorted as git mails them."""
        return sorted({edit.file for edit in self.undo} | {self.case.file})


def load_introduced(path: Path = INTRODUCED, cases: list[realbugs.Case] | None = None) -> list[Introduced]:
    """The twins of `path`, each joined to the case it names (`of`): a validation case, or a
    development one (whose twin is then no more a tuning target than the validation's)."""
    every = cases if cases is not None else realbugs.load_validation() + realbugs.load_cases()
    by_id = {c.id: c for c in every}
    twins = []
    for raw in tomllib.loads(path.read_text()).get("case", []):
        undo = tuple(realbugs.Edit(**e) for e in raw.pop("undo"))
        assert raw["of"] in by_id, f"{raw['of']}: no such case"
        assert undo and all(e.file for e in undo), f"{raw['of']}: every undo edit names its file"
        twins.append(Introduced(case=by_id[raw.pop("of")], undo=undo, **raw))
    assert len({t.id for t in twins}) == len(twins), "one twin per case"
    return twins


def versions(repo: Path, base: str, twin: Introduced) -> tuple[dict[str, str | None], dict[str, str]]:
    """(the base: each touched file without the introducing change, None where that change created
    it; the buggy tree: the same files with the fix undone) at `base`; EditError when an edit
    does not apply exactly once."""
    def at_base(path: str) -> str:
        return git(repo, "show", f"{base}:{path}") + "\n"

    buggy = {path: at_base(path) for path in twin.files}
    buggy[twin.case.file] = realbugs.apply_edits(buggy[twin.case.file], twin.case)
    before: dict[str, str | None] = {}
    for path in twin.files:
        edits = tuple(e for e in twin.undo if e.file == path)
        if any(e.op == "new_file" for e in edits):
            before[path] = None
        else:
            before[path] = realbugs.edit_source(buggy[path], edits, None) if edits else buggy[path]
    return before, buggy


def patch_digest(before: dict[str, str | None], after: dict[str, str]) -> str:
    """change_digest of the diff from `before` to `after` as git makes it (files in path order)."""
    with tempfile.TemporaryDirectory(prefix="intro-digest-") as tmp:
        for side, files in (("a", before), ("b", after)):
            Path(tmp, side).mkdir()
            for path, text in files.items():
                if text is not None:
                    Path(tmp, side, path).parent.mkdir(parents=True, exist_ok=True)
                    Path(tmp, side, path).write_text(text)
        diff = subprocess.run(["git", "diff", "--no-index", "--no-color", "-U3", "a", "b"], cwd=tmp,
                              capture_output=True, text=True, timeout=60).stdout
    return realbugs.diff_digest(diff) if diff else realbugs.change_digest([], [])


def applicability(repo: Path, base: str, twin: Introduced, linux: str) -> str | None:
    """None when the twin replays faithfully at `base`, else why not, naming the Linux version."""
    reason = realbugs.applicability(repo, base, twin.case, linux)
    if reason:
        return reason
    missing = [p for p in twin.files if not git(repo, "ls-tree", base, "--", p)]
    if missing:
        return f"no {', '.join(missing)} in Linux {linux}"
    try:
        before, buggy = versions(repo, base, twin)
    except realbugs.EditError as exc:
        return f"undo of {twin.commit[:12]}: {exc} in Linux {linux}"
    if patch_digest(before, buggy) != twin.intro_digest:
        return f"{twin.commit[:12]} as replayed differs from its mailed diff in Linux {linux}"
    return None


def make_series(repo: Path, base: str, twin: Introduced, out: Path) -> Path:
    """Commit the base without the introducing change (not mailed), patch 1 (that change) and
    patch 2 (the fix) on `base`, and mail the two patches into `out`."""
    before, buggy = versions(repo, base, twin)
    start = commit_files(repo, base, {p: None if t is None else t.encode() for p, t in before.items()},
                         f"Without {twin.commit[:12]}", date="2024-02-29T09:30:00-05:00")
    first = commit_files(repo, start, {p: t.encode() for p, t in buggy.items()},
                         f"{twin.subject}\n\nThe change that introduced the bug ({twin.commit}), as posted.\n"
                         f"Benchmark case {twin.id}, as introduced.\n\nSigned-off-by: Ada Series <ada@example.org>",
                         date="2024-03-01T09:30:00-05:00")
    fixed = git(repo, "show", f"{base}:{twin.case.file}") + "\n"
    second = commit_files(repo, first, {twin.case.file: fixed.encode()},
                          f"{twin.case.subject}\n\nThe upstream fix ({twin.case.commit}).\n\n"
                          "Signed-off-by: Ada Series <ada@example.org>", date="2024-03-02T09:30:00-05:00")
    format_patch(repo, start, second, out)
    return out


def run(repo: Path, base: str, twin: Introduced, workdir: Path, cache: Path) -> realbugs.Outcome:
    series = make_series(repo, base, twin, workdir / f"{twin.id}-introduced")
    return realbugs.judge(twin.case, realbugs.run_check(series, repo, cache))


def main(argv: list[str]) -> int:
    """Check the twins of a file against their trees: undo applies, digest matches."""
    from tests.support.kernel import base_commit, kernel_repo

    path = Path(argv[0]) if argv else INTRODUCED
    bad = 0
    for twin in load_introduced(path):
        repo = kernel_repo(twin.case.kernel)
        base = base_commit(repo, twin.case.kernel)
        try:
            before, buggy = versions(repo, base, twin)
        except realbugs.EditError as exc:
            print(f"NO-APPLY  {twin.id}: {exc}")
            bad += 1
            continue
        if patch_digest(before, buggy) == twin.intro_digest:
            print(f"ok        {twin.id}")
            continue
        bad += 1
        print(f"MISMATCH  {twin.id}: patch 1 as replayed:")
        with tempfile.TemporaryDirectory() as tmp:
            for path_, text in before.items():
                a, b = Path(tmp, "a"), Path(tmp, "b")
                a.write_text(text or "")
                b.write_text(buggy[path_])
                print(f"--- {path_}")
                print(subprocess.run(["git", "diff", "--no-index", "--no-color", "-U1", str(a), str(b)],
                                     capture_output=True, text=True).stdout.split("\n", 4)[-1])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
