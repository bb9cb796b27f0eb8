"""Jobs are data: what to build or boot, on which commit, with which config; and what came of them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from patchbench.dispatch.coverage import FunctionCoverage, coverage_json
from patchbench.dispatch.kbuild import DEFAULT_MAKE_VARS
from patchbench.dispatch.kconfig import KernelConfig
from patchbench.dispatch.kselftest import KselftestResult, Selection
from patchbench.dispatch.warnings import Diagnostic

STATUSES = ("pass", "fail", "error", "skip")


@dataclass(frozen=True)
class Target:
    """A source tree state and how it is configured and built: the key of its cached build directory."""
    repo: Path
    base: str                      # the build directory is kept per base; commits on top rebuild incrementally
    config: KernelConfig = field(default_factory=KernelConfig)
    make_vars: tuple[tuple[str, str], ...] = tuple(sorted(DEFAULT_MAKE_VARS.items()))
    sandboxed: bool = True


@dataclass(frozen=True)
class ObjectsJob:
    """Compile the objects a patch touched before and after it; report warnings new by identity."""
    target: Target
    patch: int | None
    parent: str
    commit: str
    files: tuple[str, ...]
    timeout: float = 900.0
    kind: str = "build"
    series_files: tuple[str, ...] = ()   # every patch's files: their objects are compiled too (bisectability)


@dataclass(frozen=True)
class KernelJob:
    """Build the whole kernel image at `commit` (the series head), for booting."""
    target: Target
    commit: str
    patch: int | None = None
    timeout: float = 3600.0
    kind: str = "build"


@dataclass(frozen=True)
class BootJob:
    """Boot the kernel built by the KernelJob of the same target and commit; run the smoke test,
    then the kselftests named, built from the same commit."""
    target: Target
    commit: str
    patch: int | None = None
    timeout: float = 60.0          # seconds under KVM; stretched under TCG
    kselftests: tuple[Selection, ...] = ()
    build_timeout: float = 3600.0  # for building the kselftests, as for the kernel
    kind: str = "boot"
    patches: tuple[tuple[int, str, str], ...] = ()   # (index, parent, commit) of the patches up to `commit`
    count_calls: bool = True       # count calls of the functions the patches changed (function profiler)
    exercise: bool = True          # run the exercises chosen for the files the series touched


@dataclass(frozen=True)
class CheckJob:
    """Run the static checks on one applied patch: its C files in its parent and in its commit."""
    repo: Path
    patch: int
    parent: str
    commit: str
    files: tuple[str, ...]
    timeout: float = 600.0
    kind: str = "check"


Job = ObjectsJob | KernelJob | BootJob | CheckJob


def repo_of(job: Job) -> Path:
    return job.repo if isinstance(job, CheckJob) else job.target.repo


def in_repo(job: Job, repo: Path) -> Job:
    """The same job, run in `repo` (a farm worker's own copy of the submitter's repository)."""
    if isinstance(job, CheckJob):
        return replace(job, repo=repo)
    return replace(job, target=replace(job.target, repo=repo))


def commits_of(job: Job) -> tuple[set[str], set[str]]:
    """(the commits `job` builds on, the commits it names that were made on top of them): what a
    worker must have to run it. A job on its base itself (nothing applied) names no commit of its own."""
    if isinstance(job, CheckJob):
        return {job.parent}, {job.commit} - {job.parent}
    pairs = [(job.parent if isinstance(job, ObjectsJob) else job.target.base, job.commit)]
    if isinstance(job, BootJob):
        pairs += [(parent, commit) for _, parent, commit in job.patches]
    parents = {job.target.base} | {parent for parent, _ in pairs}
    return parents, {commit for parent, commit in pairs if commit != parent}


@dataclass
class JobResult:
    kind: str
    patch: int | None
    commit: str
    status: str                    # one of STATUSES
    seconds: float
    scope: str = ""                # for builds: "objects" (touched by the patch) or "kernel" (whole image)
    reason: str = ""               # why it failed, errored or was skipped
    log: str | None = None         # build log or console path
    new_warnings: list[Diagnostic] = field(default_factory=list)
    fixed_warnings: list[Diagnostic] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)   # built because their Makefile or Kbuild changed
    new_symbols: list[str] = field(default_factory=list)   # "CONFIG_X: enabled" | "CONFIG_X: not enabled (...)"
    fingerprint: str | None = None
    splats: list[str] = field(default_factory=list)   # fingerprints of every splat, in console order
    seen_before: list[str] = field(default_factory=list)  # earlier commits that failed with this fingerprint
    accel: str | None = None
    image: str | None = None       # the bzImage a full build produced
    kselftests: list[KselftestResult] = field(default_factory=list)  # per test, as the guest's TAP said
    exercises: list[str] = field(default_factory=list)   # boots: the exercises run for what the series touches
    coverage: list[FunctionCoverage] = field(default_factory=list)   # boots: the series' functions, counted
    worker: str | None = None      # the farm worker that ran it (None: this machine)
    findings: list = field(default_factory=list)      # check jobs: the patch's new checker Findings

    def to_json(self) -> dict:
        data = {"kind": self.kind, "patch": self.patch, "commit": self.commit, "status": self.status,
                "seconds": round(self.seconds, 1), "reason": self.reason or None}
        if self.kind == "check":
            data.update(files=self.objects, findings=[dict(vars(f)) for f in self.findings])
        elif self.kind == "build":
            data.update(scope=self.scope, new_warnings=[d.to_json() for d in self.new_warnings],
                        fixed_warnings=[d.to_json() for d in self.fixed_warnings],
                        objects=self.objects, directories=self.directories, new_symbols=self.new_symbols,
                        image=self.image, log=self.log)
        else:
            data.update(fingerprint=self.fingerprint, splats=self.splats, seen_before=self.seen_before,
                        console=self.log, accel=self.accel, kselftests=[k.to_json() for k in self.kselftests],
                        exercises=self.exercises, coverage=coverage_json(self.coverage))
        if self.worker:
            data["worker"] = self.worker
        return data
