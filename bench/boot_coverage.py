"""What runtime coverage and the targeted exercise add to a boot: a new 3-patch tun series on 6.1
(helper, stop when full, wake under RCU; tests/support/ring_series.py), built warm and booted three
times: smoke test only, + coverage (function profiler on the changed functions), + the tun-ring exercise.

Target: the series' objects + its kernel + the full boot under 3 minutes warm under TCG on 2 cores.
Run from the project root after the 6.1 test kernel was built once (any boot test does it):
`python bench/boot_coverage.py`. Times are wall seconds; the machine's load shows in them.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.build_boot import Quiet  # noqa: E402
from patchbench.dispatch import workspace  # noqa: E402
from patchbench.dispatch.commits import applied_range  # noqa: E402
from patchbench.dispatch.jobs import BootJob, ObjectsJob, Target  # noqa: E402
from patchbench.dispatch.kconfig import KernelConfig  # noqa: E402
from patchbench.dispatch.runner import LocalRunner, default_context, plan  # noqa: E402
from tests.support.kernel import base_commit, kernel_repo  # noqa: E402
from tests.support.ring_series import commit_series, tun_boot_series  # noqa: E402


def main() -> None:
    repo = kernel_repo()
    base = base_commit(repo)
    head = commit_series(repo, base, tun_boot_series("rcu"), dated_now=True)  # new commits: nothing cached
    applied = applied_range(repo, f"{base}..{head}")
    target = Target(repo, base, KernelConfig.netdev())
    with tempfile.TemporaryDirectory() as logs:
        ctx = default_context(Path(logs), workspace.cache_root(), Quiet())
        rows = []
        for job in plan(applied, target, objects=True, boot=True):
            if isinstance(job, BootJob):   # the same boot three ways
                variants = [("boot, smoke test only", replace(job, count_calls=False, exercise=False)),
                            ("boot + coverage", replace(job, exercise=False)), ("boot + coverage + exercise", job)]
            else:
                variants = [(f"objects patch {job.patch}" if isinstance(job, ObjectsJob) else "kernel", job)]
            for name, variant in variants:
                (result,) = LocalRunner().run([variant], ctx)
                rows.append((name, result.seconds, result.status, result))
    for name, seconds, status, _ in rows:
        print(f"  {name:28} {seconds:7.1f} s  {status}")
    seconds = {name: s for name, s, _, _ in rows}
    builds = sum(s for name, s, _, _ in rows if not name.startswith("boot"))
    plain, counted, full = (seconds["boot, smoke test only"], seconds["boot + coverage"],
                            seconds["boot + coverage + exercise"])
    print(f"  {'added by coverage':28} {counted - plain:7.1f} s")
    print(f"  {'added by the exercise':28} {full - counted:7.1f} s")
    print(f"  {'series built and booted':28} {builds + full:7.1f} s  (target under 180 s warm)")
    print(f"  coverage: {'; '.join(f.describe() for f in rows[-1][3].coverage)}")


if __name__ == "__main__":
    main()
