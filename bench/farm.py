"""Throughput of the Celery farm with remote-style workers, and the broker's overhead per job.

Remote-style: each `patchbench worker` runs under bubblewrap with a home and cache of its own, the
host's /tmp and home hidden; the 6.1 tree reaches it only as the file URL of a bare copy and the
series' commits only as the bundle each task carries (as on a machine that shares nothing but the
broker). Each worker's call index is seeded from this machine's (see tests/support/farm.seed_index).

1. A cold worker's first fetch of the tree into its mirror.
2. 20 series of one patch each (each touches one real driver of the 6.1 tree; every worker starts
   with a cold facts cache and a mirror that has the base) through the local runner in one process,
   then through 1 and 2 workers: series per minute.
3. Overhead: 100 jobs that do nothing (a patch touching no C file) through one warm worker; the time
   per job from submission to result. Target: under 50 ms.
4. `--builds`: a touched-object build of a planted 3-patch series on a cold remote-style worker
   (fetch, configure, compile), then the same on the warm worker.
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

from patchbench.dispatch import mirror  # noqa: E402
from patchbench.dispatch.build import Context  # noqa: E402
from patchbench.dispatch.farm import FarmRunner  # noqa: E402
from patchbench.dispatch.jobs import CheckJob, commits_of  # noqa: E402
from patchbench.dispatch.progress import PlainProgress  # noqa: E402
from patchbench.dispatch.runner import LocalRunner, check_jobs  # noqa: E402
from patchbench.tree import AppliedPatch, ApplyResult  # noqa: E402
from tests.support.farm import Workers, redis_server, seed_index, served_copy  # noqa: E402
from tests.support.git_series import git  # noqa: E402
from tests.support.kernel import TAG, kernel_repo  # noqa: E402
from tests.support.ring_series import commit_series  # noqa: E402

DRIVERS = ["drivers/net/tun.c", "drivers/net/tap.c", "drivers/net/veth.c", "drivers/net/virtio_net.c",
           "drivers/net/macvlan.c", "drivers/net/bonding/bond_main.c", "drivers/net/vxlan/vxlan_core.c",
           "net/core/dev.c", "drivers/net/ethernet/intel/e1000/e1000_main.c", "drivers/net/geneve.c",
           "drivers/net/ipvlan/ipvlan_core.c", "net/ipv4/tcp.c", "drivers/net/dummy.c", "drivers/net/ifb.c",
           "drivers/net/vrf.c", "drivers/net/macsec.c", "drivers/net/team/team.c", "net/core/skbuff.c",
           "net/ipv4/udp.c", "net/sched/sch_generic.c"]


class _Quiet(PlainProgress):
    def start(self, *args) -> None:
        pass

    def finish(self, *args) -> None:
        pass


def twenty_series(clone: Path, base: str) -> list[ApplyResult]:
    """One series per driver, each one patch on the base, as apply would leave them."""
    series = []
    for path in DRIVERS:
        whole = git(clone, "show", f"{base}:{path}") + "\n"
        tip = commit_series(clone, base, [(path, f"{path}: comment", [(whole, whole + "/* bench */\n")])])
        series.append(ApplyResult(clone, base, "bench", [AppliedPatch(1, tip, base, [path])], None, tip))
    return series


def timed_run(runner, jobs, work: Path, results: list | None = None) -> float:
    ctx = Context(cache=work / "submitter", logs=work / "logs", progress=_Quiet(sys.stderr))
    started = time.monotonic()
    done = runner.run(jobs, ctx)
    seconds = time.monotonic() - started
    if results is not None:
        results += done
    return seconds


def remote_pool(url: str, root: Path, served: Path, n_workers: int,
                warm_mirror: mirror.Source | None) -> Workers:
    """n remote-style workers with fresh homes: the call index seeded, the base already in the mirror
    (as on a worker that has served before; step 1 times the cold fetch), unless `warm_mirror` is None."""
    root.mkdir()
    pool = Workers(url, root, visibility_timeout=3600)
    for n in range(n_workers):
        name = f"bench{n}@remote"
        seed_index(pool.home(name))
        if warm_mirror is not None:
            mirror.checkout_repo(warm_mirror, pool.home(name) / ".cache" / "patchbench")
        pool.start(name, alone=(served,))
    return pool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", action="store_true", help="also time touched-object builds, cold and warm")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, redis_server(Path(tmp)) as url:
        work = Path(tmp)
        started = time.monotonic()
        served = served_copy(kernel_repo(), work / "linux.git")
        print(f"a bare, packed copy of the 6.1 tree to serve: {time.monotonic() - started:.1f} s")
        clone = work / "linux"
        git(work, "clone", "-q", "--shared", "--no-checkout", str(kernel_repo()), str(clone))
        git(clone, "config", "patchbench.tree-url", served.as_uri())
        base = git(clone, "rev-parse", TAG)
        noop = CheckJob(clone, 1, base, base, ("README",))
        base_only = mirror.source_for(clone, served.as_uri(), *commits_of(noop))

        started = time.monotonic()
        mirror.checkout_repo(base_only, work / "cold-fetch")
        print(f"a cold worker's first fetch of the tree (--depth 1, file URL): {time.monotonic() - started:.1f} s")

        series = twenty_series(clone, base)
        jobs = [job for applied in series for job in check_jobs(applied)]
        os.environ["PATCHBENCH_CACHE"] = str(work / "local-cache")
        local = timed_run(LocalRunner(), jobs, work)
        print(f"static checks of {len(series)} series ({len(jobs)} jobs, one real driver each, cold facts cache):")
        print(f"  local runner, 1 process:     {local:6.1f} s  {60 * len(series) / local:6.1f} series/min")
        for n in (1, 2):
            pool = remote_pool(url, work / f"w{n}", served, n, base_only)
            try:
                seconds = timed_run(FarmRunner(url), jobs, work)
            finally:
                pool.stop()
            print(f"  farm, {n} remote worker(s):  {seconds:6.1f} s  {60 * len(series) / seconds:6.1f} series/min")

        pool = remote_pool(url, work / "noop", served, 1, base_only)
        try:
            timed_run(FarmRunner(url), [noop], work)   # the worker's first task: imports, connections
            many = [CheckJob(clone, n, base, base, ("README",)) for n in range(1, 101)]
            seconds = timed_run(FarmRunner(url), many, work)
        finally:
            pool.stop()
        print(f"broker overhead: {len(many)} empty jobs through 1 remote worker in {seconds:.2f} s = "
              f"{1000 * seconds / len(many):.1f} ms per job (target < 50 ms)")
        if args.builds:
            build_bench(url, work, served, clone, base)


def build_bench(url: str, work: Path, served: Path, clone: Path, base: str) -> None:
    from patchbench.dispatch.jobs import Target
    from patchbench.dispatch.kconfig import KernelConfig
    from patchbench.dispatch.runner import plan
    from tests.support.planted import plant

    head, commits = plant(clone, "warning-series", base)
    parents = [base, *commits[:-1]]
    shown = [git(clone, "show", "--name-only", "--format=", c).split() for c in commits]
    applied = ApplyResult(clone, base, "bench", [AppliedPatch(n, c, p, files) for n, (c, p, files)
                                                  in enumerate(zip(commits, parents, shown), 1)], None, head)
    jobs = plan(applied, Target(clone.resolve(), base, KernelConfig.netdev()))
    pool = remote_pool(url, work / "builds", served, 1, None)
    results: list = []
    try:
        cold = timed_run(FarmRunner(url), jobs[:1], work, results)
        warm = timed_run(FarmRunner(url), jobs[1:], work, results)
    finally:
        pool.stop()
    print("touched-object builds (planted warning-series) on one remote worker:")
    print(f"  patch 1 on a cold worker (fetch, configure, compile): {cold:6.1f} s")
    print(f"  patches 2-{len(jobs)} on the warm worker:               {warm / (len(jobs) - 1):6.1f} s per patch")
    print("  results: " + "; ".join(f"patch {r.patch} {r.status}, {len(r.new_warnings)} new warning(s), "
                                   f"{len(r.objects)} object(s) on {r.worker}" for r in results))


if __name__ == "__main__":
    main()
