"""Run boot jobs: boot the series' kernel under QEMU, run the smoke test, the exercises chosen for what
the series touches and the kselftests named, count calls of the functions it changed, judge the console."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from patchbench.dispatch import console, coverage, exercise, initramfs, kselftest, qemu, workspace
from patchbench.dispatch.build import Context, JobFailed, configured, kernel_image
from patchbench.dispatch.jobs import BootJob, JobResult
from patchbench.dispatch.kbuild import Kbuild
from patchbench.dispatch.kselftest import GuestFile, Selection


def run_boot(job: BootJob, ctx: Context) -> JobResult:
    start = time.monotonic()
    log = ctx.logs / f"console-{job.commit[:12]}.log"
    result = JobResult("boot", job.patch, job.commit, "pass", 0.0, log=str(log))
    image = kernel_image(job.target, job.commit, ctx.cache)
    if not image.exists():
        result.status, result.reason = "skip", "no kernel image: the full build of this commit did not succeed"
        return result
    extra = _kselftest_files(job, ctx) if job.kselftests else []
    ctx.progress.stage("changed functions and exercises")
    functions = coverage.series_functions(job.target.repo, job.patches) if job.count_calls else []
    touched = workspace.git(job.target.repo, "diff", "--name-only", "--no-renames", job.target.base,
                            job.commit).splitlines()
    exercises = exercise.chosen(touched) if job.exercise else []
    result.exercises = [e.name for e in exercises]
    extra += exercise.guest_files(exercises, ctx.cache) if exercises else []
    if functions:
        extra.append(GuestFile(coverage.FUNCTIONS_FILE, 0o100644,
                               "".join(f"{name}\n" for name in sorted({f.function for f in functions})).encode()))
    ctx.progress.stage("initramfs")
    initrd = initramfs.build(ctx.cache, extra)
    ctx.progress.stage("probe accelerator")
    accel = qemu.choose_accel(image, initrd, ctx.cache)
    result.accel = accel.name
    ctx.progress.stage(f"boot ({accel.name})")
    done = qemu.boot(image, initrd, accel, timeout=job.timeout, console_log=log, on_line=ctx.progress.line)
    coverage.read(done.output, functions)
    result.coverage = functions
    judge(result, done.output, timed_out=done.timed_out, limit=done.seconds, kselftests=job.kselftests)
    result.seconds = time.monotonic() - start
    return result


def _kselftest_files(job: BootJob, ctx: Context) -> list[GuestFile]:
    """Build the selected kselftests from the commit's worktree, sandboxed like the kernel build."""
    log = ctx.logs / f"kselftest-{job.commit[:12]}.log"
    with configured(job.target, job.commit, ctx, log, job.build_timeout) as kbuild:
        ctx.progress.stage(f"kselftests {' '.join(map(str, job.kselftests))}")
        install = _install_kselftests(kbuild, job.kselftests, log=log, timeout=job.build_timeout, ctx=ctx)
        return kselftest.guest_files(install, job.kselftests, job.target.sandboxed)


def _install_kselftests(kbuild: Kbuild, selections: tuple[Selection, ...], *, log: Path, timeout: float,
                        ctx: Context) -> Path:
    """Install the selected targets with the selftests Makefile into the slot's O= tree; its install path.

    Statically linked where the target's Makefile honours USERLDFLAGS=-static (no libraries to carry),
    else built again dynamically and the libraries copied in by guest_files.
    """
    missing = kselftest.missing_targets(selections, kbuild.slot.src)
    if missing:
        raise JobFailed("error", f"no kselftest target {', '.join(missing)} in {kselftest.SELFTESTS} of this tree")
    done = kbuild.make(["headers"], log=log, timeout=timeout, on_line=ctx.progress.line)
    if done.returncode != 0:
        raise JobFailed("error", "installing the kernel headers for the kselftests failed"
                        + (" (timed out)" if done.timed_out else ""), log)
    install = kbuild.slot.obj / "kselftest_install"
    targets = sorted({s.target for s in selections})
    for static in (True, False):
        shutil.rmtree(install, ignore_errors=True)  # only the selected targets go into the guest
        args = [f"TARGETS={' '.join(targets)}", "FORCE_TARGETS=1", f"KSFT_INSTALL_PATH={install}",
                *(["USERLDFLAGS=-static"] if static else []), "install"]
        done = kbuild.make(args, subdir=kselftest.SELFTESTS, log=log, timeout=timeout, on_line=ctx.progress.line)
        if done.timed_out:
            raise JobFailed("error", f"building kselftest {' '.join(targets)} timed out after {timeout:.0f} s", log)
        if done.returncode == 0:
            return install
    errors = [line.strip() for line in done.output.splitlines() if "error" in line.lower()]
    raise JobFailed("error", f"kselftest {' '.join(targets)} does not build here"
                    + (f": {errors[0]}" if errors else ""), log)


def judge(result: JobResult, output: str, *, timed_out: bool, limit: float,
          kselftests: tuple[Selection, ...] = ()) -> None:
    """Fail on any splat (fingerprinted), on a hang, on a failed or missing smoke status, or on a
    failed or unfinished kselftest."""
    result.kselftests = kselftest.parse_tap(output)
    found = console.splats(output)
    result.splats = [s.fingerprint for s in found]
    status, detail = console.smoke_status(output)
    if found:
        first = found[0]
        result.status, result.fingerprint = "fail", first.fingerprint
        result.reason = f"{first.title}" + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
        if timed_out:
            result.reason += f"; hung, killed after {limit:.0f} s"
    elif timed_out:
        last = console.last_words(output)
        result.status = "fail"
        result.reason = f"hung, killed after {limit:.0f} s; last console lines: {' / '.join(last) or 'none'}"
        result.fingerprint = "HANG:" + (console.normalise(last[-1]) if last else "silent")
    elif status == "PASS" and kselftests:
        _judge_kselftests(result, output, kselftests)
    elif status == "PASS":
        result.status = "pass"
    else:
        result.status = "fail"
        result.reason = f"smoke test: {detail}" if status else "the guest stopped without a smoke test status"
        result.fingerprint = f"SMOKE:{console.normalise(detail)}" if status else None


def _judge_kselftests(result: JobResult, output: str, kselftests: tuple[Selection, ...]) -> None:
    failed = [k for k in result.kselftests if k.status == "fail"]
    reported = {k.target for k in result.kselftests} | {f"{k.target}:{k.test}" for k in result.kselftests}
    unreported = [str(s) for s in kselftests if str(s) not in reported]
    if failed:
        first = failed[0]
        result.status, result.fingerprint = "fail", f"KSELFTEST:{first.target}:{first.test}"
        result.reason = f"kselftest {first.target}:{first.test} failed" + (
            f" (and {len(failed) - 1} more)" if len(failed) > 1 else "")
    elif not kselftest.finished(output):
        result.status, result.reason = "fail", "the guest stopped before the kselftests finished"
    elif unreported:
        result.status, result.reason = "error", f"no kselftest result for {', '.join(unreported)}"
    else:
        result.status = "pass"
