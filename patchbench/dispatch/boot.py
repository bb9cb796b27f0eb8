"""Run boot jobs: boot the series' kernel under QEMU, run the smoke test, judge the console."""

from __future__ import annotations

import time

from patchbench.dispatch import console, initramfs, qemu
from patchbench.dispatch.build import Context, kernel_image
from patchbench.dispatch.jobs import BootJob, JobResult


def run_boot(job: BootJob, ctx: Context) -> JobResult:
    start = time.monotonic()
    log = ctx.logs / f"console-{job.commit[:12]}.log"
    result = JobResult("boot", job.patch, job.commit, "pass", 0.0, log=str(log))
    image = kernel_image(job.target, job.commit, ctx.cache)
    if not image.exists():
        result.status, result.reason = "skip", "no kernel image: the full build of this commit did not succeed"
        return result
    ctx.progress.stage("initramfs")
    initrd = initramfs.build(ctx.cache)
    ctx.progress.stage("probe accelerator")
    accel = qemu.choose_accel(image, initrd, ctx.cache)
    result.accel = accel.name
    ctx.progress.stage(f"boot ({accel.name})")
    done = qemu.boot(image, initrd, accel, timeout=job.timeout, console_log=log, on_line=ctx.progress.line)
    judge(result, done.output, timed_out=done.timed_out, limit=done.seconds)
    result.seconds = time.monotonic() - start
    return result


def judge(result: JobResult, output: str, *, timed_out: bool, limit: float) -> None:
    """Fail on any splat (fingerprinted), on a hang, or on a failed or missing smoke status."""
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
    elif status == "PASS":
        result.status = "pass"
    else:
        result.status = "fail"
        result.reason = f"smoke test: {detail}" if status else "the guest stopped without a smoke test status"
        result.fingerprint = f"SMOKE:{console.normalise(detail)}" if status else None
