"""Throughput of the Celery farm on this machine, and the broker's overhead per job.

1. A batch of static-check jobs (one per patch; each patch touches one real driver of the 6.1
   tree; every worker starts with a cold facts cache) through 1 and then 2 `patchbench worker`
   processes: jobs per minute, against the same batch run by the local runner in one process.
2. `--builds`: the touched-object builds of a planted 3-patch series through 1 and 2 workers
   sharing this machine's build cache (the second worker gets a build slot of its own).
3. Overhead: jobs that do nothing (a patch touching no C file) sent through one worker; the time
   per job from submission to stored result. Target: under 50 ms.
Whole processes: real redis-server, real workers; the figures include Celery's and Redis's costs.
Run from the project root: `python bench/farm.py [--builds]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patchbench.dispatch.build import Context  # noqa: E402
from patchbench.dispatch.farm import FarmRunner  # noqa: E402
from patchbench.dispatch.jobs import CheckJob  # noqa: E402
from patchbench.dispatch.progress import PlainProgress  # noqa: E402
from patchbench.dispatch.runner import LocalRunner, check_jobs  # noqa: E402
from patchbench.tree import AppliedPatch, ApplyResult  # noqa: E402
from tests.support.farm import Workers, redis_server  # noqa: E402
from tests.support.git_series import git  # noqa: E402
from tests.support.kernel import TAG, kernel_repo  # noqa: E402
from tests.support.ring_series import commit_series  # noqa: E402

DRIVERS = ["drivers/net/tun.c", "drivers/net/tap.c", "drivers/net/veth.c", "drivers/net/virtio_net.c",
           "drivers/net/macvlan.c", "drivers/net/bonding/bond_main.c", "drivers/net/vxlan/vxlan_core.c",
           "net/core/dev.c", "drivers/net/ethernet/intel/e1000/e1000_main.c", "drivers/net/geneve.c",
           "drivers/net/ipvlan/ipvlan_core.c", "net/ipv4/tcp.c"]


class _Quiet(PlainProgress):
    def start(self, *args) -> None:
        pass

    def finish(self, *args) -> None:
        pass


def check_batch(work: Path) -> ApplyResult:
    clone = work / "linux"
    git(work, "clone", "-q", "--shared", "--no-checkout", str(kernel_repo()), str(clone))
    base = git(clone, "rev-parse", TAG)
    edits = []
    for path in DRIVERS:
        whole = git(clone, "show", f"{base}:{path}") + "\n"
        edits.append((path, f"{path}: comment", [(whole, whole + "/* bench */\n")]))
    tip = commit_series(clone, base, edits)
    shas = git(clone, "rev-list", "--reverse", f"{base}..{tip}").split()
    applied = [AppliedPatch(n, sha, parent, [edit[0]]) for n, (sha, parent, edit)
               in enumerate(zip(shas, [base, *shas], edits), 1)]
    return ApplyResult(clone, base, "bench", applied, None, tip)


def timed_run(runner, jobs, work: Path) -> float:
    ctx = Context(cache=work / "submitter", logs=work / "logs", progress=_Quiet(sys.stderr))
    started = time.monotonic()
    runner.run(jobs, ctx)
    return time.monotonic() - started


def farm_throughput(url: str, work: Path, jobs, n_workers: int, caches=None) -> float:
    pool = Workers(url, work / f"w{n_workers}", visibility_timeout=3600)
    (work / f"w{n_workers}").mkdir()
    try:
        for n in range(n_workers):
            pool.start(f"bench{n}@farm", cache=(caches or {}).get(n))
        return timed_run(FarmRunner(url), jobs, work)
    finally:
        pool.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", action="store_true", help="also time touched-object builds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, redis_server(Path(tmp)) as url:
        work = Path(tmp)
        applied = check_batch(work)
        jobs = check_jobs(applied)
        os.environ["PATCHBENCH_CACHE"] = str(work / "local-cache")
        local = timed_run(LocalRunner(), jobs, work)
        print(f"static checks, {len(jobs)} jobs (one real driver each, cold facts cache):")
        print(f"  local runner, 1 process:  {local:6.1f} s  {60 * len(jobs) / local:6.1f} jobs/min")
        for n in (1, 2):
            seconds = farm_throughput(url, work, jobs, n)
            print(f"  farm, {n} worker(s):        {seconds:6.1f} s  {60 * len(jobs) / seconds:6.1f} jobs/min")

        noop = [CheckJob(applied.repo, n, applied.base, applied.base, ("README",)) for n in range(1, 101)]
        pool = Workers(url, work / "noop")
        (work / "noop").mkdir()
        try:
            pool.start("noop@farm")
            seconds = timed_run(FarmRunner(url), noop, work)
        finally:
            pool.stop()
        print(f"broker overhead: {len(noop)} empty jobs through 1 worker in {seconds:.2f} s = "
              f"{1000 * seconds / len(noop):.1f} ms per job (target < 50 ms)")
        if args.builds:
            build_bench(url, work)


def build_bench(url: str, work: Path) -> None:
    from patchbench.dispatch import workspace
    from patchbench.dispatch.jobs import Target
    from patchbench.dispatch.kconfig import KernelConfig
    from patchbench.dispatch.runner import plan
    from tests.support.planted import plant

    repo = kernel_repo()
    base = git(repo, "rev-parse", TAG)
    head, commits = plant(repo, "warning-series", base)
    parents = [base, *commits[:-1]]
    shown = [git(repo, "show", "--name-only", "--format=", c).split() for c in commits]
    applied = ApplyResult(repo, base, "bench", [AppliedPatch(n, c, p, files) for n, (c, p, files)
                                                 in enumerate(zip(commits, parents, shown), 1)], None, head)
    jobs = plan(applied, Target(repo.resolve(), base, KernelConfig.netdev()))
    cache = workspace.cache_root()
    print(f"touched-object builds, {len(jobs)} jobs (planted warning-series, this machine's build cache):")
    for n in (1, 2):
        seconds = farm_throughput(url, work, jobs, n, caches={0: cache, 1: cache})
        print(f"  farm, {n} worker(s):        {seconds:6.1f} s  {60 * len(jobs) / seconds:6.1f} jobs/min")


if __name__ == "__main__":
    main()
