"""Run build jobs: the objects a patch touched (before and after it, W=1), or the whole kernel image."""

from __future__ import annotations

import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Iterator

from patchbench.dispatch import changes, sandbox, warnings, workspace
from patchbench.dispatch.jobs import JobResult, KernelJob, ObjectsJob, Target
from patchbench.dispatch.kbuild import Kbuild
from patchbench.dispatch.progress import PlainProgress
from patchbench.tree.git import Git

COMPILED_SUFFIXES = (".c", ".S")
HEADER_DEPENDENTS_LIMIT = 8        # objects compiled for a touched header (those that include it)
SKIPPED_TOP_DIRS = ("Documentation/", "tools/", "scripts/", "samples/", "usr/")
# gcc inlines small static functions into their callers, where ftrace cannot count them; inline-declared
# functions stay inline (some need it to compile).
TRACEABLE_CFLAGS = ("-fno-inline-functions -fno-inline-small-functions -fno-inline-functions-called-once "
                    "-fno-partial-inlining")
MAKE_ERROR = re.compile(r"^(make(\[\d+\])?|[^:\s]+:\d+): \*\*\* ")
MAKE_ERROR_SUMMARY = re.compile(r"\] Error \d+$")   # a sub-make's exit passed up: the cause is elsewhere


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
    held_elsewhere = partial(ctx.progress.stage, "waiting for the build directory another run holds")
    with workspace.hold_slot(target.repo, key_of(target), ctx.cache, on_wait=held_elsewhere) as slot:
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
        series_config(kbuild, target, commit, log, timeout, ctx)
        yield kbuild


def series_config(kbuild: Kbuild, target: Target, commit: str, log: Path, timeout: float,
                  ctx: Context, reread: bool = False) -> dict[str, str]:
    """Extend the test config with the symbols the series added up to `commit` (its new drivers and
    options get built), re-reading every Kconfig when there are any or `reread`; symbol -> the value
    Kconfig gave it."""
    symbols = changes.added_symbols(target.repo, target.base, commit)
    if not (symbols or reread):
        return {}
    ctx.progress.stage(f"config: re-read Kconfig, enable {' '.join(symbols) or 'nothing new'}")
    failed, got = kbuild.enable(symbols, log=log, timeout=timeout, on_line=ctx.progress.line)
    if failed is not None:
        errors = [line for line in failed.output.splitlines() if "error" in line.lower()]
        raise JobFailed("fail", "Kconfig does not parse" + (f": {errors[0].strip()}" if errors else "")
                        + (" (timed out)" if failed.timed_out else ""), log)
    return got


def directories_for(files: tuple[str, ...]) -> list[str]:
    """Directories to build because their Makefile or Kbuild changed (the top Makefile is the whole
    kernel's: only a full build checks it)."""
    return sorted({str(Path(path).parent) + "/" for path in files
                   if changes.is_build_rules(path) and "/" in path and not path.startswith(SKIPPED_TOP_DIRS)})


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


def _build_directories(kbuild: Kbuild, directories: list[str], log: Path, job: ObjectsJob,
                       ctx: Context) -> tuple[list[warnings.Diagnostic], list[str]]:
    """Make each directory; the diagnostics, and make's own error lines ("No rule to make target",
    a Makefile that does not parse) when it failed."""
    done = kbuild.make(directories, log=log, timeout=job.timeout, diagnostics=True, on_line=ctx.progress.line)
    if done.timed_out:
        raise JobFailed("fail", f"building {' '.join(directories)} timed out after {job.timeout:.0f} s", log)
    return warnings.parse(done.output, str(kbuild.slot.src)), make_failures(done)


def make_failures(done: sandbox.Completed) -> list[str]:
    """make's own error lines, causes first, when it failed; [] when it succeeded."""
    if done.returncode == 0:
        return []
    errors = [line.strip() for line in done.output.splitlines() if MAKE_ERROR.search(line.strip())]
    causes = [line for line in errors if not MAKE_ERROR_SUMMARY.search(line)]
    return causes + errors or ["make failed"]


def run_objects(job: ObjectsJob, ctx: Context) -> JobResult:
    """The patch's objects, the other patches' objects that exist at both ends (a patch that breaks
    a later one's object is found here) and the directories whose build rules it changed, compiled
    before and after the patch; a changed Kconfig is re-read and the symbols it adds are reported."""
    start = time.monotonic()
    log = ctx.logs / f"build-patch{job.patch}-{job.commit[:12]}.log"
    result = JobResult("build", job.patch, job.commit, "pass", 0.0, scope="objects", log=str(log))
    with configured(job.target, job.parent, ctx, log, job.timeout) as kbuild:
        own = objects_for(job.files, kbuild)
        result.directories = directories_for(job.files)
        others = [o for o in objects_for(job.series_files, kbuild) if o not in own
                  and all(_source_in(job.target.repo, rev, o) for rev in (job.parent, job.commit))]
        result.objects = own + others
        kconfig = any(changes.is_kconfig(path) for path in job.files)
        if not (result.objects or result.directories or kconfig):
            result.status, result.reason = "skip", "the patch touches no compiled file, Makefile, Kbuild or Kconfig"
        else:
            ctx.progress.stage(f"W=1 before: {' '.join(result.objects + result.directories)}")
            before, built_before = _compile(kbuild, result.objects, log, job, ctx) if result.objects else ([], set())
            dir_before, dir_failures_before = _build_directories(kbuild, result.directories, log, job, ctx) \
                if result.directories else ([], [])
            ctx.progress.stage("checkout patch")
            kbuild.slot.checkout(job.commit)
            got = series_config(kbuild, job.target, job.commit, log, job.timeout, ctx, reread=kconfig)
            added = set(changes.added_symbols(job.target.repo, job.parent, job.commit))
            result.new_symbols = [f"{s}: enabled" if got.get(s, "n") != "n" else f"{s}: not enabled (unmet dependencies)"
                                  for s in sorted(added)]
            ctx.progress.stage(f"W=1 after: {' '.join(result.objects + result.directories)}")
            after, built_after = _compile(kbuild, result.objects, log, job, ctx) if result.objects else ([], set())
            dir_after, dir_failures = _build_directories(kbuild, result.directories, log, job, ctx) \
                if result.directories else ([], [])
            built_after |= {o for o in built_before if not _has_source(kbuild, o)}  # deleted by the patch
            result.new_warnings = warnings.new_since(before + dir_before, after + dir_after)
            result.fixed_warnings = warnings.new_since(after + dir_after, before + dir_before)
            _judge(result, built_before, built_after)
            if dir_failures and not dir_failures_before and result.status != "fail":
                result.status = "fail"
                result.reason = f"{' '.join(result.directories)} no longer builds: {dir_failures[0]}"
    result.seconds = time.monotonic() - start
    return result


def _source_in(repo: Path, rev: str, obj: str) -> bool:
    stem = obj.removesuffix(".o")
    return any(Git.at(repo).run("cat-file", "-e", f"{rev}:{stem}{suffix}", check=False)[0] == 0
               for suffix in COMPILED_SUFFIXES)


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
    elif result.objects and unbuilt == result.objects and not result.directories:
        result.status, result.reason = "skip", "no touched object is built in this config"
    if unbuilt and result.status != "skip":
        result.reason = "; ".join(filter(None, [result.reason, "not built in this config: " + " ".join(unbuilt)]))


def traceable_vars(kbuild: Kbuild, target: Target, commit: str) -> dict[str, str]:
    """Make variables compiling the C files the series changed so that their functions stay out of
    line, where the boot's function profiler can count them. A Makefile that sets an object's
    CFLAGS_ keeps them (a command-line value would replace its own)."""
    changed = workspace.git(target.repo, "diff", "--name-only", "--no-renames", target.base, commit).splitlines()
    found = {}
    for path in changed:
        if not path.endswith(".c") or path.startswith(SKIPPED_TOP_DIRS):
            continue
        name = f"CFLAGS_{Path(path).stem}.o"
        makefile = kbuild.slot.src / Path(path).parent / "Makefile"
        if not (makefile.exists() and name in makefile.read_text(errors="replace")):
            found[name] = TRACEABLE_CFLAGS
    return found


def run_kernel(job: KernelJob, ctx: Context) -> JobResult:
    start = time.monotonic()
    log = ctx.logs / f"build-kernel-{job.commit[:12]}.log"
    result = JobResult("build", job.patch, job.commit, "pass", 0.0, scope="kernel", log=str(log))
    image = kernel_image(job.target, job.commit, ctx.cache)
    if image.exists():  # a commit id names its source exactly: same commit and build key, same kernel
        result.image, result.reason = str(image), "kernel image of this commit already built"
        return result
    with configured(job.target, job.commit, ctx, log, job.timeout) as kbuild:
        kbuild.make_vars.update(traceable_vars(kbuild, job.target, job.commit))
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
