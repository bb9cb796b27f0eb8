"""Time each dispatch stage for a 3-patch tun series on Linux 6.1: first run, then a warm second run.

Stages: plant the series (git), build the objects each patch touched (W=1, before and after; target
under 60 s for the 3 patches when warm), build the head's kernel, boot it in QEMU with the smoke test.
The first run uses whatever the cache holds (a new series on an already built base unless
--fresh-cache, which starts from an empty cache: a cold full kernel build).
Run from the project root: `python bench/build_boot.py [--fresh-cache] [--no-boot]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchbench.dispatch import workspace  # noqa: E402
from patchbench.dispatch.commits import applied_range  # noqa: E402
from patchbench.dispatch.jobs import Target  # noqa: E402
from patchbench.dispatch.kconfig import KernelConfig  # noqa: E402
from patchbench.dispatch.progress import PlainProgress  # noqa: E402
from patchbench.dispatch.runner import LocalRunner, default_context, plan  # noqa: E402
from tests.support.kernel import base_commit, kernel_repo  # noqa: E402
from tests.support.planted import plant  # noqa: E402


class Quiet(PlainProgress):
    def start(self, kind, patch, commit):
        pass

    def stage(self, text):
        pass

    def finish(self, status, reason):
        pass


def one_run(repo: Path, head: str, base: str, cache: Path, boot: bool) -> list[tuple[str, float, str]]:
    applied = applied_range(repo, f"{base}..{head}")
    target = Target(repo, base, KernelConfig.netdev())
    rows = []
    with tempfile.TemporaryDirectory() as logs:
        ctx = default_context(Path(logs), cache, Quiet())
        for job in plan(applied, target, objects=True, kernel=boot, boot=boot):
            (result,) = LocalRunner().run([job], ctx)
            name = f"objects patch {job.patch}" if result.scope == "objects" else (result.scope or result.kind)
            rows.append((name, result.seconds, result.status))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh-cache", action="store_true", help="start from an empty cache (cold kernel build)")
    parser.add_argument("--no-boot", action="store_true", help="time the object builds only")
    args = parser.parse_args()
    repo = kernel_repo()
    base = base_commit(repo)
    cache = Path(tempfile.mkdtemp(prefix="patchbench-bench-")) if args.fresh_cache else workspace.cache_root()
    start = time.monotonic()
    head, commits = plant(repo, "tun-bench", base, salt=time.strftime("%Y%m%d%H%M%S"))
    print(f"series: 3 tun patches on 6.1, planted in {time.monotonic() - start:.2f} s; cache {cache}")
    for label in ("first run", "warm run"):
        rows = one_run(repo, head, base, cache, not args.no_boot)
        objects = sum(s for name, s, _ in rows if name.startswith("objects"))
        print(f"{label}:")
        for name, seconds, status in rows:
            print(f"  {name:18} {seconds:7.1f} s  {status}")
        print(f"  {'objects, 3 patches':18} {objects:7.1f} s  (target under 60 s warm)")


if __name__ == "__main__":
    main()
