"""Plan jobs for an applied series and run them through a runner; the local runner is the default."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from patchbench.dispatch.boot import run_boot
from patchbench.dispatch.build import Context, JobFailed, run_kernel, run_objects
from patchbench.dispatch.jobs import BootJob, CheckJob, Job, JobResult, KernelJob, ObjectsJob, Target, repo_of
from patchbench.dispatch.kselftest import Selection
from patchbench.dispatch.store import ResultStore
from patchbench.dispatch.wire import job_id
from patchbench.errors import CheckFailed
from patchbench.tree import AppliedPatch, ApplyResult

if TYPE_CHECKING:
    from patchbench.checks.run.series import SeriesCheck


def plan(applied: ApplyResult, target: Target, *, objects: bool = True, kernel: bool = False,
         boot: bool = False, boot_each: bool = False, build_timeout: float = 3600.0, boot_timeout: float = 60.0,
         kselftests: tuple[Selection, ...] = (), count_calls: bool = True, exercise: bool = True) -> list[Job]:
    """Per patch an objects build (of every patch's objects); then, when asked, the whole kernel at
    the head and its boot (with the kselftests named), or with `boot_each` at every patch."""
    jobs: list[Job] = []
    series_files = tuple(sorted({f for p in applied.applied for f in p.files}))
    if objects:
        jobs += [ObjectsJob(target, p.index, p.parent, p.commit, tuple(p.files), build_timeout, series_files=series_files)
                 for p in applied.applied]
    booted = applied.applied if boot_each else applied.applied[-1:]
    if (kernel or boot) and not booted:   # nothing applied: the base itself
        jobs.append(KernelJob(target, applied.head, None, build_timeout))
    for n, patch in enumerate(booted):
        if kernel or boot:
            jobs.append(KernelJob(target, patch.commit, patch.index, build_timeout))
        if boot:
            upto = tuple((p.index, p.parent, p.commit) for p in applied.applied[:applied.applied.index(patch) + 1])
            jobs.append(BootJob(target, patch.commit, patch.index, timeout=boot_timeout, kselftests=kselftests,
                                build_timeout=build_timeout, patches=upto, count_calls=count_calls,
                                exercise=exercise))
    if boot and not booted:
        jobs.append(BootJob(target, applied.head, None, timeout=boot_timeout, kselftests=kselftests,
                            build_timeout=build_timeout))
    return jobs


def check_jobs(applied: ApplyResult) -> list[CheckJob]:
    """A static-check job per applied patch (the farm's way to check a series)."""
    return [CheckJob(applied.repo.resolve(), p.index, p.parent, p.commit, tuple(p.files)) for p in applied.applied]


def series_check(applied: ApplyResult, results: list[JobResult]) -> SeriesCheck:
    """The series' check assembled from its check jobs' results, as check_applied would give it; a
    job that could not run (its worker could not fetch the tree, the farm's time limit) is CheckFailed,
    never a patch with nothing found."""
    from patchbench.checks.run.series import PatchCheck, SeriesCheck

    for result in results:
        if result.status == "error":
            where = f" on {result.worker}" if result.worker else ""
            raise CheckFailed(f"patch {result.patch} was not checked{where}: {result.reason}")

    patches = [PatchCheck(r.patch, r.commit, r.objects, r.findings) for r in results]
    for patch in patches:
        for finding in patch.new:
            finding.patch = patch.index
    return SeriesCheck(applied.base, patches)


class Runner(Protocol):
    def run(self, jobs: list[Job], ctx: Context) -> list[JobResult]: ...


class LocalRunner:
    """Runs the jobs one after another on this machine, storing each result as it finishes."""

    def __init__(self, store: ResultStore | None = None):
        self.store = store
        self.run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"

    def run(self, jobs: list[Job], ctx: Context) -> list[JobResult]:
        results = []
        try:
            for job in jobs:
                result = execute_shown(job, ctx)
                if self.store is not None:
                    store_result(self.store, self.run_id, job, result)
                results.append(result)
        finally:
            ctx.progress.close()
        return results


def store_result(store: ResultStore, run_id: str, job: Job, result: JobResult) -> None:
    """Store a job's result, after naming in it the commits of earlier runs that failed with the same
    fingerprint (the same crash recognised again); a result the run has already is kept once."""
    if result.fingerprint:
        result.seen_before = sorted({r.data["commit"] for r in store.seen_before(result.fingerprint, run_id)})
    store.add(run_id, repo_of(job), result, job_id=job_id(job))


def execute_shown(job: Job, ctx: Context) -> JobResult:
    """execute() between the job's progress lines: its stages are timed from its start, and its
    finish says how long it took."""
    ctx.progress.start(_scope(job) or job.kind, job.patch, job.commit)
    result = execute(job, ctx)
    ctx.progress.finish(result.status, result.reason, result.seconds)
    return result


def execute(job: Job, ctx: Context) -> JobResult:
    """Run one job on this machine: what the local runner and a farm worker both do."""
    start = time.monotonic()
    try:
        if isinstance(job, ObjectsJob):
            return run_objects(job, ctx)
        if isinstance(job, KernelJob):
            return run_kernel(job, ctx)
        if isinstance(job, CheckJob):
            return run_check(job)
        return run_boot(job, ctx)
    except JobFailed as failed:
        return JobResult(job.kind, job.patch, job.commit, failed.status, time.monotonic() - start,
                         reason=failed.reason, scope=_scope(job), log=str(failed.log) if failed.log else None)
    except OSError as exc:  # the machine could not run the job (disk, missing tool, permissions)
        return JobResult(job.kind, job.patch, job.commit, "error", time.monotonic() - start,
                         reason=str(exc), scope=_scope(job))


def run_check(job: CheckJob) -> JobResult:
    """The static checks of one patch, as a job (the farm runs these too)."""
    from patchbench.checks.run.series import check_applied   # the checker's imports cost; builds need none

    start = time.monotonic()
    applied = ApplyResult(job.repo, job.parent, "", [AppliedPatch(job.patch, job.commit, job.parent,
                                                                  list(job.files))], None, job.commit)
    (checked,) = check_applied(applied, jobs=1).patches
    return JobResult("check", job.patch, job.commit, "fail" if checked.new else "pass",
                     time.monotonic() - start, objects=checked.files, findings=checked.new)


def _scope(job: Job) -> str:
    return {ObjectsJob: "objects", KernelJob: "kernel"}.get(type(job), "")  # only builds have a scope


def default_context(logs: Path | None, cache: Path, progress) -> Context:
    run_logs = logs or cache / "logs" / time.strftime("%Y%m%dT%H%M%S")
    return Context(cache=cache, logs=run_logs, progress=progress)
