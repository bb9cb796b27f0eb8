"""patchbench check / lint: speed, and against checkpatch.pl and Coccinelle's mini_lock.cocci.

Every patchbench figure is a whole `python -m patchbench` process with a fresh facts cache
($PATCHBENCH_CACHE); the call index cache is warm (built once per base and reused) except in the
index stage. The machine is usually shared, so each run prints its CPU seconds (user+sys: the
process's own, and its workers' and git's) and what they make on two idle cores: own + children/2
for `lint` (its workers run side by side; the parent's work is the serial part) and the plain sum
for `check` (an upper bound). Bytecode is compiled first (`compileall`), as an install has it.
The host's own speed varies too: each figure carries the `pace` before and after it, the CPU
seconds of a fixed piece of Python work (see machine_pace()); compare runs at a similar pace.

1. `patchbench lint` of all of drivers/net and net/ on the 6.1 and newest trees (targets: under 60 s on
   2 cores, 300 MB per worker), findings per rule. `--skip-tree` leaves it out. It runs first, so
   that no other child (spatch) counts in the peak RSS.
2. `--index`: the call index built from nothing (a fresh $PATCHBENCH_INDEX_CACHE) by a `lint` of one
   file, then that lint again with the index reused (target: built in under 2 minutes per base).
3. `patchbench check` of the seeds' 3-patch tun/tap_ring_consume series on 6.1 (cold facts cache;
   target: under 1 s) vs `scripts/checkpatch.pl` on the same 3 patches plus `spatch` with
   scripts/coccinelle/locks/mini_lock.cocci on the files they touch (target: half of those).
4. `patchbench lint drivers/net/*.c` vs that spatch over the same files. Target: 0.3 of it.
Run from the project root: `nice python bench/check_series.py [--skip-tree] [--index]`. Needs spatch
and perl.
"""

from __future__ import annotations

import argparse
import collections
import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.git_series import format_patch, git  # noqa: E402
from tests.support.kernel import KERNELS, TAG, kernel_repo, tree  # noqa: E402
from tests.support.ring_series import (TAP_HELPER, TUN_HELPER, WAKE_PATCH, commit_series,  # noqa: E402
                                       tap_patch, tun_patch)

MINI_LOCK = "scripts/coccinelle/locks/mini_lock.cocci"
# `patchbench ARGS` that also writes its CPU seconds (own, and waited-for children's) and the
# largest child's peak RSS to the file $BENCH_RUSAGE names.
MEASURED = """import json, os, resource, sys
from patchbench.cli import main
code = main(sys.argv[1:])
own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
with open(os.environ["BENCH_RUSAGE"], "w") as out:
    json.dump({"own": own.ru_utime + own.ru_stime, "children": children.ru_utime + children.ru_stime,
               "peak_mb": children.ru_maxrss / 1024}, out)
sys.exit(code)
"""


class Run:
    """One measured patchbench process."""

    def __init__(self, args: list[str], cwd: Path, env: dict):
        with tempfile.TemporaryDirectory(prefix="patchbench-rusage-") as tmp:
            usage = Path(tmp) / "rusage.json"
            self.load = os.getloadavg()[0]
            before = machine_pace()
            self.wall, self.proc = timed([sys.executable, "-c", MEASURED, *args], cwd,
                                         {"PYTHONPATH": str(ROOT), **env, "BENCH_RUSAGE": str(usage)})
            self.pace = (before, machine_pace())
            if self.proc.returncode not in (0, 1) or not usage.is_file():
                sys.exit(f"patchbench {' '.join(args)} failed (exit {self.proc.returncode}): {self.proc.stderr}")
            measured = json.loads(usage.read_text())
        self.own, self.children, self.peak_mb = measured["own"], measured["children"], measured["peak_mb"]

    @property
    def cpu(self) -> float:
        return self.own + self.children

    def figures(self, parallel: bool) -> str:
        """CPU seconds and the wall time they make on two idle cores."""
        idle = self.own + self.children / 2 if parallel else self.cpu
        return (f"{self.cpu:.1f} CPU-s ({self.own:.1f} own + {self.children:.1f} workers/git) = about "
                f"{idle:.1f} s on 2 idle cores; {self.wall:.1f} s wall here (load {self.load:.1f}, "
                f"pace {self.pace[0]:.2f}/{self.pace[1]:.2f})")


def machine_pace() -> float:
    """CPU seconds of a fixed piece of Python work (frozensets in a dict, like the analyses'), taken
    before and after each run: the host's speed varies by a third within an hour on a shared
    machine, and the same run's CPU seconds with it."""
    started = time.process_time()
    table: dict[int, frozenset] = {}
    for number in range(1_000_000):
        table[number & 1023] = frozenset((number, number + 1))
    return time.process_time() - started


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
    check = ["check", str(mails), "--tree", str(clone), "--format", "terse", "--checks", "rules"]
    cold = Run(check, ROOT, {"PATCHBENCH_CACHE": str(work / "cache")})
    warm = Run(check, ROOT, {"PATCHBENCH_CACHE": str(work / "cache")})
    print(f"patchbench check, 3 patches (exit {cold.proc.returncode}, {len(cold.proc.stdout.splitlines())} "
          f"findings), cold facts cache: {cold.cpu:.2f} CPU-s (under 1 s on idle cores: "
          f"{'yes' if cold.cpu < 1 else 'no'}), {cold.wall:.2f} s wall here (load {cold.load:.1f}, "
          f"pace {cold.pace[0]:.2f}/{cold.pace[1]:.2f}); warm: {warm.cpu:.2f} CPU-s")
    checkpatch, proc = timed(["perl", "scripts/checkpatch.pl", "-q", "--no-summary", *map(str, patches)], kernel)
    touched = work / "touched"
    for path in ("drivers/net/tun.c", "drivers/net/tap.c"):
        (touched / path).parent.mkdir(parents=True, exist_ok=True)
        (touched / path).write_text(git(clone, "show", f"{tip}:{path}") + "\n")
    cocci, reported = spatch(kernel, sorted(touched.rglob("*.c")))
    print(f"checkpatch.pl on the 3 patches: {checkpatch:.2f} s; spatch mini_lock.cocci on tun.c+tap.c: "
          f"{cocci:.2f} s ({reported} reports); together {checkpatch + cocci:.2f} s")
    print(f"  ratio check(cold)/(checkpatch+spatch) = {cold.wall / (checkpatch + cocci):.2f} (target <= 0.5)")


def drivers_net_bench(kernel: Path, work: Path) -> None:
    files = sorted(str(f.relative_to(kernel)) for f in (kernel / "drivers/net").glob("*.c"))
    ours = Run(["lint", "--format", "terse", "-j2", *files], kernel, {"PATCHBENCH_CACHE": str(work / "dn-cache")})
    cocci, reported = spatch(kernel, [kernel / f for f in files], jobs=2)
    print(f"lint drivers/net/*.c ({len(files)} files, 2 workers, fresh cache): {ours.wall:.1f} s wall, "
          f"{len(ours.proc.stdout.splitlines())} findings; spatch mini_lock.cocci on them (--jobs 2): "
          f"{cocci:.1f} s ({reported} reports); ratio {ours.wall / cocci:.2f} (target <= 0.3)")


def tree_bench(version: str, work: Path) -> None:
    """lint of drivers/net and net/ of one kernel, fresh facts cache, the call index reused."""
    kernel = kernel_repo(version)
    paths = ["drivers/net", "net"]
    run = Run(["lint", "--format", "json", "-j2", *paths], kernel, {"PATCHBENCH_CACHE": str(work / f"tree-{version}")})
    found = json.loads(run.proc.stdout)
    by_rule = collections.Counter(f["rule"] for f in found["findings"])
    print(f"{tree(version).describe()}: lint drivers/net + net ({len(found['checked']['files'])} files, 2 workers): "
          f"{run.figures(parallel=True)} (target 60 s); largest worker peak RSS {run.peak_mb:.0f} MB (target 300)")
    for rule, count in sorted(by_rule.items()):
        print(f"  {rule}: {count}")


def index_bench(version: str, work: Path) -> None:
    """The call index of one kernel built from nothing, then reused (a lint of one small file)."""
    kernel = kernel_repo(version)
    lint_one = ["lint", "--format", "terse", "-j2", "drivers/net/dummy.c"]
    env = {"PATCHBENCH_INDEX_CACHE": str(work / f"index-{version}")}
    built = Run(lint_one, kernel, {**env, "PATCHBENCH_CACHE": str(work / f"built-{version}")})
    reused = Run(lint_one, kernel, {**env, "PATCHBENCH_CACHE": str(work / f"reused-{version}")})
    print(f"{version}: call index built from nothing: {built.figures(parallel=True)} (target 120 s); "
          f"reused: {reused.figures(parallel=False)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-tree", action="store_true", help="leave out the lint of all of drivers/net and net/")
    parser.add_argument("--index", action="store_true", help="also build each kernel's call index from nothing")
    args = parser.parse_args()
    if not shutil.which("spatch"):
        sys.exit("spatch is not installed (apt-get install coccinelle)")
    compileall.compile_dir(ROOT / "patchbench", quiet=1)
    with tempfile.TemporaryDirectory(prefix="patchbench-bench-") as tmp:
        work = Path(tmp)
        if not args.skip_tree:   # first: the peak RSS of waited-for children must be the lint workers'
            for version in KERNELS:
                tree_bench(version, work)
        if args.index:
            for version in KERNELS:
                index_bench(version, work)
        series_bench(kernel_repo(), work)
        drivers_net_bench(kernel_repo(), work)


if __name__ == "__main__":
    main()
