"""patchbench check / lint against checkpatch.pl and Coccinelle's mini_lock.cocci on the 6.1 tree.

1. `patchbench check` of the seeds' 3-patch tun/tap_ring_consume series (cold and warm facts
   cache) vs `scripts/checkpatch.pl` on the same 3 patches plus `spatch` with
   scripts/coccinelle/locks/mini_lock.cocci on the files they touch. Target: check under 1 s and
   at most half of checkpatch + spatch.
2. `patchbench lint drivers/net/*.c` (cold) vs that spatch over the same files. Target: 0.3 of it.
3. `patchbench lint` of all of drivers/net and net/ (cold), wall time and the largest worker's peak
   RSS (targets: 60 s on 2 cores, 300 MB per worker), findings per rule. `--skip-tree` leaves it out.
   It runs first, so that no other child (spatch) counts in the peak RSS.
Run from the project root: `python bench/check_series.py [--skip-tree]`. Needs spatch and perl.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patchbench.commands.lint import lint  # noqa: E402
from tests.support.git_series import format_patch, git  # noqa: E402
from tests.support.kernel import TAG, kernel_repo  # noqa: E402
from tests.support.ring_series import (TAP_HELPER, TUN_HELPER, WAKE_PATCH, commit_series,  # noqa: E402
                                       tap_patch, tun_patch)

MINI_LOCK = "scripts/coccinelle/locks/mini_lock.cocci"


def timed(argv: list[str], cwd: Path, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    return time.monotonic() - started, proc


def spatch(kernel: Path, files: list[Path], jobs: int = 1) -> tuple[float, int]:
    """mini_lock.cocci in report mode over files; (seconds, "preceding lock" reports it printed)."""
    seconds, proc = timed(["spatch", "--very-quiet", "-D", "report", "--no-includes", "--jobs", str(jobs),
                           "--sp-file", str(kernel / MINI_LOCK), *map(str, files)], kernel)
    return seconds, sum("preceding lock" in line for line in proc.stdout.splitlines())


def series_bench(kernel: Path, work: Path) -> None:
    clone = work / "linux"
    git(work, "clone", "-q", "--shared", "--no-checkout", str(kernel), str(clone))
    base = git(clone, "rev-parse", TAG)
    tip = commit_series(clone, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER), WAKE_PATCH])
    mails = work / "series"
    patches = [p for p in format_patch(clone, base, tip, mails) if not p.name.startswith("0000-")]
    cache = {"PATCHBENCH_CACHE": str(work / "cache")}
    check = [sys.executable, "-m", "patchbench", "check", str(mails), "--tree", str(clone), "--format", "terse",
             "--checks", "rules"]
    cold, proc = timed(check, ROOT, cache)
    warm, _ = timed(check, ROOT, cache)
    print(f"patchbench check, 3 patches: {cold:.2f} s cold cache, {warm:.2f} s warm (exit {proc.returncode}, "
          f"{len(proc.stdout.splitlines())} findings)")
    checkpatch, proc = timed(["perl", "scripts/checkpatch.pl", "-q", "--no-summary", *map(str, patches)], kernel)
    touched = work / "touched"
    for path in ("drivers/net/tun.c", "drivers/net/tap.c"):
        (touched / path).parent.mkdir(parents=True, exist_ok=True)
        (touched / path).write_text(git(clone, "show", f"{tip}:{path}") + "\n")
    cocci, reported = spatch(kernel, sorted(touched.rglob("*.c")))
    print(f"checkpatch.pl on the 3 patches: {checkpatch:.2f} s; spatch mini_lock.cocci on tun.c+tap.c: "
          f"{cocci:.2f} s ({reported} reports); together {checkpatch + cocci:.2f} s")
    print(f"  ratio check(cold)/(checkpatch+spatch) = {cold / (checkpatch + cocci):.2f} (target <= 0.5), "
          f"check under 1 s: {'yes' if cold < 1 else 'no'}")


def drivers_net_bench(kernel: Path) -> None:
    files = sorted((kernel / "drivers/net").glob("*.c"))
    started = time.monotonic()
    found = lint([str(f) for f in files], jobs=2, use_cache=False)
    ours = time.monotonic() - started
    cocci, reported = spatch(kernel, files, jobs=2)
    print(f"lint drivers/net/*.c ({len(files)} files, 2 workers, no cache): {ours:.1f} s, {len(found)} findings; "
          f"spatch mini_lock.cocci on them (--jobs 2): {cocci:.1f} s ({reported} reports); "
          f"ratio {ours / cocci:.2f} (target <= 0.3)")


def tree_bench(kernel: Path) -> None:
    paths = [str(kernel / "drivers/net"), str(kernel / "net")]
    started = time.monotonic()
    found = lint(paths, jobs=2, use_cache=False)
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    by_rule = collections.Counter(f.rule for f in found)
    files = sum(1 for p in paths for f in Path(p).rglob("*") if f.suffix in (".c", ".h"))
    print(f"lint drivers/net + net ({files} files, 2 workers, no cache): {seconds:.1f} s wall "
          f"(target 60), largest worker peak RSS {peak:.0f} MB (target 300)")
    for rule, count in sorted(by_rule.items()):
        print(f"  {rule}: {count}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-tree", action="store_true", help="leave out the lint of all of drivers/net and net/")
    args = parser.parse_args()
    if not shutil.which("spatch"):
        sys.exit("spatch is not installed (apt-get install coccinelle)")
    kernel = kernel_repo()
    if not args.skip_tree:   # first: the peak RSS of waited-for children must be the lint workers'
        tree_bench(kernel)
    with tempfile.TemporaryDirectory(prefix="patchbench-bench-") as tmp:
        series_bench(kernel, Path(tmp))
    drivers_net_bench(kernel)


if __name__ == "__main__":
    main()
