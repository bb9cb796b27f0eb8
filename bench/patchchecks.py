"""Time each netdev per-patch check adds to `patchbench check` of a 3-patch series on the 6.1 tree.

The series is the seeds' tun/tap_ring_consume one (tests/support/ring_series.py). Each
configuration is a whole `python -m patchbench check` process with a fresh facts cache
(PATCHBENCH_CACHE, cold) and a fresh scratch tree for the scripts (always): `--checks rules` is
the baseline, `--checks rules,<check>` adds one check, `--checks all` adds them all. Printed: the
median wall time of REPEAT rounds (the configurations take turns), what it adds to the baseline,
the check's own seconds from the JSON report, and the CPU seconds it adds (user + system of the
whole process tree: what the load of a shared machine does not change). Target: all seven together
add under 5 s.
Run from the project root: `python bench/patchchecks.py`. Needs perl.

`python bench/patchchecks.py --builds` times instead what the building checks (`--checks builds`:
build-32bit, build-clang, build-tools, ynl) add to `--checks all` on the same series: once with an
empty build cache (cold: worktrees checked out, kernels configured, ccache empty) and once again on
the cache the cold run left (warm), one round each (a cold round takes minutes). Needs what the
checks need (gcc, clang-19, bwrap, ccache; a check that cannot run says skipped).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patchbench.patchchecks import checks  # noqa: E402
from tests.support.git_series import format_patch, git  # noqa: E402
from tests.support.kernel import TAG, kernel_repo  # noqa: E402
from tests.support.ring_series import (TAP_HELPER, TUN_HELPER, WAKE_PATCH, commit_series,  # noqa: E402
                                       tap_patch, tun_patch)

REPEAT = 5
TARGET = 5.0


def check_once(mails: Path, clone: Path, selection: str, work: Path) -> tuple[float, dict]:
    """Wall seconds of one cold `check`, and its report's per-check seconds plus the CPU seconds
    (user + system, the check and every script it ran) under "cpu"."""
    with tempfile.TemporaryDirectory(dir=work) as cache:
        return check_in(mails, clone, selection, Path(cache))


def check_in(mails: Path, clone: Path, selection: str, cache: Path) -> tuple[float, dict]:
    """check_once with the cache directory given (kept: builds leave their slots there)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "patchbench", "check", str(mails), "--tree", str(clone),
                           "--format", "json", "--checks", selection], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PATCHBENCH_CACHE": str(cache), "PYTHONPATH": str(ROOT)})
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"check --checks {selection} failed: {proc.stderr.strip()}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    report = json.loads(proc.stdout)["checks"]
    return seconds, {**{c["id"]: c["seconds"] for c in report}, "cpu": cpu,
                     "skipped": {c["id"]: c["reason"] for c in report if c["status"] == "skipped"}}


def median_runs(mails: Path, clone: Path, selections: list[str], work: Path) -> dict[str, tuple[float, dict]]:
    """Median wall time and median per-check seconds of each selection; the selections take turns
    within each round, so that a change in the machine's load falls on all of them alike."""
    runs: dict[str, list[tuple[float, dict]]] = {selection: [] for selection in selections}
    for _ in range(REPEAT):
        for selection in selections:
            runs[selection].append(check_once(mails, clone, selection, work))
    return {selection: (statistics.median(seconds for seconds, _ in found),
                        {key: statistics.median(r[key] for _, r in found) for key in found[0][1]})
            for selection, found in runs.items()}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="patchbench-bench-") as tmp:
        work = Path(tmp)
        clone = work / "linux"
        git(work, "clone", "-q", "--shared", "--no-checkout", str(kernel_repo("6.1")), str(clone))
        base = git(clone, "rev-parse", TAG)
        tip = commit_series(clone, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER), WAKE_PATCH])
        mails = work / "series"
        format_patch(clone, base, tip, mails)
        ids = [module.ID for module in checks() if getattr(module, "GROUP", "netdev") == "netdev"]
        if "--builds" in sys.argv[1:]:
            builds(mails, clone, work)
            return
        results = median_runs(mails, clone, ["rules", *(f"rules,{i}" for i in ids), "all"], work)
        baseline = results["rules"][0]
        print(f"patchbench check, 3-patch series, 6.1 tree, cold facts cache, median of {REPEAT}; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        base_cpu = results["rules"][1]["cpu"]
        print(f"{'--checks':<28} {'wall s':>7} {'added s':>8} {'check s':>8} {'added cpu s':>12}")
        print(f"{'rules (baseline)':<28} {baseline:7.2f} {'':>8} {'':>8} {'':>12}")
        for check_id in ids:
            wall, own = results[f"rules,{check_id}"]
            print(f"{'rules,' + check_id:<28} {wall:7.2f} {wall - baseline:8.2f} {own[check_id]:8.2f} "
                  f"{own['cpu'] - base_cpu:12.2f}")
        wall, own = results["all"]
        added = wall - baseline
        slowest = max(v for k, v in own.items() if k not in ("rules", "cpu"))
        print(f"{'all':<28} {wall:7.2f} {added:8.2f} {slowest:8.2f} {own['cpu'] - base_cpu:12.2f}")
        print(f"all seven checks add {added:.2f} s (target under {TARGET:.0f} s): "
              f"{'met' if added < TARGET else 'NOT met'}; the slowest of them, run side by side, takes "
              f"{slowest:.2f} s")


def builds(mails: Path, clone: Path, work: Path) -> None:
    """What `--checks builds` adds to `--checks all`: cold (an empty build cache), then warm."""
    cache = work / "cache"
    cache.mkdir()
    baseline = check_in(mails, clone, "all", cache)
    cold = check_in(mails, clone, "all,builds", cache)
    warm = check_in(mails, clone, "all,builds", cache)
    build_ids = [module.ID for module in checks() if getattr(module, "GROUP", "netdev") == "builds"]
    print(f"patchbench check, 3-patch series, 6.1 tree, --checks all,builds against --checks all, one round; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    # No CPU column: RUSAGE_CHILDREN gave 58 s for a cold run of 440 s wall on a busy 2-core machine,
    # far below the compiling it did (the sandboxed compilers' time does not all reach it).
    # A check's seconds include waiting for its build turn.
    print(f"{'':<10} {'wall s':>8} {'added s':>8}  " + "  ".join(f"{i} s" for i in build_ids))
    print(f"{'all':<10} {baseline[0]:8.1f}")
    for name, (wall, own) in (("cold", cold), ("warm", warm)):
        print(f"{name:<10} {wall:8.1f} {wall - baseline[0]:8.1f}  "
              + "  ".join(f"{own.get(i, 0):{len(i) + 2}.1f}" for i in build_ids))
    for check_id, reason in sorted(warm[1]["skipped"].items()):
        print(f"{check_id} skipped: {reason}")


if __name__ == "__main__":
    main()
