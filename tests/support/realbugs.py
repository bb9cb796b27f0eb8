"""The real-bug benchmark: genuine upstream fixes, re-introduced on a Debian kernel tree and fixed again.

fixtures/realbugs/cases.toml records, for each upstream fix, where it was seen and a small EDIT on
the Debian tree that undoes it (delete a line, replace a token, move a line, within one function).
No kernel code is stored: at run time the function is found in the tree, the edit is applied to it
(it must apply exactly once), and a two-patch series is mailed with `git format-patch`:

    patch 1  the edit   (the bug re-introduced)
    patch 2  its revert (the upstream fix again)

`run_case` checks that series with `patchbench check --format json` in a separate process and
returns an Outcome: was the bug reported on patch 1 under the expected rule, in the expected file and
function, and did anything at all get reported on patch 2 (the fix). Used by tests/test_realbugs.py,
bench/realbugs.py and scripts/check-kernel-sources.

A case is found by content, not by line numbers or a point release: where the tree at hand (another
6.1.y, or a newer kernel as Debian's newest) lacks the file, the function, or a line an edit needs,
the case is not applicable there. It is counted apart with its reason, never as a miss or a catch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.git_series import commit_files, format_patch, git

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "fixtures" / "realbugs" / "cases.toml"
MUTATIONS = ROOT / "fixtures" / "realbugs" / "mutations.toml"   # held-out mutations and pristine files
# Frozen validation set: real fixes the checker is never tuned on (docs/realbugs.md), one file per family.
VALIDATION = ROOT / "fixtures" / "realbugs" / "validation"
FAMILIES = {"lock-imbalance": "lock", "rcu-deref-unprotected": "rcu", "rcu-pointer-escapes": "rcu",
            "queue-stop-unmatched": "queue", "queue-wake-wrong-queue": "queue",
            "ptr-ring-consume-unlocked": "ptr_ring", "ptr-ring-produce-unlocked": "ptr_ring",
            "rcu-deref-null-unchecked": "rcu"}
ORDER = ("lock", "rcu", "queue", "ptr_ring")
# "adapted": a genuine fix whose own change the tree can no longer redo (the code moved or changed
# since); the case re-creates its bug in today's code and is counted apart from the upstream fixes
ORIGINS = ("upstream", "adapted", "mission", "seed", "mutation")
CHECK_TIMEOUT = 300
# Of each kernel's cases, at least this share must apply to the tree at hand: another point release
# may lack a few (counted apart), but a benchmark that has mostly stopped applying measures nothing.
APPLICABLE_FLOOR = 0.75


class EditError(ValueError):
    """A recorded edit does not apply exactly once to the tree: the case is stale or wrong."""


@dataclass(frozen=True)
class Edit:
    op: str                      # delete | replace | move_after | insert_after | delete_block | delete_function
    line: str = ""               # regex selecting the line the edit works on
    after: str | None = None     # regex of a unique line; `line` is then its first match after it
    old: str | None = None       # replace: literal in the selected line
    new: str | None = None       # replace: what it becomes
    to: str | None = None        # move_after: regex of the unique line it moves below
    text: str | None = None      # insert_after: the line to add (our own writing, tokens only)
    count: int = 1               # delete: `line` must match exactly this many lines, all deleted
    through: str | None = None   # delete_block: regex of its last line (first match from `line` on)
    function: str | None = None  # the function the edit works in; a case's edits: the case's function,
    #                              an undo edit (tests/support/introduced.py): the whole file when None
    file: str | None = None      # undo edits only: the file it edits (op new_file: the base lacks it)


@dataclass(frozen=True)
class Case:
    id: str
    rule: str
    kernel: str
    subject: str
    seen: str
    file: str
    function: str
    edits: tuple[Edit, ...]
    origin: str = "upstream"
    commit: str | None = None
    report_function: str | None = None   # where else the finding may be: the stop of a queue whose wake `function` lost
    setup: str | None = None     # a named prerequisite commit (tests/support/ring_series.py) under the series
    xfail: str | None = None     # why the checker does not catch it yet (the test then expects a miss)
    note: str | None = None
    fixes: str | None = None     # the commit the fix's Fixes: tag names (the bug's author's change)
    fix_digest: str | None = None   # change_digest of the upstream fix's removed and added lines
    undigested: str | None = None   # why an upstream case has no fix_digest (its diff was not found)
    unfaithful: str | None = None   # an adapted case: why patch 2 cannot be the fix's own change

    @property
    def family(self) -> str:
        return FAMILIES[self.rule]


@dataclass
class Outcome:
    case: Case
    caught: bool
    patch1: list[dict] = field(default_factory=list)     # every finding on patch 1
    on_fix: list[dict] = field(default_factory=list)     # every finding on patch 2 (must be none)
    error: str | None = None
    not_applicable: str | None = None    # why the tree at hand lacks the case's code

    @property
    def clean_fix(self) -> bool:
        return self.error is None and not self.on_fix


def load_cases(path: Path = CASES) -> list[Case]:
    data = tomllib.loads(path.read_text())
    cases = []
    for raw in data["case"]:
        edits = tuple(Edit(**e) for e in raw.pop("edit"))
        cases.append(Case(edits=edits, **raw))
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    for case in cases:
        assert case.rule in FAMILIES and case.origin in ORIGINS and case.kernel in ("6.1", "newest"), case.id
    return cases


def load_validation(folder: Path = VALIDATION) -> list[Case]:
    """Every case of the validation set; ids unique across its files."""
    cases = [case for path in sorted(folder.glob("*.toml")) for case in load_cases(path)]
    assert len({c.id for c in cases}) == len(cases), "validation case ids must be unique"
    return cases


def load_correct(path: Path = MUTATIONS) -> dict[str, list[str]]:
    """Pristine files per kernel whose whole-file lint should report nothing."""
    return {entry["kernel"]: entry["files"] for entry in tomllib.loads(path.read_text()).get("correct", [])}


def lint_files(tree: Path, files: list[str], cache: Path) -> list[dict]:
    """`patchbench lint --format json FILE...` run inside the Debian tree (read only), in its own
    process with the facts cache `cache`: every finding on those files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(PYTHONPATH=str(ROOT), PATCHBENCH_CACHE=str(cache))
    proc = subprocess.run([sys.executable, "-m", "patchbench", "lint", "--format", "json", *files],
                          cwd=tree, capture_output=True, text=True, env=env, timeout=CHECK_TIMEOUT)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"patchbench lint exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)["findings"]


def function_span(lines: list[str], name: str) -> tuple[int, int]:
    """[first, last] line indexes of the definition of `name`: its header to the closing brace in column 0."""
    head = re.compile(rf"^(?:[A-Za-z_].*[^\w])?{re.escape(name)}\s*\(")
    starts = [i for i, text in enumerate(lines) if head.match(text) and not text.rstrip().endswith(";")]
    spans = []
    for start in starts:
        open_at = next((j for j in range(start, min(start + 12, len(lines))) if lines[j].startswith("{")), None)
        if open_at is None or any(lines[k].rstrip().endswith(";") for k in range(start, open_at)):
            continue
        close_at = next(j for j in range(open_at, len(lines)) if lines[j].startswith("}"))
        spans.append((start, close_at))
    if len(spans) != 1:
        raise EditError(f"function {name} is defined {len(spans)} times")
    return spans[0]


def _one(lines: list[str], lo: int, hi: int, pattern: str, what: str) -> int:
    found = [i for i in range(lo, hi + 1) if re.search(pattern, lines[i])]
    if len(found) != 1:
        raise EditError(f"{what} /{pattern}/ matches {len(found)} lines")
    return found[0]


def _select(lines: list[str], lo: int, hi: int, edit: Edit) -> int:
    if edit.after is None:
        return _one(lines, lo, hi, edit.line, "line")
    anchor = _one(lines, lo, hi, edit.after, "anchor")
    for i in range(anchor + 1, hi + 1):
        if re.search(edit.line, lines[i]):
            return i
    raise EditError(f"no line /{edit.line}/ after /{edit.after}/")


def applicability(repo: Path, base: str, case: Case, linux: str) -> str | None:
    """None when `case`'s code is in the tree at `base` (its setup applies, its file and function are
    there, each edit applies exactly once), else why not, naming the Linux version."""
    if case.setup:
        try:
            base = _setup_commit(repo, base, case.setup)
        except (AssertionError, subprocess.CalledProcessError) as exc:
            return f"setup {case.setup} does not apply in Linux {linux}: {str(exc)[:120]}"
    if not git(repo, "ls-tree", base, "--", case.file):
        return f"no {case.file} in Linux {linux}"
    try:
        apply_edits(git(repo, "show", f"{base}:{case.file}") + "\n", case)
    except EditError as exc:
        return f"{case.file}: {exc} in Linux {linux}"
    return None


def change_digest(removed: list[str], added: list[str]) -> str:
    """A digest of a change's removed and added lines (each stripped, inner blanks collapsed, in
    order), not of its context or line numbers: an upstream fix and the patch 2 that redoes it on
    another tree have the same digest when they make the same change. Lines that are empty after
    stripping are left out. No kernel code is stored to check faithfulness: only this digest."""
    def norm(lines: list[str]) -> list[str]:
        return [" ".join(line.split()) for line in lines if line.strip()]
    text = "\n".join([*("-" + line for line in norm(removed)), *("+" + line for line in norm(added))])
    return hashlib.sha256(text.encode()).hexdigest()


def fix_digest_of(buggy: str, fixed: str) -> str:
    """change_digest of the change from `buggy` to `fixed` as git diffs it, which is how patch 2 (the
    fix again) is mailed and how the upstream fix was: the same algorithm pairs lines the same way."""
    with tempfile.TemporaryDirectory(prefix="fix-digest-") as tmp:
        before, after = Path(tmp, "buggy"), Path(tmp, "fixed")
        before.write_text(buggy)
        after.write_text(fixed)
        diff = subprocess.run(["git", "diff", "--no-index", "--no-color", "-U3", str(before), str(after)],
                              capture_output=True, text=True, timeout=60).stdout
    return diff_digest(diff) if diff else change_digest([], [])


def diff_digest(diff: str) -> str:
    """change_digest of a unified diff's removed and added lines (an upstream fix as mailed)."""
    from unidiff import PatchSet

    removed, added = [], []
    for patched in PatchSet(diff[diff.index("diff --git"):] if "diff --git" in diff else diff):
        for hunk in patched:
            for line in hunk:
                if line.is_removed:
                    removed.append(line.value.rstrip("\n"))
                elif line.is_added:
                    added.append(line.value.rstrip("\n"))
    return change_digest(removed, added)


def apply_edits(source: str, case: Case) -> str:
    """The file with the case's bug re-introduced; EditError when an edit does not apply exactly once."""
    return edit_source(source, case.edits, case.function)


def _span(lines: list[str], function: str | None) -> tuple[int, int]:
    return function_span(lines, function) if function else (0, len(lines) - 1)


def edit_source(source: str, edits: tuple[Edit, ...], function: str | None) -> str:
    """`source` with `edits` applied in order, each within its own function, else `function`, else
    the whole file; EditError when one does not apply exactly once or they change nothing."""
    lines = source.split("\n")
    for edit in edits:
        scope = edit.function or function
        lo, hi = _span(lines, scope)
        if edit.op == "delete_function":
            if lines[hi + 1:hi + 2] == [""]:
                hi += 1
            del lines[lo:hi + 1]
            continue
        if edit.op == "delete" and edit.count > 1:
            found = [i for i in range(lo, hi + 1) if re.search(edit.line, lines[i])]
            if len(found) != edit.count:
                raise EditError(f"line /{edit.line}/ matches {len(found)} lines, not {edit.count}")
            for i in reversed(found):
                del lines[i]
            continue
        at = _select(lines, lo, hi, edit)
        if edit.op == "delete":
            del lines[at]
        elif edit.op == "delete_block":
            last = next((i for i in range(at, hi + 1) if re.search(edit.through, lines[i])), None)
            if last is None:
                raise EditError(f"no line /{edit.through}/ from /{edit.line}/ on")
            del lines[at:last + 1]
        elif edit.op == "replace":
            if lines[at].count(edit.old) != 1:
                raise EditError(f"{edit.old!r} occurs {lines[at].count(edit.old)} times in the selected line")
            lines[at] = lines[at].replace(edit.old, edit.new)
        elif edit.op == "move_after":
            moved = lines.pop(at)
            lo, hi = _span(lines, scope)
            lines.insert(_one(lines, lo, hi, edit.to, "target") + 1, moved)
        elif edit.op == "insert_after":
            indent = re.match(r"\s*", lines[at]).group(0)
            lines.insert(at + 1, indent + edit.text)
        else:
            raise EditError(f"unknown edit {edit.op}")
    result = "\n".join(lines)
    if result == source:
        raise EditError("the edits change nothing")
    return result


def _setups() -> dict:
    """Prerequisite commits a case may sit on: the seeds' tun consume helper, waking the queue under RCU."""
    from tests.support import ring_series as ring

    return {"tun-consume-wake": [ring.tun_patch(ring.TUN_HELPER), ring.WAKE_PATCH],
            "tap-consume": [ring.tap_patch(ring.TAP_HELPER)]}


def _setup_commit(repo: Path, base: str, name: str) -> str:
    from tests.support.ring_series import commit_series

    return commit_series(repo, base, _setups()[name])


def make_case_series(repo: Path, base: str, case: Case, out: Path) -> Path:
    """Commit patch 1 (bug) and patch 2 (fix) on base (after the case's setup) and mail them into out."""
    if case.setup:
        base = _setup_commit(repo, base, case.setup)
    fixed = git(repo, "show", f"{base}:{case.file}") + "\n"
    buggy = apply_edits(fixed, case)
    first = commit_files(repo, base, {case.file: buggy.encode()},
                         f"{case.function}: re-introduce the bug fixed by \"{case.subject}\"\n\n"
                         f"Benchmark case {case.id}.\n\nSigned-off-by: Ada Series <ada@example.org>",
                         date="2024-03-01T09:30:00-05:00")
    second = commit_files(repo, first, {case.file: fixed.encode()},
                          f"{case.subject}\n\nThe upstream fix again ({case.commit or 'see ' + case.seen}).\n\n"
                          "Signed-off-by: Ada Series <ada@example.org>",
                          date="2024-03-02T09:30:00-05:00")
    format_patch(repo, base, second, out)
    return out


def run_check(series: Path, repo: Path, cache: Path) -> dict:
    """`patchbench check SERIES --tree REPO --format json --checks rules` as a user runs it, in its
    own process: the benchmark measures the static rules, not netdev's per-patch checks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(PYTHONPATH=str(ROOT), PATCHBENCH_CACHE=str(cache))
    proc = subprocess.run([sys.executable, "-m", "patchbench", "check", str(series), "--tree", str(repo),
                           "--format", "json", "--checks", "rules"], capture_output=True, text=True, env=env, timeout=CHECK_TIMEOUT)
    try:
        if proc.returncode in (0, 1):
            return json.loads(proc.stdout)
    except json.JSONDecodeError:
        pass
    raise RuntimeError(f"patchbench check exited {proc.returncode}: {proc.stderr.strip()[-400:]}")


def _where(case: Case) -> set[str]:
    """The functions a finding of the bug may be in: the one the fix changes (a finding at the
    changed line), and for a queue the one stopping it (the rule's finding on the stop)."""
    return {case.function} | ({case.report_function} if case.report_function else set())


def judge(case: Case, report: dict) -> Outcome:
    applied = [p for p in report.get("patches", []) if p.get("applied", True)]
    if len(report.get("patches", [])) != 2 or len(applied) != 2:
        return Outcome(case, False, error=f"series did not apply: {report.get('failed')}")
    patch1 = [f for f in report["findings"] if f.get("patch") == 1]
    on_fix = [f for f in report["findings"] if f.get("patch") == 2]
    where = _where(case)
    caught = any(f["rule"] == case.rule and f["file"] == case.file and f["function"] in where for f in patch1)
    return Outcome(case, caught, patch1, on_fix)


def lint_of_case(repo: Path, base: str, case: Case, jobs: int = 1) -> tuple[bool, bool]:
    """(reported on the buggy file, reported on the fixed file): whole-file lint of the case's
    file with its bug, and as the tree has it, with no parent text (no diff to judge), as
    `patchbench lint` judges a file of the tree at `base` with its call index. Reported: a
    finding of the case's rule in its function. The rules: lint's default ones and the case's
    rule (one run only when named is named)."""
    from patchbench.checks import callindex
    from patchbench.checks.engine import registry
    from patchbench.checks.engine.context import TreeContext
    from patchbench.checks.run import checkfile
    from patchbench.tree.git import open_repository

    if case.setup:
        base = _setup_commit(repo, base, case.setup)
    fixed = git(repo, "show", f"{base}:{case.file}") + "\n"
    context = TreeContext(callindex.from_git(open_repository(repo), base, jobs))
    rules = set(registry.default_rule_ids(lint=True)) | {case.rule}
    where = _where(case)

    def reported(text: str) -> bool:
        return any(f.rule == case.rule and f.function in where
                   for f in checkfile.check_source(case.file, text.encode(), rules, context=context))

    return reported(apply_edits(fixed, case)), reported(fixed)


def run_case(repo: Path, base: str, case: Case, workdir: Path, cache: Path) -> Outcome:
    series = make_case_series(repo, base, case, workdir / case.id)
    return judge(case, run_check(series, repo, cache))


class Bench:
    """Runs cases on shared, checkout-less clones of the Debian trees (the cached trees stay untouched),
    one fresh facts cache per run, each case's outcome computed once."""

    def __init__(self, workdir: Path, trees: dict[str, Path]):
        self.workdir, self.trees = workdir, trees
        self.clones: dict[str, tuple[Path, str]] = {}
        self.outcomes: dict[str, Outcome] = {}

    def clone(self, kernel: str) -> tuple[Path, str]:
        if kernel not in self.clones:
            from tests.support.kernel import KERNELS

            repo = self.workdir / f"linux-{kernel}"
            git(self.workdir, "clone", "-q", "--shared", "--no-checkout", str(self.trees[kernel]), str(repo))
            self.clones[kernel] = repo, git(repo, "rev-parse", KERNELS[kernel].tag)
        return self.clones[kernel]

    def linux(self, kernel: str) -> str:
        """The Linux version of the tree standing for `kernel` (its Makefile's)."""
        from tests.support.kernel import built

        tree = built(self.trees[kernel])
        return tree.linux if tree else kernel

    def not_applicable(self, case: Case) -> str | None:
        """Why the tree of the case's kernel lacks its code, or None when the case applies."""
        repo, base = self.clone(case.kernel)
        return applicability(repo, base, case, self.linux(case.kernel))

    def outcome(self, case: Case) -> Outcome:
        if case.id not in self.outcomes:
            reason = self.not_applicable(case)
            if reason:
                self.outcomes[case.id] = Outcome(case, False, not_applicable=reason)
                return self.outcomes[case.id]
            repo, base = self.clone(case.kernel)
            try:
                self.outcomes[case.id] = run_case(repo, base, case, self.workdir / "series", self.workdir / "cache")
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                self.outcomes[case.id] = Outcome(case, False, error=str(exc))
        return self.outcomes[case.id]

    def present(self, kernel: str, files: list[str]) -> tuple[list[str], list[str]]:
        """(files the tree of `kernel` has, files it lacks)."""
        tree = self.trees[kernel]
        return [f for f in files if (tree / f).is_file()], [f for f in files if not (tree / f).is_file()]


def applicable(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.not_applicable is None]


def recall(outcomes: list[Outcome]) -> tuple[int, int]:
    """(caught, applicable) over the outcomes: a case counts when its bug is reported and its fix is
    clean; cases whose code the tree lacks count in neither."""
    counted = applicable(outcomes)
    return sum(o.caught and o.clean_fix for o in counted), len(counted)
