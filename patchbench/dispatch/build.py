"""Run build jobs: the objects a patch touched (before and after it, W=1), or the whole kernel image."""

from __future__ import annotations

import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from patchbench.dispatch import warnings, workspace
from patchbench.dispatch.jobs import JobResult, KernelJob, ObjectsJob, Target
from patchbench.dispatch.kbuild import Kbuild
from patchbench.dispatch.progress import PlainProgress

COMPILED_SUFFIXES = (".c", ".S")
HEADER_DEPENDENTS_LIMIT = 8        # objects compiled for a touched header (those that include it)
SKIPPED_TOP_DIRS = ("Documentation/", "tools/", "scripts/", "samples/", "usr/")


@dataclass
class Context:
    """Where a run keeps its logs and caches, and whom it tells about progress."""
    cache: Path
    logs: Path
    progress: PlainProgress
    jobs: int = 2


class JobFailed(Exception):
    """The job cannot go on: carries the result to report (fail or error)."""

    def __init__(self, status: str, reason: str, log: Path | None = None):
        super().__init__(reason)
        self.status, self.reason, self.log = status, reason, log


def key_of(target: Target) -> str:
    return workspace.build_key(target.repo, target.base, target.config.text(), dict(target.make_vars))


def kernel_image(target: Target, commit: str, cache: Path) -> Path:
    return cache / "kernels" / key_of(target) / commit / "bzImage"


@contextmanager
def configured(target: Target, commit: str, ctx: Context, log: Path, timeout: float) -> Iterator[Kbuild]:
    """A build slot for `target` with `commit` checked out and the kernel configured."""
    with workspace.hold_slot(target.repo, key_of(target), ctx.cache) as slot:
        ctx.progress.stage("checkout")
        slot.checkout(commit)
        kbuild = Kbuild(slot, dict(target.make_vars), ctx.jobs, target.sandboxed)
        ctx.progress.stage("configure")
        failed, check = kbuild.configure(target.config, log=log, timeout=timeout, on_line=ctx.progress.line)
        if failed is not None:
            raise JobFailed("error", "configuring the kernel failed" + (" (timed out)" if failed.timed_out else ""),
                            log)
        if check.missing:
            raise JobFailed("error", f"Kconfig did not keep {check.describe()}", log)
        yield kbuild


def objects_for(files: tuple[str, ...], kbuild: Kbuild) -> list[str]:
    """Objects to compile for the touched files: their own object, or for a header those including it."""
    objects: list[str] = []
    for path in files:
        if path.startswith(SKIPPED_TOP_DIRS):
            continue
        if path.endswith(COMPILED_SUFFIXES):
            objects.append(path.rsplit(".", 1)[0] + ".o")
        elif path.endswith(".h"):
            objects += _including(kbuild, path)[:HEADER_DEPENDENTS_LIMIT]
    return sorted(set(objects))


def _including(kbuild: Kbuild, header: str) -> list[str]:
    """Objects whose recorded dependencies (Kbuild's .*.o.cmd files) name the header."""
    needle = f"{kbuild.slot.src}/{header}"
    found = []
    for cmd in sorted(kbuild.slot.obj.rglob(".*.o.cmd")):
        if needle in cmd.read_text(errors="replace"):
            rel = cmd.relative_to(kbuild.slot.obj)
            found.append(str(rel.parent / rel.name[1:].removesuffix(".cmd")))
    return [o for o in found if Path(o).suffix == ".o" and not o.endswith((".mod.o", "built-in.o"))]


def _compile(kbuild: Kbuild, objects: list[str], log: Path, job: ObjectsJob,
             ctx: Context) -> tuple[list[warnings.Diagnostic], set[str]]:
    """Compile `objects` from scratch; the diagnostics, and which objects now exist."""
    for obj in objects:
        (kbuild.slot.obj / obj).unlink(missing_ok=True)  # an up-to-date object would print no warnings
    done = kbuild.make(objects, log=log, timeout=job.timeout, diagnostics=True, on_line=ctx.progress.line)
    if done.timed_out:
        raise JobFailed("fail", f"compiling timed out after {job.timeout:.0f} s", log)
    built = {obj for obj in objects if (kbuild.slot.obj / obj).exists()}
    return warnings.parse(done.output, str(kbuild.slot.src)), built


def run_objects(job: ObjectsJob, ctx: Context) -> JobResult:
    start = time.monotonic()
    log = ctx.logs / f"build-patch{job.patch}-{job.commit[:12]}.log"
    result = JobResult("build", job.patch, job.commit, "pass", 0.0, scope="objects", log=str(log))
    with configured(job.target, job.parent, ctx, log, job.timeout) as kbuild:
        result.objects = objects_for(job.files, kbuild)
        if not result.objects:
            result.status, result.reason = "skip", "the patch touches no compiled file"
        else:
            ctx.progress.stage(f"W=1 before: {' '.join(result.objects)}")
            before, built_before = _compile(kbuild, result.objects, log, job, ctx)
            ctx.progress.stage("checkout patch")
            kbuild.slot.checkout(job.commit)
            ctx.progress.stage(f"W=1 after: {' '.join(result.objects)}")
            after, built_after = _compile(kbuild, result.objects, log, job, ctx)
            built_after |= {o for o in built_before if not _has_source(kbuild, o)}  # deleted by the patch
            result.new_warnings = warnings.new_since(before, after)
            result.fixed_warnings = warnings.new_since(after, before)
            _judge(result, built_before, built_after)
    result.seconds = time.monotonic() - start
    return result


def _has_source(kbuild: Kbuild, obj: str) -> bool:
    stem = kbuild.slot.src / obj.removesuffix(".o")
    return any(stem.with_suffix(suffix).exists() for suffix in COMPILED_SUFFIXES)


def _judge(result: JobResult, built_before: set[str], built_after: set[str]) -> None:
    broken = sorted(built_before - built_after)
    unbuilt = sorted(set(result.objects) - built_before - built_after)
    new_errors = [d for d in result.new_warnings if d.kind == "error"]
    if broken or new_errors:
        result.status = "fail"
        result.reason = "no longer compiles: " + " ".join(broken or sorted({d.file for d in new_errors}))
    elif result.new_warnings:
        result.status = "fail"
        result.reason = f"{len(result.new_warnings)} new warning(s)"
    elif unbuilt == result.objects:
        result.status, result.reason = "skip", "no touched object is built in this config"
    if unbuilt and result.status != "skip":
        result.reason = "; ".join(filter(None, [result.reason, "not built in this config: " + " ".join(unbuilt)]))


def run_kernel(job: KernelJob, ctx: Context) -> JobResult:
    start = time.monotonic()
    log = ctx.logs / f"build-kernel-{job.commit[:12]}.log"
    result = JobResult("build", job.patch, job.commit, "pass", 0.0, scope="kernel", log=str(log))
    image = kernel_image(job.target, job.commit, ctx.cache)
    if image.exists():  # a commit id names its source exactly: same commit and build key, same kernel
        result.image, result.reason = str(image), "kernel image of this commit already built"
        return result
    with configured(job.target, job.commit, ctx, log, job.timeout) as kbuild:
        ctx.progress.stage("make bzImage")
        done = kbuild.make(["bzImage"], log=log, timeout=job.timeout, on_line=ctx.progress.line)
        if done.timed_out:
            raise JobFailed("fail", f"kernel build timed out after {job.timeout:.0f} s", log)
        if done.returncode != 0:
            errors = [d for d in warnings.parse(done.output, str(kbuild.slot.src)) if d.kind == "error"]
            raise JobFailed("fail", "kernel build failed" + (f": {errors[0].file}: {errors[0].message}"
                                                             if errors else ""), log)
        image.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(kbuild.slot.obj / "arch/x86/boot/bzImage", image)
        result.image = str(image)
    result.seconds = time.monotonic() - start
    return result
