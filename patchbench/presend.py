"""The pre-send gate: check the patches about to be mailed and say whether the send may go.

Used by `patchbench hook sendemail-validate` (git send-email's hook) and `patchbench b4-check`
(b4's per-patch check command). The outgoing mails go through the pipeline like any series: read
(series stage), applied in isolation onto a base chosen for a send, on top of the patches before
them when those can be found (tree stage), checked (checks stage) and, when configured, their
touched objects built (dispatch stage). The verdict blocks on
new findings of the blocking severity; everything that keeps us from judging (not a patch, not a
kernel tree, does not apply, too slow) is `NotChecked`, which the commands report in one line
and which blocks only under `patchbench.presend.strict`.

Configuration is git config, `patchbench.presend.*` (see `Settings`); nothing is needed by default.
"""

from __future__ import annotations

import argparse
import io
import re
import signal
import subprocess
import threading
import time
from contextlib import contextmanager, nullcontext, redirect_stderr
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from patchbench.checks.engine.finding import Finding
from patchbench.errors import BadInput
from patchbench.mail import InputLimits
from patchbench.series import Series, find_series, load_series
from patchbench.tree import ApplyResult
from patchbench.tree.git import Git, GitFailed, open_repository

if TYPE_CHECKING:
    from patchbench.dispatch.jobs import JobResult

SEVERITIES = ("note", "warning", "error")          # mildest first
NEVER = "none"                                     # patchbench.presend.block = none: report only
# How many commits of HEAD's history are searched for the commit an outgoing patch was made from.
HISTORY_SEARCHED = 200
PROGRESS_AFTER = 1.0                               # seconds before the first progress line
# What is read of the directory an outgoing file is in, looking for the patches before it: a send's
# files, not a mail archive (past these, the patches before it count as not found).
SEND_FILES = InputLimits(max_input_size=16 << 20, max_messages=1000)
# Findings that say something is missing elsewhere in the driver (the wake of a stopped queue on the
# completion side, a caller saying what a function holds on entry), which a patch before the judged
# one may add: judged without those patches, they do not block. Rule id -> kinds of its MESSAGES.
MISSING_ELSEWHERE = {
    "queue-stop-unmatched": ("unmatched", "unmatched-wakes-elsewhere"),
    "queue-wake-wrong-queue": ("wrong-queue",),
    "rcu-deref-unprotected": ("callee-needs-unknown-entry", "callee-needs-by-name-unknown-entry",
                              "condition-lock-unknown-entry", "outside-unknown-entry"),
}
_TRUE, _FALSE = ("true", "yes", "on", "1", ""), ("false", "no", "off", "0")


class NotChecked(Exception):
    """The gate could not judge the patches (our failure, not the patches'): one line to the user."""


@dataclass(frozen=True)
class Settings:
    """git config patchbench.presend.{rules,block,build,timeout,strict}."""
    rules: frozenset[str] | None = None   # rule ids to report; None: every rule
    block: str = "error"                  # findings this severe or worse block the send; "none": never
    build: bool = False                   # also compile each patch's touched objects (W=1, before/after)
    timeout: float = 300.0                # seconds for the whole check; then NotChecked
    strict: bool = False                  # NotChecked blocks the send too

    def blocks(self, severity: str) -> bool:
        return self.block != NEVER and SEVERITIES.index(severity) >= SEVERITIES.index(self.block)


def _bool(key: str, value: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise NotChecked(f"git config patchbench.presend.{key} = {value!r} is not a boolean")


def read_settings(repo: Path) -> Settings:
    """The gate's settings from git config as seen in `repo` (the global ones outside a repository)."""
    proc = subprocess.run(["git", "-C", str(repo), "config", "--null", "--get-regexp", r"^patchbench\.presend\."],
                          capture_output=True, text=True)
    values: dict[str, str] = {}
    for entry in filter(None, proc.stdout.split("\0")):
        key, _, value = entry.partition("\n")        # a key with no "= value" is a true boolean
        values[key.removeprefix("patchbench.presend.")] = value
    found: dict = {}
    for key, value in values.items():
        if key == "rules":
            found["rules"] = _rule_ids(value)
        elif key == "block":
            if value not in (*SEVERITIES, NEVER):
                raise NotChecked(f"git config patchbench.presend.block = {value!r}: "
                                 f"expected one of {', '.join((*SEVERITIES, NEVER))}")
            found["block"] = value
        elif key in ("build", "strict"):
            found[key] = _bool(key, value)
        elif key == "timeout":
            try:
                found["timeout"] = float(value)
            except ValueError:
                found["timeout"] = -1.0
            if not found["timeout"] > 0:
                raise NotChecked(f"git config patchbench.presend.timeout = {value!r} is not a number of seconds")
    return Settings(**found)


def _rule_ids(value: str) -> frozenset[str] | None:
    from patchbench.checks.engine import registry   # the rules' modules: only when a selection is configured

    wanted = frozenset(filter(None, re.split(r"[\s,]+", value)))
    unknown = sorted(wanted - {module.ID for module in registry.rules()})
    if unknown:
        raise NotChecked(f"git config patchbench.presend.rules names unknown rule(s): {', '.join(unknown)}")
    return wanted or None


def strict_configured(repo: Path) -> bool:
    """patchbench.presend.strict, for a failure that happened before (or while) the settings were read."""
    try:
        return read_settings(repo).strict
    except NotChecked:
        return False


@dataclass
class Verdict:
    applied: ApplyResult                             # the outgoing patches' commits (on top of the earlier ones)
    base_reason: str
    findings: list[Finding]                          # new in the patches, of the rules selected
    blocking: list[Finding]                          # the findings that stop the send
    jobs: list[JobResult] = field(default_factory=list)
    blocking_jobs: list[JobResult] = field(default_factory=list)
    stack: Stack | None = None                       # what was applied under the outgoing patches
    unsure: list[Finding] = field(default_factory=list)   # of `findings`: not blocking, earlier patches missing

    @property
    def refused(self) -> bool:
        return bool(self.blocking or self.blocking_jobs)

    def only(self, indexes: set[int]) -> Verdict:
        """The verdict on the patches `indexes` alone, of a check that judged more (the send's
        later files, ahead of their own hook runs)."""
        def of(items: list) -> list:
            return [item for item in items if item.patch in indexes]

        first = min(indexes)
        earlier = self.stack.earlier
        if first > min(self.stack.outgoing):     # the patches checked before it came from the files
            earlier = SEND_FILES_SOURCE if earlier in ("", SEND_FILES_SOURCE) else f"{earlier} and {SEND_FILES_SOURCE}"
        stack = replace(self.stack, outgoing=frozenset(indexes), earlier=earlier)
        applied = replace(self.applied, applied=[p for p in self.applied.applied if p.index in indexes])
        return Verdict(applied, self.base_reason, of(self.findings), of(self.blocking), of(self.jobs),
                       of(self.blocking_jobs), stack, of(self.unsure))

    def terse_lines(self) -> list[tuple[str, bool]]:
        """(line, whether its severity may block) for the findings, then the build's new diagnostics,
        in the terse format; a finding that the missing earlier patches may resolve says so and never blocks."""
        from patchbench.report.findings import terse

        unsure = {id(f) for f in self.unsure}
        lines = [(f"{terse(f)} ({self.stack.without()}, which may resolve it: not blocking)", False)
                 if id(f) in unsure else (terse(f), True) for f in self.findings]
        if self.jobs:   # the build's report (and its imports) only when there was a build
            from patchbench.report.jobs import to_terse
            lines += [(line, True) for line in to_terse(self.jobs)]
        return lines


# --- choosing the base ------------------------------------------------------------------------------

def _made_from(git: Git, series: Series) -> tuple[str, str] | None:
    """(parent, why) of the commit in HEAD's recent history that the series' first patch was made
    from, matched by `git patch-id --stable`; None when the patch is not committed there."""
    first = series.patches[0]
    wanted = git.out("patch-id", "--stable", input=first.diff.encode("utf-8", "surrogateescape")).split()[:1]
    paths = sorted({p for change in first.files for p in (change.old_path, change.path) if p})
    if not wanted or not paths:
        return None
    code, commits, _ = git.run("rev-list", f"--max-count={HISTORY_SEARCHED}", "--no-merges", "HEAD", check=False)
    if code != 0 or not commits.strip():
        return None
    # Porcelain `log -p`, as format-patch: both follow the user's diff settings, so the ids agree.
    history = git.run("log", "--no-walk=unsorted", "--stdin", "-p", "--no-color", "--no-ext-diff",
                      "--no-textconv", "--format=commit %H", "--", *paths, input=commits.encode())[1]
    for line in git.out("patch-id", "--stable", input=history.encode("utf-8", "surrogateescape")).splitlines():
        patch_id, commit = line.split()
        if patch_id == wanted[0]:
            parent = git.commit_exists(commit + "^")
            if parent:
                return parent, f"parent of {commit[:12]}, the commit patch {first.index} was made from"
    return None


def _target_merge_base(git: Git, series: Series) -> tuple[str, str] | None:
    """(merge-base of HEAD and the target branch, why): the branch of the tree named in the subject
    (patchbench.<tree>.base, or a branch named after it), else HEAD's upstream."""
    from patchbench.tree.base import tree_branch

    found = tree_branch(git, series.tree) if series.tree else None
    if found is None:
        upstream = git.commit_exists("HEAD@{upstream}")
        found = (upstream, "HEAD's upstream") if upstream else None
    if found is None:
        return None
    code, merge_base, _ = git.run("merge-base", "HEAD", found[0], check=False)
    return (merge_base.strip(), f"merge-base of HEAD and {found[1]}") if code == 0 else None


def choose_base(git: Git, series: Series) -> tuple[str, str]:
    """(commit, why) the outgoing patches are applied onto.

    The series' `base-commit:` when the check starts at patch 1 and the repository has it; else the
    parent of the commit the first patch was made from (so that patch 3 of 5, checked alone, goes
    where it belongs); else the merge-base of HEAD and the target branch; else HEAD.
    """
    if series.base_commit and series.patches[0].index == 1:
        sha = git.commit_exists(series.base_commit) if re.fullmatch(r"[0-9a-fA-F]{7,64}", series.base_commit) else None
        if sha:
            return sha, "base-commit: of the series"
    for way in (_made_from, _target_merge_base):
        if found := way(git, series):
            return found
    return _head(git)


def _head(git: Git) -> tuple[str, str]:
    head = git.commit_exists("HEAD")
    if head is None:
        raise NotChecked(f"{git.git_dir}: HEAD is not a commit")
    return head, "HEAD"


# --- the patches before the outgoing ones --------------------------------------------------------------

@dataclass(frozen=True)
class Stack:
    """What the gate applies: the patches before the outgoing ones (when it found them), then those."""
    series: Series                 # applied in order; only the outgoing patches are judged
    base: str
    base_reason: str
    outgoing: frozenset[int]       # indexes of the patches being sent
    earlier: str = ""              # where the patches before them come from; "" when none is needed
    missing: tuple[int, ...] = ()  # patches before them that were not found: applied without them
    # the commit below patch 1, whose call index the checks read (as for the whole series): not a
    # new index for the tree under each patch
    indexed: str = ""

    def on_top(self) -> str:
        """"on top of patches 1-2 of 3 from HEAD's commits", or "" when no patch comes before."""
        if not self.earlier:
            return ""
        return f"on top of {_patches(tuple(range(1, min(self.outgoing))), self.series.total)} from {self.earlier}"

    def without(self) -> str:
        """"checked without patches 1-2 of 3", for the line of a finding they may resolve."""
        return f"checked without {_patches(self.missing, self.series.total)}"


def _patches(indexes: tuple[int, ...], total: int) -> str:
    if len(indexes) == 1:
        return f"patch {indexes[0]}/{total}"
    return f"patches {indexes[0]}-{indexes[-1]} of {total}"


SEND_FILES_SOURCE = "the send's files"


def stack_outgoing(git: Git, series: Series, beside: Path | None, ahead: bool = False) -> Stack:
    """Patch k is judged on top of patches 1..k-1: from HEAD's commits when the outgoing patch was
    made there (onto the parent of its commit); else from the other files of the same send, in the
    directory `beside` (git send-email < 2.41 validates one file at a time), applied first; else
    nothing is applied under it, and `missing` names them. `ahead`: the patches after the outgoing
    ones among the send's files are judged too (their own hook runs replay the outcome)."""
    first, last = series.patches[0].index, series.patches[-1].index
    sent = _sent_with(beside, series) if beside and (first > 1 or ahead) else None
    later = [p for p in sent.patches if p.index > last] if sent and ahead else []
    judged = frozenset(p.index for p in series.patches + later)
    if first == 1:   # the send's cover letter may name the base
        stacked = replace(sent, patches=series.patches + later, missing=[]) if sent else series
        return Stack(stacked, *choose_base(git, stacked), judged)
    if found := _made_from(git, series):
        below_first = git.commit_exists(f"{found[0]}~{first - 1}") or found[0]
        return Stack(_followed(series, later), *found, judged, earlier="HEAD's commits", indexed=below_first)
    if sent is not None:
        stacked = replace(sent, patches=[p for p in sent.patches if p.index < first] + series.patches + later,
                          missing=[])
        return Stack(stacked, *choose_base(git, stacked), judged, earlier=SEND_FILES_SOURCE)
    return Stack(series, *(_target_merge_base(git, series) or _head(git)), judged, missing=tuple(range(1, first)))


def _followed(series: Series, later: list) -> Series:
    return replace(series, patches=series.patches + later) if later else series


def _sent_with(directory: Path, series: Series) -> Series | None:
    """The posting among the mails in `directory` (the outgoing file's) that holds the outgoing
    patches (same version, count and patch-id at their index) and every patch before them: the
    files of the same send, grouped by thread or by their [PATCH n/M] numbering. None when there is none."""
    try:
        topics = find_series(str(directory), SEND_FILES)
    except BadInput:
        return None     # unreadable, or more than a send's files: as if they were not there
    first = series.patches[0]
    found = None
    for posting in (posting for topic in topics for posting in topic):
        own = {p.index: p for p in posting.patches}
        same = own.get(first.index)
        if (posting.version, posting.total) == (series.version, series.total) and same is not None \
                and same.patch_id == first.patch_id and all(n in own for n in range(1, first.index)):
            found = posting     # of two postings of one version (a resend), the later one
    return found


def _require_kernel_tree(git: Git, commit: str, repo: Path) -> None:
    answers = git.out("cat-file", "--batch-check", input=f"{commit}:Kbuild\n{commit}:MAINTAINERS\n".encode())
    if "missing" in answers:
        raise NotChecked(f"{repo} is not a Linux kernel tree (no Kbuild and MAINTAINERS at {commit[:12]})")


# --- progress and time limit --------------------------------------------------------------------------

class Progress:
    """Says what the gate is doing once it has taken longer than PROGRESS_AFTER, then at every step."""

    def __init__(self, write: Callable[[str], None] | None):
        self.write = write
        self.started = time.monotonic()
        self.current = ""
        self.shown = False
        self.lock = threading.Lock()
        self.timer = threading.Timer(PROGRESS_AFTER, self._show) if write else None
        if self.timer:
            self.timer.daemon = True
            self.timer.start()

    def _show(self) -> None:
        with self.lock:
            self.shown = True
            if self.current:
                self.write(f"patchbench: {self.current} ({time.monotonic() - self.started:.1f} s)")

    def step(self, text: str) -> None:
        with self.lock:
            self.current = text
        if self.shown:
            self._show()

    def stop(self) -> None:
        if self.timer:
            self.timer.cancel()


class _TimedOut(Exception):
    pass


@contextmanager
def time_limit(seconds: float):
    """Raise NotChecked when the block runs longer than `seconds` (SIGALRM; main thread only)."""
    def expire(signum, frame):
        raise _TimedOut

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _TimedOut:
        raise NotChecked(f"the check took longer than {seconds:g} s (git config patchbench.presend.timeout)") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- the check ----------------------------------------------------------------------------------------

def load_outgoing(source: str) -> Series:
    """The series in the outgoing mail(s) at `source`; NotChecked when there is no patch in it."""
    try:
        return load_series(source)
    except BadInput as exc:
        raise NotChecked(str(exc)) from None


def check_outgoing(repo: Path, series: Series, settings: Settings,
                   progress: Callable[[str], None] | None = None, beside: Path | None = None,
                   ahead: bool = False) -> Verdict:
    """Apply `series` in isolation to `repo` on top of the patches before it (`stack_outgoing`;
    `beside`: the directory of the outgoing file, where the send's other files are; `ahead`: judge
    the send's later files too), check it (and build it when configured), and judge it by
    `settings`. Raises NotChecked when it cannot be judged."""
    shown = Progress(progress)
    try:
        with time_limit(settings.timeout):
            return _check(repo, series, settings, shown, beside, ahead)
    except (BadInput, GitFailed) as exc:
        raise NotChecked(str(exc)) from None
    finally:
        shown.stop()


def _check(repo: Path, series: Series, settings: Settings, progress: Progress, beside: Path | None,
           ahead: bool) -> Verdict:
    from patchbench.checks.run.series import check_applied
    from patchbench.tree import apply_series, series_ref

    git = Git(open_repository(repo))
    stack = stack_outgoing(git, series, beside, ahead)
    base, reason = stack.base, stack.base_reason
    _require_kernel_tree(git, base, repo)
    count = f"{len(stack.series.patches)} patch{'es' * (len(stack.series.patches) != 1)}"
    progress.step(f"applying {count} onto {base[:12]} ({reason})")
    ref = series_ref(stack.series, base)    # where apply keeps the commits: the gate keeps nothing
    kept = git.commit_exists(ref)           # ... but a `patchbench apply` of the user's made it first
    try:
        applied = apply_series(stack.series, repo, base)
        failed = applied.failed
        if failed and failed.index <= series.patches[-1].index:   # a later file's failure is its own
            where = f" ({failed.file})" if failed.file else ""
            without = f"; {stack.without()}" if stack.missing else ""
            raise NotChecked(f"patch {failed.index} does not apply to {base[:12]} ({reason}){where}: "
                             f"{failed.reason}{without}")
        # the earlier patches are judged when they are sent: only the outgoing ones here
        judged = replace(applied, applied=[p for p in applied.applied if p.index in stack.outgoing], failed=None)
        stack = replace(stack, outgoing=frozenset(p.index for p in judged.applied))
        progress.step(f"checking {len(judged.applied)} of {count}")
        findings = [f for f in check_applied(replace(judged, base=stack.indexed or base)).findings
                    if settings.rules is None or f.rule in settings.rules]
        jobs = []
        if settings.build:
            progress.step(f"building the objects {count} touch")
            jobs = _build(judged, settings, quiet=progress.write is None)
    finally:
        if not kept:
            git.run("update-ref", "-d", ref, check=False)
    blocking_jobs = [job for job in jobs if _job_blocks(job, settings)]
    errored = [job for job in jobs if job.status == "error"]
    if errored:
        raise NotChecked(f"the build could not run: {errored[0].reason}")
    unsure = []
    for n, finding in enumerate(findings if stack.missing else ()):
        if finding.kind in MISSING_ELSEWHERE.get(finding.rule, ()):   # a warning at most, never blocking
            findings[n] = replace(finding, severity=min(finding.severity, "warning", key=SEVERITIES.index))
            unsure.append(findings[n])
    blocking = [f for f in findings if settings.blocks(f.severity) and not any(f is u for u in unsure)]
    return Verdict(judged, reason, findings, blocking, jobs, blocking_jobs, stack, unsure)


def _job_blocks(job: JobResult, settings: Settings) -> bool:
    """A failed build blocks by its new diagnostics' kinds; one that broke without any, as an error."""
    kinds = {d.kind for d in job.new_warnings} or {"error"}
    return job.status == "fail" and any(settings.blocks(kind) for kind in kinds)


def _build(applied: ApplyResult, settings: Settings, quiet: bool) -> list[JobResult]:
    """`patchbench build`'s objects jobs with its defaults, within the gate's time limit; `quiet`
    drops the build's progress lines (b4 counts every stderr line as a failure)."""
    from patchbench.commands.build import add_dispatch_arguments, dispatch

    parser = argparse.ArgumentParser()
    add_dispatch_arguments(parser)
    args = parser.parse_args([])
    args.build_timeout = settings.timeout
    with redirect_stderr(io.StringIO()) if quiet else nullcontext():
        return dispatch(applied, args, objects=True, kernel=False, boot=False)
